package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/brokerqueue"
	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// deposedReason is serve's answer when a broker knows a newer controller;
// Run then waits deposedBackoff before acting again.
const (
	deposedReason  = "deposed: a newer controller exists"
	deposedBackoff = time.Second
)

// DefaultSessionTimeout is how long a broker may stay silent before it is
// fenced (Kafka's broker.session.timeout.ms is 9s; SPEC's default is 6s).
const DefaultSessionTimeout = 6 * time.Second

// BrokerDialer opens a client of a broker's ReplicaManagerService. The
// controller closes the Closer when the broker registers again or is fenced.
type BrokerDialer func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error)

// Config configures a Controller.
type Config struct {
	// Store holds the metadata. Required.
	Store store.Store
	// Advertise is the HOST:PORT clients reach this controller at (as the
	// etcd store's EtcdConfig.Advertise): a standby names the active one
	// in its NOT_CONTROLLER answers, and tells itself apart from it.
	Advertise string
	// Elector, when set, must be won before this controller acts (etcd).
	// Nil: the controller acts as soon as Run starts (the embedded store,
	// whose file lock already keeps a second controller out).
	Elector store.Elector
	// ID is the controller_id stamped on requests to brokers.
	ID int32
	// SessionTimeout: a broker silent this long is fenced. Default
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// UncleanLeaderElection lets a partition with no live ISR member be led
	// by the most caught-up live replica, losing what only the ISR had.
	UncleanLeaderElection bool
	// AutoLeaderRebalance turns on the automatic leader rebalance (Kafka's
	// auto.leader.rebalance.enable): every LeaderImbalanceCheckInterval
	// (default DefaultLeaderImbalanceCheckInterval), the partitions of each
	// broker whose leader imbalance (the share of the partitions it is the
	// preferred leader of that another broker leads) exceeds
	// LeaderImbalancePerBrokerPercentage (0: any imbalance) move back to it
	// where it is in the ISR and eligible, at most LeaderRebalanceBatch
	// (default DefaultLeaderRebalanceBatch) per check.
	AutoLeaderRebalance                bool
	LeaderImbalanceCheckInterval       time.Duration
	LeaderImbalancePerBrokerPercentage int
	LeaderRebalanceBatch               int
	// DialBroker connects to a broker. Required.
	DialBroker BrokerDialer
	// QueueBackoff and QueueMaxBackoff tune the per-broker queues' retries
	// (zero: the queue's defaults).
	QueueBackoff, QueueMaxBackoff time.Duration
	// DecisionBatch is the most partitions one store write of a big
	// decision (a fencing's move, a controlled shutdown) changes; the lock
	// is released between two (batches.go). Default DefaultDecisionBatch.
	DecisionBatch int
	// SendBatch is the most partitions whose state is queued for the
	// brokers under one hold of the lock when a broker or a new controller
	// is told everything, or a topic is created (sendFullStatesLocked,
	// announceCreatedLocked). Default 2 x DecisionBatch.
	SendBatch int
	// StoreTimeout bounds each store write (default DefaultStoreTimeout).
	// A write runs under this deadline of the controller's own, never
	// under the deadline of the request that caused it.
	StoreTimeout time.Duration
	// SendTimeout bounds how long an admin call or a controlled shutdown waits
	// for its requests to reach the brokers before answering. Default 10s.
	SendTimeout time.Duration
	Clock       clock.Clock
	// processClock is the clock that stands still while this process does
	// (nil: the real clock); the session checks read it to notice that the
	// controller was paused. Tests set it to play a pause.
	processClock clock.Clock
	Logger       zerolog.Logger
	// TracerProvider makes the controller's spans (Controller.*, and the
	// broker queues' ControllerChannel.send). Nil: the global provider.
	TracerProvider trace.TracerProvider
	// QueueInt64N is the broker queues' jitter source (brokerqueue's
	// Config.Int64N); nil: math/rand/v2's. A seeded simulation sets it.
	QueueInt64N func(n int64) int64
	// QueueGate is the broker queues' Gate (brokerqueue's Config.Gate),
	// given the queue's broker; nil: none. A seeded simulation sets it.
	QueueGate func(ctx context.Context, broker int32)
}

