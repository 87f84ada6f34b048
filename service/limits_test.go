package service

import (
	"bytes"
	"context"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// What a Consume or a Fetch may hold follows the broker's caps, not what
// the client asks (issue 12): max_bytes of int32 max reaches the replica
// manager as at most 50 MiB (consume) and 10 MiB (follower fetch).
func TestResponseSizeIsCappedServerSide(t *testing.T) {
	rm := &fakeRM{maxBatch: 2048}
	_, conn := startServer(t, rm)
	ctx := context.Background()
	if _, err := replicadv1.NewLogServiceClient(conn).Consume(ctx, &replicadv1.ConsumeRequest{Topic: "t", MaxBytes: math.MaxInt32}); err != nil {
		t.Fatal(err)
	}
	stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&replicadv1.FetchRequest{ReplicaId: 2, MaxBytes: math.MaxInt32}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	calls := rm.Calls()
	if len(calls) != 2 {
		t.Fatalf("calls %v", calls)
	}
	if c := calls[0].(core.ConsumeRequest); c.MaxBytes > core.MaxConsumeBytes {
		t.Errorf("consume reached the replica manager with max bytes %d, over %d", c.MaxBytes, core.MaxConsumeBytes)
	}
	if f := calls[1].(core.FetchRequest); f.MaxBytes > core.DefaultFetchMaxBytes {
		t.Errorf("fetch reached the replica manager with max bytes %d, over %d", f.MaxBytes, core.DefaultFetchMaxBytes)
	}
}

// blockingRM parks every Consume and acks=-1 Produce until release closes.
type blockingRM struct {
	*fakeRM
	release chan struct{}
}

func (b *blockingRM) Consume(ctx context.Context, req core.ConsumeRequest) core.ConsumeResult {
	b.record(req)
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return b.consume
}

func (b *blockingRM) Produce(ctx context.Context, req core.ProduceRequest) core.ProduceResult {
	b.record(req)
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return b.produce
}

// Parked requests (long-poll consumes, acks=-1 produces) are bounded: past
// Limits.MaxWaiting they are refused ResourceExhausted at once, naming the
// field, and the slots come back when the parked ones finish.
func TestParkedRequestsAreBounded(t *testing.T) {
	rm := &blockingRM{fakeRM: &fakeRM{maxBatch: 1 << 20}, release: make(chan struct{})}
	_, conn := startServerWith(t, Options{ReplicaManager: rm, Limits: Limits{MaxWaiting: 2}})
	logc := replicadv1.NewLogServiceClient(conn)
	ctx := context.Background()
	parked := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := logc.Consume(ctx, &replicadv1.ConsumeRequest{Topic: "t", MaxWaitMs: 60000, MinBytes: 1})
			parked <- err
		}()
	}
	waitUntil(t, func() bool { return len(rm.Calls()) == 2 })
	_, err := logc.Consume(ctx, &replicadv1.ConsumeRequest{Topic: "t", MaxWaitMs: 60000, MinBytes: 1})
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), "max_wait_ms:") {
		t.Fatalf("third parked consume: %v, want ResourceExhausted naming max_wait_ms", err)
	}
	_, err = logc.Produce(ctx, &replicadv1.ProduceRequest{Topic: "t", Acks: -1, Records: []*replicadv1.Record{{Value: []byte("v")}}})
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.HasPrefix(st.Message(), "acks:") {
		t.Fatalf("acks=-1 produce past the limit: %v, want ResourceExhausted naming acks", err)
	}
	// A consume that does not wait is not limited.
	go func() { time.Sleep(50 * time.Millisecond); close(rm.release) }()
	if _, err := logc.Consume(ctx, &replicadv1.ConsumeRequest{Topic: "t"}); err != nil {
		t.Fatalf("consume without waiting: %v", err)
	}
	for range 2 {
		if err := <-parked; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := logc.Consume(ctx, &replicadv1.ConsumeRequest{Topic: "t", MaxWaitMs: 10, MinBytes: 1}); err != nil {
		t.Fatalf("slots not given back: %v", err)
	}
}

