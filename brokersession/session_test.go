package brokersession

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
	"github.com/replicad/replicad/internal/spantest"
	"github.com/replicad/replicad/internal/syncbuf"
	"github.com/replicad/replicad/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on a condition (generous for -race on a slow machine).
const waitTimeout = 10 * time.Second

// fakeController serves ControllerService on loopback and records the calls.
type fakeController struct {
	replicadv1.UnimplementedControllerServiceServer

	mu sync.Mutex
	// standby answers NOT_CONTROLLER to everything, naming hint as the
	// active controller in the trailer when set (as the controller does).
	standby bool
	hint    string
	// epoch is the broker epoch of the last registration (the next one gets epoch+1).
	epoch            int64
	sessionTimeoutMs int32
	// fenced answers heartbeats is_fenced, staleEpoch answers them
	// STALE_BROKER_EPOCH; a registration clears both.
	fenced, staleEpoch bool
	// remaining is how many partitions the n-th ControlledShutdown (from 0)
	// leaves led by the broker.
	remaining func(n int) int
	// ctlID and ctlEpoch are the controller id and epoch the answers name
	// (a registration names epoch 4 when ctlEpoch is 0).
	ctlID, ctlEpoch int32
	// duplicates is how many registrations from now on are answered
	// DUPLICATE_BROKER_REGISTRATION (another process holds the id).
	duplicates int

	registrations []*replicadv1.RegisterBrokerRequest
	heartbeats    []*replicadv1.BrokerHeartbeatRequest
	shutdowns     []*replicadv1.ControlledShutdownRequest
	// shutdownTraceparents is the W3C traceparent header of each
	// ControlledShutdown ("" when it had none).
	shutdownTraceparents []string

	addr string
	srv  *grpc.Server
}

func newFakeController(sessionTimeoutMs int32) *fakeController {
	return &fakeController{sessionTimeoutMs: sessionTimeoutMs, remaining: func(int) int { return 0 }}
}

func (f *fakeController) RegisterBroker(ctx context.Context, req *replicadv1.RegisterBrokerRequest) (*replicadv1.RegisterBrokerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.registrations = append(f.registrations, proto.Clone(req).(*replicadv1.RegisterBrokerRequest))
	if f.standby {
		if f.hint != "" {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcx.ActiveControllerKey, f.hint))
		}
		return &replicadv1.RegisterBrokerResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER}, nil
	}
	if f.duplicates > 0 {
		f.duplicates--
		return &replicadv1.RegisterBrokerResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION}, nil
	}
	f.epoch++
	f.fenced, f.staleEpoch = false, false
	epoch := f.ctlEpoch
	if epoch == 0 {
		epoch = 4
	}
	return &replicadv1.RegisterBrokerResponse{BrokerEpoch: f.epoch, ControllerEpoch: epoch, ControllerId: f.ctlID, SessionTimeoutMs: f.sessionTimeoutMs}, nil
}

func (f *fakeController) BrokerHeartbeat(_ context.Context, req *replicadv1.BrokerHeartbeatRequest) (*replicadv1.BrokerHeartbeatResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.heartbeats = append(f.heartbeats, proto.Clone(req).(*replicadv1.BrokerHeartbeatRequest))
	switch {
	case f.standby:
		return &replicadv1.BrokerHeartbeatResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER}, nil
	case f.staleEpoch:
		return &replicadv1.BrokerHeartbeatResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH,
			ControllerId: f.ctlID, ControllerEpoch: f.ctlEpoch}, nil
	}
	return &replicadv1.BrokerHeartbeatResponse{IsFenced: f.fenced, ControllerId: f.ctlID, ControllerEpoch: f.ctlEpoch}, nil
}

func (f *fakeController) ControlledShutdown(ctx context.Context, req *replicadv1.ControlledShutdownRequest) (*replicadv1.ControlledShutdownResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	f.shutdownTraceparents = append(f.shutdownTraceparents, strings.Join(md.Get("traceparent"), ","))
	n := len(f.shutdowns)
	f.shutdowns = append(f.shutdowns, proto.Clone(req).(*replicadv1.ControlledShutdownRequest))
	if f.standby {
		return &replicadv1.ControlledShutdownResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER}, nil
	}
	resp := &replicadv1.ControlledShutdownResponse{}
	for i := range f.remaining(n) {
		resp.RemainingPartitions = append(resp.RemainingPartitions, &replicadv1.PartitionError{Topic: "orders", Partition: int32(i)})
	}
	return resp, nil
}

