package sim

import (
	"context"
	"io"
	"sync/atomic"

	"github.com/replicad/replicad/controller"
	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

const controllerName = "ctl"

// controllerNode is the simulated controller machine. Its store (a Memory
// store kept across lives) is its durable disk; a crash loses only the
// process.
type controllerNode struct {
	sim     *Sim
	store   *store.Memory
	lives   int
	cur     *controllerLife
	stopped chan struct{}
}

type controllerLife struct {
	life   int
	ctl    *controller.Controller
	fence  *fencedStore
	cancel context.CancelFunc
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

func (c *controllerNode) start() error {
	s := c.sim
	c.lives++
	life := c.lives
	fence := &fencedStore{Store: c.store}
	ctl, err := controller.New(controller.Config{
		Store:          fence,
		ID:             1,
		SessionTimeout: s.cfg.SessionTimeout,
		DialBroker: func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
			return brokerClient{&conn{net: s.net, client: controllerName, clientLife: life, server: nodeOf(addr), kind: "control"}}, nopCloser{}, nil
		},
		Clock:       clock.Real{},
		Logger:      s.logger.With().Str("node", controllerName).Int("life", life).Logger(),
		QueueInt64N: s.int64N,
	})
	if err != nil {
		return err
	}
	ctx, stop := context.WithCancel(context.Background())
	s.net.serve(&endpoint{name: controllerName, life: life, ctx: ctx, stop: stop, unary: map[string]unaryHandler{
		"RegisterBroker":     unary(ctl.RegisterBroker),
		"BrokerHeartbeat":    unary(ctl.BrokerHeartbeat),
		"AlterPartition":     unary(ctl.AlterPartition),
		"ControlledShutdown": unary(ctl.ControlledShutdown),
	}})
	runCtx, cancel := context.WithCancel(context.Background())
	c.cur = &controllerLife{life: life, ctl: ctl, fence: fence, cancel: cancel}
	stopped := make(chan struct{})
	c.stopped = stopped
	go func() {
		defer close(stopped)
		_ = ctl.Run(runCtx)
	}()
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
	l.cancel()
}

// fencedStore is a controller life's view of the durable store: once the
// life has crashed, its writes fail, as a dead process writes nothing.
// Crashes happen while every goroutine is blocked, and the Memory store
// never blocks, so no write is ever half-way when it is fenced.
type fencedStore struct {
	store.Store
	dead atomic.Bool
}

func (f *fencedStore) check() error {
	if f.dead.Load() {
		return store.ErrClosed
	}
	return nil
}

func (f *fencedStore) BumpControllerEpoch(ctx context.Context, past int32) (int32, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	return f.Store.BumpControllerEpoch(ctx, past)
}
func (f *fencedStore) RegisterBroker(ctx context.Context, b store.Broker) (store.Broker, error) {
	if err := f.check(); err != nil {
		return store.Broker{}, err
	}
	return f.Store.RegisterBroker(ctx, b)
}
func (f *fencedStore) UpdateBroker(ctx context.Context, b store.Broker) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.UpdateBroker(ctx, b)
}
func (f *fencedStore) CreateTopic(ctx context.Context, name string, parts []store.Partition, configs map[string]string) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.CreateTopic(ctx, name, parts, configs)
}
func (f *fencedStore) SetTopicConfig(ctx context.Context, name string, expected int64, configs map[string]string) (store.TopicConfig, error) {
	if err := f.check(); err != nil {
		return store.TopicConfig{}, err
	}
	return f.Store.SetTopicConfig(ctx, name, expected, configs)
}
func (f *fencedStore) AlterTopicConfig(ctx context.Context, name string, expected int64, next store.TopicConfig, updates []store.PartitionUpdate) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.AlterTopicConfig(ctx, name, expected, next, updates)
}
func (f *fencedStore) DeleteTopic(ctx context.Context, name string) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.DeleteTopic(ctx, name)
}
func (f *fencedStore) CompleteDeletions(ctx context.Context, topicID string, done []store.Replica) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.CompleteDeletions(ctx, topicID, done)
}
func (f *fencedStore) UpdatePartitions(ctx context.Context, updates []store.PartitionUpdate) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.UpdatePartitions(ctx, updates)
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
