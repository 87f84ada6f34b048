package controller

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/controller/brokerqueue"
	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// sinkBroker is a broker endpoint for the scale benchmarks: it takes every
// request, answers NONE, and keeps only the largest request of each kind,
// in bytes as they would go over gRPC.
type sinkBroker struct {
	replicadv1.ReplicaManagerServiceClient // nil: the benchmarks call nothing else

	mu           sync.Mutex
	maxLAI       int
	maxLAIStates int
	maxUM        int
}

func (s *sinkBroker) LeaderAndIsr(_ context.Context, in *replicadv1.LeaderAndIsrRequest, _ ...grpc.CallOption) (*replicadv1.LeaderAndIsrResponse, error) {
	n := proto.Size(in)
	s.mu.Lock()
	s.maxLAI, s.maxLAIStates = max(s.maxLAI, n), max(s.maxLAIStates, len(in.GetPartitionStates()))
	s.mu.Unlock()
	return &replicadv1.LeaderAndIsrResponse{}, nil
}

func (s *sinkBroker) UpdateMetadata(_ context.Context, in *replicadv1.UpdateMetadataRequest, _ ...grpc.CallOption) (*replicadv1.UpdateMetadataResponse, error) {
	n := proto.Size(in)
	s.mu.Lock()
	s.maxUM = max(s.maxUM, n)
	s.mu.Unlock()
	return &replicadv1.UpdateMetadataResponse{}, nil
}

func (s *sinkBroker) StopReplica(context.Context, *replicadv1.StopReplicaRequest, ...grpc.CallOption) (*replicadv1.StopReplicaResponse, error) {
	return &replicadv1.StopReplicaResponse{}, nil
}

// scaleCluster is an in-process controller over a real store and
// scaleBrokers sink brokers, for the 100,000-partition benchmarks.
type scaleCluster struct {
	b      *testing.B
	st     store.Store
	dir    string // the bolt store's directory ("": memory)
	clk    *clock.Manual
	c      *Controller
	sinks  map[string]*sinkBroker
	epochs map[int32]int64
	cancel context.CancelFunc
	done   chan struct{}
}

const (
	scaleBrokers       = 5
	scaleTopics        = 10
	scalePartitions    = 10000 // per topic: 100,000 in all
	scaleRF            = 3
	scaleSessionTimout = time.Second // the 1 s session
)

func (sc *scaleCluster) dial(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
	return sc.sinks[addr], io.NopCloser(nil), nil
}

func newScaleCluster(b *testing.B, kind string) *scaleCluster {
	b.Helper()
	sc := &scaleCluster{b: b, clk: clock.NewManual(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)),
		sinks: map[string]*sinkBroker{}, epochs: map[int32]int64{}}
	for id := int32(1); id <= scaleBrokers; id++ {
		sc.sinks[fmt.Sprintf("%s:%d", brokerHost(id), brokerPort(id))] = &sinkBroker{}
	}
	switch kind {
	case "memory":
		sc.st = store.NewMemory()
	case "bolt":
		sc.dir = b.TempDir()
		sc.openBolt()
	}
	b.Cleanup(func() { sc.stop(); _ = sc.st.Close() })
	return sc
}

func (sc *scaleCluster) openBolt() {
	st, err := store.OpenBolt(sc.dir)
	if err != nil {
		sc.b.Fatal(err)
	}
	sc.st = st
}

// start runs a new controller over the store and waits until it acts.
func (sc *scaleCluster) start() {
	sc.b.Helper()
	c, err := New(Config{Store: sc.st, ID: 1, SessionTimeout: scaleSessionTimout, DialBroker: sc.dial,
		QueueBackoff: time.Millisecond, QueueMaxBackoff: 5 * time.Millisecond, SendTimeout: time.Minute,
		Clock: sc.clk, processClock: clock.NewManual(sc.clk.Now()), Logger: zerolog.Nop()})
	if err != nil {
		sc.b.Fatal(err)
	}
	sc.c = c
	ctx, cancel := context.WithCancel(context.Background())
	sc.cancel, sc.done = cancel, make(chan struct{})
	go func() {
		defer close(sc.done)
		_ = c.Run(ctx)
	}()
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Millisecond) {
		if c.activations.Load() > 0 {
			return
		}
		if time.Now().After(deadline) {
			sc.b.Fatal("the controller did not become active")
		}
	}
}