func (f *fakeController) with(fn func(f *fakeController)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// counts returns how many registrations, heartbeats and controlled shutdowns arrived.
func (f *fakeController) counts() (registrations, heartbeats, shutdowns int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.registrations), len(f.heartbeats), len(f.shutdowns)
}

// heartbeatsWithEpoch counts the heartbeats that carried epoch.
func (f *fakeController) heartbeatsWithEpoch(epoch int64) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, h := range f.heartbeats {
		if h.GetBrokerEpoch() == epoch {
			n++
		}
	}
	return n
}

// serve starts serving f on addr ("127.0.0.1:0" for any port) until stop or the test's end.
func (f *fakeController) serve(t *testing.T, addr string) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.addr = lis.Addr().String()
	f.srv = grpc.NewServer()
	srv := f.srv
	f.mu.Unlock()
	replicadv1.RegisterControllerServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
}

func (f *fakeController) stop() {
	f.mu.Lock()
	srv := f.srv
	f.mu.Unlock()
	srv.Stop()
}

// freeAddr is a loopback address nothing listens on (yet).
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct{ syncbuf.Buffer }

func (b *syncBuffer) count(s string) int { return strings.Count(b.String(), s) }

func testConfig(t *testing.T, controllers ...string) Config {
	return Config{
		Controllers:               controllers,
		BrokerID:                  7,
		Host:                      "127.0.0.1",
		Port:                      9097,
		LogDirs:                   []string{"/data/a", "/data/b"},
		RetryBackoff:              10 * time.Millisecond,
		MaxRetryBackoff:           50 * time.Millisecond,
		ControlledShutdownBackoff: 10 * time.Millisecond,
		Logger:                    zerolog.New(zerolog.NewTestWriter(t)),
	}
}

func start(t *testing.T, cfg Config) *Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, func() error {
		if !cond() {
			return errors.New(what)
		}
		return nil
	})
}

// Start keeps registering, one warning per failed attempt, until the
// controller comes up, then registers once with the broker's endpoint, log
// dirs and an incarnation id, and takes the epoch the controller gave.
func TestStartRetriesRegistrationUntilControllerComesUp(t *testing.T) {
	addr := freeAddr(t)
	logs := &syncBuffer{}
	cfg := testConfig(t, addr)
	cfg.Logger = zerolog.New(logs)
	type started struct {
		s   *Session
		err error
	}
	done := make(chan started, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		s, err := Start(ctx, cfg)
		done <- started{s, err}
	}()
	eventually(t, "three failed registration attempts logged", func() bool { return logs.count("broker registration failed, retrying") >= 3 })

	f := newFakeController(6000)
	f.epoch = 41
	f.serve(t, addr)
	r := <-done
	if r.err != nil {
		t.Fatalf("Start: %v", r.err)
	}
	defer r.s.Close()
	if got := r.s.BrokerEpoch(); got != 42 {
		t.Fatalf("BrokerEpoch() = %d, want 42", got)
	}
	f.with(func(f *fakeController) {
		if len(f.registrations) != 1 {
			t.Fatalf("%d registrations, want 1", len(f.registrations))
		}
		reg := f.registrations[0]
		if reg.GetBrokerId() != 7 || reg.GetHost() != "127.0.0.1" || reg.GetPort() != 9097 ||
			strings.Join(reg.GetLogDirs(), ",") != "/data/a,/data/b" || reg.GetIncarnationId() == "" {
			t.Fatalf("registration %v", reg)
		}
		if reg.GetIncarnationId() != r.s.IncarnationID() {
			t.Fatalf("incarnation id %q, session says %q", reg.GetIncarnationId(), r.s.IncarnationID())
		}
	})
	if n := logs.count(`"message":"registered"`); n != 1 {
		t.Fatalf("%d registered lines, want 1", n)
	}
}

