package controllerchannel

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
	"github.com/replicad/replicad/internal/tlsconf"
)

// fakeController is a controller on loopback: active, or a standby that
// names hint (in the trailer, as the controller's broker methods do, and in
// the error message, as its admin methods do).
type fakeController struct {
	replicadv1.UnimplementedControllerServiceServer
	addr string

	mu     sync.Mutex
	active bool
	hint   string
	// hang makes every call wait for its context (a controller that took
	// the request and never answers).
	hang  bool
	calls atomic.Int32
}

func (f *fakeController) state() (bool, string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.active, f.hint, f.hang
}

func (f *fakeController) set(active bool, hint string) {
	f.mu.Lock()
	f.active, f.hint = active, hint
	f.mu.Unlock()
}

func (f *fakeController) BrokerHeartbeat(ctx context.Context, _ *replicadv1.BrokerHeartbeatRequest) (*replicadv1.BrokerHeartbeatResponse, error) {
	f.calls.Add(1)
	active, hint, hang := f.state()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if !active {
		if hint != "" {
			_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcx.ActiveControllerKey, hint))
		}
		return &replicadv1.BrokerHeartbeatResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER}, nil
	}
	return &replicadv1.BrokerHeartbeatResponse{ControllerId: 1, ControllerEpoch: 1}, nil
}

func (f *fakeController) CreateTopic(ctx context.Context, _ *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	f.calls.Add(1)
	active, hint, hang := f.state()
	if hang {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if !active {
		msg := "not the active controller"
		if hint != "" {
			msg += "; the active one is " + hint
		}
		return &replicadv1.CreateTopicResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER, ErrorMessage: msg}, nil
	}
	return &replicadv1.CreateTopicResponse{}, nil
}

// startFake serves f on a loopback port, with opts (TLS).
func startFake(t testing.TB, f *fakeController, opts ...grpc.ServerOption) *fakeController {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(opts...)
	replicadv1.RegisterControllerServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	f.addr = lis.Addr().String()
	return f
}

// benchChannel is a channel to f served on loopback.
func benchChannel(b *testing.B, f *fakeController) (*Channel, func()) {
	startFake(b, f)
	ch, err := New(Config{Addrs: []string{f.addr}})
	if err != nil {
		b.Fatal(err)
	}
	return ch, func() { _ = ch.Close() }
}

// deadAddr is a loopback address nothing listens on (connection refused).
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	_ = lis.Close()
	return addr
}

// silentAddr accepts connections and never speaks: gRPC never gets a
// transport, so nothing is ever sent there.
func silentAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = lis.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return lis.Addr().String()
}

func newChannel(t *testing.T, cfg Config) *Channel {
	t.Helper()
	ch, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

func heartbeat(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.BrokerHeartbeatResponse, error) {
	return c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: 1})
}

func createTopic(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.CreateTopicResponse, error) {
	return c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "t", Partitions: 1, ReplicationFactor: 1})
}

// A standby's NOT_CONTROLLER names the active controller: the next attempt
// goes there, past the addresses in between (a hung one among them would
// cost an attempt timeout each). Both ways the hint is carried: the
// trailer (broker methods) and the error message (admin methods).
func TestFollowsTheStandbysHint(t *testing.T) {
	active := startFake(t, &fakeController{active: true})
	between := startFake(t, &fakeController{hang: true})
	standby := startFake(t, &fakeController{})
	standby.set(false, active.addr)
	ch := newChannel(t, Config{Addrs: []string{standby.addr, between.addr, active.addr}})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Call(ctx, ch, Policy{Rounds: 1, Idempotent: true, AttemptTimeout: 5 * time.Second}, heartbeat); err != nil {
		t.Fatal(err)
	}
	if got := ch.Active(); got != active.addr {
		t.Fatalf("active %q, want %q", got, active.addr)
	}
	if n := between.calls.Load(); n != 0 {
		t.Fatalf("the address between the standby and the active one got %d calls, want 0 (the hint was not followed)", n)
	}

	// The error message's hint, for an admin method (a fresh channel, so
	// it starts at the standby again).
	ch2 := newChannel(t, Config{Addrs: []string{standby.addr, between.addr, active.addr}})
	if _, err := Call(ctx, ch2, Policy{Rounds: 1, AttemptTimeout: 5 * time.Second}, createTopic); err != nil {
		t.Fatal(err)
	}
	if n := between.calls.Load(); n != 0 || ch2.Active() != active.addr {
		t.Fatalf("admin call: %d calls to the address between, active %q; want 0 and %q", n, ch2.Active(), active.addr)
	}

	// Attempt follows it as well, one request at a time.
	ch3 := newChannel(t, Config{Addrs: []string{standby.addr, between.addr, active.addr}})
	resp, addr, err := Attempt(ctx, ch3, AttemptOptions{}, heartbeat)
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER || addr != standby.addr {
		t.Fatalf("first attempt: %v %v to %s, want NOT_CONTROLLER from the standby", resp, err, addr)
	}
	if got := ch3.Target(); got != active.addr {
		t.Fatalf("after the standby's answer the target is %s, want the hinted %s", got, active.addr)
	}
}

