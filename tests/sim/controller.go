package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace/noop"

	"github.com/replicad/replicad/controller"
	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/server"
)

const controllerName = "ctl"

// controllerNode is the simulated controller machine. Its store (a Memory
// store kept across lives) is its durable disk; a crash loses only the
// process.
type controllerNode struct {
	sim    *Sim
	store  *store.Memory
	faults storeFaults
	lives  int
	cur    *controllerLife
	// stopped is closed when the last life's Run has returned.
	stopped <-chan struct{}
}

type controllerLife struct {
	life  int
	srv   *server.Controller
	ctl   *controller.Controller
	fence *fencedStore
}

func (c *controllerNode) up() bool { return c.cur != nil }

func (c *controllerNode) canStart() bool {
	if c.cur != nil {
		return false
	}
	if c.stopped == nil {
		return true
	}
	select {
	case <-c.stopped:
		return true
	default:
		return false
	}
}

// start runs a new life: server.Controller, the controller process
// replicad ships, with the store, the network, the logger and the tracer
// replaced.
func (c *controllerNode) start() error {
	s := c.sim
	c.lives++
	life := c.lives
	fence := &fencedStore{Store: c.store, faults: &c.faults, node: c}
	logger := s.logger.With().Str("node", controllerName).Int("life", life).Logger()
	cfg := server.DefaultControllerConfig()
	cfg.Listen = controllerAddr
	cfg.ID = 1
	cfg.SessionTimeout = s.cfg.SessionTimeout
	cfg.AutoRebalance = false
	cfg.Logger = &logger
	cfg.MetadataStore = fence
	cfg.Clock = clock.Real{}
	cfg.TracerProvider = noop.NewTracerProvider()
	cfg.Network = server.ControllerNetwork{
		Serve: func(ctl *controller.Controller) (net.Addr, error) {
			ctx, stop := context.WithCancel(context.Background())
			s.net.serve(&endpoint{name: controllerName, life: life, ctx: ctx, stop: stop, unary: map[string]unaryHandler{
				"RegisterBroker":     unary(ctl.RegisterBroker),
				"BrokerHeartbeat":    unary(ctl.BrokerHeartbeat),
				"AlterPartition":     unary(ctl.AlterPartition),
				"ControlledShutdown": unary(ctl.ControlledShutdown),
				// Producer IDs (issue 21): a broker's block, an epoch bump.
				"AllocateProducerIds": unary(ctl.AllocateProducerIds),
				"BumpProducerEpoch":   unary(ctl.BumpProducerEpoch),
				// The operator's (operator.go).
				"CreateTopic":              unary(ctl.CreateTopic),
				"DeleteTopic":              unary(ctl.DeleteTopic),
				"CreatePartitions":         unary(ctl.CreatePartitions),
				"AlterTopicConfig":         unary(ctl.AlterTopicConfig),
				"ReassignPartition":        unary(ctl.ReassignPartition),
				"ElectLeader":              unary(ctl.ElectLeader),
				"ElectLeaders":             unary(ctl.ElectLeaders),
				"AlterReplicationThrottle": unary(ctl.AlterReplicationThrottle),
			}})
			return simAddr(controllerAddr), nil
		},
		DialBroker: func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
			return brokerClient{&conn{net: s.net, client: controllerName, clientLife: life, server: nodeOf(addr), kind: "control"}}, nopCloser{}, nil
		},
	}
	cfg.Tune = func(cc *controller.Config) {
		// One partition per store write, and per hold when telling the
		// brokers everything: every big decision (a fencing's move, a
		// controlled shutdown, a full state, a creation's announcement) is
		// split, with the lock released between two, even over the
		// simulation's few partitions, so the invariants judge every
		// state in between.
		cc.DecisionBatch = 1
		cc.SendBatch = 1
		cc.QueueInt64N = s.int64N
		cc.QueueGate = func(ctx context.Context, broker int32) {
			s.queues.wait(ctx, life, broker)
		}
	}
	srv, err := server.NewController(context.Background(), cfg)
	if err != nil {
		return err
	}
	if err := srv.Start(context.Background()); err != nil {
		return err
	}
	c.cur = &controllerLife{life: life, srv: srv, ctl: srv.Controller(), fence: fence}
	c.stopped = srv.Done()
	return nil
}

