package core

import "sync"

// notifier wakes every goroutine waiting for a partition's state to change
// (HW moved, log appended, leadership lost). It replaces Kafka's purgatory
// watch lists: a waiter re-checks its condition each time the channel it got
// from wait() is closed.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
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

// notify wakes every current waiter.
func (n *notifier) notify() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch != nil {
		close(n.ch)
		n.ch = nil
	}
}
