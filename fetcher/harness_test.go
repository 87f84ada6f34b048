package fetcher

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// transports are the LeaderClients every fetcher test runs against.
var transports = []string{"inmem", "grpc"}

// forEachTransport runs test once per LeaderClient implementation.
func forEachTransport(t *testing.T, test func(t *testing.T, e *env)) {
	for _, name := range transports {
		t.Run(name, func(t *testing.T) { test(t, newEnv(t, name)) })
	}
}

// env is a follower broker (id 100) with real logs, a Manager, and leaders
// reached through the transport under test.
type env struct {
	t         *testing.T
	transport string
	inmem     *InmemClient
	grpc      *GRPCClient
	client    *countingClient
	clock     clock.Clock
	cfg       Config

	mu       sync.Mutex
	replicas map[tp.TopicPartition]*followerReplica
	servers  []*grpc.Server
	nextPort int32
	mgr      *Manager
}

// followerReplica is the follower's log and the leader epoch the replica
// manager would hold for it.
type followerReplica struct {
	log   *log.Log
	epoch atomic.Int32
	Replica
}

func newEnv(t *testing.T, transport string) *env {
	e := &env{t: t, transport: transport, replicas: make(map[tp.TopicPartition]*followerReplica), nextPort: 9000, clock: clock.Real{}}
	var lc LeaderClient
	if transport == "inmem" {
		e.inmem = NewInmemClient()
		lc = e.inmem
	} else {
		e.grpc = NewGRPCClient()
		lc = e.grpc
	}
	e.client = &countingClient{LeaderClient: lc}
	e.cfg = Config{
		BrokerID: 100, BrokerEpoch: func() int64 { return 7 }, NumFetchers: 1,
		MaxWait: 200 * time.Millisecond, PartitionBackoff: 5 * time.Millisecond,
		ReconnectBackoff: time.Millisecond, MaxReconnectBackoff: 10 * time.Millisecond,
		Client: e.client, Replicas: ReplicasFunc(e.replica), Logger: testLogger(t),
	}
	t.Cleanup(e.close)
	return e
}

// manager starts the Manager (after the test adjusted e.cfg).
func (e *env) manager() *Manager {
	e.t.Helper()
	if e.cfg.Clock == nil {
		e.cfg.Clock = e.clock
	}
	m, err := NewManager(e.cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	e.mgr = m
	e.mu.Unlock()
	return m
}

// close stops, in order: fetchers, leaders' servers, client connections.
// Logs close in their own cleanups, which run after this one.
func (e *env) close() {
	e.mu.Lock()
	m, servers := e.mgr, e.servers
	e.mu.Unlock()
	if m != nil {
		m.Shutdown()
	}
	for _, s := range servers {
		s.Stop()
	}
	if e.grpc != nil {
		_ = e.grpc.Close()
	}
}

func (e *env) replica(t tp.TopicPartition) (Replica, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r, ok := e.replicas[t]
	if !ok {
		return nil, false
	}
	return r, true
}

// follow creates the follower's replica of p at leader epoch ep.
func (e *env) follow(p tp.TopicPartition, ep int32, logStart int64) *followerReplica {
	r := &followerReplica{log: openLog(e.t, p, logStart)}
	r.epoch.Store(ep)
	r.Replica = NewLogReplica(r.log, r.epoch.Load)
	e.mu.Lock()
	e.replicas[p] = r
	e.mu.Unlock()
	return r
}

// serve makes fl reachable as broker id, at a new endpoint each call.
func (e *env) serve(id int32, fl *fakeLeader) core.Broker {
	e.t.Helper()
	if e.transport == "inmem" {
		e.inmem.Register(id, fl)
		e.mu.Lock()
		defer e.mu.Unlock()
		e.nextPort++
		return core.Broker{ID: id, Host: "inmem", Port: e.nextPort}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	srv := grpc.NewServer(grpcx.ServerOptions()...)
	replicadv1.RegisterFetchServiceServer(srv, &FetchServer{Handler: fl})
	go func() { _ = srv.Serve(lis) }()
	e.mu.Lock()
	e.servers = append(e.servers, srv)
	e.mu.Unlock()
	addr := lis.Addr().(*net.TCPAddr)
	return core.Broker{ID: id, Host: "127.0.0.1", Port: int32(addr.Port)}
}

// add is AddFetcherForPartitions for one partition at its replica's LEO.
func (e *env) add(p tp.TopicPartition, leader core.Broker, ep int32) {
	e.mu.Lock()
	r := e.replicas[p]
	m := e.mgr
	e.mu.Unlock()
	m.AddFetcherForPartitions(context.Background(), map[tp.TopicPartition]core.InitialFetchState{
		p: {Leader: leader, LeaderEpoch: ep, InitOffset: r.LogEndOffset()},
	})
}

// countingClient counts the streams opened, whatever the transport.
type countingClient struct {
	LeaderClient
	opens atomic.Int32
}

func (c *countingClient) Open(ctx context.Context, leader core.Broker) (FetchStream, error) {
	s, err := c.LeaderClient.Open(ctx, leader)
	if err == nil {
		c.opens.Add(1)
	}
	return s, err
}

// waitFor polls cond until it holds, failing the test after 5 s. tick, when
// set, runs between polls (e.g. to advance a manual clock).
func waitFor(t *testing.T, what string, cond func() bool, tick func()) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		if tick != nil {
			tick()
		}
		time.Sleep(time.Millisecond)
	}
}

// waitCaughtUp waits until the follower's log ends where the leader's does.
func waitCaughtUp(t *testing.T, r *followerReplica, leaderLog *log.Log) {
	t.Helper()
	waitFor(t, "follower caught up", func() bool { return r.LogEndOffset() == leaderLog.LogEndOffset() }, nil)
}

// sameLog fails unless the two logs hold the same bytes and epochs.
func sameLog(t *testing.T, follower, leader *log.Log) {
	t.Helper()
	if f, l := follower.LogEndOffset(), leader.LogEndOffset(); f != l {
		t.Fatalf("follower LEO %d, leader LEO %d", f, l)
	}
	if f, l := follower.EpochCache().Entries(), leader.EpochCache().Entries(); len(f) != len(l) {
		t.Fatalf("follower epochs %v, leader epochs %v", f, l)
	} else {
		for i := range f {
			if f[i] != l[i] {
				t.Fatalf("follower epochs %v, leader epochs %v", f, l)
			}
		}
	}
	for off := leader.LogStartOffset(); off < leader.LogEndOffset(); {
		li, err := leader.Read(off, 1<<20, leader.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		fi, err := follower.Read(off, len(li.Data), leader.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		if string(fi.Data[:min(len(fi.Data), len(li.Data))]) != string(li.Data) {
			t.Fatalf("logs differ from offset %d", off)
		}
		off = lastNext(li.Data)
	}
}

// lastNext is the offset after the last batch in data.
func lastNext(data []byte) int64 {
	var next int64
	for rest := data; len(rest) > 0; {
		b, r, err := record.Next(rest)
		if err != nil {
			panic(err)
		}
		next, rest = b.NextOffset(), r
	}
	return next
}

// testLogger logs to the test when FETCHER_TEST_LOG is set.
func testLogger(t *testing.T) zerolog.Logger {
	if os.Getenv("FETCHER_TEST_LOG") == "" {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.NewTestWriter(t))
}
