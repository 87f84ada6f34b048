package sim

import (
	"slices"
	"sync"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
)

// isrGate is a broker life's core.IsrChanger: it holds the ISR changes its
// partitions submit and hands them to the life's AlterPartition manager
// only from the scheduler, one at a time, in TopicPartition order, with
// the cluster idle between two (Sim.flushIsr).
//
// Why: the manager batches what is queued when its goroutine wakes. Two
// changes submitted in one step (one fetch expanding two partitions, or two
// handlers woken together) reach it from goroutines racing its own: it may
// send both in one AlterPartition or the first alone, and the request, the
// controller's answer and all that follows differ from one run of a seed
// to the next. Submitted one by one with the manager idle in between, the
// first always goes alone and the next wait for its answer (batched with
// whatever else is queued by then, as the product does). Nothing is lost
// or delayed in virtual time: a held change goes out at the next step.
type isrGate struct {
	mu   sync.Mutex
	ap   core.IsrChanger
	held []heldIsrChange
}

type heldIsrChange struct {
	change core.IsrChange
	done   func(core.IsrChangeResult)
}

var _ core.IsrChanger = (*isrGate)(nil)

func (g *isrGate) Submit(change core.IsrChange, done func(core.IsrChangeResult)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = append(g.held, heldIsrChange{change, done})
}

// take returns the held changes in TopicPartition order (a partition has
// one change in flight at a time, so the order is total).
func (g *isrGate) take() []heldIsrChange {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.held
	g.held = nil
	slices.SortStableFunc(out, func(a, b heldIsrChange) int {
		switch {
		case tp.Less(a.change.TopicPartition, b.change.TopicPartition):
			return -1
		case tp.Less(b.change.TopicPartition, a.change.TopicPartition):
			return 1
		}
		return 0
	})
	return out
}

// flushIsr hands every broker life's held ISR changes to its manager (see
// isrGate), brokers in id order, letting the cluster go idle after each.
// A life that has crashed gets them too, as its partitions' changes would
// reach its closing manager, which fails them.
func (s *Sim) flushIsr() {
	for _, g := range s.isrGates {
		for _, h := range g.take() {
			// On its own goroutine: Submit to a closed manager answers at
			// once, and the answer takes the partition's lock.
			go g.ap.Submit(h.change, h.done)
			s.cfg.Wait()
		}
	}
}
