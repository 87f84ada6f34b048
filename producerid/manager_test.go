package producerid

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitTimeout = 10 * time.Second

// fakeController is one controller address: its answers come from the
// test's scripts, and it counts the calls.
type fakeController struct {
	replicadv1.ControllerServiceClient // nil: other methods panic

	mu       sync.Mutex
	allocs   []*replicadv1.AllocateProducerIdsRequest
	bumps    []*replicadv1.BumpProducerEpochRequest
	allocate func(n int, req *replicadv1.AllocateProducerIdsRequest) (*replicadv1.AllocateProducerIdsResponse, error)
	bump     func(n int, req *replicadv1.BumpProducerEpochRequest) (*replicadv1.BumpProducerEpochResponse, error)
}

func (f *fakeController) AllocateProducerIds(_ context.Context, req *replicadv1.AllocateProducerIdsRequest, _ ...grpc.CallOption) (*replicadv1.AllocateProducerIdsResponse, error) {
	f.mu.Lock()
	n := len(f.allocs)
	f.allocs = append(f.allocs, req)
	script := f.allocate
	f.mu.Unlock()
	return script(n, req)
}

func (f *fakeController) BumpProducerEpoch(_ context.Context, req *replicadv1.BumpProducerEpochRequest, _ ...grpc.CallOption) (*replicadv1.BumpProducerEpochResponse, error) {
	f.mu.Lock()
	n := len(f.bumps)
	f.bumps = append(f.bumps, req)
	script := f.bump
	f.mu.Unlock()
	return script(n, req)
}

func (f *fakeController) allocCalls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.allocs)
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// blocks hands out blocks of count IDs from 1, as the controller does.
func blocks(count int32) func(int, *replicadv1.AllocateProducerIdsRequest) (*replicadv1.AllocateProducerIdsResponse, error) {
	var mu sync.Mutex
	next := int64(1)
	return func(int, *replicadv1.AllocateProducerIdsRequest) (*replicadv1.AllocateProducerIdsResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		first := next
		next += int64(count)
		return &replicadv1.AllocateProducerIdsResponse{FirstProducerId: first, Count: count}, nil
	}
}