// Start gives up with ctx's error when no controller answers in time, and
// leaves no goroutine behind (goleak).
func TestStartGivesUpWhenContextEnds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	s, err := Start(ctx, testConfig(t, freeAddr(t)))
	if !errors.Is(err, context.DeadlineExceeded) || s != nil {
		t.Fatalf("Start = %v, %v; want a DeadlineExceeded error", s, err)
	}
}

// Start refuses a config without a controller or without a dialable endpoint.
func TestStartValidatesConfig(t *testing.T) {
	if _, err := Start(context.Background(), testConfig(t)); !errors.Is(err, ErrNoController) {
		t.Fatalf("no controller: %v", err)
	}
	cfg := testConfig(t, "127.0.0.1:1")
	cfg.Port = 0
	if _, err := Start(context.Background(), cfg); err == nil {
		t.Fatal("port 0 accepted")
	}
	cfg = testConfig(t, "127.0.0.1:1", "")
	if _, err := Start(context.Background(), cfg); err == nil {
		t.Fatal("empty controller address accepted")
	}
}

// recordingClock is a manual clock that remembers the delay of every
// AfterFunc, so a test sees each heartbeat wait being armed.
type recordingClock struct {
	*clock.Manual
	mu     sync.Mutex
	delays []time.Duration
}

func (c *recordingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	c.delays = append(c.delays, d)
	c.mu.Unlock()
	return c.Manual.AfterFunc(d, f)
}

func (c *recordingClock) armed() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.delays...)
}

// Heartbeats go every session timeout / 3 (the timeout from the
// registration answer; at least 50ms; 6s when the controller gives none),
// each carrying the broker's id and epoch, and none goes before its time.
func TestHeartbeatCadence(t *testing.T) {
	cases := []struct {
		sessionTimeoutMs int32
		want             time.Duration
	}{
		{900, 300 * time.Millisecond},
		{90, MinHeartbeatInterval},
		{0, 2 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.want.String(), func(t *testing.T) {
			f := newFakeController(c.sessionTimeoutMs)
			f.serve(t, "127.0.0.1:0")
			clk := &recordingClock{Manual: clock.NewManual(time.Unix(0, 0))}
			cfg := testConfig(t, f.addr)
			cfg.Clock = clk
			s := start(t, cfg)
			for i := 1; i <= 3; i++ {
				eventually(t, "heartbeat wait armed", func() bool { return len(clk.armed()) == i })
				if got := clk.armed()[i-1]; got != c.want {
					t.Fatalf("heartbeat %d armed after %v, want %v", i, got, c.want)
				}
				clk.Advance(c.want - time.Millisecond)
				if _, hb, _ := f.counts(); hb != i-1 {
					t.Fatalf("heartbeat %d sent early", i)
				}
				clk.Advance(time.Millisecond)
				eventually(t, "heartbeat sent", func() bool { _, hb, _ := f.counts(); return hb == i })
			}
			if n := f.heartbeatsWithEpoch(s.BrokerEpoch()); n != 3 {
				t.Fatalf("%d of 3 heartbeats carried broker epoch %d", n, s.BrokerEpoch())
			}
			f.with(func(f *fakeController) {
				for _, h := range f.heartbeats {
					if h.GetBrokerId() != 7 || h.GetWantShutdown() {
						t.Fatalf("heartbeat %v", h)
					}
				}
			})
		})
	}
}

// A broker the controller calls fenced, or whose epoch it calls stale,
// registers again (same incarnation id) and moves to the new broker epoch,
// which its later heartbeats carry.
func TestReregistersWhenFencedOrStale(t *testing.T) {
	f := newFakeController(150) // heartbeats every 50ms
	f.serve(t, "127.0.0.1:0")
	s := start(t, testConfig(t, f.addr))
	if s.BrokerEpoch() != 1 {
		t.Fatalf("BrokerEpoch() = %d, want 1", s.BrokerEpoch())
	}
	eventually(t, "a heartbeat with epoch 1", func() bool { return f.heartbeatsWithEpoch(1) > 0 })

	f.with(func(f *fakeController) { f.fenced = true })
	eventually(t, "broker epoch 2", func() bool { return s.BrokerEpoch() == 2 })
	eventually(t, "a heartbeat with epoch 2", func() bool { return f.heartbeatsWithEpoch(2) > 0 })

	f.with(func(f *fakeController) { f.staleEpoch = true })
	eventually(t, "broker epoch 3", func() bool { return s.BrokerEpoch() == 3 })
	eventually(t, "a heartbeat with epoch 3", func() bool { return f.heartbeatsWithEpoch(3) > 0 })

	f.with(func(f *fakeController) {
		if len(f.registrations) != 3 {
			t.Fatalf("%d registrations, want 3", len(f.registrations))
		}
		for _, r := range f.registrations {
			if r.GetIncarnationId() != s.IncarnationID() {
				t.Fatalf("re-registration with incarnation %q, want %q", r.GetIncarnationId(), s.IncarnationID())
			}
		}
	})
}

