package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// ProduceRequestSpanName is the span of one request on a ProduceStream (with
// --trace-data-plane): like a Fetch stream's requests, each is a root span
// of its own linked to the stream's, which lives as long as the producer.
const ProduceRequestSpanName = "LogService.produceRequest"

// ProduceStream answers each request as Produce would, in order. A request
// Produce would fail with a gRPC status gets that status in its response
// (status_code, error_message) and the stream goes on: one bad record must
// not cost a producer its stream. The stream itself ends with a status only
// when the client ends it, a message cannot be read (over the server's size
// limit), or the server shuts down (Unavailable, once the answer in hand is
// sent).
//
// Requests are pipelined: the receiver appends each request as it arrives,
// in order, and hands it to the responder, which waits for its acks and
// answers, in the same order. A producer's next batch to a partition is so
// appended while the one before waits for the ISR, as Kafka's in-flight
// requests are; before, one acks=all batch at a time made an idempotent
// producer (whose batches to a partition share a stream) up to 0.73x as
// fast as plain ones spread over streams. At most maxPipelined requests
// wait; the delayed-produce limits bound them as they bound unary ones.
//
// The handler's own goroutine only waits for the two workers or for the
// shutdown, since a blocked Recv cannot be woken otherwise.
func (s *logService) ProduceStream(stream replicadv1.LogService_ProduceStreamServer) error {
	var drain <-chan struct{}
	if s.draining != nil {
		drain = s.draining.Done()
	}
	w := &produceStreamWorker{s: s, stream: stream, pending: make(chan *streamProduce, maxPipelined),
		panicked: make(chan string, 2)}
	received, sendFailed, responded := make(chan error, 1), make(chan error, 1), make(chan struct{})
	// These goroutines are not the handler's, so gRPC's recovery
	// interceptor does not cover them: a panic in the produce path is
	// raised again on the handler's goroutine (with its own stack), where
	// it ends the stream with Internal, as it ends a unary Produce,
	// instead of the broker.
	w.goSafe(func() { received <- w.receive() })
	go func() {
		defer close(responded)
		defer func() {
			if r := recover(); r != nil {
				w.panicked <- fmt.Sprintf("%v\n%s", r, debug.Stack())
				// The handler now ends the stream, so the receiver's Recv
				// fails and it closes pending: give back what the items
				// still queued hold, and never leave the receiver blocked
				// on a full pending.
				w.discard()
			}
		}()
		w.respond(sendFailed)
	}()
	stop := func() error {
		// After this, the responder sends nothing: gRPC forbids a Send
		// once the handler returned. The receiver's Recv ends when the
		// stream does, and the responder then gives back what it holds.
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		return status.Error(codes.Unavailable, "broker is shutting down: produce to the partition's leader on a new stream")
	}
	select {
	case p := <-w.panicked:
		panic(p)
	case err := <-sendFailed:
		return err
	case <-drain:
		return stop()
	case err := <-received:
		// The client closed its side (EOF) or the stream broke: what was
		// appended is answered first.
		select {
		case p := <-w.panicked:
			panic(p)
		case <-responded:
		case <-drain:
			return stop()
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	}
}

// maxPipelined bounds the requests of one stream appended and not yet
// answered (Kafka's producer sends at most 5 per connection by default).
const maxPipelined = 16

type produceStreamWorker struct {
	s      *logService
	stream replicadv1.LogService_ProduceStreamServer
	// pending carries appended requests from the receiver to the
	// responder, in order; the receiver closes it when the stream ends.
	pending  chan *streamProduce
	panicked chan string
	// mu is held while the request in hand is finished and answered;
	// stopped, set under it when the server drains, tells the responder
	// to send no more.
	mu      sync.Mutex
	stopped bool
}

// streamProduce is one request of the stream: appended (pp) or refused
// before the append (resp), and its span.
type streamProduce struct {
	pp   *pendingProduce
	resp *replicadv1.ProduceResponse
	err  error
	span trace.Span
}

func (w *produceStreamWorker) goSafe(f func()) {
	go func() {
		defer func() {
			if r := recover(); r != nil {
				w.panicked <- fmt.Sprintf("%v\n%s", r, debug.Stack())
			}
		}()
		f()
	}()
}

// receive reads requests and appends them in arrival order until the
// stream ends, then closes pending so the responder finishes.
func (w *produceStreamWorker) receive() error {
	defer close(w.pending)
	for {
		req, err := w.stream.Recv()
		item := &streamProduce{}
		if err != nil {
			// The authorizer refuses one request without ending the stream
			// (authz: a refusal that says the stream continues).
			var inBand interface{ StreamContinues() bool }
			if !errors.As(err, &inBand) || !inBand.StreamContinues() {
				return err
			}
			item.resp = statusResponse(err)
		} else {
			item.span = w.s.startProduceSpan(w.stream.Context(), req)
			item.pp, item.err = w.s.startProduce(req)
			if item.err != nil {
				item.resp = statusResponse(item.err)
			}
		}
		// The responder takes every item until pending is closed, so
		// this blocks only while maxPipelined wait.
		w.pending <- item
	}
}

// respond answers the appended requests in order, each once its acks are
// in. After a failed send (reported on failed) or a drain it answers no
// more but still finishes every item, giving back the limits they hold,
// until the receiver closes pending.
func (w *produceStreamWorker) respond(failed chan<- error) {
	ctx := w.stream.Context()
	quiet := false
	for item := range w.pending {
		if quiet {
			item.finish(ctx)
			continue
		}
		// Held while the request in hand waits and is answered: a drain
		// waits for that answer (the others behind it get none).
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			quiet = true
			item.finish(ctx)
			continue
		}
		err := w.stream.Send(item.finish(ctx))
		w.mu.Unlock()
		if err != nil {
			quiet = true
			failed <- err
		}
	}
}

