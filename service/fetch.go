package service

import (
	"context"
	"errors"
	"io"
	"time"

	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/protoconv"
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
	// limits bound the answer's bytes, parked requests, and how long an
	// answer may wait to be sent.
	limits *limiter
}

// FetchRequestSpanName is the span of one fetch request on its stream (with
// --trace-data-plane). A follower's stream lives as long as it follows, and
// its own span ends only then, so each request is a root span of its own
// linked to the stream's: it shows in Jaeger as it happens.
const FetchRequestSpanName = "FetchService.fetchRequest"

// Fetch serves one follower fetcher's stream. A fetcher keeps one request in
// flight, so requests are answered in order, each (long-polling included)
// before the next is read. One goroutine receives, so the handler can stop on
// ctx.Done even while nothing arrives; one send at a time (answerSender). A malformed
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
	sender := &answerSender{stream: stream, done: make(chan error, 1), failed: cancel}
	// gRPC forbids a Send once the handler has returned: every return waits
	// for the send in flight (at once in the usual case, where the answer
	// was queued long ago; at most FetchSendTimeout for a follower that
	// stopped reading, whose blocked send is the one case left to the
	// transport's close).
	defer func() { _ = sender.wait(context.Background(), s.limits.limits.FetchSendTimeout) }()
	// held is the response budget granted to the last answer: gRPC may
	// still hold it (a send returns once the answer is queued, before flow
	// control lets it out), so it is given back only when the follower asks
	// again or the stream ends. A follower keeps a request in flight, asking
	// again as soon as it has an answer: one that has not for
	// FetchSendTimeout after an answer stopped reading, and its stream ends.
	var held int64
	defer func() { s.limits.response.give(held) }()
	// allowance is the most this stream's next answer may hold: it starts
	// at MinResponseGrant and doubles with every request, so a stream
	// must keep asking (reading) to be answered in bulk, and one that
	// never reads holds one small answer, not the fetch cap.
	allowance := int64(MinResponseGrant)
	idle := time.NewTimer(time.Hour)
	idle.Stop()
	defer idle.Stop()
	// session is the stream's fetch session, from its first request with
	// session set (see FetchSession); nil while it sends full requests.
	var session *FetchSession
	for {
		select {
		case <-idle.C:
			return status.Errorf(codes.DeadlineExceeded, "no fetch for %v after the last answer (not read?): closing the stream", s.limits.limits.FetchSendTimeout)
		case <-ctx.Done():
			if err := sender.failure(); err != nil {
				return err
			}
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
			idle.Stop()
			s.limits.response.give(held)
			held = 0
			if err := validateFetch(req); err != nil {
				return err
			}
			span := s.startRequestSpan(ctx, req)
			reqCtx := ctx // the stream's: its cancellation ends a long poll
			if span != nil {
				reqCtx = trace.ContextWithSpan(ctx, span)
			}
			if !req.GetSession() {
				session = nil
			} else if session == nil {
				session = NewFetchSession()
			}
			resp, grant, err := s.fetch(reqCtx, sender, req, session, allowance)
			allowance = min(2*allowance, core.DefaultFetchMaxBytes)
			held = grant
			endRequestSpan(span, resp, err)
			if err != nil {
				return err
			}
			idle.Reset(s.limits.limits.FetchSendTimeout)
		}
	}
}