func (sc *scaleCluster) stop() {
	if sc.cancel != nil {
		sc.cancel()
		<-sc.done
		sc.cancel = nil
	}
}

func (sc *scaleCluster) register(id int32, incarnation string) {
	sc.b.Helper()
	resp, err := sc.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{BrokerId: id, Host: brokerHost(id),
		Port: brokerPort(id), PreviousBrokerEpoch: sc.epochs[id], IncarnationId: incarnation})
	if err != nil || resp.GetErrorCode() != codeNone {
		sc.b.Fatalf("register %d: %v %v", id, resp, err)
	}
	sc.epochs[id] = resp.GetBrokerEpoch()
}

func (sc *scaleCluster) heartbeat(id int32) {
	resp, err := sc.c.BrokerHeartbeat(context.Background(), &replicadv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: sc.epochs[id]})
	if err != nil || resp.GetErrorCode() != codeNone || resp.GetIsFenced() {
		sc.b.Fatalf("heartbeat %d: %v %v", id, resp, err)
	}
}

func (sc *scaleCluster) createAll() {
	sc.b.Helper()
	for i := range scaleTopics {
		resp, err := sc.c.CreateTopic(context.Background(), &replicadv1.CreateTopicRequest{Topic: "t" + strconv.Itoa(i),
			Partitions: scalePartitions, ReplicationFactor: scaleRF})
		if err != nil || resp.GetErrorCode() != codeNone {
			sc.b.Fatalf("create t%d: %v", i, err)
		}
	}
}

// flush waits until every live broker's queue delivered everything.
func (sc *scaleCluster) flush() {
	sc.c.lock()
	var queues []*brokerqueue.Queue
	for _, bs := range sc.c.brokers {
		if bs.reachable() {
			queues = append(queues, bs.queue)
		}
	}
	sc.c.unlock()
	for _, q := range queues {
		if err := q.Flush(context.Background()); err != nil {
			sc.b.Fatal(err)
		}
	}
}

// setup is a cluster of scaleBrokers brokers and 100,000 partitions, every
// request delivered.
func (sc *scaleCluster) setup() {
	sc.start()
	for id := int32(1); id <= scaleBrokers; id++ {
		sc.register(id, "i"+strconv.Itoa(int(id)))
	}
	sc.createAll()
	sc.flush()
}

// report adds the figures every scale benchmark gives: the longest hold of
// the controller's lock during the measured step, the controller's heap,
// the store's size on disk and the largest requests sent.
func (sc *scaleCluster) report(longest time.Duration) {
	b := sc.b
	b.ReportMetric(float64(longest.Microseconds())/1000, "max-hold-ms")
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "heap-MiB")
	if sc.dir != "" {
		if fi, err := os.Stat(filepath.Join(sc.dir, store.BoltFile)); err == nil {
			b.ReportMetric(float64(fi.Size())/(1<<20), "store-MiB")
		}
	}
	var lai, laiStates, um int
	for _, s := range sc.sinks {
		s.mu.Lock()
		lai, laiStates, um = max(lai, s.maxLAI), max(laiStates, s.maxLAIStates), max(um, s.maxUM)
		s.mu.Unlock()
	}
	b.ReportMetric(float64(lai)/(1<<20), "max-LAI-MiB")
	b.ReportMetric(float64(laiStates), "max-LAI-partitions")
	b.ReportMetric(float64(um)/(1<<20), "max-UM-MiB")
}