// A registration again in the same process carries the broker's offline
// replicas, as its heartbeats do: the controller must not take a failed log
// dir's replicas as healthy until the next heartbeat (issue 19, path 9).
func TestReregistrationCarriesOfflineReplicas(t *testing.T) {
	f := newFakeController(150)
	f.serve(t, "127.0.0.1:0")
	var offline atomic.Bool
	cfg := testConfig(t, f.addr)
	cfg.OfflinePartitions = func() []tp.TopicPartition {
		if offline.Load() {
			return []tp.TopicPartition{{Topic: "orders", Partition: 3}}
		}
		return nil
	}
	s := start(t, cfg)
	offline.Store(true)
	f.with(func(f *fakeController) { f.fenced = true })
	eventually(t, "broker epoch 2", func() bool { return s.BrokerEpoch() == 2 })
	f.with(func(f *fakeController) {
		if got := f.registrations[0].GetOfflinePartitions(); len(got) != 0 {
			t.Errorf("first registration carries offline replicas %v, want none", got)
		}
		got := f.registrations[1].GetOfflinePartitions()
		if len(got) != 1 || got[0].GetTopic() != "orders" || got[0].GetPartition() != 3 {
			t.Errorf("registration again carries offline replicas %v, want [orders-3]", got)
		}
	})
}

// A registration refused with DUPLICATE_BROKER_REGISTRATION (another live
// process holds the broker id) is retried, each refusal logged at error,
// until the controller accepts it (issue 19, path 13).
func TestDuplicateRegistrationIsRetried(t *testing.T) {
	f := newFakeController(150)
	f.duplicates = 3
	f.serve(t, "127.0.0.1:0")
	var logs syncBuffer
	cfg := testConfig(t, f.addr)
	cfg.Logger = zerolog.New(&logs)
	s := start(t, cfg)
	if s.BrokerEpoch() != 1 {
		t.Fatalf("BrokerEpoch() = %d, want 1", s.BrokerEpoch())
	}
	if n, _, _ := f.counts(); n != 4 {
		t.Fatalf("%d registrations, want 4 (3 refused)", n)
	}
	if n := logs.count("DUPLICATE_BROKER_REGISTRATION"); n != 3 {
		t.Fatalf("%d refusals logged, want 3:\n%s", n, logs.String())
	}
	if n := logs.count(`"level":"error"`); n != 3 {
		t.Fatalf("%d error lines, want the 3 refusals:\n%s", n, logs.String())
	}
}

