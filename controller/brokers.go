package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// errNotController answers calls while this controller is not acting.
var errNotController = errors.New("not the active controller")

// errRegistrationInProgress answers a registration of a broker whose
// previous registration still runs; the broker retries (Unavailable).
var errRegistrationInProgress = errors.New("a registration of this broker is in progress")

// registration is what a broker says of itself when it registers, besides
// its endpoint.
type registration struct {
	incarnation string
	// previousEpoch is the broker epoch of its last registration when that
	// life ended with nothing lost (a clean shutdown, or a process crash on
	// a machine that kept running, which keeps the page cache), -1
	// otherwise (KIP-966's PreviousBrokerEpoch).
	previousEpoch int64
	// offline are the replicas the broker says are offline as it registers
	// (a log dir that failed in this process's life).
	offline []*replicadv1.PartitionRef
}

// registerBroker gives a (re)starting broker a new broker epoch. A broker
// that registers while its previous incarnation is still unfenced is fenced
// first: the new process may have lost what the old one had not flushed, so
// it may not keep leading on the old one's word. A broker whose previous
// epoch is not its last registration's came back from an unclean shutdown
// and leaves every ELR (KIP-966): it may lack records it acknowledged. It
// then gets the full state of its partitions, and leads again where it may
// (a leaderless partition it is in the ELR of).
//
// A registration that repeats the incarnation id of the live registration
// is a retry whose answer was lost: it gets the same epoch, and nothing is
// fenced (Kafka treats a repeated incarnation id the same way).
func (c *Controller) registerBroker(ctx context.Context, b store.Broker, reg registration) (store.Broker, int32, error) {
	incarnation := reg.incarnation
	ctx, span := c.tracer.Start(ctx, "Controller.registerBroker", trace.WithAttributes(attribute.Int("replicad.broker", int(b.ID))))
	defer span.End()
	c.lock()
	defer c.unlock()
	if !c.active {
		return store.Broker{}, 0, errNotController
	}
	// A registration may release the lock between its writes (moving the
	// old incarnation's partitions away, telling the new one its state):
	// one registration of a broker at a time.
	if c.registering[b.ID] {
		return store.Broker{}, 0, errRegistrationInProgress
	}
	if c.registering == nil {
		c.registering = make(map[int32]bool)
	}
	c.registering[b.ID] = true
	defer delete(c.registering, b.ID) // before the unlock: defers run last first
	if old, ok := c.brokers[b.ID]; ok && !old.info.Fenced && incarnation != "" && old.incarnation == incarnation &&
		old.info.Host == b.Host && old.info.Port == b.Port {
		old.lastSeen = c.cfg.Clock.Now()
		c.log.Info().Int32("broker", b.ID).Int64("broker_epoch", old.info.Epoch).Msg("broker registration retried; same incarnation")
		if old.welcomePending {
			// The first attempt stored the registration but failed after
			// (an election write): finish it now, or the broker never
			// hears its partitions' state.
			if err := c.welcomeLocked(ctx, old); err != nil {
				return store.Broker{}, 0, err
			}
		}
		return old.info, c.epoch, nil
	}
	if old, ok := c.brokers[b.ID]; ok {
		if silent, dup := c.duplicateRegistrationLocked(old, b, reg); dup {
			span.SetAttributes(attribute.String("replicad.error_code", "DUPLICATE_BROKER_REGISTRATION"))
			span.SetStatus(codes.Error, "DUPLICATE_BROKER_REGISTRATION")
			c.log.Warn().Int32("broker", b.ID).Str("incarnation", incarnation).Str("live_incarnation", old.incarnation).
				Int64("live_broker_epoch", old.info.Epoch).Str("live_endpoint", endpoint(old.info.Host, old.info.Port)).
				Str("endpoint", endpoint(b.Host, b.Port)).Int64("previous_broker_epoch", reg.previousEpoch).Dur("silent_ms", silent).
				Msg("broker registration refused (DUPLICATE_BROKER_REGISTRATION): the id is registered by another incarnation that is alive")
			return store.Broker{}, 0, errDuplicateRegistration
		}
	}
	if old, ok := c.brokers[b.ID]; ok && !old.info.Fenced {
		if err := c.fenceLocked(ctx, []*brokerState{old}, "registered again (new incarnation)", true); err != nil {
			return store.Broker{}, 0, err
		}
	} else if ok && old.movePending {
		// Fenced, but its partitions not all moved yet (a failed write, or
		// a session check's move between two of its writes): they move
		// now, or the new incarnation would be told it leads them on the
		// old one's word.
		if err := c.moveAwayFromLocked(ctx, []int32{b.ID}, "registered again while its move was pending", true); err != nil {
			return store.Broker{}, 0, err
		}
	}
	if old, ok := c.brokers[b.ID]; ok && reg.previousEpoch != old.info.Epoch {
		span.SetAttributes(attribute.Bool("replicad.unclean_shutdown", true))
		if err := c.uncleanShutdownLocked(ctx, b.ID, old.info.Epoch, reg.previousEpoch); err != nil {
			return store.Broker{}, 0, err
		}
	}
	// A lower --min-insync-replicas than its last registration's lowers
	// the min ISR of the partitions without a topic override: their stale
	// ELR is cleared first, in a write of its own (a registration and
	// partitions are two writes); the broker cannot lead, so apply its
	// flag, before it is registered. Activation repairs a crash between.
	if err := c.clearStaleElrLocked(ctx, fmt.Sprintf("broker %d registers with --min-insync-replicas %d", b.ID, b.MinInsyncReplicas),
		c.staleElrUpdatesLocked("", c.registrationMinIsrLocked(b))); err != nil {
		return store.Broker{}, 0, err
	}
	sctx, cancel := c.storeCtx(ctx)
	info, err := c.cfg.Store.RegisterBroker(sctx, b)
	cancel()
	if err != nil {
		return store.Broker{}, 0, c.writeFailedLocked(ctx, "broker registration not stored", fmt.Errorf("register broker %d: %w", b.ID, err))
	}
	bs := c.brokers[b.ID]
	if bs == nil {
		bs = &brokerState{}
		c.brokers[b.ID] = bs
	}
	bs.info, bs.lastSeen, bs.shuttingDown, bs.shutDown, bs.incarnation, bs.movePending = info, c.cfg.Clock.Now(), false, false, incarnation, false
	// A new life: its heartbeats say again what is offline, and so does the
	// registration itself, before any election below can pick a replica in
	// a log dir that failed (issue 19, path 9).
	bs.offline, bs.storageErrors = nil, nil
	bs.refusing.Store(false)
	c.openQueueLocked(bs)
	if len(reg.offline) > 0 {
		// After the queue: what moves away from them is announced to the
		// new incarnation too.
		c.setOfflineLocked(ctx, bs, reg.offline)
	}
	c.log.Info().Int32("broker", info.ID).Int64("broker_epoch", info.Epoch).Str("host", info.Host).Int32("port", info.Port).
		Msg("broker registered")
	span.SetAttributes(attribute.Int64("replicad.broker_epoch", info.Epoch))
	bs.welcomePending = true
	if err := c.welcomeLocked(ctx, bs); err != nil {
		return store.Broker{}, 0, err
	}
	return info, c.epoch, nil
}

