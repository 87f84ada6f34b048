package sim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs/crashfs"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

const (
	topic = "sim"
	// minISR is every broker's --min-insync-replicas; topics are RF 3.
	minISR            = 2
	replicationFactor = 3
)

// Config is one simulated run.
type Config struct {
	Seed       uint64
	Brokers    int // default 3
	Partitions int // default 3
	// FaultTime is how long (virtual) faults are injected after the
	// cluster is up; HealTime bounds the time, after faults stop and every
	// node is back, until every partition has a leader and a full ISR.
	FaultTime, HealTime time.Duration
	// MaxFaults stops injecting faults after that many (-1: no limit): the
	// shrinker replays a failing seed with fewer.
	MaxFaults int
	// FaultRate is the chance that a step injects a fault (default 0.01),
	// OpRate that it starts an operator command (default 0.005; see
	// operator).
	FaultRate, OpRate float64
	// NoOps and NoStoreFaults leave the operator's commands, or the store
	// faults, out of the schedule (to tell which finds a bug).
	NoOps, NoStoreFaults bool
	// Plain runs the workload of issue 19's findings: one plain (not
	// idempotent) producer per partition, no producer restarts and no
	// DeleteRecords, so that those seeds keep their schedules.
	Plain bool
	// NoRetention leaves retention out of the workload (see retention.go):
	// the findings found before it keep their schedules.
	NoRetention bool
	// StrictDelete holds a retried first batch appended again after a
	// DeleteRecords took its first copy and the producer's state as a
	// duplicate (see checker.committedOnce).
	StrictDelete bool
	// Producers is the number of idempotent producers per partition
	// (default 2).
	Producers         int
	SessionTimeout    time.Duration // the controller's; default 3s
	ReplicaLagTimeMax time.Duration // the brokers'; default 4s
	// Wait is synctest.Wait: it returns once every other goroutine of the
	// bubble is durably blocked. Required.
	Wait   func()
	Logger zerolog.Logger
	// KeepTrace keeps every step's line in Result.Trace (the hash is
	// always computed).
	KeepTrace bool
	// TracePending adds, before each step's line in the trace (not in the
	// hash), the messages pending when the scheduler chose: where two runs
	// of one seed part, the first difference is often in what was pending,
	// a step before the choices differ.
	TracePending bool
}

func (c *Config) setDefaults() {
	if c.Brokers <= 0 {
		c.Brokers = 3
	}
	if c.Partitions <= 0 {
		c.Partitions = 3
	}
	if c.FaultTime <= 0 {
		c.FaultTime = 20 * time.Second
	}
	if c.HealTime <= 0 {
		c.HealTime = 60 * time.Second
	}
	if c.FaultRate <= 0 {
		c.FaultRate = 0.01
	}
	if c.OpRate <= 0 {
		c.OpRate = 0.005
	}
	if c.Producers <= 0 {
		c.Producers = 2
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 3 * time.Second
	}
	if c.ReplicaLagTimeMax <= 0 {
		c.ReplicaLagTimeMax = 4 * time.Second
	}
}

// Result is what a run did and found.
type Result struct {
	Seed  uint64
	Steps int
	// Hash is FNV-1a of the schedule: every step's action and virtual
	// time. Two runs of one seed that hash alike made the same choices.
	Hash uint64
	// Faults are the fault steps, in order: the schedule to shrink.
	Faults      []string
	Trace       []string
	Violations  []string
	VirtualTime time.Duration
	Produced    int
	Acked       int
	Errors      map[string]int
	// Idempotence is what the idempotent producers did (zero with Plain).
	Idempotence IdempotenceStats
	// Ops counts the operator's commands by command and outcome.
	Ops map[string]int
	// FileEvictions and FileReopens are the brokers' file caches' work
	// (files closed while idle, and reopened on use) over the lives that
	// stopped: the run exercised the cache.
	FileEvictions, FileReopens int64
}

// Failed says whether an invariant was broken (liveness included).
func (r Result) Failed() bool { return len(r.Violations) > 0 }