// With two controllers the session finds the active one: a standby's
// NOT_CONTROLLER or an unreachable controller sends the call to the next
// address, and OnControllerChange follows.
func TestFailsOverBetweenControllers(t *testing.T) {
	a, b := newFakeController(150), newFakeController(150)
	a.standby = true
	a.serve(t, "127.0.0.1:0")
	b.serve(t, "127.0.0.1:0")
	var mu sync.Mutex
	var changes []string
	lastChange := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(changes) == 0 {
			return ""
		}
		return changes[len(changes)-1]
	}
	cfg := testConfig(t, a.addr, b.addr)
	cfg.OnControllerChange = func(addr string) {
		mu.Lock()
		changes = append(changes, addr)
		mu.Unlock()
	}
	s := start(t, cfg)
	if ra, _, _ := a.counts(); ra != 1 {
		t.Fatalf("standby got %d registrations, want 1 (answered NOT_CONTROLLER)", ra)
	}
	if rb, _, _ := b.counts(); rb != 1 || s.BrokerEpoch() != 1 {
		t.Fatalf("active controller got %d registrations (epoch %d), want 1", rb, s.BrokerEpoch())
	}
	if got := lastChange(); got != b.addr {
		t.Fatalf("OnControllerChange last named %q, want %q", got, b.addr)
	}
	eventually(t, "heartbeats to the active controller", func() bool { _, hb, _ := b.counts(); return hb > 0 })

	// b steps down, a takes over (with the same broker registry).
	a.with(func(f *fakeController) { f.standby = false; f.epoch = 1 })
	b.with(func(f *fakeController) { f.standby = true })
	eventually(t, "heartbeats to the new active controller", func() bool { return a.heartbeatsWithEpoch(1) > 0 })
	eventually(t, "OnControllerChange names a", func() bool { return lastChange() == a.addr })

	// a goes away, b is active again.
	_, before, _ := b.counts()
	b.with(func(f *fakeController) { f.standby = false })
	a.stop()
	eventually(t, "heartbeats back to b after a is unreachable", func() bool { _, hb, _ := b.counts(); return hb > before })
	eventually(t, "OnControllerChange names b", func() bool { return lastChange() == b.addr })
	if s.BrokerEpoch() != 1 {
		t.Fatalf("broker epoch changed to %d by a failover", s.BrokerEpoch())
	}
}

// hungController takes every request and never answers (a controller
// paused, or behind a black hole).
type hungController struct {
	replicadv1.UnimplementedControllerServiceServer
	calls atomic.Int32
}

func (h *hungController) RegisterBroker(ctx context.Context, _ *replicadv1.RegisterBrokerRequest) (*replicadv1.RegisterBrokerResponse, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// Regression (issue 22): a standby's NOT_CONTROLLER names the active
// controller, and the session goes straight there. Before the controller
// channel the hint reached only ctlclient: the session went down its list,
// and waited out a whole request timeout on each hung controller before
// the active one (here a hung one sits between the standby and the active).
func TestRegistrationFollowsTheStandbysHint(t *testing.T) {
	active, standby := newFakeController(6000), newFakeController(6000)
	active.serve(t, "127.0.0.1:0")
	standby.standby, standby.hint = true, active.addr
	standby.serve(t, "127.0.0.1:0")
	hung := &hungController{}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	replicadv1.RegisterControllerServiceServer(srv, hung)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	cfg := testConfig(t, standby.addr, lis.Addr().String(), active.addr)
	cfg.RequestTimeout = 3 * time.Second
	began := time.Now()
	s := start(t, cfg)
	if n := hung.calls.Load(); n != 0 {
		t.Fatalf("the hung controller got %d registrations after the standby named the active one (in %v), want 0", n, time.Since(began))
	}
	if ra, _, _ := active.counts(); ra != 1 || s.BrokerEpoch() != 1 || s.controller() != active.addr {
		t.Fatalf("active controller got %d registrations, epoch %d, session follows %q; want 1, 1, %q", ra, s.BrokerEpoch(), s.controller(), active.addr)
	}
}

// ControlledShutdown asks until the controller answers that no partition is
// left, with the broker's id and epoch each time; heartbeats meanwhile say
// want_shutdown.
func TestControlledShutdownLoopsUntilNoPartitionRemains(t *testing.T) {
	f := newFakeController(150)
	f.remaining = func(n int) int { return max(2-n, 0) }
	f.serve(t, "127.0.0.1:0")
	s := start(t, testConfig(t, f.addr))
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.ControlledShutdown(ctx); err != nil {
		t.Fatalf("ControlledShutdown: %v", err)
	}
	f.with(func(f *fakeController) {
		if len(f.shutdowns) != 3 {
			t.Fatalf("%d ControlledShutdown calls, want 3 (2, 1, then 0 partitions left)", len(f.shutdowns))
		}
		for _, r := range f.shutdowns {
			if r.GetBrokerId() != 7 || r.GetBrokerEpoch() != 1 {
				t.Fatalf("request %v", r)
			}
		}
	})
	eventually(t, "a heartbeat with want_shutdown", func() bool {
		var saw bool
		f.with(func(f *fakeController) {
			for _, h := range f.heartbeats {
				saw = saw || h.GetWantShutdown()
			}
		})
		return saw
	})
}

// TestControlledShutdownIsOneTrace: every ControlledShutdown request of one
// shutdown carries the Broker.controlledShutdown span, so the controller's
// side joins one trace however many times the broker asks.
func TestControlledShutdownIsOneTrace(t *testing.T) {
	prev := otel.GetTextMapPropagator()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() { otel.SetTextMapPropagator(prev) })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	f := newFakeController(150)
	f.remaining = func(n int) int { return max(2-n, 0) }
	f.serve(t, "127.0.0.1:0")
	cfg := testConfig(t, f.addr)
	cfg.TracerProvider = tp
	s := start(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := s.ControlledShutdown(ctx); err != nil {
		t.Fatalf("ControlledShutdown: %v", err)
	}
	spans := spantest.Named(rec, "Broker.controlledShutdown")
	if len(spans) != 1 {
		t.Fatalf("%d Broker.controlledShutdown spans, want 1", len(spans))
	}
	sp := spans[0]
	a := spantest.Attrs(sp.Attributes())
	if a["replicad.broker"].AsInt64() != 7 || a["replicad.attempts"].AsInt64() != 3 || sp.Status().Code == codes.Error {
		t.Errorf("span attributes %v status %v, want broker 7, 3 attempts, no error", a, sp.Status())
	}
	if n := len(sp.Events()); n != 2 {
		t.Errorf("%d events, want 2 (2 then 1 partitions still led)", n)
	}
	traceID := sp.SpanContext().TraceID().String()
	f.with(func(f *fakeController) {
		if len(f.shutdownTraceparents) != 3 {
			t.Fatalf("%d requests", len(f.shutdownTraceparents))
		}
		for i, h := range f.shutdownTraceparents {
			if !strings.Contains(h, traceID) {
				t.Errorf("request %d traceparent %q, want trace %s", i, h, traceID)
			}
		}
	})
}

// ControlledShutdown gives up with ctx's error at the deadline when a
// partition never moves, saying how many are left.
func TestControlledShutdownGivesUpAtDeadline(t *testing.T) {
	f := newFakeController(6000)
	f.remaining = func(int) int { return 1 }
	f.serve(t, "127.0.0.1:0")
	s := start(t, testConfig(t, f.addr))
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := s.ControlledShutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "1 partitions still led") {
		t.Fatalf("ControlledShutdown = %v, want a DeadlineExceeded error naming 1 partition", err)
	}
	if _, _, n := f.counts(); n < 2 {
		t.Fatalf("%d ControlledShutdown calls, want it to keep asking", n)
	}
}