// The bytes held by delayed produces are bounded too, and come back when
// the produce completes.
func TestDelayedProduceBytesAreBounded(t *testing.T) {
	rm := &blockingRM{fakeRM: &fakeRM{maxBatch: 1 << 20}, release: make(chan struct{})}
	_, conn := startServerWith(t, Options{ReplicaManager: rm, Limits: Limits{DelayedProduceBytes: 300 << 10}})
	logc := replicadv1.NewLogServiceClient(conn)
	big := []*replicadv1.Record{{Value: bytes.Repeat([]byte("x"), 200<<10)}}
	first := make(chan error, 1)
	go func() {
		_, err := logc.Produce(context.Background(), &replicadv1.ProduceRequest{Topic: "t", Acks: -1, Records: big})
		first <- err
	}()
	waitUntil(t, func() bool { return len(rm.Calls()) == 1 })
	_, err := logc.Produce(context.Background(), &replicadv1.ProduceRequest{Topic: "t", Acks: -1, Records: big})
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted {
		t.Fatalf("second 200 KiB delayed produce over a 300 KiB budget: %v, want ResourceExhausted", err)
	}
	close(rm.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if _, err := logc.Produce(context.Background(), &replicadv1.ProduceRequest{Topic: "t", Acks: -1, Records: big}); err != nil {
		t.Fatalf("a 200 KiB delayed produce once the first completed: %v (its bytes not given back?)", err)
	}
}

// A Consume is granted what is left of the response budget (at least
// MinResponseGrant) and gives it back once answered.
func TestConsumeGrantsComeFromTheResponseBudget(t *testing.T) {
	rm := &blockingRM{fakeRM: &fakeRM{maxBatch: 1 << 20}, release: make(chan struct{})}
	srv, conn := startServerWith(t, Options{ReplicaManager: rm, Limits: Limits{ResponseBytes: 1 << 20}})
	logc := replicadv1.NewLogServiceClient(conn)
	first := make(chan error, 1)
	go func() {
		_, err := logc.Consume(context.Background(), &replicadv1.ConsumeRequest{Topic: "t", MaxBytes: math.MaxInt32})
		first <- err
	}()
	waitUntil(t, func() bool { return len(rm.Calls()) == 1 })
	second := make(chan error, 1)
	go func() {
		_, err := logc.Consume(context.Background(), &replicadv1.ConsumeRequest{Topic: "t", MaxBytes: math.MaxInt32})
		second <- err
	}()
	waitUntil(t, func() bool { return len(rm.Calls()) == 2 })
	calls := rm.Calls()
	if got := calls[0].(core.ConsumeRequest).MaxBytes; got != 1<<20 {
		t.Fatalf("the first consume was granted %d bytes, want the whole 1 MiB budget", got)
	}
	if got := calls[1].(core.ConsumeRequest).MaxBytes; got != MinResponseGrant {
		t.Fatalf("a consume while the budget is spent was granted %d bytes, want the %d floor", got, MinResponseGrant)
	}
	close(rm.release)
	for _, c := range []chan error{first, second} {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, func() bool {
		srv.limits.response.mu.Lock()
		defer srv.limits.response.mu.Unlock()
		return srv.limits.response.avail == 1<<20
	})
}

// A Fetch stream whose answers are never read ends after FetchSendTimeout
// and gives its answer's bytes back: flow control stops the send, the
// deadline stops the hold.
func TestFetchStreamThatNeverReadsIsClosed(t *testing.T) {
	records := bytes.Repeat([]byte("r"), 3<<20) // far over the client's 64 KiB window
	rm := &fakeRM{fetch: func(req core.FetchRequest) core.FetchResponse {
		return core.FetchResponse{Partitions: []core.FetchPartitionResult{{Records: records}}}
	}}
	srv := NewServer(Options{ReplicaManager: rm, Limits: Limits{FetchSendTimeout: 300 * time.Millisecond}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Shutdown(context.Background())
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&replicadv1.FetchRequest{ReplicaId: 2, Partitions: []*replicadv1.FetchPartition{{Topic: "t"}}}); err != nil {
		t.Fatal(err)
	}
	full := srv.limits.limits.ResponseBytes
	// The answer is stuck; its grant comes back once the stream is closed.
	waitUntil(t, func() bool {
		srv.limits.response.mu.Lock()
		defer srv.limits.response.mu.Unlock()
		return srv.limits.response.avail < full
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		srv.limits.response.mu.Lock()
		avail := srv.limits.response.avail
		srv.limits.response.mu.Unlock()
		if avail == full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a never-read fetch answer still holds %d bytes of the budget after 5s", full-avail)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The client sees the stream end (after the data it never read).
	for {
		if _, err := stream.Recv(); err != nil {
			if st, _ := status.FromError(err); st.Code() != codes.DeadlineExceeded {
				t.Fatalf("stream ended with %v, want DeadlineExceeded", err)
			}
			break
		}
	}
}

// At most MaxConnections connections are served at once; another waits
// until one closes. An idle connection is closed after ConnectionsMaxIdle.
func TestConnectionLimitAndIdleClose(t *testing.T) {
	srv := NewServer(Options{ReplicaManager: &fakeRM{}, Limits: Limits{MaxConnections: 2, ConnectionsMaxIdle: 500 * time.Millisecond}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(lis) }()
	defer srv.Shutdown(context.Background())
	dial := func() *grpc.ClientConn {
		c, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	check := func(c *grpc.ClientConn, within time.Duration) error {
		ctx, cancel := context.WithTimeout(context.Background(), within)
		defer cancel()
		_, err := healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	a, b, c := dial(), dial(), dial()
	if err := check(a, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := check(b, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := check(c, 300*time.Millisecond); err == nil {
		t.Fatal("a third connection was served with MaxConnections 2")
	}
	a.Close()
	if err := check(c, 2*time.Second); err != nil {
		t.Fatalf("the third connection after one closed: %v", err)
	}
	// b has been idle: the server closes it (GOAWAY) and it leaves READY.
	waitUntil(t, func() bool { return b.GetState() != connectivity.Ready })
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A stream's grant is hard until it has read enough answers for its
// allowance to reach the cap, so one that never reads holds at most
// MinResponseGrant whatever the batch sizes; and the response budget is
// charged what an answer holds (a whole batch over the grant overdraws it),
// not what it was granted.
func TestFetchGrantsAreHardUntilTheStreamReadsAndChargeWhatTheyHold(t *testing.T) {
	records := bytes.Repeat([]byte("r"), 3<<20)
	rm := &fakeRM{fetch: func(req core.FetchRequest) core.FetchResponse {
		if req.HardMaxBytes {
			return core.FetchResponse{Partitions: []core.FetchPartitionResult{{}}}
		}
		return core.FetchResponse{Partitions: []core.FetchPartitionResult{{Records: records}}}
	}}
	srv, conn := startServer(t, rm)
	stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	avail := func() int64 {
		srv.limits.response.mu.Lock()
		defer srv.limits.response.mu.Unlock()
		return srv.limits.response.avail
	}
	full := srv.limits.limits.ResponseBytes
	for i := 0; ; i++ {
		if err := stream.Send(&replicadv1.FetchRequest{ReplicaId: 2, MaxBytes: math.MaxInt32, Partitions: []*replicadv1.FetchPartition{{Topic: "t"}}}); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		req := rm.Calls()[i].(core.FetchRequest)
		if len(resp.GetPartitions()[0].GetRecords()) > 0 {
			if req.HardMaxBytes || i < 5 {
				t.Fatalf("request %d (hard %v, max bytes %d) was served a whole batch", i, req.HardMaxBytes, req.MaxBytes)
			}
			// Held until the next request: 3 MiB, though granted less.
			if got := full - avail(); got != int64(len(records)) {
				t.Fatalf("the budget is charged %d bytes for an answer holding %d", got, len(records))
			}
			break
		}
		if !req.HardMaxBytes || req.MaxBytes > MinResponseGrant<<i {
			t.Fatalf("request %d of a new stream: hard %v, max bytes %d; want hard, at most %d", i, req.HardMaxBytes, req.MaxBytes, MinResponseGrant<<i)
		}
		if i > 10 {
			t.Fatal("the stream's allowance never grew to the cap")
		}
	}
	_ = stream.CloseSend()
	if _, err := stream.Recv(); err == nil {
		t.Fatal("stream still open after CloseSend")
	}
	waitUntil(t, func() bool { return avail() == full })
}