// Sim is one simulated cluster.
type Sim struct {
	cfg Config
	// fileEvictions and fileReopens total the brokers' file caches' work
	// over their stopped lives (Result).
	fileEvictions, fileReopens atomic.Int64
	seed                       uint64
	rng                        *rand.Rand // the scheduler's: only its goroutine draws
	net                        *network
	ctl                        *controllerNode
	brokers                    []*brokerNode
	workload                   *workload
	checker                    *checker
	op                         *operator
	// opCtx ends the operator's commands at teardown.
	opCtx    context.Context
	opCancel context.CancelFunc
	logger   zerolog.Logger

	t0     time.Time
	steps  int
	faults []string
	trace  []string
	hash   hashWriter
	// isrGates are every broker life's, in start order (see isrGate).
	isrGates []*isrGate
	// queues holds the controller's broker queues until the next step
	// (see queueGate).
	queues queueGate
	// lookups are the producers' leader lookups waiting for the next step
	// (see lookupLeader).
	lookupsMu sync.Mutex
	lookups   []leaderLookup
	// The producers (producer.go), their context and goroutines.
	producers  []*idemProducer
	prodCtx    context.Context
	producerWG sync.WaitGroup
	// truncations counts, per partition, the truncations the checker saw
	// (a replica's LEO going back, its log start moving on).
	truncMu     sync.Mutex
	truncations map[tp.TopicPartition]int64
}

// truncationCount is how many truncations of t the checker has seen.
func (s *Sim) truncationCount(t tp.TopicPartition) int64 {
	s.truncMu.Lock()
	defer s.truncMu.Unlock()
	return s.truncations[t]
}

func (s *Sim) truncated(t tp.TopicPartition) {
	s.truncMu.Lock()
	defer s.truncMu.Unlock()
	s.truncations[t]++
}

type hashWriter struct{ h uint64 }

// float64 and int64N are the product's jitter: a fixed midpoint, not a
// draw. Goroutines draw jitter in whatever order they run, so a shared
// seeded source would hand the same draws to different goroutines from one
// run to the next; the scheduler's choices already vary the timing.
func (s *Sim) float64() float64 { return 0.5 }

func (s *Sim) int64N(n int64) int64 { return n / 2 }

// Run runs one simulation. It must run inside a synctest bubble (the test
// wraps it in synctest.Test): time is virtual, and cfg.Wait is the
// bubble's Wait.
func Run(cfg Config) Result {
	cfg.setDefaults()
	s := &Sim{
		cfg: cfg, seed: cfg.Seed,
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x5e1ec7)),
		net:      newNetwork(),
		workload: newWorkload(),
		checker:  newChecker(cfg.StrictDelete),
		logger:   cfg.Logger,
		t0:       time.Now(),

		truncations: map[tp.TopicPartition]int64{},
	}
	s.hash.h = fnvOffset
	s.op = newOperator(s.net)
	s.opCtx, s.opCancel = context.WithCancel(context.Background())
	s.ctl = &controllerNode{sim: s, store: store.NewMemory()}
	for i := 1; i <= cfg.Brokers; i++ {
		s.brokers = append(s.brokers, &brokerNode{sim: s, id: int32(i), name: brokerName(int32(i)), fs: crashfs.New(), minISR: minISR})
	}
	cliCtx, cliStop := context.WithCancel(context.Background())
	s.net.serve(&endpoint{name: clientName, life: 1, ctx: cliCtx, stop: cliStop})

	res := s.run()
	res.Seed = cfg.Seed
	res.Steps = s.steps
	res.Hash = s.hash.h
	res.Faults = s.faults
	res.Trace = s.trace
	res.VirtualTime = time.Since(s.t0)
	res.Violations = append(res.Violations, s.checker.violations...)
	res.Produced, res.Acked = s.workload.count()
	res.Errors = s.workload.errors
	res.Idempotence = s.workload.idem
	res.Idempotence.ReappendedAfterDelete = s.checker.reappendedCount
	res.Ops = s.op.outcomes
	res.FileEvictions, res.FileReopens = s.fileEvictions.Load(), s.fileReopens.Load()
	return res
}

const fnvOffset = 14695981039346656037