// discard finishes, unanswered, every item until the receiver closes
// pending (after a panic in the responder: one that panics again is
// given up, its limits with it).
func (w *produceStreamWorker) discard() {
	ctx := w.stream.Context()
	for item := range w.pending {
		func() {
			defer func() { _ = recover() }()
			item.finish(ctx)
		}()
	}
}

// finish waits for the item's acks (if it was appended), ends its span and
// gives its answer; the limits it held are given back.
func (it *streamProduce) finish(ctx context.Context) *replicadv1.ProduceResponse {
	resp := it.resp
	if it.pp != nil {
		resp = it.pp.finish(ctx)
	}
	if it.span != nil {
		it.span.SetAttributes(attribute.String("replicad.error_code", resp.GetErrorCode().String()),
			attribute.String("replicad.status_code", codes.Code(resp.GetStatusCode()).String()))
		if it.err != nil {
			it.span.RecordError(it.err)
		}
		it.span.End()
	}
	return resp
}

// startProduceSpan starts a stream request's span (with --trace-data-plane):
// a root of its own, linked to the stream's.
func (s *logService) startProduceSpan(ctx context.Context, req *replicadv1.ProduceRequest) trace.Span {
	if s.tracer == nil {
		return nil
	}
	_, span := s.tracer.Start(context.Background(), ProduceRequestSpanName, trace.WithNewRoot(),
		trace.WithLinks(trace.LinkFromContext(ctx)), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("replicad.topic", req.GetTopic()),
			attribute.Int("replicad.partition", int(req.GetPartition())),
			attribute.Int("replicad.acks", int(req.GetAcks())),
			attribute.Int("replicad.records", len(req.GetRecords()))))
	return span
}

// statusResponse is the response of a request unary Produce would have
// failed with err's status. error_code says it failed too, for a client
// that reads only that: nothing was appended.
func statusResponse(err error) *replicadv1.ProduceResponse {
	st := status.Convert(err)
	code := replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR
	switch st.Code() {
	case codes.InvalidArgument:
		code = replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
	case codes.PermissionDenied, codes.Unauthenticated:
		code = replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED
	}
	return &replicadv1.ProduceResponse{ErrorCode: code, BaseOffset: -1, HighWatermark: -1,
		ErrorMessage: st.Message(), StatusCode: int32(st.Code())}
}
