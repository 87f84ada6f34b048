package clock

import (
	"testing"
	"time"
)

// A Manual clock fires due timers, in deadline order, only when advanced past them.
func TestManualFiresDueTimersInOrder(t *testing.T) {
	c := NewManual(time.Unix(0, 0))
	var fired []int
	c.AfterFunc(2*time.Second, func() { fired = append(fired, 2) })
	c.AfterFunc(time.Second, func() { fired = append(fired, 1) })
	stopped := c.AfterFunc(time.Second, func() { fired = append(fired, 99) })
	if !stopped.Stop() {
		t.Fatal("Stop of a pending timer returned false")
	}
	c.Advance(500 * time.Millisecond)
	if len(fired) != 0 {
		t.Fatalf("fired early: %v", fired)
	}
	c.Advance(2 * time.Second)
	if len(fired) != 2 || fired[0] != 1 || fired[1] != 2 {
		t.Fatalf("fired %v, want [1 2]", fired)
	}
	if got := c.Now(); !got.Equal(time.Unix(2, 500_000_000)) {
		t.Fatalf("now %v", got)
	}
}
