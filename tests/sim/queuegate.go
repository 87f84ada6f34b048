package sim

import (
	"cmp"
	"context"
	"slices"
	"sync"
)

// queueGate is the controller's broker queues' Gate (controller.Config
// .QueueGate): a queue's sending goroutine that finds calls waiting stops
// there until the scheduler lets it take them, at its next step, with the
// cluster idle (Sim.releaseQueues).
//
// Why: a queue merges consecutive calls of one kind that wait, so what one
// request carries depends on whether a second call is queued before the
// goroutine takes the first. Two callers race it: a decision that queues
// two UpdateMetadata to one broker in a row (a registration's ELR change,
// then its live-broker list) while the queue is idle, and a caller woken
// by the same answer that frees the queue (a Flush waiter, an operator's
// command waiting for delivery, a goroutine the answer starts). One run of
// a seed sends one request, the next two, and every step after differs.
// Taken at an idle point, every call queued by then joins, as in the
// product when the goroutine is slow to wake. Nothing waits in virtual
// time: a held queue sends at the next step, before time may pass.
type queueGate struct {
	mu   sync.Mutex
	held []heldQueue
}

type heldQueue struct {
	life    int // the controller life
	broker  int32
	release chan struct{}
}

// wait is the Gate of broker's queue in controller life life.
func (g *queueGate) wait(ctx context.Context, life int, broker int32) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.held = append(g.held, heldQueue{life: life, broker: broker, release: ch})
	g.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// take returns the held queues in (life, broker) order.
func (g *queueGate) take() []heldQueue {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.held
	g.held = nil
	slices.SortStableFunc(out, func(a, b heldQueue) int {
		return cmp.Or(cmp.Compare(a.life, b.life), cmp.Compare(a.broker, b.broker))
	})
	return out
}

// releaseQueues lets every held queue take what waits, one at a time with
// the cluster idle after each, until none is held (a queue's request may
// fail at once, on a broken connection, and its retry waits for a timer,
// so this ends).
func (s *Sim) releaseQueues() {
	for {
		held := s.queues.take()
		if len(held) == 0 {
			return
		}
		for _, h := range held {
			close(h.release)
			s.cfg.Wait()
		}
	}
}