// welcomeLocked finishes the registration of bs: it leads the leaderless
// partitions it may, and it and every other broker are told the state.
// Until it succeeds, bs.welcomePending makes the broker's retry of the
// same registration run it again.
func (c *Controller) welcomeLocked(ctx context.Context, bs *brokerState) error {
	info := bs.info
	// Partitions left leaderless that this broker can now lead (it is in
	// their ELR, or their last resort).
	var updates []store.PartitionUpdate
	for p := range c.allPartitionsLocked() {
		if p.Leader != store.NoLeader || !slices.Contains(p.Replicas, info.ID) {
			continue
		}
		if next, ok := c.electLeaderlessLocked(ctx, p); ok {
			updates = append(updates, update(p, next))
		}
	}
	if _, err := c.commitLocked(ctx, updates, nil); err != nil {
		return err
	}
	// What it still holds of deleted topics goes first: a log of a topic
	// deleted while it was away must not serve a topic created since.
	c.sendPendingDeletionsLocked(ctx, bs)
	epoch := c.epoch
	c.sendFullStatesLocked(ctx, []*brokerState{bs}, true)
	if !c.active || c.epoch != epoch {
		// This term ended while the lock was released: the next one
		// tells the broker its state.
		return errNotController
	}
	// Everyone else learns the new endpoint.
	live := c.liveBrokersLocked()
	for id, other := range c.brokers {
		if id != info.ID && other.reachable() {
			other.queue.UpdateMetadataContext(ctx, live, nil)
		}
	}
	bs.welcomePending = false
	return nil
}

