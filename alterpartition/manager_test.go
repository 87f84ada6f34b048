package alterpartition

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on a condition (generous for -race on a slow machine).
const waitTimeout = 10 * time.Second

// fakeController serves ControllerService.AlterPartition on loopback and
// answers each call with its test's script.
type fakeController struct {
	replicadv1.UnimplementedControllerServiceServer
	// script answers the n-th call (from 0).
	script func(ctx context.Context, n int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error)

	mu       sync.Mutex
	requests []*replicadv1.AlterPartitionRequest
	// received gets each request as it arrives (buffered, never blocks).
	received chan *replicadv1.AlterPartitionRequest

	addr string
	srv  *grpc.Server
}

func (f *fakeController) AlterPartition(ctx context.Context, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
	f.mu.Lock()
	n := len(f.requests)
	f.requests = append(f.requests, proto.Clone(req).(*replicadv1.AlterPartitionRequest))
	f.mu.Unlock()
	select {
	case f.received <- req:
	default:
	}
	return f.script(ctx, n, req)
}

func (f *fakeController) calls() []*replicadv1.AlterPartitionRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests)
}

// startController serves a fake controller on 127.0.0.1:0 until the test ends.
func startController(t *testing.T, script func(ctx context.Context, n int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error)) *fakeController {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeController{script: script, received: make(chan *replicadv1.AlterPartitionRequest, 64), addr: lis.Addr().String(), srv: grpc.NewServer()}
	replicadv1.RegisterControllerServiceServer(f.srv, f)
	go func() { _ = f.srv.Serve(lis) }()
	t.Cleanup(f.srv.Stop)
	return f
}

// newManager starts a Manager for broker 1 (epoch 3) with short backoffs,
// closed when the test ends.
func newManager(t *testing.T, addr string) *Manager {
	t.Helper()
	m, err := New(Config{
		Controller:  addr,
		BrokerID:    1,
		BrokerEpoch: func() int64 { return 3 },
		MinBackoff:  5 * time.Millisecond,
		MaxBackoff:  50 * time.Millisecond,
		Rand:        rand.New(rand.NewPCG(1, 2)),
		Logger:      zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// submit hands change to m and returns where its results arrive, and a
// count of how often done was called.
func submit(m *Manager, change core.IsrChange) (<-chan core.IsrChangeResult, *atomic.Int32) {
	ch := make(chan core.IsrChangeResult, 4)
	var n atomic.Int32
	m.Submit(change, func(res core.IsrChangeResult) {
		n.Add(1)
		ch <- res
	})
	return ch, &n
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitTimeout):
		t.Fatalf("no %s within %v", what, waitTimeout)
		panic("unreachable")
	}
}

func expansion(topic string, partition int32, newIsr ...int32) core.IsrChange {
	return core.IsrChange{
		TopicPartition: tp.TopicPartition{Topic: topic, Partition: partition},
		LeaderID:       1,
		LeaderEpoch:    4,
		PartitionEpoch: 6,
		NewIsr:         newIsr,
	}
}

// accept commits every item as proposed with partition epoch + 1.
func accept(req *replicadv1.AlterPartitionRequest) *replicadv1.AlterPartitionResponse {
	resp := &replicadv1.AlterPartitionResponse{}
	for _, it := range req.GetPartitions() {
		var isr []int32
		for _, b := range it.GetNewIsr() {
			isr = append(isr, b.GetBrokerId())
		}
		resp.Partitions = append(resp.Partitions, &replicadv1.AlterPartitionResult{Topic: it.GetTopic(), Partition: it.GetPartition(),
			Leader: req.GetBrokerId(), LeaderEpoch: it.GetLeaderEpoch(), Isr: isr, PartitionEpoch: it.GetPartitionEpoch() + 1})
	}
	return resp
}

func partitionsOf(req *replicadv1.AlterPartitionRequest) []string {
	var out []string
	for _, it := range req.GetPartitions() {
		out = append(out, fmt.Sprintf("%s-%d", it.GetTopic(), it.GetPartition()))
	}
	slices.Sort(out)
	return out
}

// An accepted expansion is sent with this broker's id and epoch and every
// member's broker epoch, and completes NONE with the ISR and partition epoch
// the controller committed (not the ones proposed).
func TestAcceptedExpansionCompletesWithCommittedState(t *testing.T) {
	ctl := startController(t, func(_ context.Context, _ int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		return &replicadv1.AlterPartitionResponse{Partitions: []*replicadv1.AlterPartitionResult{{
			Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 4, Isr: []int32{1, 2, 3}, PartitionEpoch: 9,
		}}}, nil
	})
	m := newManager(t, ctl.addr)
	change := expansion("orders", 0, 1, 2, 3)
	change.BrokerEpochs = map[int32]int64{2: 11}
	results, _ := submit(m, change)

	res := await(t, results, "result")
	if res.Error != core.ErrNone || !slices.Equal(res.Isr, []int32{1, 2, 3}) || res.PartitionEpoch != 9 {
		t.Fatalf("result %+v, want NONE with ISR [1 2 3] and partition epoch 9", res)
	}
	want := &replicadv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: 3, Partitions: []*replicadv1.AlterPartitionItem{{
		Topic: "orders", Partition: 0, LeaderEpoch: 4, PartitionEpoch: 6,
		NewIsr: []*replicadv1.BrokerEpoch{{BrokerId: 1, BrokerEpoch: 3}, {BrokerId: 2, BrokerEpoch: 11}, {BrokerId: 3, BrokerEpoch: -1}},
	}}}
	if got := ctl.calls(); len(got) != 1 || !proto.Equal(got[0], want) {
		t.Fatalf("controller got %v, want one request %v", got, want)
	}
}

