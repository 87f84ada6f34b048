package service

import (
	"context"
	"errors"
	"math"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/telemetry"
	"github.com/replicad/replicad/producerid"
)

// ProducerIDs issues idempotent producers' IDs and bumps their epochs: the
// broker's producerid.Manager, which asks the controller. Errors the
// controller answered with a code are *producerid.CodeError.
type ProducerIDs interface {
	// NewProducerID returns an ID never issued before in the cluster.
	NewProducerID(ctx context.Context) (int64, error)
	// BumpEpoch returns the epoch after epoch for id, if epoch is the
	// newest handed out for it.
	BumpEpoch(ctx context.Context, id int64, epoch int16) (int16, error)
}

// DefaultInitProducerIdTimeout is InitProducerId's wait for the controller
// when timeout_ms is 0 (Kafka's request.timeout.ms).
const DefaultInitProducerIdTimeout = 30 * time.Second

// validateInitProducerId checks an InitProducerId request.
func validateInitProducerId(req *replicadv1.InitProducerIdRequest) error {
	if id := req.GetProducerId(); id < 0 {
		return invalid("producer_id", "must not be negative: 0 for a new ID, or an ID issued before (got %d)", id)
	}
	if e := req.GetProducerEpoch(); e < 0 || e > math.MaxInt16 {
		return invalid("producer_epoch", "must be in 0..%d (got %d)", math.MaxInt16, e)
	}
	if req.GetProducerId() == 0 && req.GetProducerEpoch() != 0 {
		return invalid("producer_epoch", "must be 0 without a producer_id: a new ID starts at epoch 0 (got %d)", req.GetProducerEpoch())
	}
	return validateNonNegative("timeout_ms", int64(req.GetTimeoutMs()))
}

// InitProducerId issues a producer ID (producer_id 0) or bumps the epoch of
// one (Kafka's InitProducerId). The broker hands a new ID out of the block
// the controller allocated it; a bump goes to the controller, which keeps
// the newest epoch per ID.
func (s *logService) InitProducerId(ctx context.Context, req *replicadv1.InitProducerIdRequest) (*replicadv1.InitProducerIdResponse, error) {
	if err := validateInitProducerId(req); err != nil {
		return nil, err
	}
	id, epoch := req.GetProducerId(), int16(req.GetProducerEpoch())
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.Int64("replicad.producer_id", id), attribute.Int("replicad.producer_epoch", int(epoch)))
	refuse := func(code replicadv1.ErrorCode, msg string) *replicadv1.InitProducerIdResponse {
		span.SetAttributes(telemetry.ErrorCode(code))
		s.logger.Info().Str("logger", "state.change").Int64("producer_id", id).Int16("producer_epoch", epoch).
			Str("error_code", telemetry.ErrorCodeName(code)).Str("reason", msg).Msg("InitProducerId refused")
		return &replicadv1.InitProducerIdResponse{ErrorCode: code, ErrorMessage: msg}
	}
	if s.producerIDs == nil {
		// ctlclient falls back to plain batches on this message's
		// "without a controller": keep the words.
		return refuse(replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE,
			"this broker runs without a controller (no --controller): producer IDs come from the controller's store, "+
				"so only plain (non-idempotent) produce, producer_id 0, is possible here"), nil
	}
	if id > 0 && epoch == math.MaxInt16 {
		return refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST,
			"producer_epoch 32767 is the largest: this producer ID has no epoch left; ask for a new one (producer_id 0)"), nil
	}
	timeout := time.Duration(req.GetTimeoutMs()) * time.Millisecond
	if timeout == 0 {
		timeout = DefaultInitProducerIdTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	newID, newEpoch := id, epoch
	var err error
	if id == 0 {
		newID, err = s.producerIDs.NewProducerID(ctx)
	} else {
		newEpoch, err = s.producerIDs.BumpEpoch(ctx, id, epoch)
	}
	if err != nil {
		var ce *producerid.CodeError
		switch {
		case errors.As(err, &ce):
			return refuse(ce.Code, err.Error()), nil
		case errors.Is(err, context.DeadlineExceeded):
			return refuse(replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT, err.Error()), nil
		case errors.Is(err, context.Canceled):
			// The caller went away: nothing to answer.
			return nil, status.FromContextError(context.Canceled).Err()
		default:
			return refuse(replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE, err.Error()), nil
		}
	}
	span.SetAttributes(attribute.Int64("replicad.producer_id", newID), attribute.Int("replicad.new_producer_epoch", int(newEpoch)))
	ev := s.logger.Info
	if id == 0 {
		ev = s.logger.Debug // one per producer start: routine
	}
	ev().Str("logger", "state.change").Int64("producer_id", newID).Int16("producer_epoch", newEpoch).
		Bool("bumped", id != 0).Msg("producer ID initialized")
	return &replicadv1.InitProducerIdResponse{ProducerId: newID, ProducerEpoch: int32(newEpoch)}, nil
}
