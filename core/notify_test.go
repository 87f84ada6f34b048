package core

import (
	"testing"
	"time"

	"github.com/replicad/replicad/core/clock"
)

func poked(w chan struct{}) bool {
	select {
	case <-w:
		return true
	default:
		return false
	}
}

// notifyWaitersNow wakes the waiters at once and pokes the watchers only
// after the linger; a notify in between pokes them and cancels that poke.
func TestNotifierWaitersNowWatchersAfterLinger(t *testing.T) {
	c := clock.NewManual(time.Unix(0, 0))
	var n notifier
	w := make(chan struct{}, 1)
	n.watch(w)
	waiter := n.wait()
	n.notifyWaitersNow(c, time.Millisecond)
	select {
	case <-waiter:
	default:
		t.Fatal("notifyWaitersNow did not wake the waiter")
	}
	if poked(w) {
		t.Fatal("the watcher was poked before the linger")
	}
	n.notifyWaitersNow(c, time.Millisecond) // one poke pending at most
	c.Advance(time.Millisecond)
	if !poked(w) {
		t.Fatal("the watcher was not poked after the linger")
	}
	c.Advance(time.Hour)
	if poked(w) {
		t.Fatal("the watcher was poked twice")
	}

	n.notifyWaitersNow(c, time.Millisecond)
	n.notify()
	if !poked(w) {
		t.Fatal("notify did not poke the watcher")
	}
	c.Advance(time.Hour)
	if poked(w) {
		t.Fatal("the lingering poke was not cancelled by the notify")
	}

	// A poke that fired as a notify cancelled it (its generation is old)
	// does nothing, and the next linger is armed afresh.
	n.notifyWaitersNow(c, time.Millisecond)
	stale := n.lingerGen
	n.notify()
	poked(w)
	n.pokeLingering(stale)
	if poked(w) {
		t.Fatal("a stale lingering poke poked the watcher")
	}
	n.notifyWaitersNow(c, time.Millisecond)
	c.Advance(time.Millisecond)
	if !poked(w) {
		t.Fatal("the linger armed after a cancelled one did not poke")
	}
}