// Controller is the controller. Create it with New, drive it with Run, and
// serve it over gRPC (it implements replicadv1.ControllerServiceServer).
type Controller struct {
	replicadv1.UnimplementedControllerServiceServer

	cfg    Config
	log    zerolog.Logger
	tracer trace.Tracer
	// queueTracer traces the broker queues' sends.
	queueTracer trace.Tracer
	// process is cfg.processClock; lastCheck is its reading at the last
	// session check (or at the start of the term), under mu.
	process   clock.Clock
	lastCheck time.Time

	// lost receives when this controller must stop acting: a store write
	// found it deposed, or a broker knows a newer controller epoch.
	lost chan struct{}
	// pastEpoch is the highest controller epoch a broker answered
	// STALE_CONTROLLER_EPOCH with: the next activation moves past it in one
	// step (see Run).
	pastEpoch atomic.Int32

	// mu serialises every decision, as Kafka's controller event thread does.
	// Take it with lock and unlock (deafness.go), which measure how long it
	// was held.
	mu         sync.Mutex
	lockedAt   time.Time
	lockedReal time.Time
	active     bool
	epoch      int32
	// brokers and parts mirror the store while active.
	brokers map[int32]*brokerState
	parts   map[partitionKey]store.Partition
	// moving are the partitions of parts with a reassignment in progress,
	// which the periodic check drives (driveReassignmentsLocked) without a
	// pass over every partition. Kept by setPartLocked and deletePartLocked.
	moving map[partitionKey]struct{}
	// sortedKeys is the keys of parts in order, nil when not known
	// (sortedKeysLocked).
	sortedKeys []partitionKey
	// topics counts the topics created, to rotate where assignments start.
	topicsCreated int
	// deleted mirrors the store's pending deletions, by topic ID.
	deleted map[string]store.DeletedTopic
	// acls mirrors the store's ACLs while active, sorted; wireACLs is their
	// wire form, read without the lock by the broker queues as they build
	// each UpdateMetadata (brokerqueue.Config.ACLs), with the count of
	// sets made, their acls_version.
	acls         []store.ACL
	wireACLs     atomic.Pointer[wireACLSet]
	aclsVersions int64
	// configs mirrors the store's topic configs while active, by topic.
	configs map[string]store.TopicConfig
	// floorClears are the topics whose stored min ISR floor a goroutine is
	// clearing (retryMinIsrFloorClearsLocked). The floor itself is stored
	// with the topic config (min_isr.go): this only avoids duplicate tries.
	floorClears map[string]bool
	// configDelivered, when set, answers for the brokers whether every
	// reachable one took everything queued (clearMinIsrFloorWhenDelivered):
	// the model check (modelcheck_test.go), whose brokers have no queues,
	// decides it. Nil: the broker queues are flushed.
	configDelivered func() bool
	// throttle is the stored replication throttle while active (bytes/s,
	// 0: none); wireThrottle the same with its replication_throttle_version,
	// read without the lock by the broker queues (brokerqueue.Config.Throttle).
	throttle         int64
	wireThrottle     atomic.Pointer[wireThrottle]
	throttleVersions int64
	// moveRetryAt is when the session check may next run after a fencing
	// or a move away from fenced brokers failed, moveFailures how many
	// failed in a row: a store that stays down is retried with backoff,
	// not every check.
	moveRetryAt  time.Time
	moveFailures int
	// resyncPending: a write failed with an unknown outcome or a conflict
	// and the re-read of the store that follows failed too; memory may be
	// behind the store. reconcile retries at resyncRetryAt.
	resyncPending bool
	resyncRetryAt time.Time
	// reassignRetryAt is when the periodic check may next try to complete
	// reassignments after a completion failed, reassignFailures how many
	// failed in a row.
	reassignRetryAt  time.Time
	reassignFailures int
	// counters count committed partition states for /metrics (metrics.go).
	counters stateCounters
	// liveView is what heartbeats are answered from without mu, published
	// at every release of mu (liveness.go).
	liveView atomic.Pointer[livenessView]
	// activations counts the activations that completed (tests wait on it).
	activations atomic.Int64
	// registering are the brokers whose registration runs, which may
	// release the lock between its writes: a second registration of the
	// same broker meanwhile is refused, and the broker retries it.
	registering map[int32]bool
	// longestHold is the longest hold of mu so far, in nanoseconds
	// (deafness.go's unlock): decisions are split so that it stays short.
	longestHold atomic.Int64
}