// electLeaderlessLocked elects a leader for a leaderless partition: clean
// if an ISR or ELR member is eligible; else, when nobody is left in either,
// the most caught-up eligible member of the last known ELR (KIP-966's
// balanced recovery); else unclean when allowed.
func (c *Controller) electLeaderlessLocked(ctx context.Context, p store.Partition) (store.Partition, bool) {
	eligible := c.eligibleForLocked(keyOf(p))
	var next store.Partition
	if leader := cleanLeader(p, eligible); leader != store.NoLeader {
		next = withLeader(p, leader)
	} else if last := lastResortCandidates(p, eligible); len(last) > 0 {
		leader := mostCaughtUp(last, c.logEndOffsetsLocked(ctx, last, p))
		c.log.Warn().Str("topic", p.Topic).Int32("partition", p.Partition).Int32("leader", leader).Ints32("last_known_elr", p.LastKnownELR).
			Msg("no replica is known to hold every committed record (the last ones came back from unclean shutdowns): the most caught-up of them leads")
		trace.SpanFromContext(ctx).AddEvent("last known ELR election", trace.WithAttributes(
			attribute.String("replicad.topic", p.Topic), attribute.Int("replicad.partition", int(p.Partition)),
			attribute.Int("replicad.leader", int(leader))))
		next = withUncleanLeader(p, leader)
	} else if c.cfg.UncleanLeaderElection {
		leader := c.uncleanLeaderLocked(ctx, p)
		if leader == store.NoLeader {
			return p, false
		}
		next = withUncleanLeader(p, leader)
	} else {
		return p, false
	}
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, true
}

// uncleanShutdownLocked takes broker id out of every ELR: it registered
// with previousEpoch, not the epoch of its last registration, so its last
// life ended uncleanly (a power loss, a kernel crash, a wiped or replaced
// disk) and it may have lost records it had acknowledged. It may still lead
// as a last resort when nobody else is left (withoutElr).
func (c *Controller) uncleanShutdownLocked(ctx context.Context, id int32, lastEpoch, previousEpoch int64) error {
	var updates []store.PartitionUpdate
	for p := range c.allPartitionsLocked() {
		next := withoutElr(p, id)
		if slices.Equal(next.ELR, p.ELR) {
			continue
		}
		next.PartitionEpoch++
		updates = append(updates, update(p, next))
	}
	c.log.Warn().Int32("broker", id).Int64("previous_broker_epoch", previousEpoch).Int64("last_broker_epoch", lastEpoch).
		Int("partitions", len(updates)).Msg("broker comes back from an unclean shutdown: it leaves every ELR")
	_, err := c.commitLocked(ctx, updates, nil)
	return err
}

// uncleanLeaderLocked asks the eligible replicas of p for their log end
// offsets and returns the most caught-up one. Records only the old ISR had
// are lost, which is why this is off by default and logged at error.
func (c *Controller) uncleanLeaderLocked(ctx context.Context, p store.Partition) int32 {
	candidates := uncleanCandidates(p, c.eligibleForLocked(keyOf(p)))
	if len(candidates) == 0 {
		return store.NoLeader
	}
	leo := c.logEndOffsetsLocked(ctx, candidates, p)
	leader := mostCaughtUp(candidates, leo)
	c.log.Error().Str("topic", p.Topic).Int32("partition", p.Partition).Int32("leader", leader).
		Ints32("old_isr", p.ISR).Interface("log_end_offsets", leo).
		Msg("UNCLEAN leader election: no ISR member is alive; records only the old ISR had are lost")
	trace.SpanFromContext(ctx).AddEvent("unclean leader election", trace.WithAttributes(
		attribute.String("replicad.topic", p.Topic), attribute.Int("replicad.partition", int(p.Partition)),
		attribute.Int("replicad.leader", int(leader))))
	return leader
}