// A partition-level error rejects that partition's change only, and a
// top-level error rejects every change of the request.
func TestRejectionsMapToTheirChanges(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resp     *replicadv1.AlterPartitionResponse
		wantA    core.ErrorCode
		wantB    core.ErrorCode
		wantIsrB []int32
	}{
		{
			name: "partition INVALID_UPDATE_VERSION",
			resp: &replicadv1.AlterPartitionResponse{Partitions: []*replicadv1.AlterPartitionResult{
				{Topic: "a", Partition: 0, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION},
				{Topic: "b", Partition: 0, Leader: 1, LeaderEpoch: 4, Isr: []int32{1, 2}, PartitionEpoch: 7},
			}},
			wantA: core.ErrInvalidUpdateVersion, wantB: core.ErrNone, wantIsrB: []int32{1, 2},
		},
		{
			// A joining replica's stale broker epoch: refused against the
			// committed state, so core may drop the expansion and propose
			// again with the replica's new epoch (tests/sim seed
			// 117115516: left pending, the replica never rejoined).
			name: "partition STALE_BROKER_EPOCH",
			resp: &replicadv1.AlterPartitionResponse{Partitions: []*replicadv1.AlterPartitionResult{
				{Topic: "a", Partition: 0, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH},
				{Topic: "b", Partition: 0, Leader: 1, LeaderEpoch: 4, Isr: []int32{1, 2}, PartitionEpoch: 7},
			}},
			wantA: core.ErrIneligibleReplica, wantB: core.ErrNone, wantIsrB: []int32{1, 2},
		},
		{
			name: "partition missing from the answer",
			resp: &replicadv1.AlterPartitionResponse{Partitions: []*replicadv1.AlterPartitionResult{
				{Topic: "b", Partition: 0, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH},
			}},
			wantA: core.ErrUnknownServerError, wantB: core.ErrFencedLeaderEpoch,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release := make(chan struct{})
			ctl := startController(t, func(ctx context.Context, n int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
				if n == 0 { // hold the first request so both changes go in the second
					select {
					case <-release:
					case <-ctx.Done():
					}
					return accept(req), nil
				}
				return tc.resp, nil
			})
			m := newManager(t, ctl.addr)
			first, _ := submit(m, expansion("first", 0, 1, 2))
			await(t, ctl.received, "first request")
			resA, _ := submit(m, expansion("a", 0, 1, 2))
			resB, _ := submit(m, expansion("b", 0, 1, 2))
			close(release)
			await(t, first, "result of the first change")
			a, b := await(t, resA, "result of a"), await(t, resB, "result of b")
			if a.Error != tc.wantA || b.Error != tc.wantB || !slices.Equal(b.Isr, tc.wantIsrB) {
				t.Fatalf("results a %+v b %+v, want a %v, b %v with ISR %v", a, b, tc.wantA, tc.wantB, tc.wantIsrB)
			}
		})
	}
}

// A change whose request fails with UNAVAILABLE is retried, and completes
// once, with the answer to the retry.
func TestUnavailableIsRetried(t *testing.T) {
	ctl := startController(t, func(_ context.Context, n int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		if n < 2 {
			return nil, status.Error(codes.Unavailable, "controller moving")
		}
		return accept(req), nil
	})
	m := newManager(t, ctl.addr)
	results, calls := submit(m, expansion("orders", 0, 1, 2))
	res := await(t, results, "result")
	if res.Error != core.ErrNone || !slices.Equal(res.Isr, []int32{1, 2}) || res.PartitionEpoch != 7 {
		t.Fatalf("result %+v, want NONE with ISR [1 2] and partition epoch 7", res)
	}
	if got := ctl.calls(); len(got) != 3 || !proto.Equal(got[0], got[2]) {
		t.Fatalf("controller got %d requests %v, want the same request three times", len(got), got)
	}
	// Close answers whatever is still pending: a second answer would show here.
	_ = m.Close()
	if n := calls.Load(); n != 1 {
		t.Fatalf("done called %d times, want once", n)
	}
}