// brokerState is what the controller knows of one registered broker.
type brokerState struct {
	info store.Broker
	// lastSeen is the time of its last heartbeat handled under the lock (or
	// registration, or this controller's activation); live has those
	// answered without it. seen() is the later of the two.
	lastSeen time.Time
	live     *liveness
	// shuttingDown: the broker asked for a controlled shutdown; it may not
	// lead or join an ISR until it registers again.
	shuttingDown bool
	// shutDown: its controlled shutdown completed (it leads nothing another
	// replica could take) and it is stopping. DescribeCluster shows it not
	// alive from then on rather than until its session expires, as KRaft
	// fences a broker once its controlled shutdown is done. In memory only:
	// a controller taking over shows it alive until its session expires.
	shutDown bool
	// incarnation is the id the broker process registered with: a repeat
	// is a retried registration, not a restart.
	incarnation string
	// movePending: fenced, but its partitions have not all been moved away
	// yet (the move failed); the session check retries it.
	movePending bool
	// moveRunning: a move away from it runs, releasing the lock between
	// its writes (moveAwayFromLocked); the session check does not start
	// another meanwhile.
	moveRunning bool
	// welcomePending: registered, but the rest of the registration (the
	// elections it allows, telling it the state) failed; its retry of the
	// registration runs it again (welcomeLocked).
	welcomePending bool
	// offline are the replicas the broker's last heartbeat reported
	// offline, storageErrors those it answered a LeaderAndIsr for with
	// STORAGE_ERROR (until it takes one for them): neither leads nor joins
	// an ISR. Both are cleared when it registers again. refusing says
	// storageErrors is not empty, for the broker queue's goroutine, which
	// cannot take the controller's lock.
	offline, storageErrors map[partitionKey]struct{}
	refusing               atomic.Bool
	client                 replicadv1.ReplicaManagerServiceClient
	conn                   io.Closer
	queue                  *brokerqueue.Queue
}

type partitionKey struct {
	topic     string
	partition int32
}

func keyOf(p store.Partition) partitionKey { return partitionKey{p.Topic, p.Partition} }

// New checks cfg and returns a controller that is not yet acting.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.DialBroker == nil {
		return nil, errors.New("controller: Store and DialBroker are required")
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = DefaultSessionTimeout
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 10 * time.Second
	}
	if cfg.StoreTimeout <= 0 {
		cfg.StoreTimeout = DefaultStoreTimeout
	}
	if cfg.DecisionBatch <= 0 {
		cfg.DecisionBatch = DefaultDecisionBatch
	}
	if cfg.SendBatch <= 0 {
		cfg.SendBatch = 2 * cfg.DecisionBatch
	}
	if cfg.LeaderImbalanceCheckInterval <= 0 {
		cfg.LeaderImbalanceCheckInterval = DefaultLeaderImbalanceCheckInterval
	}
	if cfg.LeaderRebalanceBatch <= 0 {
		cfg.LeaderRebalanceBatch = DefaultLeaderRebalanceBatch
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.processClock == nil {
		cfg.processClock = clock.Real{}
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = otel.GetTracerProvider()
	}
	return &Controller{
		cfg:         cfg,
		log:         cfg.Logger.With().Str("logger", "controller").Logger(),
		tracer:      cfg.TracerProvider.Tracer("github.com/replicad/replicad/controller"),
		queueTracer: cfg.TracerProvider.Tracer("github.com/replicad/replicad/controller/brokerqueue"),
		lost:        make(chan struct{}, 1),
		process:     cfg.processClock,
	}, nil
}