// leoQueryTimeout bounds the log end offset queries of an unclean election:
// they run under the controller lock, so a sick broker must not hold up
// heartbeats for long.
const leoQueryTimeout = 500 * time.Millisecond

// logEndOffsetsLocked asks the candidates, in parallel, for their log end
// offset of p; a candidate that does not answer in time is left out.
func (c *Controller) logEndOffsetsLocked(ctx context.Context, candidates []int32, p store.Partition) map[int32]int64 {
	ctx, cancel := context.WithTimeout(ctx, leoQueryTimeout)
	defer cancel()
	type answer struct {
		id  int32
		leo int64
		ok  bool
	}
	answers := make(chan answer, len(candidates))
	for _, id := range candidates {
		bs := c.brokers[id]
		if bs == nil || bs.client == nil {
			answers <- answer{id: id}
			continue
		}
		go func(client replicadv1.ReplicaManagerServiceClient) {
			part := p.Partition
			resp, err := client.DescribePartitions(ctx, &replicadv1.DescribePartitionsRequest{Topic: p.Topic, Partition: &part})
			if err != nil {
				c.log.Warn().Err(err).Int32("broker", id).Msg("log end offset for unclean election")
				answers <- answer{id: id}
				return
			}
			for _, d := range resp.GetPartitions() {
				if d.GetTopic() == p.Topic && d.GetPartition() == p.Partition {
					answers <- answer{id: id, leo: d.GetLogEndOffset(), ok: true}
					return
				}
			}
			answers <- answer{id: id}
		}(bs.client)
	}
	leo := make(map[int32]int64, len(candidates))
	for range candidates {
		if a := <-answers; a.ok {
			leo[a.id] = a.leo
		}
	}
	return leo
}

// heartbeat keeps a broker's session alive and returns this controller's
// epoch, which the broker takes control requests at. A broker that is
// unknown or shows another epoch gets STALE_BROKER_EPOCH, a fenced one is
// told so: both register again.
//
// A heartbeat with wantShutdown marks the broker as stopping (as a
// ControlledShutdown does), so it is not elected while it goes.
func (c *Controller) heartbeat(ctx context.Context, id int32, epoch int64, wantShutdown bool, offline []*replicadv1.PartitionRef) (replicadv1.ErrorCode, bool, int32, error) {
	// The arrival time, read before the lock: a heartbeat that waited behind
	// a long decision (a 10,000-partition failover) still proves the broker
	// alive when it arrived.
	arrived := c.cfg.Clock.Now()
	// A heartbeat that changes no state is answered without the lock
	// (liveness.go): it never waits behind a decision.
	if code, fenced, epoch, ok := c.fastHeartbeat(arrived, id, epoch, wantShutdown, offline); ok {
		return code, fenced, epoch, nil
	}
	c.lock()
	defer c.unlock()
	if !c.active {
		return 0, false, 0, errNotController
	}
	bs, ok := c.brokers[id]
	if !ok || bs.info.Epoch != epoch {
		return replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, false, c.epoch, nil
	}
	if bs.info.Fenced {
		return replicadv1.ErrorCode_ERROR_CODE_NONE, true, c.epoch, nil
	}
	if arrived.After(bs.lastSeen) {
		bs.lastSeen = arrived
	}
	bs.shuttingDown = bs.shuttingDown || wantShutdown
	if len(offline) > 0 || len(bs.offline) > 0 {
		c.setOfflineLocked(ctx, bs, offline)
	}
	return replicadv1.ErrorCode_ERROR_CODE_NONE, false, c.epoch, nil
}

