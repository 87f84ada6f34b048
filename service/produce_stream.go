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

// ProduceStream answers each request as Produce would, in order, one at a
// time. A request Produce would fail with a gRPC status gets that status in
// its response (status_code, error_message) and the stream goes on: one bad
// record must not cost a producer its stream. The stream itself ends with a
// status only when the client ends it, a message cannot be read (over the
// server's size limit), or the server shuts down (Unavailable, once the
// request in hand is answered).
//
// One goroutine receives, handles and sends, so a record costs no hand-off
// between goroutines; the handler's own goroutine only waits for it or for
// the shutdown, since a blocked Recv cannot be woken otherwise.
func (s *logService) ProduceStream(stream replicadv1.LogService_ProduceStreamServer) error {
	var drain <-chan struct{}
	if s.draining != nil {
		drain = s.draining.Done()
	}
	w := &produceStreamWorker{s: s, stream: stream}
	done := make(chan error, 1)
	panicked := make(chan string, 1)
	go func() {
		// This goroutine is not the handler's, so gRPC's recovery
		// interceptor does not cover it: a panic in the produce path is
		// raised again on the handler's goroutine (with this one's stack),
		// where it ends the stream with Internal, as it ends a unary
		// Produce, instead of the broker.
		defer func() {
			if r := recover(); r != nil {
				panicked <- fmt.Sprintf("%v\n%s", r, debug.Stack())
			}
		}()
		done <- w.serve()
	}()
	select {
	case p := <-panicked:
		panic(p)
	case err := <-done:
		if errors.Is(err, io.EOF) {
			return nil
		}
		return err
	case <-drain:
		// After this, the worker sends nothing: gRPC forbids a Send once
		// the handler returned. Its Recv ends when the stream does.
		w.mu.Lock()
		w.stopped = true
		w.mu.Unlock()
		return status.Error(codes.Unavailable, "broker is shutting down: produce to the partition's leader on a new stream")
	}
}

type produceStreamWorker struct {
	s      *logService
	stream replicadv1.LogService_ProduceStreamServer
	// mu is held while a request is handled and answered; stopped, set
	// under it when the server drains, tells the worker to send no more.
	mu      sync.Mutex
	stopped bool
}

func (w *produceStreamWorker) serve() error {
	ctx := w.stream.Context()
	for {
		req, err := w.stream.Recv()
		var resp *replicadv1.ProduceResponse
		if err != nil {
			// The authorizer refuses one request without ending the stream
			// (authz: a refusal that says the stream continues).
			var inBand interface{ StreamContinues() bool }
			if !errors.As(err, &inBand) || !inBand.StreamContinues() {
				return err
			}
			resp = statusResponse(err)
		}
		w.mu.Lock()
		if w.stopped {
			w.mu.Unlock()
			return nil
		}
		if resp == nil {
			resp = w.s.produceOnStream(ctx, req)
		}
		err = w.stream.Send(resp)
		w.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// produceOnStream is produce, its gRPC error turned into a response.
func (s *logService) produceOnStream(ctx context.Context, req *replicadv1.ProduceRequest) *replicadv1.ProduceResponse {
	var span trace.Span
	if s.tracer != nil {
		_, span = s.tracer.Start(context.Background(), ProduceRequestSpanName, trace.WithNewRoot(),
			trace.WithLinks(trace.LinkFromContext(ctx)), trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("replicad.topic", req.GetTopic()),
				attribute.Int("replicad.partition", int(req.GetPartition())),
				attribute.Int("replicad.acks", int(req.GetAcks())),
				attribute.Int("replicad.records", len(req.GetRecords()))))
	}
	resp, err := s.produce(ctx, req)
	if err != nil {
		resp = statusResponse(err)
	}
	if span != nil {
		span.SetAttributes(attribute.String("replicad.error_code", resp.GetErrorCode().String()),
			attribute.String("replicad.status_code", codes.Code(resp.GetStatusCode()).String()))
		if err != nil {
			span.RecordError(err)
		}
		span.End()
	}
	return resp
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