// record adds one step's action to the schedule.
func (s *Sim) record(action string) {
	line := fmt.Sprintf("%d %s", time.Since(s.t0).Milliseconds(), action)
	h := fnv.New64a()
	var b [8]byte
	for i := range 8 {
		b[i] = byte(s.hash.h >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(line))
	s.hash.h = h.Sum64()
	if s.cfg.KeepTrace {
		s.trace = append(s.trace, line)
	}
}

func (s *Sim) run() Result {
	var res Result
	if err := s.ctl.start(); err != nil {
		res.Violations = append(res.Violations, err.Error())
		return res
	}
	s.cfg.Wait() // see restartDown
	for _, b := range s.brokers {
		if err := b.start(); err != nil {
			res.Violations = append(res.Violations, err.Error())
			return res
		}
		s.cfg.Wait()
	}
	prodCtx, stopProducers := context.WithCancel(context.Background())
	s.prodCtx = prodCtx
	defer func() {
		stopProducers()
		s.teardown(&s.producerWG)
	}()

	// Setup, without faults: the brokers register, the topic is created
	// and gets its leaders and full ISRs.
	if !s.runUntil(30*time.Second, false, s.allRegistered) {
		res.Violations = append(res.Violations, "setup: brokers did not all register within 30s")
		return res
	}
	created := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err := s.ctl.cur.ctl.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: topic,
			Partitions: int32(s.cfg.Partitions), ReplicationFactor: replicationFactor, Configs: s.topicConfigs()})
		if err == nil && resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			err = fmt.Errorf("create topic: %s %s", resp.GetErrorCode(), resp.GetErrorMessage())
		}
		created <- err
	}()
	if !s.runUntil(30*time.Second, false, func() bool { return len(created) > 0 }) {
		res.Violations = append(res.Violations, "setup: topic creation did not return within 30s")
		return res
	}
	if err := <-created; err != nil {
		res.Violations = append(res.Violations, "setup: "+err.Error())
		return res
	}
	if !s.runUntil(30*time.Second, false, s.healthy) {
		res.Violations = append(res.Violations, "setup: partitions did not get leaders and full ISRs within 30s: "+s.describe())
		return res
	}
	s.record("setup done")
	if s.cfg.Plain {
		for p := range s.cfg.Partitions {
			t := tp.TopicPartition{Topic: topic, Partition: int32(p)}
			s.producerWG.Add(1)
			go s.producePlain(prodCtx, t, rand.New(rand.NewPCG(s.seed, uint64(1000+p))), s.producerWG.Done)
		}
	} else {
		s.startProducers()
	}

	// Faults.
	s.runUntil(s.cfg.FaultTime, true, func() bool { return false })
	if len(s.checker.violations) > 0 {
		return res
	}

	// Healing: no more faults, every cut healed, every node restarted.
	for _, c := range s.net.cuts() {
		s.net.heal(c[0], c[1])
		s.record(fmt.Sprintf("heal %s-%s", c[0], c[1]))
	}
	s.ctl.faults.disarm()
	s.record("faults end")
	healStart := time.Now()
	ok := s.runUntil(s.cfg.HealTime, false, func() bool {
		s.restartDown()
		s.healOps()
		return s.healthy() && s.settled() == "" && s.logStartsFollowed() == ""
	})
	if len(s.checker.violations) > 0 {
		return res
	}
	if !ok {
		if !s.healthy() {
			// settled says, besides, whether the controller's memory fell
			// behind its store (a wedge keeps ISRs from growing back).
			res.Violations = append(res.Violations, fmt.Sprintf("liveness: %v after healing, not every partition has a leader and a full ISR (%s): %s",
				time.Since(healStart), s.settled(), s.describe()))
		} else {
			why := s.settled()
			if why == "" {
				why = s.logStartsFollowed()
			}
			res.Violations = append(res.Violations, fmt.Sprintf("liveness: %v after healing, %s: %s",
				time.Since(healStart), why, s.describe()))
		}
	}
	// A last check with everything healthy: with full ISRs, every
	// acknowledged record is on every replica.
	s.cfg.Wait()
	s.checker.check(s, s.steps)
	s.checker.finalOrder()
	return res
}

// runUntil steps until done holds (checked after each step) or d of
// virtual time passed; it reports whether done held. With faults, steps may
// inject them.
func (s *Sim) runUntil(d time.Duration, faults bool, done func() bool) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		s.step(faults)
		if len(s.checker.violations) > 0 {
			return false
		}
		// Idle again before done looks or acts: a sleep's timers may have
		// woken goroutines that run at the same instant.
		s.cfg.Wait()
		if done() {
			return true
		}
	}
	return false
}