// crash ends the process: it writes nothing more to the store (fenced at
// once, which a dead process is) and is off the network; its goroutines
// wind down in the background.
func (c *controllerNode) crash() {
	l := c.cur
	if l == nil {
		return
	}
	c.cur = nil
	l.fence.dead.Store(true)
	c.sim.net.down(controllerName)
	l.srv.Kill()
}

// fencedStore is a controller life's view of the durable store: once the
// life has crashed, its writes fail, as a dead process writes nothing.
// Crashes happen while every goroutine is blocked, and the Memory store
// never blocks, so no write is ever half-way when it is fenced. Every write
// also goes through the store faults the scheduler armed (storeFaults).
type fencedStore struct {
	store.Store
	dead   atomic.Bool
	faults *storeFaults
	node   *controllerNode
}

func (f *fencedStore) check() error {
	if f.dead.Load() {
		return store.ErrClosed
	}
	return nil
}

// write runs one store write through the life's fence and the armed store
// fault, if this write is the one it waits for.
func (f *fencedStore) write(ctx context.Context, what string, do func() error) error {
	if err := f.check(); err != nil {
		return err
	}
	kind := f.faults.take(what)
	switch kind {
	case sfFail:
		return errStoreUnavailable
	case sfLandThenFail:
		if err := do(); err != nil {
			return err
		}
		return errStoreTimedOut
	case sfSlow:
		// The write is slow: it lands after the caller's deadline passed,
		// and the caller hears context.DeadlineExceeded. The time itself
		// does not pass here: the controller writes holding its lock, and
		// a goroutine waiting on a mutex is not durably blocked, so a
		// bubble whose lock holder sleeps never advances its clock.
		if err := do(); err != nil {
			return err
		}
		return context.DeadlineExceeded
	case sfCrashAfter:
		// The write lands and the process dies before it hears: nothing
		// it does from here reaches the store, and the scheduler takes
		// it off the network at its next step.
		err := do()
		f.dead.Store(true)
		f.faults.crashNow(f.node)
		if err != nil {
			return err
		}
		return store.ErrClosed
	}
	return do()
}

var (
	// errStoreUnavailable is a write that failed: nothing was written.
	errStoreUnavailable = errors.New("sim store: unavailable (nothing written)")
	// errStoreTimedOut is etcd's answer to a write whose outcome it does
	// not know: here it landed.
	errStoreTimedOut = errors.New("sim store: request timed out (the write landed)")
)

func (f *fencedStore) BumpControllerEpoch(ctx context.Context, past int32) (int32, error) {
	var e int32
	err := f.write(ctx, "BumpControllerEpoch", func() (err error) {
		e, err = f.Store.BumpControllerEpoch(context.Background(), past)
		return err
	})
	return e, err
}
func (f *fencedStore) RegisterBroker(ctx context.Context, b store.Broker) (store.Broker, error) {
	var out store.Broker
	err := f.write(ctx, "RegisterBroker", func() (err error) {
		out, err = f.Store.RegisterBroker(context.Background(), b)
		return err
	})
	return out, err
}
func (f *fencedStore) UpdateBroker(ctx context.Context, b store.Broker) error {
	return f.write(ctx, "UpdateBroker", func() error { return f.Store.UpdateBroker(context.Background(), b) })
}
func (f *fencedStore) CreateTopic(ctx context.Context, name string, parts []store.Partition, configs map[string]string) error {
	return f.write(ctx, "CreateTopic", func() error { return f.Store.CreateTopic(context.Background(), name, parts, configs) })
}
func (f *fencedStore) CreatePartitions(ctx context.Context, name string, existing int32, parts []store.Partition) error {
	return f.write(ctx, "CreatePartitions", func() error { return f.Store.CreatePartitions(context.Background(), name, existing, parts) })
}
func (f *fencedStore) SetTopicConfig(ctx context.Context, name string, expected int64, configs map[string]string) (store.TopicConfig, error) {
	var out store.TopicConfig
	err := f.write(ctx, "SetTopicConfig", func() (err error) {
		out, err = f.Store.SetTopicConfig(context.Background(), name, expected, configs)
		return err
	})
	return out, err
}
func (f *fencedStore) AlterTopicConfig(ctx context.Context, name string, expected int64, next store.TopicConfig, updates []store.PartitionUpdate) error {
	return f.write(ctx, "AlterTopicConfig", func() error {
		return f.Store.AlterTopicConfig(context.Background(), name, expected, next, updates)
	})
}
func (f *fencedStore) DeleteTopic(ctx context.Context, name string) error {
	return f.write(ctx, "DeleteTopic", func() error { return f.Store.DeleteTopic(context.Background(), name) })
}
func (f *fencedStore) CompleteDeletions(ctx context.Context, topicID string, done []store.Replica) error {
	return f.write(ctx, "CompleteDeletions", func() error { return f.Store.CompleteDeletions(context.Background(), topicID, done) })
}
func (f *fencedStore) UpdatePartitions(ctx context.Context, updates []store.PartitionUpdate) error {
	return f.write(ctx, "UpdatePartitions", func() error { return f.Store.UpdatePartitions(context.Background(), updates) })
}
func (f *fencedStore) SetReplicationThrottle(ctx context.Context, bytesPerSec int64) error {
	return f.write(ctx, "SetReplicationThrottle", func() error { return f.Store.SetReplicationThrottle(context.Background(), bytesPerSec) })
}
func (f *fencedStore) AllocateProducerIDs(ctx context.Context, count int32) (int64, error) {
	var first int64
	err := f.write(ctx, "AllocateProducerIDs", func() (err error) {
		first, err = f.Store.AllocateProducerIDs(context.Background(), count)
		return err
	})
	return first, err
}
func (f *fencedStore) BumpProducerEpoch(ctx context.Context, id int64, from int16) (int16, error) {
	var next int16
	err := f.write(ctx, "BumpProducerEpoch", func() (err error) {
		next, err = f.Store.BumpProducerEpoch(context.Background(), id, from)
		return err
	})
	return next, err
}

