package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Partition budgets (Kafka's KIP-578, max.broker.partitions): every broker
// registers the most replicas it hosts (its --max-partitions), and a create
// or reassignment that would put more on any broker is refused whole,
// before anything is stored or sent. One careless `create-topic
// --partitions 100000` then gets a clear answer instead of running every
// broker out of memory and descriptors, which broke produce to every topic.
// A broker also guards itself (core refuses new partitions beyond its
// budget in a LeaderAndIsr), for a stale controller or a hand-made request.

// overBudget is one broker a change would put over its budget.
type overBudget struct {
	broker  int32
	hosting int // replicas assigned to it now
	adding  int // replicas the change adds
	budget  int
}

// refuseOverBudgetLocked refuses a change that adds the replicas in added
// (one list per partition; a broker may appear in many) when it would put
// any registered broker over its --max-partitions, with
// WILL_EXCEED_PARTITION_LIMITS; op says what the change is.
func (c *Controller) refuseOverBudgetLocked(ctx context.Context, op string, added [][]int32) error {
	return c.reportOverBudget(ctx, op, c.overBudgetLocked(added))
}

// refuseCreateOverBudgetLocked is refuseOverBudgetLocked for a create of
// topic with assignment, except that a topic that exists is left to the
// store's create, which answers TOPIC_ALREADY_EXISTS (and resyncs a topic
// stored but not in memory): its partitions are counted already, so the
// check would otherwise refuse a repeated create as over budget, and an
// operator retrying a create whose answer was lost would loop on it.
func (c *Controller) refuseCreateOverBudgetLocked(ctx context.Context, topic string, rf int, assignment [][]int32) error {
	over := c.overBudgetLocked(assignment)
	if len(over) == 0 {
		return nil
	}
	if _, known := c.configs[topic]; known {
		return nil
	}
	sctx, cancel := c.storeCtx(ctx)
	_, err := c.cfg.Store.Topic(sctx, topic)
	cancel()
	if err == nil {
		return nil
	}
	return c.reportOverBudget(ctx, fmt.Sprintf("creating topic %q (%d partitions, replication factor %d)", topic, len(assignment), rf), over)
}

// overBudgetLocked is every registered broker that adding the replicas in
// added would put over its budget. A broker that did not say (budget 0)
// has no limit. The count is every partition's replica list, adding
// replicas of reassignments in flight included: what the brokers host once
// the metadata is delivered.
func (c *Controller) overBudgetLocked(added [][]int32) []overBudget {
	adding := map[int32]int{}
	for _, rs := range added {
		for _, r := range rs {
			if bs, ok := c.brokers[r]; ok && bs.info.MaxPartitions > 0 {
				adding[r]++
			}
		}
	}
	if len(adding) == 0 {
		return nil
	}
	// A broker hosts at most one replica of each partition: while there
	// are fewer partitions than any budget minus what is added, nothing
	// needs counting (most clusters, most of the time).
	fits := true
	for id, n := range adding {
		fits = fits && len(c.parts)+n <= int(c.brokers[id].info.MaxPartitions)
	}
	if fits {
		return nil
	}
	// Every replica of every partition is looked at (300,000 at 100,000
	// partitions RF 3), under the controller's lock: brokers with a budget
	// are found by a dense table of their ids, not a map.
	maxID := int32(0)
	for id := range adding {
		maxID = max(maxID, id)
	}
	hosting := map[int32]int{}
	if maxID < 1<<16 {
		counts := make([]int32, maxID+1)
		for id := range adding {
			counts[id] = 1 // 0: not counted; otherwise 1 + the replicas counted
		}
		for _, p := range c.parts {
			for _, r := range p.Replicas {
				if r >= 0 && r <= maxID && counts[r] > 0 {
					counts[r]++
				}
			}
		}
		for id := range adding {
			hosting[id] = int(counts[id] - 1)
		}
	} else {
		for _, p := range c.parts {
			for _, r := range p.Replicas {
				if _, ok := adding[r]; ok {
					hosting[r]++
				}
			}
		}
	}
	var over []overBudget
	for id, n := range adding {
		budget := int(c.brokers[id].info.MaxPartitions)
		if hosting[id]+n > budget {
			over = append(over, overBudget{broker: id, hosting: hosting[id], adding: n, budget: budget})
		}
	}
	slices.SortFunc(over, func(a, b overBudget) int { return int(a.broker) - int(b.broker) })
	return over
}

// reportOverBudget is the refusal of op for the brokers in over (nil when
// none), logged and on ctx's span.
func (c *Controller) reportOverBudget(ctx context.Context, op string, over []overBudget) error {
	if len(over) == 0 {
		return nil
	}
	err := refuse(replicadv1.ErrorCode_ERROR_CODE_WILL_EXCEED_PARTITION_LIMITS, "%s", budgetMessage(op, over))
	span := trace.SpanFromContext(ctx)
	span.SetAttributes(attribute.String("replicad.error_code", "WILL_EXCEED_PARTITION_LIMITS"))
	span.SetStatus(codes.Error, "WILL_EXCEED_PARTITION_LIMITS")
	brokers := make([]int32, len(over))
	for i, o := range over {
		brokers[i] = o.broker
	}
	c.log.Warn().Str("op", op).Ints32("brokers", brokers).Msg("refused (WILL_EXCEED_PARTITION_LIMITS): " + err.Error())
	return err
}

// budgetMessage says which brokers a change would overfill, by how much,
// and what the operator can do.
func budgetMessage(op string, over []overBudget) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s would exceed the partition limit of %d broker(s): ", op, len(over))
	for i, o := range over {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "broker %d would host %d partitions (%d now + %d new), its --max-partitions is %d",
			o.broker, o.hosting+o.adding, o.hosting, o.adding, o.budget)
	}
	b.WriteString(" (fewer partitions, a lower replication factor, more brokers, or a higher --max-partitions)")
	return b.String()
}