// Run campaigns (when there is an Elector), acts while elected, and returns
// when ctx is done. Losing an election, or learning of a newer controller,
// makes it stop acting and campaign again.
func (c *Controller) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		var lead store.Leadership
		if c.cfg.Elector != nil {
			c.log.Info().Msg("campaigning to become the active controller")
			l, err := c.cfg.Elector.Campaign(ctx)
			if err != nil {
				if ctx.Err() != nil {
					break
				}
				c.log.Warn().Err(err).Msg("campaign failed; retrying")
				sleepCtx(ctx, backoff)
				continue
			}
			lead = l
		}
		if err := c.activate(ctx); err != nil {
			c.deactivate("activation failed")
			if ctx.Err() != nil {
				break
			}
			c.log.Error().Err(err).Msg("could not become the active controller; retrying")
			if lead != nil {
				resign(lead, c.log)
			}
			sleepCtx(ctx, backoff)
			continue
		}
		reason := c.serve(ctx, lead)
		_, epoch := c.Active()
		c.deactivate(reason)
		if reason == deposedReason {
			if past := c.pastEpoch.Load(); past >= epoch {
				// A broker follows an epoch at least ours. Either a newer
				// controller acts (then the store refuses this controller's
				// next write: ErrNotLeader, and it campaigns again), or the
				// broker took an epoch no controller holds (a hand-made
				// request). Activating again at once moves this
				// controller's epoch past it in one step, through the store
				// so standbys agree, and re-sends the full state at it.
				c.log.Warn().Int32("controller_epoch", epoch).Int32("broker_controller_epoch", past).
					Msg("a broker follows a controller epoch at least this controller's: moving past it")
			} else {
				// Deposed otherwise (a store write found another
				// controller acting): back off rather than leapfrog its
				// epoch in a tight loop.
				sleepCtx(ctx, deposedBackoff)
			}
		}
		if lead != nil && ctx.Err() != nil {
			resign(lead, c.log)
		}
	}
	return nil
}

// serve runs the session checks while this controller acts, and returns why
// it stopped.
func (c *Controller) serve(ctx context.Context, lead store.Leadership) string {
	var leadDone <-chan struct{}
	if lead != nil {
		leadDone = lead.Done()
	}
	interval := c.sessionCheckInterval()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// The leader rebalance checks run here too, while this controller acts
	// (only the active controller rebalances).
	rebalance := c.rebalanceTimer()
	var rebalanceC <-chan time.Time
	if rebalance != nil {
		defer rebalance.Stop()
		rebalanceC = rebalance.C
	}
	// A new term's first check measures from here: a pause right after
	// activation is a pause too (see expireSessions).
	c.mu.Lock()
	c.lastCheck = c.process.Now()
	c.mu.Unlock()
	for {
		select {
		case <-ctx.Done():
			return "stopping"
		case <-leadDone:
			return "lost the election"
		case <-c.lost:
			return deposedReason
		case <-tick.C:
			c.expireSessions(ctx)
			c.lock()
			if c.active {
				c.retryMinIsrFloorClearsLocked(ctx)
			}
			c.unlock()
			c.reconcile(ctx)
		case <-rebalanceC:
			c.runRebalanceCheck(ctx, rebalance)
		}
	}
}

// pauseThreshold is the gap between two session checks beyond which the
// controller takes it that its own process stood still: well past the
// ticker's interval (a loaded machine delays ticks by a few), and below the
// session timeout, so a pause is always caught before it can fence.
func pauseThreshold(sessionTimeout, interval time.Duration) time.Duration {
	return min(max(sessionTimeout/2, 5*interval), sessionTimeout)
}