// delays are the sleeps a step may take: virtual time passing with
// messages in flight is network latency.
var delays = []time.Duration{time.Millisecond, 5 * time.Millisecond, 20 * time.Millisecond, 100 * time.Millisecond}

// step waits until the cluster is idle, checks the invariants, and takes
// one action: deliver one pending message, let time pass, or (with
// faults) inject a fault.
func (s *Sim) step(faults bool) {
	s.cfg.Wait()
	s.releaseQueues()
	s.storeFaultsFired()
	s.growProducers()
	s.stopShutDown()
	s.flushIsr()
	s.serveLookups()
	s.releaseQueues()
	s.checker.check(s, s.steps)
	s.steps++
	pend := s.net.pending()
	if s.cfg.TracePending && s.cfg.KeepTrace {
		var ks []string
		for _, m := range pend {
			ks = append(ks, m.Key())
		}
		s.trace = append(s.trace, fmt.Sprintf("  pending %v", ks))
	}
	r := s.rng.Float64()
	switch {
	case faults && r < s.cfg.FaultRate:
		if s.cfg.MaxFaults >= 0 && len(s.faults) >= s.cfg.MaxFaults {
			s.sleep()
			return
		}
		s.fault(pend)
	case faults && !s.cfg.NoOps && r < s.cfg.FaultRate+s.cfg.OpRate:
		if s.cfg.MaxFaults >= 0 && len(s.faults) >= s.cfg.MaxFaults {
			s.sleep()
			return
		}
		s.operate()
	case len(pend) > 0 && r < 0.9:
		m := pend[s.rng.IntN(len(pend))]
		s.record("deliver " + m.Key())
		s.net.deliver(m)
	default:
		s.sleep()
	}
}

func (s *Sim) sleep() {
	d := delays[s.rng.IntN(len(delays))]
	s.record("sleep " + d.String())
	time.Sleep(d)
}

// fault injects one fault, chosen among those possible now.
func (s *Sim) fault(pend []*message) {
	type option struct {
		weight int
		what   string
		do     func()
	}
	var opts []option
	if len(pend) > 0 {
		opts = append(opts, option{4, "drop", func() {
			m := pend[s.rng.IntN(len(pend))]
			s.noteFault("drop " + m.Key())
			s.net.drop(m)
		}})
	}
	var up, down []*brokerNode
	for _, b := range s.brokers {
		if b.up() {
			up = append(up, b)
		} else if b.canStart() {
			down = append(down, b)
		}
	}
	if len(up) > 1 {
		opts = append(opts, option{1, "crash", func() {
			b := up[s.rng.IntN(len(up))]
			s.noteFault("crash " + b.name)
			b.crash(rand.New(rand.NewPCG(s.rng.Uint64(), s.rng.Uint64())))
		}})
	}
	if len(down) > 0 {
		opts = append(opts, option{3, "restart", func() {
			b := down[s.rng.IntN(len(down))]
			s.noteFault("restart " + b.name)
			if err := b.start(); err != nil {
				s.checker.fail("restart %s: %v", b.name, err)
			}
		}})
	}
	if len(up) > 1 {
		// A process that stops (killed, or stopped without a controlled
		// shutdown) with its machine up: its disk keeps every write, and
		// it comes back as a clean restart (the same boot), which keeps it
		// in the ELRs it was in.
		opts = append(opts, option{1, "stop", func() {
			b := up[s.rng.IntN(len(up))]
			s.noteFault("stop " + b.name + " (no power loss)")
			b.shutdown()
		}})
	}
	if s.ctl.up() {
		opts = append(opts, option{1, "crash controller", func() {
			s.noteFault("crash " + controllerName)
			s.ctl.crash()
		}})
	} else if s.ctl.canStart() {
		opts = append(opts, option{4, "restart controller", func() {
			s.noteFault("restart " + controllerName)
			if err := s.ctl.start(); err != nil {
				s.checker.fail("restart controller: %v", err)
			}
		}})
	}
	if s.ctl.up() && !s.cfg.NoStoreFaults && !s.ctl.faults.isArmed() {
		opts = append(opts, option{3, "store fault", func() {
			kind := storeFault(1 + s.rng.IntN(4))
			skip := []int{0, 0, 1}[s.rng.IntN(3)]
			s.noteFault(fmt.Sprintf("arm store %s (after %d writes)", kind, skip))
			s.ctl.faults.arm(kind, skip)
		}})
	}
	nodes := []string{controllerName}
	for _, b := range s.brokers {
		nodes = append(nodes, b.name)
	}
	if !s.cfg.Plain && len(s.restartableProducers()) > 0 {
		opts = append(opts, option{1, "restart producer", func() { s.restartProducer() }})
	}
	cuts := s.net.cuts()
	opts = append(opts, option{1, "partition", func() {
		a := s.rng.IntN(len(nodes))
		b := (a + 1 + s.rng.IntN(len(nodes)-1)) % len(nodes)
		s.noteFault(fmt.Sprintf("partition %s-%s", nodes[a], nodes[b]))
		s.net.partition(nodes[a], nodes[b])
	}})
	if len(cuts) > 0 {
		opts = append(opts, option{2, "heal", func() {
			c := cuts[s.rng.IntN(len(cuts))]
			s.noteFault(fmt.Sprintf("heal %s-%s", c[0], c[1]))
			s.net.heal(c[0], c[1])
		}})
	}
	total := 0
	for _, o := range opts {
		total += o.weight
	}
	pick := s.rng.IntN(total)
	for _, o := range opts {
		if pick < o.weight {
			o.do()
			return
		}
		pick -= o.weight
	}
}