// BenchmarkScale100k measures the controller at 100,000 partitions (RF 3)
// on 5 brokers (issue 20, section 4), each step from a cluster with every
// partition created and delivered: creating them (10 topics of 10,000),
// fencing a broker (20,000 leaderships elected elsewhere, 40,000 ISRs
// shrunk; until every broker was told), a controlled shutdown of another
// (the same), a broker restart (a new incarnation: fenced, moved away, then
// its full state: 60,000 partitions) and a controller failover that
// rebuilds from the store and sends every broker its full state. The store
// is bbolt on TMPDIR (each write fsynced) or the in-memory one; the brokers
// are in-process sinks that take every request. Besides ns/op: the longest
// hold of the controller's lock, the heap (the memory store's included,
// bbolt's mapped file not), the store file, and the largest LeaderAndIsr
// and UpdateMetadata sent (a broker takes 4 MiB: service/msgsize.go).
//
//	TMPDIR=/dev/shm/x go test -run '^$' -bench BenchmarkScale100k -benchtime 1x ./controller/
func BenchmarkScale100k(b *testing.B) {
	for _, kind := range []string{"bolt", "memory"} {
		b.Run("store="+kind, func(b *testing.B) {
			b.Run("op=create", func(b *testing.B) {
				var longest time.Duration
				var sc *scaleCluster
				for range b.N {
					b.StopTimer()
					sc = newScaleCluster(b, kind)
					sc.start()
					for id := int32(1); id <= scaleBrokers; id++ {
						sc.register(id, "i"+strconv.Itoa(int(id)))
					}
					sc.c.longestHold.Store(0)
					b.StartTimer()
					sc.createAll()
					sc.flush()
					longest = max(longest, time.Duration(sc.c.longestHold.Load()))
				}
				b.StopTimer()
				sc.report(longest)
			})
			b.Run("op=fence", func(b *testing.B) {
				runScaleStep(b, kind, func(sc *scaleCluster) {
					sc.clk.Advance(scaleSessionTimout / 2)
					for id := int32(2); id <= scaleBrokers; id++ {
						sc.heartbeat(id)
					}
					sc.clk.Advance(scaleSessionTimout/2 + time.Millisecond)
				}, func(sc *scaleCluster) {
					sc.c.expireSessions(context.Background())
					sc.flush()
				}, func(sc *scaleCluster) {
					sc.c.lock()
					fenced := sc.c.active && sc.c.brokers[1].info.Fenced
					sc.c.unlock()
					if !fenced {
						b.Fatal("broker 1 not fenced")
					}
				})
			})
			b.Run("op=shutdown", func(b *testing.B) {
				runScaleStep(b, kind, nil, func(sc *scaleCluster) {
					resp, err := sc.c.ControlledShutdown(context.Background(), &replicadv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: sc.epochs[1]})
					if err != nil || resp.GetErrorCode() != codeNone || len(resp.GetRemainingPartitions()) != 0 {
						b.Fatalf("controlled shutdown: %v %v", resp, err)
					}
					sc.flush()
				}, nil)
			})
			b.Run("op=restart", func(b *testing.B) {
				runScaleStep(b, kind, nil, func(sc *scaleCluster) {
					sc.register(1, "second life")
					sc.flush()
				}, nil)
			})
			b.Run("op=failover", func(b *testing.B) {
				runScaleStep(b, kind, func(sc *scaleCluster) {
					sc.stop()
					if sc.dir != "" {
						_ = sc.st.Close()
						sc.openBolt()
					}
				}, func(sc *scaleCluster) {
					sc.start()
					sc.flush()
				}, nil)
			})
		})
	}
}

// runScaleStep times step on a set-up 100,000-partition cluster, b.N
// times, each on a new one; prepare runs before, untimed, check after.
func runScaleStep(b *testing.B, kind string, prepare, step, check func(*scaleCluster)) {
	var longest time.Duration
	var sc *scaleCluster
	for range b.N {
		b.StopTimer()
		if sc != nil {
			sc.stop()
			_ = sc.st.Close()
		}
		sc = newScaleCluster(b, kind)
		sc.setup()
		if prepare != nil {
			prepare(sc)
		}
		if sc.c != nil {
			sc.c.longestHold.Store(0)
		}
		b.StartTimer()
		step(sc)
		b.StopTimer()
		longest = max(longest, time.Duration(sc.c.longestHold.Load()))
		if check != nil {
			check(sc)
		}
	}
	sc.report(longest)
}