// fetch answers one request and hands the answer to sender, returning the
// response budget it was granted (the caller gives it back). A long poll
// takes a waiting slot (ResourceExhausted past Limits.MaxWaiting). A send
// blocked longer than Limits.FetchSendTimeout (a fetcher that stopped
// reading, so flow control holds the answer) ends the stream with
// DeadlineExceeded: the previous answer's here, the last one's by the
// handler's idle timer; the handler's return cancels the stream, which
// unblocks the send and frees the answer.
//
// With a session, req is merged into it and the answer carries only what
// is new (see FetchSession).
func (s *fetchService) fetch(ctx context.Context, sender *answerSender, req *replicadv1.FetchRequest, session *FetchSession, allowance int64) (*replicadv1.FetchResponse, int64, error) {
	var freq core.FetchRequest
	if session != nil {
		var err error
		if freq, err = session.Apply(req); err != nil {
			return nil, 0, err
		}
	} else {
		freq = protoconv.FetchRequestFromProto(req)
	}
	if req.GetMaxWaitMs() > 0 && req.GetMinBytes() > 0 {
		unpark, err := s.limits.park("max_wait_ms")
		if err != nil {
			return nil, 0, err
		}
		defer unpark()
	}
	grant := s.limits.fetchBytes(req.GetMaxBytes(), allowance)
	// The caller gives the grant back once it is returned; a panic on the
	// way (turned into Internal) must give it back here, or the budget
	// shrinks for good.
	returned := false
	defer func() {
		if !returned {
			s.limits.response.give(grant)
		}
	}()
	freq.MaxBytes = int(grant)
	// Until the stream's allowance has grown to the cap (it has read its
	// answers for a while), the grant is hard: an answer holds no whole
	// batch beyond it, so a stream that never reads holds at most
	// MinResponseGrant however large the batches are.
	freq.HardMaxBytes = allowance < core.DefaultFetchMaxBytes
	fresp := s.rm.FetchMessages(ctx, freq)
	used := 0
	for _, p := range fresp.Partitions {
		used += len(p.Records)
	}
	grant = s.limits.response.settle(grant, int64(used))
	var resp *replicadv1.FetchResponse
	if session != nil {
		resp = session.Answer(req.GetCorrelationId(), fresp)
	} else {
		resp = protoconv.FetchResponseToProto(req.GetCorrelationId(), fresp)
	}
	returned = true
	if err := sender.wait(ctx, s.limits.limits.FetchSendTimeout); err != nil {
		return resp, grant, err
	}
	sender.send(resp)
	return resp, grant, nil
}

// answerSender sends a Fetch stream's answers, one at a time, each from a
// goroutine of its own: a send blocked by flow control (a follower that
// stopped reading) must not keep the handler from its deadlines. The
// handler does not wait for the send it started: had it waited, the
// sender's wake-up of it would have made the handler, not gRPC's writer
// goroutine, the next to run (Go runs the goroutine readied last first),
// and the answer would have left only once the handler was parked again:
// that was on the path of every record to a follower. It waits for a send
// only before the next one, which by then (the follower asked again after
// reading the answer) has long finished.
type answerSender struct {
	stream replicadv1.FetchService_FetchServer
	// done holds the finished send's error; pending: a send was started
	// and its error not taken yet.
	done    chan error
	pending bool
	// failed cancels the handler's context: a failed send wakes it (a
	// successful one wakes no one).
	failed context.CancelFunc
}

func (a *answerSender) send(resp *replicadv1.FetchResponse) {
	a.pending = true
	go func() {
		err := a.stream.Send(resp)
		a.done <- err
		if err != nil {
			a.failed()
		}
	}()
}

// wait waits for the last send to finish, at most timeout; its error, or
// DeadlineExceeded.
func (a *answerSender) wait(ctx context.Context, timeout time.Duration) error {
	if !a.pending {
		return nil
	}
	select {
	case err := <-a.done:
		a.pending = false
		return err
	default:
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case err := <-a.done:
		a.pending = false
		return err
	case <-t.C:
		return status.Errorf(codes.DeadlineExceeded, "the last fetch answer was not read for %v: closing the stream", timeout)
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// failure is the last send's error if it has finished and failed.
func (a *answerSender) failure() error {
	if !a.pending {
		return nil
	}
	select {
	case err := <-a.done:
		a.pending = false
		return err
	default:
		return nil
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
	return protoconv.OffsetsForLeaderEpochToProto(s.rm.OffsetsForLeaderEpoch(ctx, protoconv.OffsetsForLeaderEpochFromProto(req))), nil
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