// expireSessions fences every broker silent for longer than the session
// timeout. Brokers that went silent together are fenced together, so none
// of them is elected only to be fenced a moment later. It also retries the
// partition moves of brokers fenced earlier whose move failed.
func (c *Controller) expireSessions(ctx context.Context) {
	waitStart := time.Now()
	c.lock()
	defer c.unlock()
	if !c.active {
		return
	}
	if waited := time.Since(waitStart); waited > c.sessionCheckInterval() {
		// A long decision held the lock: heartbeats are queued behind it
		// too, and judging sessions before they land would fence live
		// brokers. The next check sees them.
		c.log.Debug().Dur("waited_ms", waited).Msg("session check deferred: the controller was busy")
		return
	}
	// Read under the lock, next to the session clock, so a pause cannot
	// fall between the two readings unnoticed.
	if pause := c.pausedLocked(); pause > 0 {
		c.forgivePauseLocked(ctx, pause)
		return // the brokers' queued heartbeats land before the next check
	}
	now := c.cfg.Clock.Now()
	if now.Before(c.moveRetryAt) {
		// A fencing or move failed (the store is failing): the next try
		// waits out a backoff instead of failing, and tracing, every check.
		return
	}
	var expired []*brokerState
	var silentFor []time.Duration
	for _, id := range c.sortedBrokerIDsLocked() {
		bs := c.brokers[id]
		if !bs.info.Fenced && now.Sub(bs.seen()) > c.cfg.SessionTimeout {
			expired = append(expired, bs)
			silentFor = append(silentFor, now.Sub(bs.seen()).Round(time.Millisecond))
		}
	}
	if len(expired) > 0 {
		reason := fmt.Sprintf("session expired: silent for %v", silentFor)
		if err := c.fenceLocked(ctx, expired, reason, true); err != nil {
			c.log.Error().Err(err).Msg("fence brokers")
			c.moveFailedLocked(c.cfg.Clock.Now())
		} else {
			c.moveFailures = 0
		}
		return // what failed is retried by a later check, after a backoff
	}
	var pending []int32
	for _, id := range c.sortedBrokerIDsLocked() {
		if bs := c.brokers[id]; bs.info.Fenced && bs.movePending && !bs.moveRunning {
			pending = append(pending, id)
		}
	}
	if len(pending) > 0 {
		c.retryMoveAwayLocked(ctx, now, pending)
	}
}

// maxMoveRetryBackoff bounds the wait between retries of a failed move.
const maxMoveRetryBackoff = 5 * time.Second

// moveFailedLocked schedules the next retry of a failed move: one session
// check interval after the first failure, doubling to maxMoveRetryBackoff.
func (c *Controller) moveFailedLocked(now time.Time) {
	c.moveFailures++
	backoff := min(c.sessionCheckInterval()<<min(c.moveFailures-1, 10), maxMoveRetryBackoff)
	c.moveRetryAt = now.Add(backoff)
}

// retryMoveAwayLocked moves partitions away from brokers fenced earlier whose
// move failed (the store write did not go through). It is a root trace of
// its own, like the fencing it completes, so the brokers it tells join it.
func (c *Controller) retryMoveAwayLocked(ctx context.Context, now time.Time, ids []int32) {
	const reason = "retrying the move away from fenced brokers"
	ctx, span := c.tracer.Start(ctx, "Controller.retryMoveAway", trace.WithAttributes(
		attribute.IntSlice("replicad.brokers", toInts(ids)), attribute.String("replicad.reason", reason),
		attribute.Int("replicad.attempt", c.moveFailures+1)))
	defer span.End()
	if err := c.moveAwayFromLocked(ctx, ids, reason, true); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "move failed")
		c.log.Error().Err(err).Ints32("brokers", ids).Int("failures", c.moveFailures+1).Msg("move partitions away from fenced brokers")
		c.moveFailedLocked(c.cfg.Clock.Now())
		return
	}
	c.moveFailures, c.moveRetryAt = 0, time.Time{}
}