// newManager is a Manager for broker 1 at epoch 3 over the fakes (in the
// order of Config.Controller), closed when the test ends.
func newManager(t *testing.T, prefetch int64, fakes ...*fakeController) *Manager {
	t.Helper()
	var addrs []string
	byAddr := map[string]*fakeController{}
	for i, f := range fakes {
		a := string(rune('a'+i)) + ":1"
		addrs = append(addrs, a)
		byAddr[a] = f
	}
	m, err := New(Config{Controller: strings.Join(addrs, ","), BrokerID: 1, BrokerEpoch: func() int64 { return 3 },
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, PrefetchRemaining: prefetch,
		Dial: func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
			return byAddr[addr], nopCloser{}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func mustID(t *testing.T, m *Manager) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	id, err := m.NewProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// IDs come out of each block in order, every one once, and the next block
// is asked for while PrefetchRemaining are left, before the block runs out;
// requests carry the broker and its epoch.
func TestNewProducerIDHandsOutBlocksInOrder(t *testing.T) {
	f := &fakeController{allocate: blocks(10)}
	m := newManager(t, 3, f)
	for want := int64(1); want <= 7; want++ {
		if id := mustID(t, m); id != want {
			t.Fatalf("ID %d, want %d", id, want)
		}
	}
	// 3 left: the next block is on its way before any producer waits.
	waitFor(t, "the block fetched ahead", func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.spareCount > 0
	})
	if n := f.allocCalls(); n != 2 {
		t.Fatalf("%d AllocateProducerIds calls with 3 IDs left, want 2 (one ahead)", n)
	}
	for want := int64(8); want <= 25; want++ {
		if id := mustID(t, m); id != want {
			t.Fatalf("ID %d, want %d", id, want)
		}
	}
	for _, r := range f.allocs {
		if r.GetBrokerId() != 1 || r.GetBrokerEpoch() != 3 {
			t.Fatalf("request %v, want broker 1 epoch 3", r)
		}
	}
}

// Concurrent callers never get the same ID.
func TestNewProducerIDConcurrentCallersGetDistinctIDs(t *testing.T) {
	f := &fakeController{allocate: blocks(7)}
	m := newManager(t, 0, f)
	const callers, each = 8, 40
	var mu sync.Mutex
	seen := map[int64]bool{}
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				id := mustID(t, m)
				mu.Lock()
				if seen[id] {
					t.Errorf("ID %d handed out twice", id)
				}
				seen[id] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(seen) != callers*each {
		t.Fatalf("%d distinct IDs, want %d", len(seen), callers*each)
	}
}

// A standby's NOT_CONTROLLER and a transport failure move the request to
// the next controller; STALE_BROKER_EPOCH (not registered yet) is retried.
func TestAllocateRetriesUntilTheActiveControllerAnswers(t *testing.T) {
	standby := &fakeController{allocate: func(int, *replicadv1.AllocateProducerIdsRequest) (*replicadv1.AllocateProducerIdsResponse, error) {
		return &replicadv1.AllocateProducerIdsResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER}, nil
	}}
	down := &fakeController{allocate: func(int, *replicadv1.AllocateProducerIdsRequest) (*replicadv1.AllocateProducerIdsResponse, error) {
		return nil, status.Error(codes.Unavailable, "connection refused")
	}}
	next := blocks(100)
	active := &fakeController{allocate: func(n int, req *replicadv1.AllocateProducerIdsRequest) (*replicadv1.AllocateProducerIdsResponse, error) {
		if n < 2 {
			return &replicadv1.AllocateProducerIdsResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH}, nil
		}
		return next(n, req)
	}}
	m := newManager(t, 0, standby, down, active)
	if id := mustID(t, m); id != 1 {
		t.Fatalf("ID %d, want 1", id)
	}
	if standby.allocCalls() == 0 || down.allocCalls() == 0 || active.allocCalls() != 3 {
		t.Fatalf("calls: standby %d, down %d, active %d; want the active one's third answered", standby.allocCalls(), down.allocCalls(), active.allocCalls())
	}
	// UseController points the next request at a named controller.
	m.UseController("a:1")
	if got := m.ch.Target(); got != "a:1" {
		t.Fatalf("after UseController(a:1) requests go to %s, want a:1", got)
	}
}

