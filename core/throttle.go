package core

import (
	"math"
	"sync"
	"time"
)

// The leader's replication throttle (Kafka's leader.replication.throttled.rate
// with the moving replicas throttled, as kafka-reassign-partitions sets
// follower.replication.throttled.replicas): over all the partitions this
// broker leads, the replicas a reassignment is adding (PartitionState's
// AddingReplicas) get at most a rate of bytes/s while they are not in their
// partition's ISR, so a move cannot take the disk and network from the ISR,
// whose fetches are never held back: an acks=all produce waits on the ISR
// only. Other followers outside the ISR (back from a restart, or fallen
// behind) are not throttled: they catch up at full speed and the partition
// is fully replicated again as soon as it can be. The controller sends the
// rate with UpdateMetadata; 0 is none.
//
// As Kafka's ReplicaManager.shouldLeaderThrottle does, a throttled partition
// of a fetch gets no records while the budget is spent; the follower's
// fetch then waits its max wait as any empty fetch does and asks again. Here
// the budget is a token bucket: a read takes at most the tokens there are
// (so a fetch's first batch aside, which is always whole, nothing overshoots),
// tokens refill at the rate up to one second's worth, and bytes read for an
// answer that is not sent (a delayed fetch read again) are given back.

// ReplicationThrottle is the throttle an UpdateMetadata carries.
type ReplicationThrottle struct {
	// BytesPerSec is the rate; 0 removes the throttle.
	BytesPerSec int64
	// Version orders the throttles of one controller epoch
	// (replication_throttle_version).
	Version int64
}

// throttleBurst is how much the bucket holds: one second at the rate.
const throttleBurst = time.Second

// tokenBucket is the throttle's state. Its mutex is a leaf lock.
type tokenBucket struct {
	now func() time.Time

	mu sync.Mutex
	// rate is bytes/s, 0 when off.
	rate   int64
	tokens float64
	last   time.Time
	// epoch and version are those of the throttle in force, to ignore an
	// older one delivered late.
	epoch   int32
	version int64
	// throttledBytes counts the bytes read under the throttle, and
	// throttledReads the partition reads it left without records.
	throttledBytes int64
	throttledReads int64
}

func newTokenBucket(now func() time.Time) *tokenBucket { return &tokenBucket{now: now} }

// set applies a throttle sent by controllerEpoch unless an equal or newer
// one is in force; it reports whether it applied. A new rate starts with an
// empty bucket: a move started now gets no burst.
func (b *tokenBucket) set(controllerEpoch int32, t ReplicationThrottle) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if controllerEpoch < b.epoch || (controllerEpoch == b.epoch && t.Version < b.version) {
		return false
	}
	b.epoch, b.version = controllerEpoch, t.Version
	if t.BytesPerSec == b.rate {
		return true
	}
	b.rate = max(0, t.BytesPerSec)
	b.tokens, b.last = 0, b.now()
	return true
}

// refillLocked adds the tokens earned since the last refill.
func (b *tokenBucket) refillLocked() {
	now := b.now()
	if elapsed := now.Sub(b.last); elapsed > 0 {
		b.tokens = min(b.tokens+elapsed.Seconds()*float64(b.rate), throttleBurst.Seconds()*float64(b.rate))
	}
	b.last = now
}

// available is how many bytes a throttled read may take now: 0 while the
// budget is spent; on is false (and n math.MaxInt) without a throttle.
func (b *tokenBucket) available() (n int, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.rate == 0 {
		return math.MaxInt, false
	}
	b.refillLocked()
	if b.tokens < 1 {
		b.throttledReads++
		return 0, true
	}
	return int(b.tokens), true
}

// take spends n bytes read under the throttle; the bucket may go below
// zero (a first batch larger than the tokens), a debt paid before the next
// read.
func (b *tokenBucket) take(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.throttledBytes += int64(n)
	if b.rate == 0 {
		return
	}
	b.refillLocked()
	b.tokens -= float64(n)
}

// giveBack returns n bytes taken for an answer that was not sent.
func (b *tokenBucket) giveBack(n int) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.throttledBytes -= int64(n)
	if b.rate == 0 {
		return
	}
	b.refillLocked()
	b.tokens = min(b.tokens+float64(n), throttleBurst.Seconds()*float64(b.rate))
}

// ThrottleStats is the replication throttle as metrics report it.
type ThrottleStats struct {
	// BytesPerSec is the rate in force (0: none).
	BytesPerSec int64
	// ThrottledBytes counts the bytes sent, as leader, to replicas being
	// added (outside the ISR) while a throttle was in force.
	ThrottledBytes int64
	// ThrottledReads counts the partition reads of such replicas that the
	// throttle left without records.
	ThrottledReads int64
}

func (b *tokenBucket) stats() ThrottleStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return ThrottleStats{BytesPerSec: b.rate, ThrottledBytes: b.throttledBytes, ThrottledReads: b.throttledReads}
}

// ReplicationThrottleStats reports the replication throttle and what it did.
func (rm *ReplicaManager) ReplicationThrottleStats() ThrottleStats { return rm.throttle.stats() }