// Close stops the heartbeats (goleak checks the goroutine is gone) and is
// idempotent; a ControlledShutdown after Close returns at once.
func TestCloseStopsHeartbeats(t *testing.T) {
	f := newFakeController(150)
	f.remaining = func(int) int { return 1 }
	f.serve(t, "127.0.0.1:0")
	s := start(t, testConfig(t, f.addr))
	eventually(t, "a heartbeat", func() bool { _, hb, _ := f.counts(); return hb > 0 })
	s.Close()
	s.Close()
	if err := s.ControlledShutdown(context.Background()); !errors.Is(err, context.Canceled) {
		t.Fatalf("ControlledShutdown after Close = %v, want Canceled", err)
	}
	if s.BrokerEpoch() != 1 {
		t.Fatalf("BrokerEpoch() after Close = %d, want the last one (1)", s.BrokerEpoch())
	}
}

// Start gives up after MisconfiguredAttempts failures Config.Misconfigured
// names (a TLS/plaintext mismatch), and goes on retrying other failures.
func TestStartGivesUpWhenMisconfigured(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cfg := testConfig(t, freeAddr(t))
	calls := 0
	cfg.Misconfigured = func(err error) bool {
		calls++
		return strings.Contains(err.Error(), "Unavailable")
	}
	s, err := Start(ctx, cfg)
	if s != nil || err == nil || ctx.Err() != nil || calls != MisconfiguredAttempts {
		t.Fatalf("Start = %v, %v after %d failures; want it to give up after %d", s, err, calls, MisconfiguredAttempts)
	}
}