func (f *fencedStore) CreateAcls(ctx context.Context, acls []store.ACL) ([]store.ACL, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Store.CreateAcls(ctx, acls)
}
func (f *fencedStore) DeleteAcls(ctx context.Context, filters []store.ACLFilter) ([]store.ACL, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Store.DeleteAcls(ctx, filters)
}

// Close leaves the durable store open for the next life.
func (f *fencedStore) Close() error { return nil }

// storeFault is what happens to one store write.
type storeFault int

const (
	sfNone storeFault = iota
	// sfFail: nothing is written, the write fails.
	sfFail
	// sfLandThenFail: the write lands and still returns an error (etcd's
	// "request timed out" or "leader changed"): an unknown outcome.
	sfLandThenFail
	// sfSlow: the write lands after the caller's deadline passed (see
	// fencedStore.write).
	sfSlow
	// sfCrashAfter: the write lands and the controller dies before it
	// hears (a failover between the writes of one operation).
	sfCrashAfter
)

var storeFaultNames = []string{"none", "fail", "land-then-fail", "slow", "crash-after"}

func (k storeFault) String() string { return storeFaultNames[k] }

// storeFaults is the store fault the scheduler armed: it hits the write
// after the next skip ones (skip 1 is the second write of a two-write
// operation, as a reassignment's completion after the ISR change that
// makes it due). The scheduler arms and disarms it with the cluster idle;
// the controller's goroutines take it. What fired is reported back to the
// scheduler (drain), which records it at its next step, so the schedule's
// hash does not depend on when the goroutine ran.
type storeFaults struct {
	mu    sync.Mutex
	armed bool
	skip  int
	kind  storeFault
	fired []string
	// crash asks the scheduler to take the controller life down (set by
	// sfCrashAfter).
	crash *controllerNode
}

func (sf *storeFaults) arm(kind storeFault, skip int) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.armed, sf.kind, sf.skip = true, kind, skip
}

func (sf *storeFaults) disarm() {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.armed = false
}

func (sf *storeFaults) isArmed() bool {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	return sf.armed
}

func (sf *storeFaults) take(what string) storeFault {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	if !sf.armed {
		return sfNone
	}
	if sf.skip > 0 {
		sf.skip--
		return sfNone
	}
	sf.armed = false
	sf.fired = append(sf.fired, fmt.Sprintf("store %s %s", sf.kind, what))
	return sf.kind
}

func (sf *storeFaults) crashNow(c *controllerNode) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	sf.crash = c
}

// drain returns what fired since the last call, and whether the
// controller must be taken down.
func (sf *storeFaults) drain() ([]string, bool) {
	sf.mu.Lock()
	defer sf.mu.Unlock()
	fired, crash := sf.fired, sf.crash != nil
	sf.fired, sf.crash = nil, nil
	return fired, crash
}
