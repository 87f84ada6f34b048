package controller

import (
	"sync/atomic"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Heartbeats never wait behind a decision (issue 20, section 4). A decision
// over tens of thousands of partitions holds c.mu for as long as it takes;
// a heartbeat that queued behind it would reach the broker late, and with a
// short session timeout a healthy broker could be fenced for the
// controller's own slowness. Kafka's KRaft controller keeps heartbeats
// cheap the same way: BrokerHeartbeatManager notes each heartbeat's time
// apart from the decisions of the event loop (updateBrokerContact), and the
// session check asks it which brokers are silent.
//
// So a plain heartbeat (no shutdown request, no offline replicas to report
// or clear) is answered from livenessView, an immutable snapshot of what it
// needs (the controller epoch, each broker's epoch and fencing), published
// with an atomic pointer whenever c.mu is released, and records its arrival
// in its incarnation's liveness with an atomic store. It never takes c.mu.
// The session check (expireSessions) takes the later of the two records, so
// a broker whose heartbeat arrived while a decision ran is alive. Only a
// heartbeat that changes state (a shutdown request, offline replicas) takes
// the lock.
//
// A heartbeat answered from a snapshot published just before a fencing
// reads as if it had been handled just before that fencing: the broker
// learns of it at its next heartbeat, as it would have then.

// liveness is one broker incarnation's heartbeat record.
type liveness struct {
	epoch int64
	// heardAt is when its latest heartbeat arrived (Config.Clock, in Unix
	// nanoseconds; 0: none yet).
	heardAt atomic.Int64
}

// heard records a heartbeat that arrived at t; a late one never moves it
// back.
func (l *liveness) heard(t time.Time) {
	n := t.UnixNano()
	for {
		cur := l.heardAt.Load()
		if n <= cur || l.heardAt.CompareAndSwap(cur, n) {
			return
		}
	}
}

// livenessView is what a heartbeat needs to be answered without c.mu.
type livenessView struct {
	active  bool
	epoch   int32
	brokers map[int32]livenessEntry
}

type livenessEntry struct {
	live   *liveness
	fenced bool
	// locked: the broker has offline replicas, whose clearing a heartbeat
	// decides under the lock (setOfflineLocked).
	locked bool
	// shuttingDown: a heartbeat with want_shutdown changes nothing more.
	shuttingDown bool
}

// seen is when the controller last heard from bs: its last heartbeat,
// whether or not the decision loop has handled it yet.
func (bs *brokerState) seen() time.Time {
	if bs.live != nil && bs.live.epoch == bs.info.Epoch {
		if n := bs.live.heardAt.Load(); n != 0 {
			if t := time.Unix(0, n); t.After(bs.lastSeen) {
				return t
			}
		}
	}
	return bs.lastSeen
}

// publishLivenessLocked gives every broker incarnation its liveness record
// and publishes a new livenessView when the state it holds changed. It runs
// at every release of c.mu, in O(brokers) and without allocating when
// nothing changed.
func (c *Controller) publishLivenessLocked() {
	cur := c.liveView.Load()
	same := cur != nil && cur.active == c.active && cur.epoch == c.epoch && len(cur.brokers) == len(c.brokers)
	for id, bs := range c.brokers {
		if bs.live == nil || bs.live.epoch != bs.info.Epoch {
			// A new incarnation starts with the controller's word for
			// it (lastSeen), not with its predecessor's heartbeats.
			bs.live = &liveness{epoch: bs.info.Epoch}
			same = false
		}
		if !same {
			continue
		}
		e, ok := cur.brokers[id]
		same = ok && e.live == bs.live && e.fenced == bs.info.Fenced && e.locked == (len(bs.offline) > 0) &&
			e.shuttingDown == bs.shuttingDown
	}
	if same {
		return
	}
	v := &livenessView{active: c.active, epoch: c.epoch, brokers: make(map[int32]livenessEntry, len(c.brokers))}
	for id, bs := range c.brokers {
		v.brokers[id] = livenessEntry{live: bs.live, fenced: bs.info.Fenced, locked: len(bs.offline) > 0, shuttingDown: bs.shuttingDown}
	}
	c.liveView.Store(v)
}

// fastHeartbeat answers a heartbeat that changes no state from the
// published view, without c.mu. ok is false when the heartbeat must take
// the lock (it may change state, or the view cannot tell).
func (c *Controller) fastHeartbeat(arrived time.Time, id int32, epoch int64, wantShutdown bool, offline []*replicadv1.PartitionRef) (code replicadv1.ErrorCode, fenced bool, ctlEpoch int32, ok bool) {
	v := c.liveView.Load()
	if v == nil || !v.active || len(offline) > 0 {
		return 0, false, 0, false
	}
	e, known := v.brokers[id]
	if !known || e.live.epoch != epoch {
		return replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, false, v.epoch, true
	}
	if e.fenced {
		return replicadv1.ErrorCode_ERROR_CODE_NONE, true, v.epoch, true
	}
	if e.locked || (wantShutdown && !e.shuttingDown) {
		return 0, false, 0, false
	}
	e.live.heard(arrived)
	return replicadv1.ErrorCode_ERROR_CODE_NONE, false, v.epoch, true
}