// sessionCheckInterval is how often sessions are checked: a tenth of the
// timeout, so a silent broker is fenced at most 10% late.
func (c *Controller) sessionCheckInterval() time.Duration {
	return min(max(c.cfg.SessionTimeout/10, 10*time.Millisecond), 500*time.Millisecond)
}

// activate makes this controller the acting one: a new controller epoch,
// the metadata loaded, every live broker sent its full state.
func (c *Controller) activate(ctx context.Context) error {
	ctx, span := c.tracer.Start(ctx, "Controller.activate", trace.WithAttributes(attribute.Int("replicad.controller_id", int(c.cfg.ID))))
	defer span.End()
	// Drop a stale "lost" signal from the previous term.
	select {
	case <-c.lost:
	default:
	}
	epoch, err := c.cfg.Store.BumpControllerEpoch(ctx, c.pastEpoch.Load())
	if err != nil {
		return fmt.Errorf("bump controller epoch: %w", err)
	}
	brokers, err := c.cfg.Store.Brokers(ctx)
	if err != nil {
		return fmt.Errorf("load brokers: %w", err)
	}
	parts, err := c.cfg.Store.Partitions(ctx)
	if err != nil {
		return fmt.Errorf("load partitions: %w", err)
	}
	configs, err := c.cfg.Store.TopicConfigs(ctx)
	if err != nil {
		return fmt.Errorf("load topic configs: %w", err)
	}
	// The mirror is built before the lock is taken (100,000 partitions
	// take tens of milliseconds), with the indexes setPartLocked keeps.
	topics := make(map[string]bool)
	partMap := make(map[partitionKey]store.Partition, len(parts))
	moving := make(map[partitionKey]struct{})
	keys := make([]partitionKey, len(parts))
	for i, p := range parts {
		k := keyOf(p)
		partMap[k] = p
		if len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
			moving[k] = struct{}{}
		}
		topics[p.Topic] = true
		keys[i] = k
	}
	// The store lists them sorted (Store.Partitions): no sort under the
	// lock, unless a store broke that promise.
	if !slices.IsSortedFunc(keys, comparePartitionKeys) || len(keys) != len(partMap) {
		keys = nil
	}

	c.lock()
	defer c.unlock()
	c.epoch = epoch
	c.active = true
	c.brokers = make(map[int32]*brokerState, len(brokers))
	c.parts, c.moving, c.sortedKeys = partMap, moving, keys
	c.topicsCreated = len(topics)
	c.configs = configs
	for t := range topics {
		if _, ok := c.configs[t]; !ok {
			c.configs[t] = store.TopicConfig{} // stored before topic configs: version 0
		}
	}
	c.floorClears = nil
	if err := c.loadDeletedLocked(ctx); err != nil {
		return err
	}
	// Before any queue opens: the first UpdateMetadata of each carries them.
	if err := c.loadACLsLocked(ctx); err != nil {
		return fmt.Errorf("load acls: %w", err)
	}
	if err := c.loadThrottleLocked(ctx); err != nil {
		return fmt.Errorf("load replication throttle: %w", err)
	}
	now := c.cfg.Clock.Now()
	for _, b := range brokers {
		// Unfenced brokers get a whole session from now: this controller has
		// not heard from them yet, and they heartbeat to whoever is active.
		bs := &brokerState{info: b, lastSeen: now}
		c.brokers[b.ID] = bs
		if !b.Fenced {
			c.openQueueLocked(bs)
		}
	}
	c.log.Info().Int32("controller_epoch", epoch).Int("brokers", len(brokers)).Int("partitions", len(parts)).
		Int("acls", len(c.acls)).Msg("active controller")
	span.SetAttributes(attribute.Int("replicad.controller_epoch", int(epoch)), attribute.Int("replicad.brokers", len(brokers)),
		attribute.Int("replicad.partitions", len(parts)))
	// A crash between a fall of min ISR and the ELR clear it needs (a
	// broker's registration and the clear are two writes), or a store an
	// older controller wrote: no ELR that a leader may commit without
	// survives, before anyone is elected from it.
	if err := c.clearStaleElrLocked(ctx, "activation", c.staleElrUpdatesLocked("", c.minIsrLocked)); err != nil {
		return err
	}
	// A crash between fencing a broker and moving its partitions leaves a
	// fenced broker leading; finish that work now.
	var fenced []int32
	for _, b := range brokers {
		if b.Fenced {
			fenced = append(fenced, b.ID)
		}
	}
	if len(fenced) > 0 {
		if err := c.moveAwayFromLocked(ctx, fenced, "fenced before this controller started", false); err != nil {
			return err
		}
	}
	// Leaderless partitions get an election now (Kafka's offline-partition
	// election on failover): an ISR member may be back, or unclean
	// election may have been switched on since.
	var elections []store.PartitionUpdate
	for p := range c.allPartitionsLocked() {
		if p.Leader != store.NoLeader {
			continue
		}
		if next, ok := c.electLeaderlessLocked(ctx, p); ok {
			elections = append(elections, update(p, next))
		}
	}
	if _, err := c.commitLocked(ctx, elections, nil); err != nil {
		return err
	}
	if err := c.giveLegacyTopicsIDsLocked(ctx); err != nil {
		return err
	}
	// A reassignment whose completion was due when the last controller
	// stopped (it died between the ISR change and the completion write,
	// or that write failed) completes now.
	c.resyncPending, c.reassignRetryAt, c.reassignFailures = false, time.Time{}, 0
	c.driveReassignmentsLocked(ctx, "activation")
	var live []*brokerState
	for _, id := range c.sortedBrokerIDsLocked() {
		if bs := c.brokers[id]; !bs.info.Fenced {
			c.sendPendingDeletionsLocked(ctx, bs)
			live = append(live, bs)
		}
	}
	// Last, and with the lock released between chunks: the decisions above
	// are done, and what runs between two chunks decides on the state as
	// any later decision would.
	c.sendFullStatesLocked(ctx, live, true)
	c.activations.Add(1)
	return nil
}

