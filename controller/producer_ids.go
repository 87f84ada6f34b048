package controller

import (
	"context"
	"errors"
	"math"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/telemetry"
)

// Producer IDs (issue 21, Kafka's KIP-730). A broker asks for a block of
// ProducerIDBlockSize IDs (AllocateProducerIds) and hands them to the
// idempotent producers that call its InitProducerId; a producer that
// restarts with its ID asks for the next epoch (BumpProducerEpoch), which
// fences its older instance on every partition.
//
// Neither is kept in the controller's memory: the store is the one copy.
// Its AllocateProducerIDs moves the stored end of the last block forward
// and returns the block in one transaction (a compare-and-set in etcd), and
// the controller answers a block only when that write returned nil. So a
// block is handed out once: a new active controller, after a failover or a
// restart, continues after the last stored end; a write that failed or
// whose outcome is unknown answers an error, and the block it may have
// stored is skipped by the next call, never handed out. The same holds for
// the epochs: BumpProducerEpoch stores the newest epoch per ID, compared
// with the caller's, and a refused or failed bump hands out nothing.

// ProducerIDBlockSize is how many producer IDs one AllocateProducerIds
// answer holds (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE).
const ProducerIDBlockSize = 1000

// producerOutcome is a producer ID request's answer: an error code for the
// broker, or err when the store failed (the broker retries).
type producerOutcome struct {
	code replicadv1.ErrorCode
	err  error
}

// checkProducerRequest reports whether this controller acts, and refuses a
// request from a broker that is not the current, unfenced incarnation of a
// registered one (STALE_BROKER_EPOCH, as AlterPartition): a broker that
// registers again asks again.
//
// The store write that follows runs without the lock: the store's own
// transaction is what makes blocks and epochs unique, the controller keeps
// no copy to update, and a producer's InitProducerId (a bump is a write per
// call) must not hold up the controller's decisions. A controller deposed
// meanwhile cannot write (etcd fences the write; bbolt has one controller).
func (c *Controller) checkProducerRequest(id int32, epoch int64) (bool, replicadv1.ErrorCode) {
	c.lock()
	defer c.unlock()
	if !c.active {
		return false, codeNone
	}
	if bs, ok := c.brokers[id]; !ok || bs.info.Epoch != epoch || bs.info.Fenced {
		return true, replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH
	}
	return true, codeNone
}

// allocateProducerIDs hands broker a block of ProducerIDBlockSize producer
// IDs, stored before it answers.
func (c *Controller) allocateProducerIDs(ctx context.Context, broker int32, brokerEpoch int64) (int64, producerOutcome) {
	ctx, span := c.tracer.Start(ctx, "Controller.allocateProducerIds", trace.WithAttributes(
		attribute.Int("replicad.broker", int(broker)), attribute.Int64("replicad.broker_epoch", brokerEpoch)))
	defer span.End()
	active, code := c.checkProducerRequest(broker, brokerEpoch)
	if !active {
		return 0, producerOutcome{err: errNotController}
	}
	if code != codeNone {
		span.SetAttributes(telemetry.ErrorCode(code))
		c.log.Info().Int32("broker", broker).Int64("broker_epoch", brokerEpoch).Str("error_code", telemetry.ErrorCodeName(code)).
			Msg("AllocateProducerIds refused")
		return 0, producerOutcome{code: code}
	}
	sctx, cancel := c.storeCtx(ctx)
	first, err := c.cfg.Store.AllocateProducerIDs(sctx, ProducerIDBlockSize)
	cancel()
	if err != nil {
		// Nothing is handed out: a block the write stored all the same is
		// skipped by the next allocation (it starts after the stored end).
		err = c.storeErr(err)
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, "producer ID block not stored")
		c.log.Warn().Err(err).Int32("broker", broker).Bool("outcome_unknown", !store.IsDefinite(err)).
			Msg("producer ID block not stored; the broker asks again")
		return 0, producerOutcome{err: err}
	}
	last := first + ProducerIDBlockSize - 1
	span.SetAttributes(attribute.Int64("replicad.first_producer_id", first), attribute.Int64("replicad.last_producer_id", last))
	c.log.Info().Int32("broker", broker).Int64("broker_epoch", brokerEpoch).Int64("first_producer_id", first).
		Int64("last_producer_id", last).Msg("producer ID block allocated")
	return first, producerOutcome{}
}