// A controller that does not serve AlterPartition rejects the change rather
// than holding it forever.
func TestUnimplementedRejects(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	replicadv1.RegisterControllerServiceServer(srv, &replicadv1.UnimplementedControllerServiceServer{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	m := newManager(t, lis.Addr().String())
	results, _ := submit(m, expansion("orders", 0, 1, 2))
	if res := await(t, results, "result"); res.Error != core.ErrUnknownServerError {
		t.Fatalf("result %+v, want UNKNOWN_SERVER_ERROR", res)
	}
}

// Changes of two partitions submitted while a request is in flight go to the
// controller together, in the next request.
// holdFirst is a controller script accepting every request, the first only
// once release is closed: changes submitted meanwhile batch up.
func holdFirst(release <-chan struct{}) func(ctx context.Context, n int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
	return func(ctx context.Context, n int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		if n == 0 {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return accept(req), nil
	}
}

func TestChangesSubmittedDuringARequestAreBatched(t *testing.T) {
	release := make(chan struct{})
	ctl := startController(t, holdFirst(release))
	m := newManager(t, ctl.addr)
	first, _ := submit(m, expansion("orders", 0, 1, 2))
	await(t, ctl.received, "first request")
	second, _ := submit(m, expansion("orders", 1, 1, 3))
	third, _ := submit(m, expansion("payments", 0, 1, 2, 3))
	close(release)
	for _, ch := range []<-chan core.IsrChangeResult{first, second, third} {
		if res := await(t, ch, "result"); res.Error != core.ErrNone {
			t.Fatalf("result %+v, want NONE", res)
		}
	}
	got := ctl.calls()
	if len(got) != 2 || !slices.Equal(partitionsOf(got[0]), []string{"orders-0"}) ||
		!slices.Equal(partitionsOf(got[1]), []string{"orders-1", "payments-0"}) {
		t.Fatalf("controller got %d requests %v, want [orders-0] then [orders-1 payments-0]", len(got), got)
	}
}

// Close with a request in flight fails its change before returning, fails
// later submissions at once, and leaves no goroutine behind.
func TestCloseFailsTheChangeInFlight(t *testing.T) {
	ctl := startController(t, func(ctx context.Context, _ int, _ *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		<-ctx.Done() // never answers
		return nil, ctx.Err()
	})
	m := newManager(t, ctl.addr)
	inFlight, calls := submit(m, expansion("orders", 0, 1, 2))
	await(t, ctl.received, "request")
	if err := m.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case res := <-inFlight:
		if res.Error != core.ErrBrokerNotAvailable {
			t.Fatalf("result %+v, want BROKER_NOT_AVAILABLE", res)
		}
	default:
		t.Fatal("Close returned before failing the change in flight")
	}
	late, _ := submit(m, expansion("orders", 1, 1, 2))
	select {
	case res := <-late:
		if res.Error != core.ErrBrokerNotAvailable {
			t.Fatalf("late result %+v, want BROKER_NOT_AVAILABLE", res)
		}
	default:
		t.Fatal("Submit after Close did not fail at once")
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("done called %d times, want once", n)
	}
	ctl.srv.Stop()
	goleak.VerifyNone(t)
}

// A change submitted while the controller is unreachable (connection
// refused) is retried until the controller comes up, then committed.
func TestUnreachableControllerIsRetried(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there yet
	m := newManager(t, addr)
	results, _ := submit(m, expansion("orders", 0, 1, 2))
	select {
	case res := <-results:
		t.Fatalf("result %+v while the controller was unreachable, want none yet", res)
	case <-time.After(100 * time.Millisecond):
	}
	lis, err = net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port %s taken meanwhile: %v", addr, err)
	}
	srv := grpc.NewServer()
	ctl := &fakeController{received: make(chan *replicadv1.AlterPartitionRequest, 64),
		script: func(_ context.Context, _ int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
			return accept(req), nil
		}}
	replicadv1.RegisterControllerServiceServer(srv, ctl)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	if res := await(t, results, "result"); res.Error != core.ErrNone || res.PartitionEpoch != 7 {
		t.Fatalf("result %+v, want NONE with partition epoch 7", res)
	}
}

// A standby controller answers NOT_CONTROLLER: the same change goes to the
// next address and completes with the active controller's answer.
func TestStandbyControllerSendsToTheNext(t *testing.T) {
	standby := startController(t, func(context.Context, int, *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		return &replicadv1.AlterPartitionResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER}, nil
	})
	active := startController(t, func(_ context.Context, _ int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		return accept(req), nil
	})
	m := newManager(t, standby.addr+","+active.addr)
	results, _ := submit(m, expansion("orders", 0, 1, 2))
	res := await(t, results, "result")
	if res.Error != core.ErrNone || res.PartitionEpoch != 7 {
		t.Fatalf("result %+v, want NONE at partition epoch 7 from the active controller", res)
	}
	if len(standby.calls()) == 0 || len(active.calls()) != 1 {
		t.Fatalf("standby got %d calls, active %d; want >= 1 and 1", len(standby.calls()), len(active.calls()))
	}
}