// deactivate stops acting: queues closed, requests answered NOT_CONTROLLER.
func (c *Controller) deactivate(reason string) {
	c.lock()
	defer c.unlock()
	if c.active {
		c.log.Warn().Str("reason", reason).Int32("controller_epoch", c.epoch).Msg("no longer the active controller")
	}
	c.active = false
	for _, bs := range c.brokers {
		c.closeQueueLocked(bs)
	}
	c.brokers = nil
	c.parts, c.moving = nil, nil
	c.partsChangedLocked()
	c.deleted = nil
	c.acls = nil
	c.configs = nil
	c.floorClears = nil
}

// signalLost asks Run to stop acting; it never blocks.
func (c *Controller) signalLost() {
	select {
	case c.lost <- struct{}{}:
	default:
	}
}

// notePastEpoch records a controller epoch a broker follows.
func (c *Controller) notePastEpoch(epoch int32) {
	for {
		cur := c.pastEpoch.Load()
		if epoch <= cur || c.pastEpoch.CompareAndSwap(cur, epoch) {
			return
		}
	}
}

// storeErr notes a deposed controller and passes err on. Writes use
// writeFailedLocked, which also re-reads the store after a write whose
// outcome is unknown.
func (c *Controller) storeErr(err error) error {
	if errors.Is(err, store.ErrNotLeader) {
		c.signalLost()
	}
	return err
}

// Active reports whether this controller is acting, and its epoch.
func (c *Controller) Active() (bool, int32) {
	c.lock()
	defer c.unlock()
	return c.active, c.epoch
}

func resign(lead store.Leadership, log zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := lead.Resign(ctx); err != nil {
		log.Warn().Err(err).Msg("resign from the controller election")
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
