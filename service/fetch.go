package service

import (
	"context"
	"errors"
	"io"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// fetchService serves FetchService: the leader side of replication.
type fetchService struct {
	replicadv1.UnimplementedFetchServiceServer
	rm ReplicaManager
	// draining ends every stream when the server shuts down (nil: never).
	draining context.Context
	// tracer, set with --trace-data-plane, makes a span of every fetch
	// request; nil makes none.
	tracer trace.Tracer
}

// FetchRequestSpanName is the span of one fetch request on its stream (with
// --trace-data-plane). A follower's stream lives as long as it follows, and
// its own span ends only then, so each request is a root span of its own
// linked to the stream's: it shows in Jaeger as it happens.
const FetchRequestSpanName = "FetchService.fetchRequest"

// Fetch serves one follower fetcher's stream. A fetcher keeps one request in
// flight, so requests are answered in order, each (long-polling included)
// before the next is read. One goroutine receives, so the handler can stop on
// ctx.Done even while nothing arrives; the handler alone sends. A malformed
// request ends the stream with InvalidArgument: it is a bug in the follower,
// and a stream carries a status only at its end.
func (s *fetchService) Fetch(stream replicadv1.FetchService_FetchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	if s.draining != nil {
		// A long-polling fetch returns at once too: the follower reconnects
		// to whichever broker leads next.
		defer context.AfterFunc(s.draining, cancel)()
	}
	reqs := make(chan *replicadv1.FetchRequest)
	recvErr := make(chan error, 1)
	go receiveFetches(ctx, stream, reqs, recvErr)
	for {
		select {
		case <-ctx.Done():
			if s.draining != nil && s.draining.Err() != nil {
				return status.Error(codes.Unavailable, "broker is shutting down")
			}
			return status.FromContextError(ctx.Err()).Err()
		case err := <-recvErr:
			if errors.Is(err, io.EOF) {
				return nil // the follower closed its side: a clean end
			}
			return err
		case req := <-reqs:
			if err := validateFetch(req); err != nil {
				return err
			}
			span := s.startRequestSpan(ctx, req)
			reqCtx := ctx // the stream's: its cancellation ends a long poll
			if span != nil {
				reqCtx = trace.ContextWithSpan(ctx, span)
			}
			resp := FetchResponseToProto(req.GetCorrelationId(), s.rm.FetchMessages(reqCtx, FetchRequestFromProto(req)))
			err := stream.Send(resp)
			endRequestSpan(span, resp, err)
			if err != nil {
				return err
			}
		}
	}
}

// receiveFetches hands each request received to reqs until Recv fails (io.EOF
// included), which it reports on recvErr. It exits once the handler has
// returned, since gRPC then cancels ctx and Recv fails.
func receiveFetches(ctx context.Context, stream replicadv1.FetchService_FetchServer, reqs chan<- *replicadv1.FetchRequest, recvErr chan<- error) {
	for {
		req, err := stream.Recv()
		if err != nil {
			recvErr <- err
			return
		}
		select {
		case reqs <- req:
		case <-ctx.Done():
			return
		}
	}
}

func (s *fetchService) OffsetsForLeaderEpoch(ctx context.Context, req *replicadv1.OffsetsForLeaderEpochRequest) (*replicadv1.OffsetsForLeaderEpochResponse, error) {
	if err := validateOffsetsForLeaderEpoch(req); err != nil {
		return nil, err
	}
	return offsetsForLeaderEpochToProto(s.rm.OffsetsForLeaderEpoch(ctx, offsetsForLeaderEpochFromProto(req))), nil
}

// startRequestSpan is nil without a tracer.
func (s *fetchService) startRequestSpan(ctx context.Context, req *replicadv1.FetchRequest) trace.Span {
	if s.tracer == nil {
		return nil
	}
	_, span := s.tracer.Start(context.Background(), FetchRequestSpanName, trace.WithNewRoot(),
		trace.WithLinks(trace.LinkFromContext(ctx)), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.Int("replicad.replica_id", int(req.GetReplicaId())),
			attribute.Int64("replicad.broker_epoch", req.GetBrokerEpoch()),
			attribute.Int("replicad.partitions", len(req.GetPartitions())),
			attribute.Int64("replicad.correlation_id", req.GetCorrelationId())))
	return span
}

func endRequestSpan(span trace.Span, resp *replicadv1.FetchResponse, err error) {
	if span == nil {
		return
	}
	bytes, errs := 0, 0
	for _, p := range resp.GetPartitions() {
		bytes += len(p.GetRecords())
		if p.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			errs++
		}
	}
	span.SetAttributes(attribute.Int("replicad.record_bytes", bytes), attribute.Int("replicad.partition_errors", errs))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, "send")
	}
	span.End()
}