// bumpProducerEpoch hands out the epoch after from for producer ID id, if
// from is the newest handed out.
func (c *Controller) bumpProducerEpoch(ctx context.Context, broker int32, brokerEpoch, id int64, from int32) (int16, producerOutcome) {
	ctx, span := c.tracer.Start(ctx, "Controller.bumpProducerEpoch", trace.WithAttributes(
		attribute.Int("replicad.broker", int(broker)), attribute.Int64("replicad.broker_epoch", brokerEpoch),
		attribute.Int64("replicad.producer_id", id), attribute.Int("replicad.producer_epoch", int(from))))
	defer span.End()
	refuse := func(code replicadv1.ErrorCode, why string) (int16, producerOutcome) {
		span.SetAttributes(telemetry.ErrorCode(code), attribute.String("replicad.reason", why))
		c.log.Info().Int32("broker", broker).Int64("producer_id", id).Int32("producer_epoch", from).
			Str("error_code", telemetry.ErrorCodeName(code)).Str("reason", why).Msg("producer epoch bump refused")
		return 0, producerOutcome{code: code}
	}
	active, code := c.checkProducerRequest(broker, brokerEpoch)
	if !active {
		return 0, producerOutcome{err: errNotController}
	}
	if code != codeNone {
		return refuse(code, "stale broker epoch")
	}
	if from == math.MaxInt16 {
		return refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, "the epoch is the largest: the producer needs a new producer ID")
	}
	sctx, cancel := c.storeCtx(ctx)
	next, err := c.cfg.Store.BumpProducerEpoch(sctx, id, int16(from))
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, store.ErrNotFound):
		return refuse(replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID, err.Error())
	case errors.Is(err, store.ErrConflict):
		// An older instance of the producer, or one that never held from:
		// a newer epoch was handed out (or none this high).
		return refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH, err.Error())
	case errors.Is(err, store.ErrInvalid):
		return refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, err.Error())
	default:
		// Unknown outcome or a failure: the epoch is not handed out. If the
		// write landed, the retry from the same epoch is refused
		// INVALID_PRODUCER_EPOCH and the producer asks for a new ID: never
		// two instances at one epoch.
		err = c.storeErr(err)
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, "producer epoch bump not stored")
		c.log.Warn().Err(err).Int32("broker", broker).Int64("producer_id", id).Int32("producer_epoch", from).
			Bool("outcome_unknown", !store.IsDefinite(err)).Msg("producer epoch bump not stored")
		return 0, producerOutcome{err: err}
	}
	span.SetAttributes(attribute.Int("replicad.new_producer_epoch", int(next)))
	c.log.Info().Int32("broker", broker).Int64("producer_id", id).Int32("old_producer_epoch", from).Int16("producer_epoch", next).
		Msg("producer epoch bumped: older instances are fenced")
	return next, producerOutcome{}
}

// AllocateProducerIds implements ControllerService.
func (c *Controller) AllocateProducerIds(ctx context.Context, req *replicadv1.AllocateProducerIdsRequest) (*replicadv1.AllocateProducerIdsResponse, error) {
	if err := validateBrokerID("broker_id", req.GetBrokerId()); err != nil {
		return nil, err
	}
	first, out := c.allocateProducerIDs(ctx, req.GetBrokerId(), req.GetBrokerEpoch())
	if errors.Is(out.err, errNotController) {
		c.hintActive(ctx)
		return &replicadv1.AllocateProducerIdsResponse{ErrorCode: codeNotController}, nil
	}
	if out.err != nil {
		return nil, internalErr(out.err)
	}
	if out.code != codeNone {
		return &replicadv1.AllocateProducerIdsResponse{ErrorCode: out.code}, nil
	}
	return &replicadv1.AllocateProducerIdsResponse{FirstProducerId: first, Count: ProducerIDBlockSize}, nil
}

// BumpProducerEpoch implements ControllerService.
func (c *Controller) BumpProducerEpoch(ctx context.Context, req *replicadv1.BumpProducerEpochRequest) (*replicadv1.BumpProducerEpochResponse, error) {
	if err := validateBrokerID("broker_id", req.GetBrokerId()); err != nil {
		return nil, err
	}
	if id := req.GetProducerId(); id <= 0 {
		return nil, invalid("producer_id", "must be positive: an issued producer ID (got %d)", id)
	}
	if e := req.GetProducerEpoch(); e < 0 || e > math.MaxInt16 {
		return nil, invalid("producer_epoch", "must be in 0..%d (got %d)", math.MaxInt16, e)
	}
	next, out := c.bumpProducerEpoch(ctx, req.GetBrokerId(), req.GetBrokerEpoch(), req.GetProducerId(), req.GetProducerEpoch())
	if errors.Is(out.err, errNotController) {
		c.hintActive(ctx)
		return &replicadv1.BumpProducerEpochResponse{ErrorCode: codeNotController}, nil
	}
	if out.err != nil {
		return nil, internalErr(out.err)
	}
	if out.code != codeNone {
		return &replicadv1.BumpProducerEpochResponse{ErrorCode: out.code}, nil
	}
	return &replicadv1.BumpProducerEpochResponse{ProducerEpoch: int32(next)}, nil
}
