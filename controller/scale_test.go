package controller

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/controller/store/storetest"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// gatedStore holds an UpdatePartitions while armed, as a store write that
// takes long (an etcd election, a slow disk), and records the size of every
// UpdatePartitions.
type gatedStore struct {
	store.Store

	mu      sync.Mutex
	armed   bool
	entered chan struct{} // closed when an armed write is held
	release chan struct{} // closing it lets held writes go on
	sizes   []int
}

func newGatedStore(s store.Store) *gatedStore { return &gatedStore{Store: s} }

// arm makes the next UpdatePartitions wait for the returned release.
func (g *gatedStore) arm() (entered <-chan struct{}, release func()) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed, g.entered, g.release = true, make(chan struct{}), make(chan struct{})
	rel := g.release
	return g.entered, sync.OnceFunc(func() { close(rel) })
}

func (g *gatedStore) writes() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.sizes)
}

func (g *gatedStore) UpdatePartitions(ctx context.Context, updates []store.PartitionUpdate) error {
	g.hold(len(updates))
	return g.Store.UpdatePartitions(ctx, updates)
}

func (g *gatedStore) CreateTopic(ctx context.Context, name string, parts []store.Partition, configs map[string]string) error {
	g.hold(len(parts))
	return g.Store.CreateTopic(ctx, name, parts, configs)
}

// hold records a write of n partitions and holds it while armed.
func (g *gatedStore) hold(n int) {
	g.mu.Lock()
	g.sizes = append(g.sizes, n)
	armed, entered, release := g.armed, g.entered, g.release
	g.armed = false
	g.mu.Unlock()
	if armed {
		close(entered)
		<-release
	}
}

// heartbeatWithin sends a heartbeat of broker id and fails t unless it is
// answered, alive and not fenced, within d: a heartbeat that waits for the
// decision lock is not.
func heartbeatWithin(t *testing.T, h *harness, id int32, d time.Duration) {
	t.Helper()
	type answer struct {
		resp *replicadv1.BrokerHeartbeatResponse
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		resp, err := h.c.BrokerHeartbeat(context.Background(), &replicadv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: h.epoch[id]})
		done <- answer{resp, err}
	}()
	select {
	case a := <-done:
		if a.err != nil || a.resp.GetErrorCode() != codeNone || a.resp.GetIsFenced() {
			t.Fatalf("heartbeat of broker %d during the move: %v %v", id, a.resp, a.err)
		}
	case <-time.After(d):
		t.Fatalf("heartbeat of broker %d not answered within %v while a move held the controller", id, d)
	}
}

// Heartbeats never wait behind a decision (issue 20, section 4): while the
// fencing of a broker leading 10,000 partitions is held in a store write
// (the controller's lock taken), the other brokers' heartbeats are answered
// at once, and once the decision ends neither of them is fenced, though the
// decision took two session timeouts. The move goes in writes of at most
// DecisionBatch partitions.
func TestHeartbeatsAnsweredDuringLongMove(t *testing.T) {
	g := newGatedStore(store.NewMemory())
	h := startCluster(t, 3, withStore(g), func(c *Config) { c.DecisionBatch = 1000 })
	// 30,000 partitions RF 2 on 3 brokers: each leads 10,000 (the issue's
	// controlled shutdown scenario).
	h.createTopic("t", 30000, 2)
	var led int
	for p := range int32(30000) {
		if h.memPart("t", p).Leader == 1 {
			led++
		}
	}
	if led != 10000 {
		t.Fatalf("setup: broker 1 leads %d partitions, want 10000", led)
	}
	before := len(g.writes())

	h.clk.Advance(testSessionTimeout / 2)
	h.heartbeat(2, 3)
	h.clk.Advance(testSessionTimeout/2 + time.Millisecond)
	entered, release := g.arm()
	defer release()
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		h.c.expireSessions(context.Background()) // fences 1 and moves its partitions
	}()
	<-entered
	// The write takes two session timeouts; the brokers keep heartbeating.
	for range 4 {
		h.clk.Advance(testSessionTimeout / 2)
		heartbeatWithin(t, h, 2, time.Second)
		heartbeatWithin(t, h, 3, time.Second)
	}
	release()
	<-moved
	h.c.expireSessions(context.Background())
	h.c.lock()
	for _, id := range []int32{2, 3} {
		if h.c.brokers[id].info.Fenced {
			t.Errorf("healthy broker %d fenced after the move", id)
		}
	}
	if !h.c.brokers[1].info.Fenced {
		t.Errorf("silent broker 1 not fenced")
	}
	h.c.unlock()
	for p := range int32(30000) {
		if st := h.memPart("t", p); st.Leader == 1 || slices.Contains(st.ISR, 1) {
			t.Fatalf("t-%d still has broker 1: %+v", p, st)
		}
	}
	sizes := g.writes()[before:]
	total := 0
	for _, n := range sizes {
		if n > 1000 {
			t.Errorf("a write of %d partitions, want at most DecisionBatch 1000 (writes %v)", n, sizes)
		}
		total += n
	}
	// Broker 1 is a replica of 20,000 partitions: it leads 10,000 and
	// follows in 10,000, and leaves every one.
	if total != 20000 || len(sizes) != 20 {
		t.Errorf("the move wrote %d partitions in %d writes %v, want 20000 in 20", total, len(sizes), sizes)
	}
}