func (s *Sim) noteFault(what string) {
	line := fmt.Sprintf("step %d t=%dms: %s", s.steps, time.Since(s.t0).Milliseconds(), what)
	s.faults = append(s.faults, line)
	s.record("fault " + what)
}

// restartDown restarts every node that is down and may start. Each start
// is let run until idle before the next: a start leaves goroutines running
// (the controller's Run, a broker's registration), and whether the
// controller's first UpdateMetadata to b1 finds b1 up, or fails to connect,
// must not depend on whether its goroutine runs before or after this one
// starts b1.
func (s *Sim) restartDown() {
	if s.ctl.canStart() {
		s.record("restart " + controllerName)
		if err := s.ctl.start(); err != nil {
			s.checker.fail("restart controller: %v", err)
		}
		s.cfg.Wait()
	}
	for _, b := range s.brokers {
		if b.canStart() {
			s.record("restart " + b.name)
			if err := b.start(); err != nil {
				s.checker.fail("restart %s: %v", b.name, err)
			}
			s.cfg.Wait()
		}
	}
}

func (s *Sim) allRegistered() bool {
	bs, err := s.ctl.store.Brokers(context.Background())
	if err != nil {
		return false
	}
	n := 0
	for _, b := range bs {
		if !b.Fenced && b.Epoch > 0 {
			n++
		}
	}
	return n == s.cfg.Brokers
}

// healthy: every partition has a leader that knows it leads at the
// store's epoch, and a full ISR.
func (s *Sim) healthy() bool {
	parts, err := s.ctl.store.Partitions(context.Background())
	if err != nil || len(parts) < s.cfg.Partitions {
		return false
	}
	for _, p := range parts {
		if p.Leader == store.NoLeader || len(p.ISR) != len(p.Replicas) {
			return false
		}
		b := s.brokers[p.Leader-1]
		if b.cur == nil {
			return false
		}
		part := p.Partition
		d := b.cur.rm.Describe(p.Topic, &part)
		if len(d.Partitions) != 1 || d.Partitions[0].Role != core.RoleLeader || d.Partitions[0].LeaderEpoch != p.LeaderEpoch {
			return false
		}
	}
	return true
}