// pausedLocked returns how long this process stood still since the last
// session check (0: it did not), and notes this check's time.
//
// The gap is read from the process clock (Config.processClock, the real
// clock outside tests) at each check, never from a ticker's value: since
// Go 1.23 a ticker that fires late delivers the time it was due, so the
// first tick after a SIGSTOP carries a time one interval after the last
// and the pause went unseen. The check then fenced every broker at once
// for the controller's own absence (issue 19 path 11: make chaos's
// pause-controller fault, "brokers [1,2,3] fenced in one decision").
func (c *Controller) pausedLocked() time.Duration {
	now := c.process.Now()
	last := c.lastCheck
	c.lastCheck = now
	if gap := now.Sub(last); !last.IsZero() && gap > pauseThreshold(c.cfg.SessionTimeout, c.sessionCheckInterval()) {
		return gap
	}
	return 0
}

// forgivePauseLocked forgives every live broker the controller's own
// pause: the process stood still (a stopped process, a stalled VM, a long
// GC pause) and heard no heartbeat, though the brokers kept sending them
// (they wait in its sockets). Each live broker's last heartbeat moves
// forward by the pause (to at most now), as for a long lock hold
// (deafness.go), so silence counts only over time the controller could
// hear: a broker that died before or during the pause is still fenced, one
// session timeout of hearing time after its last heartbeat, and the others
// are not all fenced at once for the controller's absence (etcd extends
// every lease on a leader change for the same reason).
func (c *Controller) forgivePauseLocked(ctx context.Context, pause time.Duration) {
	_, span := c.tracer.Start(ctx, "Controller.extendSessions", trace.WithAttributes(
		attribute.Int64("replicad.pause_ms", pause.Milliseconds())))
	defer span.End()
	c.counters.pauses.Add(1)
	c.log.Warn().Dur("pause_ms", pause).Msg("the controller was paused; broker sessions extended by the pause")
	c.forgiveDeafnessLocked(c.cfg.Clock.Now(), pause)
}

// fenceLocked fences broker incarnations and moves their partitions away.
// Each broker is marked fenced in the store first (so it is neither elected
// nor let back into an ISR), then every partition move is one transaction.
// A failed move is retried at the next session check.
//
// With yield, the move releases the lock between its store writes
// (moveAwayFromLocked). A registration's fencing yields too: the registering
// map keeps a second registration of the id out meanwhile, and what it
// decides after the move it reads again.
func (c *Controller) fenceLocked(ctx context.Context, brokers []*brokerState, reason string, yield bool) error {
	ids := make([]int32, len(brokers))
	for i, bs := range brokers {
		ids[i] = bs.info.ID
	}
	ctx, span := c.tracer.Start(ctx, "Controller.fenceBrokers", trace.WithAttributes(
		attribute.IntSlice("replicad.brokers", toInts(ids)), attribute.String("replicad.reason", reason)))
	defer span.End()
	// One line per decision, however many brokers it fences (the chaos
	// checker counts them: a decision fencing more than one broker in the
	// default mix is a controller that blamed its brokers for its own
	// pause or deafness).
	c.log.Warn().Ints32("brokers", ids).Str("reason", reason).Msg("fencing brokers")
	for _, bs := range brokers {
		fenced := bs.info
		fenced.Fenced = true
		sctx, cancel := c.storeCtx(ctx)
		err := c.cfg.Store.UpdateBroker(sctx, fenced)
		cancel()
		if err != nil {
			// A fencing that landed unanswered is found by the re-read,
			// which marks it in memory: the move goes on. One that did
			// not is retried by the next session check.
			err = c.writeFailedLocked(ctx, "broker fencing not stored", fmt.Errorf("fence broker %d: %w", fenced.ID, err))
			span.RecordError(err)
			if bs.info.Fenced && bs.info.Epoch == fenced.Epoch {
				continue
			}
			span.SetStatus(codes.Error, "fencing not stored")
			return err
		}
		bs.info = fenced
		bs.shuttingDown, bs.shutDown = false, false
		bs.movePending = true
		c.closeQueueLocked(bs)
		c.log.Warn().Int32("broker", fenced.ID).Int64("broker_epoch", fenced.Epoch).Str("reason", reason).Msg("broker fenced")
	}
	if err := c.moveAwayFromLocked(ctx, ids, reason, yield); err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "move failed; retried at the next session check")
		return err
	}
	return nil
}

