package store_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicad/replicad/controller/store"
)

// holdingProxy forwards TCP to target until hold, then keeps every byte in
// flight (as a cut link or a paused member does: the connection stays up,
// nothing comes back), until release.
type holdingProxy struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	held   bool // every byte
	reply  bool // only etcd's answers
	freed  chan struct{}
	conns  []net.Conn
}

func startHoldingProxy(t *testing.T, target string) *holdingProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{lis: lis, target: target, freed: make(chan struct{})}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *holdingProxy) addr() string { return p.lis.Addr().String() }

func (p *holdingProxy) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		b, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, b)
		p.mu.Unlock()
		go p.pipe(b, c, false) // requests
		go p.pipe(c, b, true)  // answers
	}
}

// pipe copies src to dst, waiting while the proxy holds (answers is the
// direction from etcd).
func (p *holdingProxy) pipe(dst, src net.Conn, answers bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			held, freed := p.held || (answers && p.reply), p.freed
			p.mu.Unlock()
			if held {
				<-freed
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				dst.Close()
			}
			return
		}
	}
}

func (p *holdingProxy) hold() {
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
}

// holdAnswers lets requests through but keeps etcd's answers: a write
// lands, and its caller never hears.
func (p *holdingProxy) holdAnswers() {
	p.mu.Lock()
	p.reply = true
	p.mu.Unlock()
}