// A hint naming an address the channel was not given (a controller's own
// address behind a proxy) is not followed: the next address is.
func TestIgnoresAHintOutsideItsAddresses(t *testing.T) {
	active := startFake(t, &fakeController{active: true})
	standby := startFake(t, &fakeController{})
	standby.set(false, "10.255.255.1:9090")
	ch := newChannel(t, Config{Addrs: []string{standby.addr, active.addr}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Call(ctx, ch, Policy{Rounds: 1, Idempotent: true}, heartbeat); err != nil {
		t.Fatal(err)
	}
	if ch.Active() != active.addr {
		t.Fatalf("active %q, want %q", ch.Active(), active.addr)
	}
}

// recordingClock fires every timer at once and records its duration: the
// backoff between rounds is read off it.
type recordingClock struct {
	mu    sync.Mutex
	waits []time.Duration
}

func (r *recordingClock) Now() time.Time { return time.Now() }

func (r *recordingClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	r.mu.Lock()
	r.waits = append(r.waits, d)
	r.mu.Unlock()
	return time.AfterFunc(0, f)
}

// With every controller down, Call goes round after round, waiting between
// rounds a backoff that doubles up to MaxBackoff and no further, until ctx
// ends; the error says no controller was reached and nothing was applied.
func TestAllDownBacksOffBounded(t *testing.T) {
	rc := &recordingClock{}
	ch := newChannel(t, Config{Addrs: []string{deadAddr(t), deadAddr(t)}, Clock: rc,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 80 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := Call(ctx, ch, Policy{}, createTopic)
	var nc *NoControllerError
	if !errors.As(err, &nc) || !errors.Is(err, ErrNoController) || errors.Is(err, ErrMaybeApplied) {
		t.Fatalf("err %v, want a *NoControllerError that is ErrNoController and not ErrMaybeApplied", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want it to carry the deadline", err)
	}
	rc.mu.Lock()
	waits := append([]time.Duration(nil), rc.waits...)
	rc.mu.Unlock()
	if len(waits) < 5 {
		t.Fatalf("%d rounds' backoffs (%v), want at least 5", len(waits), waits)
	}
	want := 10 * time.Millisecond
	for i, w := range waits {
		if w != want {
			t.Fatalf("backoff %d is %v, want %v (all: %v)", i, w, want, waits)
		}
		want = min(2*want, 80*time.Millisecond)
	}
	for _, o := range nc.Outcomes {
		if o == "" {
			t.Fatalf("outcomes %q: every address should say why it was passed over", nc.Outcomes)
		}
	}
}

// The active controller moves: callers follow it (the old one now answers
// NOT_CONTROLLER naming the new one), and a subscriber hears each move.
// Use points the channel elsewhere and abandons an AbortOnMove attempt in
// flight to another address.
func TestActiveMovesCallersFollow(t *testing.T) {
	a := startFake(t, &fakeController{active: true})
	b := startFake(t, &fakeController{})
	ch := newChannel(t, Config{Addrs: []string{a.addr, b.addr}})
	var mu sync.Mutex
	var heard []string
	ch.Subscribe(func(addr string) {
		mu.Lock()
		heard = append(heard, addr)
		mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p := Policy{Rounds: 1, Idempotent: true}
	for range 3 {
		if _, err := Call(ctx, ch, p, heartbeat); err != nil {
			t.Fatal(err)
		}
	}
	a.set(false, b.addr)
	b.set(true, "")
	for range 3 {
		if _, err := Call(ctx, ch, p, heartbeat); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.calls.Load(); n != 4 {
		t.Fatalf("old active got %d calls, want 4 (3, then one NOT_CONTROLLER)", n)
	}
	mu.Lock()
	got := append([]string(nil), heard...)
	mu.Unlock()
	if len(got) != 2 || got[0] != a.addr || got[1] != b.addr {
		t.Fatalf("subscriber heard %v, want [%s %s]", got, a.addr, b.addr)
	}

	// Use abandons an attempt in flight to another controller.
	a.mu.Lock()
	a.hang = true
	a.mu.Unlock()
	ch.Use(a.addr)
	done := make(chan error, 1)
	go func() {
		_, _, err := Attempt(ctx, ch, AttemptOptions{AbortOnMove: true}, heartbeat)
		done <- err
	}()
	for a.calls.Load() < 5 {
		select {
		case <-ctx.Done():
			t.Fatal("the attempt never reached the hung controller")
		case <-time.After(time.Millisecond):
		}
	}
	ch.Use(b.addr)
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the abandoned attempt succeeded")
		}
	case <-ctx.Done():
		t.Fatal("Use did not abandon the attempt in flight")
	}
	if ch.Target() != b.addr {
		t.Fatalf("target %s after Use(%s)", ch.Target(), b.addr)
	}
}

// A request that is not idempotent and went out without an answer stops
// there (ErrMaybeApplied), not sent again to the next controller; an
// idempotent one goes on. A timeout before any connection (nothing sent)
// moves on either way, and a call that only met such addresses is not
// ErrMaybeApplied.
func TestSentWithoutAnswerIsNotResent(t *testing.T) {
	hung := startFake(t, &fakeController{active: true, hang: true})
	active := startFake(t, &fakeController{active: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ch := newChannel(t, Config{Addrs: []string{hung.addr, active.addr}})
	_, err := Call(ctx, ch, Policy{Rounds: 1, AttemptTimeout: 300 * time.Millisecond}, createTopic)
	var na *NoAnswerError
	if !errors.As(err, &na) || !errors.Is(err, ErrMaybeApplied) || errors.Is(err, ErrNoController) || na.Addr != hung.addr {
		t.Fatalf("err %v, want a *NoAnswerError from %s (ErrMaybeApplied, not ErrNoController)", err, hung.addr)
	}
	if n := active.calls.Load(); n != 0 {
		t.Fatalf("the request was sent again to the next controller (%d calls)", n)
	}

	ch = newChannel(t, Config{Addrs: []string{hung.addr, active.addr}})
	if _, err := Call(ctx, ch, Policy{Rounds: 1, AttemptTimeout: 300 * time.Millisecond, Idempotent: true}, heartbeat); err != nil {
		t.Fatalf("idempotent call: %v, want the next controller's answer", err)
	}

	silent := silentAddr(t)
	ch = newChannel(t, Config{Addrs: []string{silent, active.addr}})
	if _, err := Call(ctx, ch, Policy{Rounds: 1, AttemptTimeout: 300 * time.Millisecond}, createTopic); err != nil {
		t.Fatalf("after a controller that was never reached: %v, want the next one's answer", err)
	}
	ch = newChannel(t, Config{Addrs: []string{silent}})
	_, err = Call(ctx, ch, Policy{Rounds: 1, AttemptTimeout: 300 * time.Millisecond}, createTopic)
	if !errors.Is(err, ErrNoController) || errors.Is(err, ErrMaybeApplied) {
		t.Fatalf("err %v, want ErrNoController and not ErrMaybeApplied: nothing was sent", err)
	}
}

// Config.DialOptions reach the default Dial: a TLS controller is reached
// with its CA, and not without.
func TestTLSDialOptions(t *testing.T) {
	ca, err := tlsconf.NewCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(tlsconf.LoopbackLeaf("controller", time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	f := startFake(t, &fakeController{active: true}, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	ch := newChannel(t, Config{Addrs: []string{f.addr},
		DialOptions: []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool}))}})
	if _, err := Call(ctx, ch, Policy{Rounds: 1, Idempotent: true}, heartbeat); err != nil {
		t.Fatalf("with TLS dial options: %v", err)
	}
	plain := newChannel(t, Config{Addrs: []string{f.addr}})
	if _, err := Call(ctx, plain, Policy{Rounds: 1, Idempotent: true, AttemptTimeout: time.Second}, heartbeat); !errors.Is(err, ErrNoController) {
		t.Fatalf("plaintext to a TLS controller: %v, want ErrNoController", err)
	}
}

// New refuses an empty list or address; Close makes later calls fail.
func TestNewAndClose(t *testing.T) {
	if _, err := New(Config{}); !errors.Is(err, ErrNoAddress) {
		t.Fatalf("New without addresses: %v", err)
	}
	if _, err := New(Config{Addrs: []string{"a:1", ""}}); err == nil {
		t.Fatal("New with an empty address succeeded")
	}
	ch, err := New(Config{Addrs: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	_ = ch.Close()
	if _, err := Call(context.Background(), ch, Policy{Rounds: 1}, heartbeat); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v, want ErrClosed", err)
	}
}