// moveAwayFromLocked elects new leaders for the partitions the brokers led
// and drops them from the ISRs they were in, then tells the brokers. Leader
// epoch and partition epoch rise once per partition, however many of the
// brokers it loses.
//
// The partitions go in store writes of at most Config.DecisionBatch each
// (writeBatches), every one a valid state on its own: a partition is moved
// or not. With yield, the lock is released between two writes, so that no
// hold lasts the whole move (issue 20: 10,000 leaderships are moved in
// about ten writes, each a few milliseconds); the callers that may yield
// are those that hold nothing else across the call. Between writes the
// store holds the brokers fenced and part of their partitions moved: a
// controller that takes over then moves the rest at activation, as it
// does after any crash between a fencing and its move; a failed write
// leaves movePending set and the session check retries the rest.
func (c *Controller) moveAwayFromLocked(ctx context.Context, ids []int32, reason string, yield bool) error {
	// A copy: the batches narrow ids in place (slices.DeleteFunc zeroes
	// the tail), and the caller logs its own slice afterwards.
	ids = slices.Clone(ids)
	epochs := make(map[int32]int64, len(ids))
	for _, id := range ids {
		if bs := c.brokers[id]; bs != nil {
			epochs[id] = bs.info.Epoch
			if yield && !bs.moveRunning {
				bs.moveRunning = true
				defer func() { bs.moveRunning = false }() // under the lock: the caller holds it again
			}
		}
	}
	changed, leaderless := 0, 0
	_, err := c.writeBatchesLocked(ctx, c.leadershipsFirstLocked(c.keysOfReplicasLocked(ids), ids), yield, func() bool {
		// Only the incarnations this move began for: one that registered
		// again meanwhile moved what remained of it itself (registerBroker).
		ids = slices.DeleteFunc(ids, func(id int32) bool {
			bs := c.brokers[id]
			return bs == nil || !bs.info.Fenced || bs.info.Epoch != epochs[id]
		})
		return len(ids) > 0
	}, func(p store.Partition) (store.Partition, bool) {
		next, ok := c.moveAwayOneLocked(ctx, p, ids)
		if ok {
			changed++
			if next.Leader == store.NoLeader {
				leaderless++
			}
		}
		return next, ok
	})
	if err != nil {
		return err
	}
	for _, id := range ids {
		if bs := c.brokers[id]; bs != nil {
			bs.movePending = false
		}
	}
	trace.SpanFromContext(ctx).SetAttributes(attribute.Int("replicad.partitions_changed", changed),
		attribute.Int("replicad.partitions_leaderless", leaderless))
	if changed > 0 {
		c.log.Info().Ints32("brokers", ids).Int("partitions", changed).Int("leaderless", leaderless).Str("reason", reason).
			Msg("moved leadership and ISR membership away from brokers")
	}
	return nil
}

// moveAwayOneLocked is p with the brokers ids out of its leadership, ISR and
// ELR, and whether that changed anything.
func (c *Controller) moveAwayOneLocked(ctx context.Context, p store.Partition, ids []int32) (store.Partition, bool) {
	next, changed := p, false
	eligible, minIsr := c.eligibleForLocked(keyOf(p)), c.minIsrLocked(p)
	for _, id := range ids {
		n, ch := moveAway(next, id, eligible, minIsr)
		if ch {
			next, changed = n, true
		}
	}
	if !changed {
		return p, false
	}
	next.LeaderEpoch, next.PartitionEpoch = p.LeaderEpoch+1, p.PartitionEpoch+1
	if slices.Contains(ids, p.Leader) && next.Leader == store.NoLeader && c.cfg.UncleanLeaderElection {
		if l := c.uncleanLeaderLocked(ctx, next); l != store.NoLeader {
			next = withUncleanLeader(next, l)
		}
	}
	if next.Leader == store.NoLeader {
		c.log.Warn().Str("topic", p.Topic).Int32("partition", p.Partition).Ints32("isr", next.ISR).Ints32("elr", next.ELR).
			Msg("partition is leaderless: no live ISR or ELR member (unclean leader election is off)")
	}
	return next, true
}