// A controller that stops between two writes of a fencing's move (the third
// write failed, then it stopped) leaves the store with the broker fenced
// and part of its partitions moved; the next controller moves the rest when
// it activates.
func TestMoveBetweenBatchesCompletedOnActivation(t *testing.T) {
	f := storetest.NewFaulty(store.NewMemory())
	h := startCluster(t, 3, withStore(f), func(c *Config) { c.DecisionBatch = 100 })
	h.createTopic("t", 900, 2)
	writes := 0
	f.Inject(storetest.Fault{Op: storetest.OpUpdatePartitions, Kind: storetest.FailBefore, Err: errors.New("injected: controller crashed"),
		Times: -1, Match: func(storetest.Call) bool { writes++; return writes >= 3 }})
	h.expire(2, 3)
	moved, left, led := 0, 0, 0
	for p := range int32(900) {
		st := h.part("t", p)
		if slices.Contains(st.ISR, 1) {
			left++
		} else if slices.Contains(st.Replicas, 1) {
			moved++
		}
		if st.Leader == 1 {
			led++
		}
	}
	if moved != 200 || left != 400 {
		t.Fatalf("after two of six writes: %d partitions moved away from broker 1, %d left; want 200 and 400", moved, left)
	}
	// Leaderships go first (leadershipsFirstLocked): of the 300 broker 1
	// led, the two writes moved 200.
	if led != 100 {
		t.Errorf("after two of six writes broker 1 still leads %d partitions, want 100 (its leaderships moved first)", led)
	}
	h.stop()
	f.Clear()

	h2 := newHarness(t, withStore(f), func(c *Config) { c.DecisionBatch = 100 })
	h2.start()
	for p := range int32(900) {
		if st := h2.part("t", p); st.Leader == 1 || slices.Contains(st.ISR, 1) {
			t.Fatalf("t-%d after the new controller activated: %+v, want broker 1 out", p, st)
		}
	}
}

// A controlled shutdown of a broker leading 1,000 partitions moves them in
// writes of DecisionBatch, and none is left.
func TestControlledShutdownInBatches(t *testing.T) {
	g := newGatedStore(store.NewMemory())
	h := startCluster(t, 3, withStore(g), func(c *Config) { c.DecisionBatch = 250 })
	h.createTopic("t", 3000, 2)
	before := len(g.writes())
	resp, err := h.c.ControlledShutdown(context.Background(), &replicadv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: h.epoch[1]})
	if err != nil || resp.GetErrorCode() != codeNone || len(resp.GetRemainingPartitions()) != 0 {
		t.Fatalf("controlled shutdown: %v %v", resp, err)
	}
	sizes := g.writes()[before:]
	if want := slices.Repeat([]int{250}, 8); !slices.Equal(sizes, want) {
		t.Errorf("writes %v, want %v (2,000 partitions in batches of 250)", sizes, want)
	}
	for p := range int32(3000) {
		if st := h.part("t", p); st.Leader == 1 || slices.Contains(st.ISR, 1) {
			t.Fatalf("t-%d: %+v, want broker 1 out", p, st)
		}
	}
}

// As TestHeartbeatsAnsweredDuringLongMove, for the two other big decisions
// of issue 20: a controlled shutdown of a broker leading 10,000 partitions,
// and the creation of 30,000 partitions, each held in a store write for two
// session timeouts while the brokers heartbeat. No broker is fenced.
func TestHeartbeatsAnsweredDuringShutdownAndCreate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		setup    func(h *harness)
		decision func(h *harness)
	}{
		{"controlled shutdown", func(h *harness) { h.createTopic("t", 30000, 2) }, func(h *harness) {
			resp, err := h.c.ControlledShutdown(context.Background(), &replicadv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: h.epoch[1]})
			if err != nil || resp.GetErrorCode() != codeNone {
				t.Errorf("controlled shutdown: %v %v", resp, err)
			}
		}},
		{"create 30,000 partitions", func(*harness) {}, func(h *harness) { h.createTopic("t", 30000, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newGatedStore(store.NewMemory())
			h := startCluster(t, 3, withStore(g), func(c *Config) { c.DecisionBatch = 1000 })
			tc.setup(h)
			entered, release := g.arm()
			defer release()
			done := make(chan struct{})
			go func() {
				defer close(done)
				tc.decision(h)
			}()
			<-entered
			for range 4 {
				h.clk.Advance(testSessionTimeout / 2)
				for _, id := range []int32{1, 2, 3} {
					heartbeatWithin(t, h, id, time.Second)
				}
			}
			release()
			<-done
			h.c.expireSessions(context.Background())
			h.c.lock()
			defer h.c.unlock()
			for _, id := range []int32{1, 2, 3} {
				if h.c.brokers[id].info.Fenced {
					t.Errorf("broker %d fenced, though it heartbeat all along", id)
				}
			}
		})
	}
}