// UseController (the broker's session found another controller active):
// the request in flight to a controller that hangs is abandoned and the
// change goes to the named one at once, not after the request timeout. An
// address that is not one of the Manager's is ignored.
func TestUseControllerAbandonsAHungOne(t *testing.T) {
	hung := startController(t, func(ctx context.Context, _ int, _ *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	active := startController(t, func(_ context.Context, _ int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		return accept(req), nil
	})
	m, err := New(Config{Controller: hung.addr + "," + active.addr, BrokerID: 1, BrokerEpoch: func() int64 { return 3 },
		RequestTimeout: time.Minute, MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })

	m.UseController("127.0.0.1:1") // not one of its controllers: ignored
	results, _ := submit(m, expansion("orders", 0, 1, 2))
	await(t, hung.received, "the request to the hung controller")
	start := time.Now()
	m.UseController(active.addr)
	res := await(t, results, "result") // well before the minute's timeout
	if res.Error != core.ErrNone || res.PartitionEpoch != 7 {
		t.Fatalf("result %+v, want NONE at partition epoch 7 from the active controller", res)
	}
	if len(active.calls()) != 1 {
		t.Fatalf("active controller got %d calls, want 1", len(active.calls()))
	}
	t.Logf("answered %v after UseController", time.Since(start).Round(time.Millisecond))

	// The next change goes straight to the active one.
	results, _ = submit(m, expansion("orders", 1, 1, 2))
	await(t, results, "second result")
	if len(hung.calls()) != 1 || len(active.calls()) != 2 {
		t.Fatalf("calls: hung %d, active %d; want 1 and 2", len(hung.calls()), len(active.calls()))
	}
}

// A change its partition withdrew while the controller was unreachable is
// not sent again: it is answered INVALID_UPDATE_VERSION. Retried, a deleted
// topic's change matched the topic re-created under its name (same epochs)
// and was committed there, behind its new leader's back (tests/sim, seed
// 647001108).
func TestWithdrawnChangeIsNotRetried(t *testing.T) {
	var withdrawn atomic.Bool
	ctl := startController(t, func(_ context.Context, n int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		if n == 0 {
			withdrawn.Store(true) // the topic is deleted while this call fails
			return nil, status.Error(codes.Unavailable, "controller moving")
		}
		return accept(req), nil
	})
	m := newManager(t, ctl.addr)
	change := expansion("orders", 0, 1, 2)
	change.Withdrawn = withdrawn.Load
	results, _ := submit(m, change)
	if res := await(t, results, "result"); res.Error != core.ErrInvalidUpdateVersion {
		t.Fatalf("result %+v, want INVALID_UPDATE_VERSION (withdrawn, not sent)", res)
	}
	if got := ctl.calls(); len(got) != 1 {
		t.Fatalf("controller got %d requests, want only the one before the change was withdrawn", len(got))
	}
}

// A request refused as a whole for this broker's own stale epoch is sent
// again with the epoch of the moment, not answered: core would keep an
// expansion pending until a LeaderAndIsr that does not come when the
// broker registers again and keeps leading at the same leader epoch
// (tests/sim, seed 112384444).
func TestStaleBrokerEpochIsRetriedWithTheCurrentOne(t *testing.T) {
	var epoch atomic.Int64
	epoch.Store(4)
	ctl := startController(t, func(_ context.Context, n int, req *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
		if req.GetBrokerEpoch() != 7 {
			epoch.Store(7) // the broker registers again meanwhile
			return &replicadv1.AlterPartitionResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH}, nil
		}
		return accept(req), nil
	})
	m, err := New(Config{Controller: ctl.addr, BrokerID: 1, BrokerEpoch: epoch.Load, MinBackoff: 5 * time.Millisecond,
		MaxBackoff: 50 * time.Millisecond, Rand: rand.New(rand.NewPCG(1, 2)), Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	results, _ := submit(m, expansion("orders", 0, 1, 2))
	if res := await(t, results, "result"); res.Error != core.ErrNone || !slices.Equal(res.Isr, []int32{1, 2}) {
		t.Fatalf("result %+v, want NONE with ISR [1 2] (retried with broker epoch 7)", res)
	}
	if got := ctl.calls(); len(got) != 2 || got[0].GetBrokerEpoch() != 4 || got[1].GetBrokerEpoch() != 7 {
		t.Fatalf("controller got %v, want two requests, with broker epochs 4 then 7", got)
	}
}