func (p *holdingProxy) close() {
	p.lis.Close()
	p.mu.Lock()
	if p.held || p.reply {
		close(p.freed)
		p.held, p.reply = false, false
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// A store whose etcd client reaches the cluster through two endpoints, one
// of which starts holding every byte (a paused member, a cut link), goes
// on writing and reading within a few attempt timeouts: an attempt that
// hangs is sent again, round robin, to the other endpoint, instead of
// waiting for gRPC's keepalive (13 s and more). What was written is there.
func TestEtcdAttemptsMoveOffAHungMember(t *testing.T) {
	direct := strings.TrimPrefix(startEtcd(t)[0], "http://")
	proxy := startHoldingProxy(t, direct)
	ctx := context.Background()
	s, err := store.OpenEtcd(ctx, store.EtcdConfig{Endpoints: []string{"http://" + proxy.addr(), "http://" + direct},
		Prefix: newPrefix(t), SessionTTL: testTTL, AttemptTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	// Both endpoints in use: a few calls before the hold.
	for i := range 4 {
		if _, err := s.RegisterBroker(ctx, store.Broker{ID: int32(i + 1), Host: "h", Port: 1}); err != nil {
			t.Fatal(err)
		}
	}
	proxy.hold()
	start := time.Now()
	for i := range 6 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.CreateTopic(wctx, "t"+string(rune('a'+i)), []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}, nil)
		cancel()
		if err != nil {
			t.Fatalf("CreateTopic %d with one endpoint hung: %v", i, err)
		}
	}
	if _, err := s.Brokers(ctx); err != nil {
		t.Fatalf("Brokers with one endpoint hung: %v", err)
	}
	parts, err := s.Partitions(ctx)
	if err != nil || len(parts) != 6 {
		t.Fatalf("Partitions: %d, %v; want the 6 created", len(parts), err)
	}
	// Six writes and two reads, each at worst one hung attempt (300 ms)
	// and one that goes through: far below a keepalive timeout.
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("writes and reads took %v with one endpoint hung", took)
	}
}

// A write whose attempt lands in etcd but whose answer never comes back
// (the answers held) is sent again; the retry's compares then fail, and
// the store finds that what it wrote is there: the write succeeded, it is
// not reported as a conflict (a CreateTopic retried is not "already
// exists").
func TestEtcdAttemptThatLandedIsASuccess(t *testing.T) {
	direct := strings.TrimPrefix(startEtcd(t)[0], "http://")
	proxy := startHoldingProxy(t, direct)
	ctx := context.Background()
	s, err := store.OpenEtcd(ctx, store.EtcdConfig{Endpoints: []string{"http://" + proxy.addr(), "http://" + direct},
		Prefix: newPrefix(t), SessionTTL: testTTL, AttemptTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range 4 {
		if _, err := s.RegisterBroker(ctx, store.Broker{ID: int32(i + 1), Host: "h", Port: 1}); err != nil {
			t.Fatal(err)
		}
	}
	proxy.holdAnswers()
	for i := range 6 {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := s.CreateTopic(wctx, "t"+string(rune('a'+i)), []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}, nil)
		cancel()
		if err != nil {
			t.Fatalf("CreateTopic %d whose answer may be held: %v", i, err)
		}
	}
	if err := s.CreateTopic(ctx, "ta", []store.Partition{{Partition: 0, Replicas: []int32{1}}}, nil); !errors.Is(err, store.ErrExists) {
		t.Fatalf("creating ta again: %v, want ErrExists", err)
	}
}

// release lets everything held through, and stops holding.
func (p *holdingProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held || p.reply {
		close(p.freed)
		p.freed = make(chan struct{})
		p.held, p.reply = false, false
	}
}

// Two controllers bumping the controller epoch both write old+1. A
// controller whose bump hangs (its link to etcd held) loses its election
// meanwhile; the new controller bumps to old+1; then the link heals, the
// hung attempt and its retry fail their compares, and the deposed
// controller looks whether its write landed. The epoch key holds the very
// value it meant to write, but the write was its successor's: it must not
// take it for its own and act at the same epoch (issue 19, path 7).
func TestEtcdRetriedBumpDoesNotTakeAnotherControllersEpoch(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	direct := strings.TrimPrefix(endpoints[0], "http://")
	proxy := startHoldingProxy(t, direct)
	raw := rawClient(t, endpoints)
	prefix := newPrefix(t)
	ctx := context.Background()
	a, err := store.OpenEtcd(ctx, store.EtcdConfig{Endpoints: []string{"http://" + proxy.addr()},
		Prefix: prefix, SessionTTL: testTTL, AttemptTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	b := openClosing(t, endpoints, prefix)
	elected(t, campaign(t, a), 10*time.Second, "a")
	old := bumpEpoch(t, a)
	bCh := campaign(t, b)
	waitCandidates(t, raw, prefix, 2)

	// a's next bump hangs at its first transaction attempt: read done,
	// nothing of the transaction reaches etcd.
	var attempts atomic.Int32
	held, retried := make(chan struct{}), make(chan struct{})
	store.BeforeTxnForTest(a, func() {
		switch attempts.Add(1) {
		case 1:
			proxy.hold()
			close(held)
		case 2:
			close(retried) // the first attempt timed out: its outcome is unknown to a
		}
	})
	type result struct {
		epoch int32
		err   error
	}
	aDone := make(chan result, 1)
	go func() {
		bctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		e, err := a.BumpControllerEpoch(bctx, 0)
		aDone <- result{e, err}
	}()
	closedWithin(t, held, 5*time.Second, "a's bump reaching its transaction")
	// a is deposed (its session ends, as its lease would expire behind
	// the held link), b is elected and bumps.
	revokeLeader(t, raw, prefix)
	elected(t, bCh, takeover, "b after a's lease was revoked")
	eb := bumpEpoch(t, b)
	if eb != old+1 {
		t.Fatalf("b bumped to %d, want %d", eb, old+1)
	}
	// Let a's attempts through once one was sent again: each fails its
	// compares.
	closedWithin(t, retried, 5*time.Second, "a's bump sending its transaction again")
	proxy.release()
	var r result
	select {
	case r = <-aDone:
	case <-time.After(20 * time.Second):
		t.Fatal("a's bump did not return after the link healed")
	}
	if r.err == nil {
		t.Fatalf("deposed controller a bumped to %d (b holds %d): it took b's write for its own", r.epoch, eb)
	}
	if !errors.Is(r.err, store.ErrNotLeader) {
		t.Logf("a's bump failed with %v (not ErrNotLeader, but it acts at no epoch)", r.err)
	}
	if got := bumpEpoch(t, b); got != eb+1 {
		t.Fatalf("b's next bump %d, want %d", got, eb+1)
	}
}

// A write whose caller's deadline passes while its transaction is in
// flight (it lands, the answer is held) fails with an error that says its
// outcome is unknown, not one that passes for "nothing written": the
// controller must re-read after it (issue 19, path 3).
func TestEtcdWriteCutShortIsAnUnknownOutcome(t *testing.T) {
	direct := strings.TrimPrefix(startEtcd(t)[0], "http://")
	proxy := startHoldingProxy(t, direct)
	ctx := context.Background()
	s, err := store.OpenEtcd(ctx, store.EtcdConfig{Endpoints: []string{"http://" + proxy.addr()},
		Prefix: newPrefix(t), SessionTTL: testTTL, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	proxy.holdAnswers()
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = s.CreateTopic(wctx, "t", []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}, nil)
	cancel()
	if !errors.Is(err, store.ErrUnknownOutcome) || store.IsDefinite(err) {
		t.Fatalf("CreateTopic cut short by its deadline: %v, want ErrUnknownOutcome", err)
	}
	proxy.release()
	eventually(t, 5*time.Second, "the topic the cut-short write created", func() bool {
		_, err := s.Topic(ctx, "t")
		return err == nil
	})
}