func toInts(ids []int32) []int {
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// controlledShutdown moves a stopping broker's leaderships to other ISR
// members and drops it from the ISRs it follows in (Kafka's controlled
// shutdown), waits until the brokers were told, and returns the partitions
// it still leads (those with no other eligible ISR member).
func (c *Controller) controlledShutdown(ctx context.Context, id int32, epoch int64) (replicadv1.ErrorCode, []store.Partition, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.controlledShutdown", trace.WithAttributes(attribute.Int("replicad.broker", int(id))))
	defer span.End()
	c.lock()
	if !c.active {
		c.unlock()
		return 0, nil, errNotController
	}
	bs, ok := c.brokers[id]
	if !ok || bs.info.Epoch != epoch || bs.info.Fenced {
		c.unlock()
		return replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, nil, nil
	}
	if !bs.shuttingDown {
		c.log.Info().Int32("broker", id).Msg("controlled shutdown requested")
	}
	bs.shuttingDown = true
	// In batches, the lock released between two (batches.go): a broker
	// leading 10,000 partitions moves them in about ten writes, and
	// nothing waits behind all of them at once. Between two batches the
	// store holds part of them moved; if this controller stops then, the
	// broker asks the next one again.
	moved := 0
	touched, err := c.writeBatchesLocked(ctx, c.leadershipsFirstLocked(c.keysOfReplicasLocked([]int32{id}), []int32{id}), true, func() bool {
		cur := c.brokers[id]
		return cur == bs && bs.info.Epoch == epoch && !bs.info.Fenced
	}, func(p store.Partition) (store.Partition, bool) {
		next, changed := moveAway(p, id, c.eligibleForLocked(keyOf(p)), c.minIsrLocked(p))
		// A leadership nobody else can take stays: the broker keeps
		// serving it until it stops, rather than leaving it leaderless now.
		if !changed || (p.Leader == id && next.Leader == store.NoLeader) {
			return p, false
		}
		moved++
		return next, true
	})
	if errors.Is(err, errNotController) {
		c.unlock()
		return 0, nil, err
	}
	if cur := c.brokers[id]; err == nil && (cur != bs || bs.info.Epoch != epoch || bs.info.Fenced) {
		// Fenced or registered again between two batches: this shutdown's
		// incarnation is over.
		c.unlock()
		return replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, nil, nil
	}
	// Remaining: what it still leads although another live ISR member could
	// take over (the move failed; the broker asks again). A partition with
	// no other live ISR member cannot move at all, and waiting for it would
	// only hold the shutdown to its timeout, so it is not reported (as
	// KRaft lets such a shutdown finish).
	var remaining []store.Partition
	for _, k := range c.keysOfReplicasLocked([]int32{id}) {
		p := c.parts[k]
		eligible := c.eligibleForLocked(k)
		others := func(r int32) bool { return r != id && eligible(r) }
		if p.Leader == id && cleanLeader(p, others) != store.NoLeader {
			remaining = append(remaining, p)
		}
	}
	if err == nil && len(remaining) == 0 && !bs.shutDown {
		// Done: the broker stops now. Shown not alive from here on, not
		// only once its session expires.
		bs.shutDown = true
		span.AddEvent("controlled shutdown complete", trace.WithAttributes(attribute.Int64("replicad.broker_epoch", epoch)))
		c.log.Info().Int32("broker", id).Int64("broker_epoch", epoch).Msg("controlled shutdown complete: broker shown not alive until it registers again")
	}
	c.unlock()
	if err != nil {
		return 0, nil, err
	}
	c.waitDelivered(ctx, touched)
	span.SetAttributes(attribute.Int("replicad.partitions_moved", moved), attribute.Int("replicad.partitions_remaining", len(remaining)))
	return replicadv1.ErrorCode_ERROR_CODE_NONE, remaining, nil
}
