package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

func oneRecord(topic string, partition int32) *replicadv1.ProduceRequest {
	return &replicadv1.ProduceRequest{Topic: topic, Partition: partition, Acks: -1,
		Records: []*replicadv1.Record{{Value: []byte("v")}}}
}

// TestProduceStreamAnswersInOrder: requests sent ahead are answered one
// by one, in the order sent, as unary Produce answers each.
func TestProduceStreamAnswersInOrder(t *testing.T) {
	rm := &fakeRM{produceFn: func(_ context.Context, req core.ProduceRequest) core.ProduceResult {
		return core.ProduceResult{BaseOffset: int64(req.TopicPartition.Partition), HighWatermark: int64(req.TopicPartition.Partition) + 1}
	}}
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := replicadv1.NewLogServiceClient(conn).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	for i := range n {
		if err := s.Send(oneRecord("t", int32(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		mustProtoEqual(t, "answer", r, &replicadv1.ProduceResponse{BaseOffset: int64(i), HighWatermark: int64(i) + 1})
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %v, want io.EOF (the stream ends OK)", err)
	}
	// Each request reached core as unary Produce's does.
	calls := rm.Calls()
	if len(calls) != n {
		t.Fatalf("%d produce calls, want %d", len(calls), n)
	}
	if pr := calls[3].(core.ProduceRequest); pr.Acks != core.AcksAll || pr.Timeout != DefaultProduceTimeout || pr.TopicPartition.Partition != 3 {
		t.Fatalf("request 3 reached core as %+v", pr)
	}
}

// TestProduceStreamErrorsPerRequest: a request unary Produce fails with a
// status (bad input, over the batch limit) gets that status in its answer
// and the stream goes on; an answer's own error code passes through.
func TestProduceStreamErrorsPerRequest(t *testing.T) {
	rm := &fakeRM{maxBatch: 4 << 10, produceFn: func(_ context.Context, req core.ProduceRequest) core.ProduceResult {
		if req.TopicPartition.Topic == "gone" {
			return core.ProduceResult{Error: core.ErrUnknownTopicOrPartition, BaseOffset: -1, HighWatermark: -1}
		}
		return core.ProduceResult{BaseOffset: 7, HighWatermark: 8}
	}}
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := replicadv1.NewLogServiceClient(conn)
	s, err := c.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	big := oneRecord("t", 0)
	big.Records[0].Value = make([]byte, 8<<10)
	for _, tc := range []struct {
		name string
		req  *replicadv1.ProduceRequest
	}{
		{"valid", oneRecord("t", 0)},
		{"no topic", oneRecord("", 0)},
		{"bad acks", &replicadv1.ProduceRequest{Topic: "t", Acks: 2, Records: []*replicadv1.Record{{Value: []byte("v")}}}},
		{"over the batch limit", big},
		{"unknown topic", oneRecord("gone", 0)},
		{"valid again", oneRecord("t", 0)},
	} {
		if err := s.Send(tc.req); err != nil {
			t.Fatalf("%s: send: %v", tc.name, err)
		}
		got, err := s.Recv()
		if err != nil {
			t.Fatalf("%s: the stream ended: %v", tc.name, err)
		}
		// The same request as a unary call.
		unary, uerr := c.Produce(ctx, tc.req)
		if uerr == nil {
			mustProtoEqual(t, tc.name, got, unary)
			continue
		}
		st := status.Convert(uerr)
		if codes.Code(got.GetStatusCode()) != st.Code() || got.GetErrorMessage() != st.Message() ||
			got.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE || got.GetBaseOffset() != -1 {
			t.Fatalf("%s: stream answered %v, unary failed with %v", tc.name, got, uerr)
		}
		if st.Code() == codes.InvalidArgument && got.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST {
			t.Fatalf("%s: error_code %v, want INVALID_REQUEST", tc.name, got.GetErrorCode())
		}
	}
}

// TestProduceStreamClientCancel: a client that cancels while its request
// waits for the ISR ends the wait (the produce's context is the stream's)
// and the handler; goleak (TestMain) checks nothing is left running.
func TestProduceStreamClientCancel(t *testing.T) {
	waiting := make(chan struct{})
	ended := make(chan error, 1)
	rm := &fakeRM{produceFn: func(ctx context.Context, _ core.ProduceRequest) core.ProduceResult {
		close(waiting)
		<-ctx.Done()
		ended <- ctx.Err()
		return core.ProduceResult{Error: core.ErrRequestTimedOut, BaseOffset: -1, HighWatermark: -1}
	}}
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := replicadv1.NewLogServiceClient(conn).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(oneRecord("t", 0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the replica manager")
	}
	cancel()
	select {
	case err := <-ended:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the produce's context ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiting produce did not end with the client's cancel")
	}
	if _, err := s.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("client Recv after cancel: %v", err)
	}
}

// TestProduceStreamEndsOnShutdown: a stream never ends on its own, so the
// server's shutdown ends it (Unavailable) and does not wait out its grace
// period for it; a request in hand is answered first.
func TestProduceStreamEndsOnShutdown(t *testing.T) {
	release := make(chan struct{})
	inHand := make(chan struct{}, 1)
	rm := &fakeRM{produceFn: func(_ context.Context, req core.ProduceRequest) core.ProduceResult {
		if req.TopicPartition.Partition == 1 {
			inHand <- struct{}{}
			<-release
		}
		return core.ProduceResult{BaseOffset: int64(req.TopicPartition.Partition)}
	}}
	srv, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := replicadv1.NewLogServiceClient(conn).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(oneRecord("t", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := s.Send(oneRecord("t", 1)); err != nil {
		t.Fatal(err)
	}
	<-inHand
	shut := make(chan bool, 1)
	go func() {
		sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer scancel()
		shut <- srv.Shutdown(sctx)
	}()
	// The shutdown waits for the request in hand.
	select {
	case <-shut:
		t.Fatal("shutdown finished before the request in hand was answered")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	r, err := s.Recv()
	if err != nil || r.GetBaseOffset() != 1 {
		t.Fatalf("request in hand: %v %v, want its answer", r, err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Unavailable || !strings.Contains(status.Convert(err).Message(), "shutting down") {
		t.Fatalf("after shutdown: %v, want Unavailable", err)
	}
	select {
	case graceful := <-shut:
		if !graceful {
			t.Fatal("shutdown had to cancel calls: the stream held it")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("shutdown still waits for the stream")
	}
}

// TestProduceStreamMaxMessageSize: a message over the server's receive
// limit cannot be read past, so it ends the stream ResourceExhausted (the
// unary call fails the same); one under it but over the batch limit is
// answered in the stream.
func TestProduceStreamMaxMessageSize(t *testing.T) {
	rm := &fakeRM{maxBatch: 1 << 20}
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := replicadv1.NewLogServiceClient(conn)
	huge := oneRecord("t", 0)
	huge.Records[0].Value = make([]byte, maxRecvMsgSize(rm.MaxBatchBytes())+1)
	if _, err := c.Produce(ctx, huge, grpc.MaxCallSendMsgSize(64<<20)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("unary: %v, want ResourceExhausted", err)
	}
	s, err := c.ProduceStream(ctx, grpc.MaxCallSendMsgSize(64<<20))
	if err != nil {
		t.Fatal(err)
	}
	over := oneRecord("t", 0)
	over.Records[0].Value = make([]byte, 2<<20)
	if err := s.Send(over); err != nil {
		t.Fatal(err)
	}
	r, err := s.Recv()
	if err != nil || codes.Code(r.GetStatusCode()) != codes.InvalidArgument && r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_MESSAGE_TOO_LARGE {
		t.Fatalf("over the batch limit: %v %v", r, err)
	}
	_ = s.Send(huge)
	if _, err := s.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("over the receive limit: %v, want ResourceExhausted", err)
	}
}

// A panic while a stream's request is handled ends that stream with
// Internal, as a unary Produce's panic does, and the server goes on: the
// stream's worker goroutine is outside gRPC's recovery interceptor, so it
// hands the panic to the handler's goroutine.
func TestProduceStreamPanicBecomesInternal(t *testing.T) {
	rm := &fakeRM{panicWith: "boom"}
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := replicadv1.NewLogServiceClient(conn)
	s, err := c.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(oneRecord("t", 0)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); status.Code(err) != codes.Internal {
		t.Fatalf("stream after a panic: %v, want Internal", err)
	}
	// The server is still up.
	if _, err := c.Produce(ctx, oneRecord("t", 0)); status.Code(err) != codes.Internal {
		t.Fatalf("unary Produce after the stream's panic: %v, want Internal (the fake panics on every call)", err)
	}
}

// TestProduceStreamPipelinesAppends: with a real replica manager, a
// stream's acks=all requests are appended as they arrive, while the ones
// before them still wait for the ISR (a follower that has not fetched), and
// are answered in order once it fetches. Before the stream pipelined, the
// second request was not read until the first was answered.
func TestProduceStreamPipelinesAppends(t *testing.T) {
	rm, err := core.NewReplicaManager(core.Config{BrokerID: 1, LogDirs: []string{filepath.Join(t.TempDir(), "d")}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Shutdown(context.Background()) })
	t0 := tp.TopicPartition{Topic: "t", Partition: 0}
	rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: []core.PartitionState{{
		TopicPartition: t0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, IsNew: true}}})
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := replicadv1.NewLogServiceClient(conn).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 3
	for range n {
		req := oneRecord("t", 0)
		req.TimeoutMs = 15_000
		if err := s.Send(req); err != nil {
			t.Fatal(err)
		}
	}
	leo := func() int64 {
		p := int32(0)
		return rm.Describe("t", &p).Partitions[0].LogEndOffset
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := leo(); got != n {
			return fmt.Errorf("log end offset %d, want %d: the requests behind the first are not appended while it waits", got, n)
		}
		return nil
	})
	// The follower fetches up to the log end: the high watermark passes
	// all three, and they are answered in order.
	fs, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.Send(&replicadv1.FetchRequest{CorrelationId: 1, ReplicaId: 2, BrokerEpoch: 1,
		Partitions: []*replicadv1.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: n, CurrentLeaderEpoch: 1, LastFetchedEpoch: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r, err := s.Recv()
		if err != nil || r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || r.GetBaseOffset() != int64(i) {
			t.Fatalf("answer %d: %v %v, want offset %d", i, r, err, i)
		}
	}
}

// TestProduceStreamPanicGivesBackItsLimits: found in review. A panic in the
// stream's responder used to leave the requests queued behind it holding
// their delayed-produce slots for good (and the receiver blocked on a full
// queue): a few such streams used up Limits.MaxWaiting, and every later
// acks=-1 produce was refused ResourceExhausted.
func TestProduceStreamPanicGivesBackItsLimits(t *testing.T) {
	release := make(chan struct{})
	rm := &fakeRM{produceFn: func(_ context.Context, req core.ProduceRequest) core.ProduceResult {
		if req.TopicPartition.Partition == 1 {
			<-release
			panic("boom")
		}
		return core.ProduceResult{}
	}}
	const slots = 8
	srv, conn := startServerWith(t, Options{ReplicaManager: rm, Limits: Limits{MaxWaiting: slots}})
	free := func() int64 {
		srv.limits.waiting.mu.Lock()
		defer srv.limits.waiting.mu.Unlock()
		return srv.limits.waiting.avail
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := replicadv1.NewLogServiceClient(conn).ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The first request panics once released; the three behind it wait
	// in the pipeline, each holding a slot.
	if err := s.Send(oneRecord("t", 1)); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Send(oneRecord("t", 0)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := free(); n != slots-4 {
			return fmt.Errorf("%d slots free, want %d: not all four requests are parked yet", n, slots-4)
		}
		return nil
	})
	close(release)
	if _, err := s.Recv(); status.Code(err) != codes.Internal {
		t.Fatalf("stream after a panic: %v, want Internal", err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := free(); n != slots {
			return fmt.Errorf("%d of %d waiting slots free after the stream ended: the queued requests kept theirs", n, slots)
		}
		return nil
	})
}
