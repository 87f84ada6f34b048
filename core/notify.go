package core

import (
	"sync"
	"time"

	"github.com/replicad/replicad/core/clock"
)

// notifier wakes every goroutine waiting for a partition's state to change
// (HW moved, log appended, leadership lost). It replaces Kafka's purgatory
// watch lists: a waiter re-checks its condition each time the channel it got
// from wait() is closed.
//
// A waiter that watches many partitions at once (a follower's fetch) adds a
// watcher instead: one channel of its own that every watched notifier pokes,
// so it needs neither a goroutine nor a select case per partition.
type notifier struct {
	mu       sync.Mutex
	ch       chan struct{}
	watchers map[chan<- struct{}]struct{}
	// lingering is the pending poke of the watchers that
	// notifyWaitersNow armed, nil when none is; lingerGen tells a stale
	// one (stopped as it fired) from the current one.
	lingering clock.Timer
	lingerGen uint64
}

// wait returns a channel closed at the next notify.
func (n *notifier) wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	return n.ch
}

// waiting reports whether a waiter took a channel that no notify has closed
// yet (tests use it to know a long poll is parked).
func (n *notifier) waiting() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch != nil
}

// watch makes every later notify send to w without blocking; w should have a
// buffer of one, so a wake-up between two checks is kept, not lost.
func (n *notifier) watch(w chan<- struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.watchers == nil {
		n.watchers = make(map[chan<- struct{}]struct{})
	}
	n.watchers[w] = struct{}{}
}

// unwatch undoes watch.
func (n *notifier) unwatch(w chan<- struct{}) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.watchers, w)
}

// notify wakes every current waiter and watcher. Watchers (parked follower
// fetches) are woken first and waiters (delayed produces, consumes) last:
// Go's scheduler runs the goroutine readied last next on this P, and an
// acks=-1 producer waiting on the HW is the one a client is waiting for.
func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.pokeWatchersLocked()
	n.wakeWaitersLocked()
}

// notifyWaitersNow wakes every current waiter now, and the watchers after
// linger unless a notify comes first: for a change (an HW move) that the
// waiters complete on and that the watchers only pass on, and that the next
// notify's answers carry anyway. One poke is pending at most.
func (n *notifier) notifyWaitersNow(c clock.Clock, linger time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lingering == nil && len(n.watchers) > 0 {
		n.lingerGen++
		gen := n.lingerGen
		n.lingering = c.AfterFunc(linger, func() { n.pokeLingering(gen) })
	}
	n.wakeWaitersLocked()
}

func (n *notifier) pokeLingering(gen uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lingering == nil || gen != n.lingerGen {
		return // a notify delivered it already
	}
	n.pokeWatchersLocked()
}

// pokeWatchersLocked pokes every watcher, and cancels a pending lingering
// poke: this one delivers what it would have.
func (n *notifier) pokeWatchersLocked() {
	if n.lingering != nil {
		n.lingering.Stop()
		n.lingering = nil
	}
	for w := range n.watchers {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

func (n *notifier) wakeWaitersLocked() {
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