// A caller waits for a block only as long as its context allows, and is
// told why the last request failed; Close fails waiters and later calls.
func TestNewProducerIDWaitsBoundedAndClose(t *testing.T) {
	f := &fakeController{allocate: func(int, *replicadv1.AllocateProducerIdsRequest) (*replicadv1.AllocateProducerIdsResponse, error) {
		return nil, status.Error(codes.Unavailable, "controller down")
	}}
	m := newManager(t, 0, f)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := m.NewProducerID(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "controller down") {
		t.Fatalf("NewProducerID with the controller down: %v, want a deadline naming the last failure", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := m.NewProducerID(context.Background())
		done <- err
	}()
	waitFor(t, "a waiter", func() bool { return f.allocCalls() > 2 })
	m.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("waiter after Close: %v, want ErrClosed", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("a waiter outlived Close")
	}
	if _, err := m.NewProducerID(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("NewProducerID after Close: %v, want ErrClosed", err)
	}
}

// BumpEpoch returns the controller's epoch; a refusal is a CodeError with
// the code; NOT_CONTROLLER and transport failures are retried on the next
// controller, and an INVALID_PRODUCER_EPOCH after a lost answer says the
// first attempt may have landed.
func TestBumpEpoch(t *testing.T) {
	var mu sync.Mutex
	stored := map[int64]int32{}
	bump := func(_ int, req *replicadv1.BumpProducerEpochRequest) (*replicadv1.BumpProducerEpochResponse, error) {
		mu.Lock()
		defer mu.Unlock()
		if req.GetProducerId() > 100 {
			return &replicadv1.BumpProducerEpochResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID}, nil
		}
		if stored[req.GetProducerId()] != req.GetProducerEpoch() {
			return &replicadv1.BumpProducerEpochResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH}, nil
		}
		stored[req.GetProducerId()]++
		return &replicadv1.BumpProducerEpochResponse{ProducerEpoch: stored[req.GetProducerId()]}, nil
	}
	standby := &fakeController{bump: func(int, *replicadv1.BumpProducerEpochRequest) (*replicadv1.BumpProducerEpochResponse, error) {
		return &replicadv1.BumpProducerEpochResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER}, nil
	}}
	// The active controller applies the first bump of producer 9 but its
	// answer is lost (a deadline): the retry is refused, with the hint.
	lost := false
	active := &fakeController{bump: func(n int, req *replicadv1.BumpProducerEpochRequest) (*replicadv1.BumpProducerEpochResponse, error) {
		r, err := bump(n, req)
		if req.GetProducerId() == 9 && !lost {
			lost = true
			return nil, status.Error(codes.DeadlineExceeded, "answer lost")
		}
		return r, err
	}}
	m := newManager(t, 0, standby, active)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if e, err := m.BumpEpoch(ctx, 5, 0); err != nil || e != 1 {
		t.Fatalf("bump of 5 from 0: %d %v", e, err)
	}
	var ce *CodeError
	if _, err := m.BumpEpoch(ctx, 5, 0); !errors.As(err, &ce) || ce.Code != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
		t.Fatalf("second bump of 5 from 0: %v, want INVALID_PRODUCER_EPOCH", err)
	}
	if _, err := m.BumpEpoch(ctx, 500, 0); !errors.As(err, &ce) || ce.Code != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID {
		t.Fatalf("bump of an unknown ID: %v, want UNKNOWN_PRODUCER_ID", err)
	}
	_, err := m.BumpEpoch(ctx, 9, 0)
	if !errors.As(err, &ce) || ce.Code != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH || !strings.Contains(err.Error(), "an earlier attempt whose answer was lost may have bumped it") {
		// The client reads these words (client.lostBumpNote) to tell its
		// own lost bump from a fence.
		t.Fatalf("bump whose first answer was lost: %v, want INVALID_PRODUCER_EPOCH saying the first may have landed", err)
	}
	for _, r := range active.bumps {
		if r.GetBrokerId() != 1 || r.GetBrokerEpoch() != 3 {
			t.Fatalf("bump request %v, want broker 1 epoch 3", r)
		}
	}
}

// Each request to the controller is a client span naming the broker and
// the block or the epochs.
func TestRequestSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	f := &fakeController{allocate: blocks(10), bump: func(int, *replicadv1.BumpProducerEpochRequest) (*replicadv1.BumpProducerEpochResponse, error) {
		return &replicadv1.BumpProducerEpochResponse{ProducerEpoch: 4}, nil
	}}
	m, err := New(Config{Controller: "a:1", BrokerID: 2, BrokerEpoch: func() int64 { return 7 }, TracerProvider: tp,
		Dial: func(string) (replicadv1.ControllerServiceClient, io.Closer, error) { return f, nopCloser{}, nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mustID(t, m)
	if _, err := m.BumpEpoch(context.Background(), 5, 3); err != nil {
		t.Fatal(err)
	}
	attrs := func(name string) map[string]attribute.Value {
		t.Helper()
		spans := spantest.Named(rec, name)
		if len(spans) != 1 || spans[0].SpanKind() != trace.SpanKindClient {
			t.Fatalf("%d %s spans, want one client span", len(spans), name)
		}
		return spantest.Attrs(spans[0].Attributes())
	}
	a := attrs(AllocateSpanName)
	if a["replicad.broker"].AsInt64() != 2 || a["replicad.broker_epoch"].AsInt64() != 7 || a["replicad.first_producer_id"].AsInt64() != 1 ||
		a["replicad.count"].AsInt64() != 10 {
		t.Errorf("allocate span %v", a)
	}
	b := attrs(BumpSpanName)
	if b["replicad.producer_id"].AsInt64() != 5 || b["replicad.producer_epoch"].AsInt64() != 3 || b["replicad.new_producer_epoch"].AsInt64() != 4 {
		t.Errorf("bump span %v", b)
	}
}