// describe is the cluster's state for a failure message.
func (s *Sim) describe() string {
	parts, _ := s.ctl.store.Partitions(context.Background())
	out := ""
	for _, p := range parts {
		out += fmt.Sprintf("[%s-%d leader %d epoch %d isr %v elr %v] ", p.Topic, p.Partition, p.Leader, p.LeaderEpoch, p.ISR, p.ELR)
	}
	var down []string
	for _, b := range s.brokers {
		if !b.up() {
			down = append(down, b.name)
		}
	}
	if !s.ctl.up() {
		down = append(down, controllerName)
	}
	slices.Sort(down)
	out += fmt.Sprintf("down %v", down)
	bs, _ := s.ctl.store.Brokers(context.Background())
	for _, b := range bs {
		out += fmt.Sprintf(" [broker %d epoch %d fenced %v]", b.ID, b.Epoch, b.Fenced)
	}
	for _, b := range s.brokers {
		if b.cur == nil {
			continue
		}
		out += fmt.Sprintf(" [%s life %d epoch %d:", b.name, b.cur.life, b.cur.brokerEpoch())
		for _, in := range b.cur.rm.Describe("", nil).Partitions {
			out += fmt.Sprintf(" %s %s leader %d epoch %d isr %v hw %d leo %d;", in.TopicPartition, in.Role, in.Leader, in.LeaderEpoch, in.ISR, in.HighWatermark, in.LogEndOffset)
		}
		out += "]"
	}
	return out
}

// teardown stops everything, so that the bubble's goroutines all exit.
func (s *Sim) teardown(producers *sync.WaitGroup) {
	producers.Wait()
	s.opCancel()
	s.op.wg.Wait()
	s.ctl.crash()
	for _, b := range s.brokers {
		b.shutdown()
	}
	for _, b := range s.brokers {
		if b.stopped != nil {
			<-b.stopped
		}
	}
	if s.ctl.stopped != nil {
		<-s.ctl.stopped
	}
	s.net.down(clientName)
}

var _ = errors.New

// storeFaultsFired records the store faults that hit a write since the
// last step, and takes down a controller that died after its write landed.
func (s *Sim) storeFaultsFired() {
	fired, crash := s.ctl.faults.drain()
	for _, f := range fired {
		s.record(f)
	}
	if crash && s.ctl.cur != nil && s.ctl.cur.fence.dead.Load() {
		s.noteFault("crash " + controllerName + " (after its store write landed)")
		s.ctl.crash()
		s.cfg.Wait()
	}
}

// settled says what keeps a healed cluster from being done besides its
// leaders and ISRs ("" when nothing): the controller's memory must agree
// with its store (a controller whose copy fell behind refuses every change
// of that partition: a wedge), every reassignment must have completed or
// been cancelled, and the topic must exist.
func (s *Sim) settled() string {
	ctx := context.Background()
	parts, err := s.ctl.store.Partitions(ctx)
	if err != nil {
		return "store: " + err.Error()
	}
	if len(parts) < s.cfg.Partitions {
		return fmt.Sprintf("the topic has %d partitions in the store", len(parts))
	}
	for _, p := range parts {
		if len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
			return fmt.Sprintf("reassignment not completed: %s-%d replicas %v adding %v removing %v isr %v",
				p.Topic, p.Partition, p.Replicas, p.AddingReplicas, p.RemovingReplicas, p.ISR)
		}
	}
	if s.ctl.cur == nil {
		return "controller down"
	}
	mem, ok := s.ctl.cur.ctl.PartitionStates()
	if !ok {
		return "controller not active"
	}
	if d := diffPartitions(mem, parts); d != "" {
		return "wedge: the controller's memory disagrees with its store: " + d
	}
	if d := s.brokersAgree(); d != "" {
		return "brokers disagree with the store: " + d
	}
	return ""
}

// diffPartitions names the first partition whose state differs between the
// controller's memory and the store.
func diffPartitions(mem, stored []store.Partition) string {
	if len(mem) != len(stored) {
		return fmt.Sprintf("%d partitions in memory, %d stored", len(mem), len(stored))
	}
	norm := func(p store.Partition) string {
		return fmt.Sprintf("%s-%d id %s leader %d epoch %d pepoch %d isr %v replicas %v adding %v removing %v elr %v lkelr %v",
			p.Topic, p.Partition, p.TopicID, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR, p.Replicas,
			p.AddingReplicas, p.RemovingReplicas, p.ELR, p.LastKnownELR)
	}
	for i := range mem {
		if a, b := norm(mem[i]), norm(stored[i]); a != b {
			return fmt.Sprintf("memory [%s], store [%s]", a, b)
		}
	}
	return ""
}
