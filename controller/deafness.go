package controller

import "time"

// While one decision holds c.mu, the controller cannot hear heartbeats:
// they wait for the lock, and a broker sends its next one only after the
// answer to the last. A decision stalled on the store (an etcd write while
// etcd elects a new leader takes seconds) would otherwise make every
// broker look silent, and the session check right after it would fence
// live brokers for the controller's own deafness. The chaos test found it:
// a fencing write that took 4 s under an etcd partition, then the next
// check fenced the two healthy brokers, leaving a partition leaderless.
//
// So lock and unlock measure each hold: a hold longer than a session check
// interval shifts every live broker's last heartbeat forward by the hold
// (capped at now), so silence counts only over time the controller could
// hear. A broker that is really gone is fenced that much later.

// lock takes c.mu and notes when, by the session clock (Config.Clock, which
// tests play) and by the process's own (for the longest hold).
func (c *Controller) lock() {
	c.mu.Lock()
	c.lockedAt = c.cfg.Clock.Now()
	c.lockedReal = time.Now()
}

// unlock forgives the brokers a long hold, then releases c.mu.
func (c *Controller) unlock() {
	now := c.cfg.Clock.Now()
	held := now.Sub(c.lockedAt)
	if held > c.sessionCheckInterval() && c.active {
		c.forgiveDeafnessLocked(now, held)
	}
	if real := time.Since(c.lockedReal); int64(real) > c.longestHold.Load() {
		c.longestHold.Store(int64(real)) // only under mu: no lost update
	}
	c.publishLivenessLocked()
	c.mu.Unlock()
}

// forgiveDeafnessLocked moves every live broker's last heartbeat forward by
// held, to at most now.
func (c *Controller) forgiveDeafnessLocked(now time.Time, held time.Duration) {
	n := 0
	for _, bs := range c.brokers {
		if bs.info.Fenced {
			continue
		}
		seen := bs.seen().Add(held)
		if seen.After(now) {
			seen = now
		}
		if seen.After(bs.seen()) {
			bs.lastSeen = seen
			n++
		}
	}
	if n > 0 {
		c.log.Warn().Dur("held_ms", held).Int("brokers", n).
			Msg("a decision kept the controller from hearing heartbeats; broker sessions extended by its length")
	}
}
