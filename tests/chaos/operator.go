package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Extra round kinds: operator actions against the running cluster (issue
// 19: an ordinary command racing with faults lost acknowledged data), and
// long network cuts (path 12). They are drawn from a stream of their own
// (ExtraSchedule), so a seed's fault schedule, and every fixed seed that
// replays the rounds that once found a bug, stays as it was.
const (
	// OpMinIsr raises the topic's min.insync.replicas to 3, lowers it to 1
	// and deletes the override (back to the brokers' 2); with Detail 1 a
	// follower is killed while it is 3 (it joins the ELR) and comes back
	// after the lowering.
	OpMinIsr = "op-min-isr"
	// OpReassign moves a partition to 2 replicas, starts adding the third
	// back and cancels it, then adds it back as the preferred leader, under
	// a replication throttle set for the move and removed after.
	OpReassign = "op-reassign"
	// OpElect elects a chosen ISR member leader, then the preferred
	// leaders; with Detail 1 while the fault of the round before holds (a
	// second into it), not after its heal.
	OpElect = "op-elect"
	// OpShutdown is a controlled shutdown (SIGTERM) of a broker, and its
	// restart.
	OpShutdown = "op-controlled-shutdown"
	// OpRecreate writes a scratch topic, deletes it and creates it again:
	// the new topic must be a new, empty log. The round before adds a
	// partition to it during its fault, and the partitions it has are
	// checked to be served before the delete; the new topic is then grown
	// by two (partitions.go).
	OpRecreate = "op-recreate-topic"
	// LongCut cuts the leader of a partition from the other brokers for
	// tens of seconds: Detail 0 silent (bytes held), 1 refused (every
	// connection reset). Its partitions fall under min ISR while it lasts
	// (excused); once healed, the followers must be back in the ISR within
	// the heal bound.
	LongCut = "long-cut"
)

// ScratchTopic is the topic OpRecreate deletes and creates again; the
// workload never writes it.
const ScratchTopic = "chaos-scratch"

// OverBudgetTopic is the topic OpRecreate first tries to create with more
// partitions than the brokers' --max-partitions (BrokerMaxPartitions)
// allow: it must be refused with WILL_EXCEED_PARTITION_LIMITS and never
// exist.
const OverBudgetTopic = "chaos-over-budget"

// BrokerMaxPartitions is every chaos broker's --max-partitions: far above
// what the workload's topics need.
const BrokerMaxPartitions = 1000

// ExtraMix is the extra kinds to draw from, with weights.
func ExtraMix() Mix {
	return Mix{OpMinIsr: 2, OpReassign: 2, OpElect: 2, OpShutdown: 2, OpRecreate: 1, LongCut: 2}
}

// ExtraSchedule draws, for each of rounds fault rounds, whether an extra
// round follows it (percent of them do) and which: nil entries are none.
// With every, each fault round is followed by one, the mix's kinds in
// turn (make test's slice: every kind in a few rounds).
func ExtraSchedule(seed uint64, rounds, percent int, every bool, mix Mix, brokers, parts int32) []*Fault {
	r := rand.New(rand.NewPCG(seed, 0xe7a5))
	kinds := make([]string, 0, len(mix))
	total := 0
	for k := range mix {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		total += mix[k]
	}
	out := make([]*Fault, rounds)
	for i := range rounds {
		// Every draw is made for every round, so the rate does not shift
		// which extra a round gets.
		x, pick := r.IntN(100), r.IntN(total)
		f := &Fault{Broker: 1 + r.Int32N(brokers), Partition: r.Int32N(parts), Leader: true, Detail: r.IntN(2),
			Hold: time.Duration(2000+r.IntN(2000)) * time.Millisecond}
		long := time.Duration(20+r.IntN(21)) * time.Second
		if every {
			// The harder variant of each: a follower killed while min ISR
			// is 3, a refused long cut (the one that found path 12).
			// 20 s, the shortest long cut, keeps make test's run short
			// (and found path 12: 11.7 s to full ISRs without its fix).
			f.Kind, f.Detail, long = kinds[i%len(kinds)], 1, 20*time.Second
		} else if x >= percent {
			continue
		}
		for _, k := range kinds {
			if f.Kind != "" {
				break
			}
			if pick < mix[k] {
				f.Kind = k
				break
			}
			pick -= mix[k]
		}
		if f.Kind == LongCut {
			f.Hold = long
		}
		out[i] = f
	}
	return out
}

// opError is an operator action that did not do what it must: a finding.
type opError struct{ error }

// control is the active controller's API, or an error.
func (n *nemesis) control(ctx context.Context) (replicadv1.ControllerServiceClient, *replicadv1.DescribeClusterResponse, error) {
	return n.c.Controller(ctx)
}

// callCtl calls f on the active controller until it answers NONE (or one
// of ok), at most d: controllers fail over and fault rounds end with the
// cluster healed, so an error here is retried as an operator would.
func (n *nemesis) callCtl(ctx context.Context, what string, d time.Duration, f func(context.Context, replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error), ok ...replicadv1.ErrorCode) (replicadv1.ErrorCode, error) {
	var code replicadv1.ErrorCode
	err := retryFor(ctx, d, func() error {
		ctl, _, err := n.control(ctx)
		if err != nil {
			return err
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		c, msg, err := f(cctx, ctl)
		if err != nil {
			return err
		}
		code = c
		if c != replicadv1.ErrorCode_ERROR_CODE_NONE && !slices.Contains(ok, c) {
			return fmt.Errorf("%v: %s", c, msg)
		}
		return nil
	})
	if err != nil {
		return code, opError{fmt.Errorf("%s: %w", what, err)}
	}
	n.h.note("operator", "%s: %v", what, code)
	n.ops[what]++
	return code, nil
}

// partitionOf is partition p of topic in resp (nil: not there).
func partitionOf(resp *replicadv1.DescribeClusterResponse, topic string, p int32) *replicadv1.ClusterPartition {
	for _, cp := range resp.GetPartitions() {
		if cp.GetTopic() == topic && cp.GetPartition() == p {
			return cp
		}
	}
	return nil
}

// waitPartition waits until cond holds for partition p of topic.
func (n *nemesis) waitPartition(ctx context.Context, topic string, p int32, d time.Duration, what string, cond func(*replicadv1.ClusterPartition) bool) error {
	var last *replicadv1.ClusterPartition
	err := waitFor(ctx, d, func() bool {
		_, resp, err := n.control(ctx)
		if err != nil {
			return false
		}
		last = partitionOf(resp, topic, p)
		return last != nil && cond(last)
	})
	if err != nil {
		return opError{fmt.Errorf("%s-%d: %s not reached within %v (last %v)", topic, p, what, d, last)}
	}
	return nil
}

func setMinIsr(v string) func(context.Context, replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
	return func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		req := &replicadv1.AlterTopicConfigRequest{Topic: Topic}
		if v == "" {
			req.Delete = []string{"min.insync.replicas"}
		} else {
			req.Set = map[string]string{"min.insync.replicas": v}
		}
		r, err := ctl.AlterTopicConfig(ctx, req)
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}
}

func reassign(p int32, replicas []int32, cancel bool) func(context.Context, replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
	return func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		r, err := ctl.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: Topic, Partition: p, Replicas: replicas, Cancel: cancel})
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}
}

func throttle(rate int64) func(context.Context, replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
	return func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		r, err := ctl.AlterReplicationThrottle(ctx, &replicadv1.AlterReplicationThrottleRequest{BytesPerSec: rate})
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}
}

// fullIsr: replicas all in the ISR, a leader, no reassignment in flight.
func fullIsr(cp *replicadv1.ClusterPartition) bool {
	return cp.GetLeader() > 0 && len(cp.GetIsr()) == len(cp.GetReplicas()) && len(cp.GetAddingReplicas())+len(cp.GetRemovingReplicas()) == 0
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// operate runs the operator action f; an action that the cluster does not
// carry out in time is returned as an opError (a finding), anything else
// as an error of the harness.
func (n *nemesis) operate(ctx context.Context, f Fault) error {
	p := f.Partition
	_, resp, err := n.control(ctx)
	if err != nil {
		return err
	}
	cp := partitionOf(resp, Topic, p)
	if cp == nil {
		return fmt.Errorf("partition %d not described", p)
	}
	hold := func(d time.Duration) {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	switch f.Kind {
	case OpMinIsr:
		if n.harsh && f.Detail == 1 {
			return n.lowerMinIsrUnderElr(ctx, cp, f.Hold)
		}
		start := time.Now()
		if _, err := n.callCtl(ctx, "alter-config min.insync.replicas=3", 30*time.Second, setMinIsr("3")); err != nil {
			return err
		}
		var killed *node
		done := false
		defer func() {
			if done {
				return
			}
			// Failed half way: leave the cluster as the next round expects
			// it (a finding is reported all the same).
			if killed != nil && !killed.proc.running() {
				_ = n.c.Restart(killed)
			}
			_, _ = n.callCtl(ctx, "alter-config delete min.insync.replicas (after a failure)", 30*time.Second, setMinIsr(""))
		}()
		if f.Detail == 1 {
			// A follower dies while min ISR is 3: the ISR shrinks to 2,
			// under the minimum, and it goes to the ELR; acks=all stall
			// until the lowering (excused).
			for _, r := range cp.GetReplicas() {
				if r != cp.GetLeader() {
					killed = n.c.Broker(r)
					break
				}
			}
			n.h.note("fault", "kill -9 %s while min.insync.replicas is 3", killed.name)
			n.c.Kill(killed)
		}
		hold(f.Hold)
		if _, err := n.callCtl(ctx, "alter-config min.insync.replicas=1", 30*time.Second, setMinIsr("1")); err != nil {
			return err
		}
		n.excuse(start, time.Now().Add(time.Second))
		hold(f.Hold / 2)
		if killed != nil {
			n.h.note("heal", "restart %s", killed.name)
			if err := n.c.Restart(killed); err != nil {
				return err
			}
		}
		hold(f.Hold / 2)
		_, err := n.callCtl(ctx, "alter-config delete min.insync.replicas", 30*time.Second, setMinIsr(""))
		done = err == nil
		return err
	case OpReassign:
		orig := slices.Clone(cp.GetReplicas())
		if len(orig) != 3 {
			return fmt.Errorf("partition %d has replicas %v, want 3", p, orig)
		}
		// The one to drop and add back: not the leader, so the move itself
		// elects nobody; it comes back first, as the preferred leader.
		var out int32
		var keep []int32
		for _, r := range orig {
			if r != cp.GetLeader() && out == 0 {
				out = r
			} else {
				keep = append(keep, r)
			}
		}
		if _, err := n.callCtl(ctx, "replication throttle 4 MiB/s", 30*time.Second, throttle(4<<20)); err != nil {
			return err
		}
		done := false
		defer func() {
			if !done { // failed half way: no throttle left on for the next rounds
				_, _ = n.callCtl(ctx, "replication throttle removed (after a failure)", 30*time.Second, throttle(0))
			}
		}()
		if _, err := n.callCtl(ctx, fmt.Sprintf("reassign partition %d to %v (RF 2)", p, keep), 30*time.Second, reassign(p, keep, false)); err != nil {
			return err
		}
		if err := n.waitPartition(ctx, Topic, p, 30*time.Second, fmt.Sprintf("replicas %v", keep), func(cp *replicadv1.ClusterPartition) bool {
			return sameSet(cp.GetReplicas(), keep) && fullIsr(cp)
		}); err != nil {
			return err
		}
		back := append([]int32{out}, keep...)
		if _, err := n.callCtl(ctx, fmt.Sprintf("reassign partition %d to %v (RF 3)", p, back), 30*time.Second, reassign(p, back, false)); err != nil {
			return err
		}
		// Cancelled at once; it may already have completed (nothing to
		// cancel), which is fine too.
		if _, err := n.callCtl(ctx, fmt.Sprintf("cancel the reassignment of partition %d", p), 30*time.Second, reassign(p, nil, true),
			replicadv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS); err != nil {
			return err
		}
		if err := n.waitPartition(ctx, Topic, p, 30*time.Second, "the cancel settled", fullIsr); err != nil {
			return err
		}
		if _, err := n.callCtl(ctx, fmt.Sprintf("reassign partition %d to %v (RF 3)", p, back), 30*time.Second, reassign(p, back, false),
			replicadv1.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS); err != nil {
			return err
		}
		if err := n.waitPartition(ctx, Topic, p, 45*time.Second, fmt.Sprintf("replicas %v with a full ISR", back), func(cp *replicadv1.ClusterPartition) bool {
			return slices.Equal(cp.GetReplicas(), back) && fullIsr(cp)
		}); err != nil {
			return err
		}
		_, err := n.callCtl(ctx, "replication throttle removed", 30*time.Second, throttle(0))
		done = err == nil
		return err
	case OpElect:
		var other int32
		for _, r := range cp.GetIsr() {
			if r != cp.GetLeader() {
				other = r
				break
			}
		}
		if other == 0 {
			return nil // nobody to elect: the round is a no-op
		}
		if _, err := n.callCtl(ctx, fmt.Sprintf("elect broker %d for partition %d", other, p), 30*time.Second,
			func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
				r, err := ctl.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: Topic, Partition: p, Leader: &other})
				return r.GetErrorCode(), r.GetErrorMessage(), err
			}); err != nil {
			return err
		}
		if err := n.waitPartition(ctx, Topic, p, 30*time.Second, fmt.Sprintf("leader %d", other), func(cp *replicadv1.ClusterPartition) bool {
			return cp.GetLeader() == other
		}); err != nil {
			return err
		}
		hold(f.Hold)
		_, err := n.callCtl(ctx, "preferred leader election of every partition", 30*time.Second,
			func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
				r, err := ctl.ElectLeaders(ctx, &replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED,
					Topics: []*replicadv1.ElectLeadersTopic{{Topic: Topic}}})
				return r.GetErrorCode(), r.GetErrorMessage(), err
			})
		return err
	case OpShutdown:
		b := n.target(ctx, f)
		bn := n.c.Broker(b)
		n.h.note("operator", "controlled shutdown (SIGTERM) of broker %d", b)
		n.ops["controlled shutdown"]++
		start := time.Now()
		n.c.Terminate(bn, 20*time.Second)
		if d := time.Since(start); d > 15*time.Second {
			return opError{fmt.Errorf("broker %d's controlled shutdown took %v", b, d.Round(time.Millisecond))}
		}
		hold(f.Hold)
		n.h.note("heal", "restart broker %d", b)
		return n.c.Restart(bn)
	case OpRecreate:
		return n.recreate(ctx)
	}
	return fmt.Errorf("unknown operator action %q", f.Kind)
}

// createOverBudget tries to create OverBudgetTopic with RF 1 and one
// partition past BrokerMaxPartitions for every broker: whichever brokers
// are live, one would go over its budget, so the controller must refuse it
// whole, and nothing of it may appear.
func (n *nemesis) createOverBudget(ctx context.Context) error {
	parts := int32(BrokerMaxPartitions+1) * int32(len(n.c.brokers))
	what := fmt.Sprintf("create %s (%d partitions)", OverBudgetTopic, parts)
	want := replicadv1.ErrorCode_ERROR_CODE_WILL_EXCEED_PARTITION_LIMITS
	code, err := n.callCtl(ctx, what, 30*time.Second, func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		r, err := ctl.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: OverBudgetTopic, Partitions: parts, ReplicationFactor: 1})
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}, want)
	n.ops["create over budget"]++
	if err != nil {
		return err
	}
	if code != want {
		return opError{fmt.Errorf("%s: answered %v, want %v", what, code, want)}
	}
	_, resp, err := n.control(ctx)
	if err != nil {
		return err
	}
	if partitionOf(resp, OverBudgetTopic, 0) != nil {
		return opError{fmt.Errorf("%s was refused, yet its partitions exist", what)}
	}
	return nil
}

// recreate writes ScratchTopic, deletes it and creates it again: the new
// topic must come up as a new log (no record of the old one, at any
// offset), and take writes of its own.
func (n *nemesis) recreate(ctx context.Context) error {
	if err := n.createOverBudget(ctx); err != nil {
		return err
	}
	create := func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		r, err := ctl.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: ScratchTopic, Partitions: 1, ReplicationFactor: 3})
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}
	// produce writes k acks=all records to the scratch topic's leader.
	produce := func(prefix string, k int) error {
		for i := 0; i < k; {
			_, resp, err := n.control(ctx)
			if err != nil {
				return err
			}
			cp := partitionOf(resp, ScratchTopic, 0)
			if cp == nil || cp.GetLeader() <= 0 {
				return errors.New("no leader")
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r, err := n.c.log(cp.GetLeader()).Produce(cctx, &replicadv1.ProduceRequest{Topic: ScratchTopic, Acks: -1, TimeoutMs: 3000,
				Records: []*replicadv1.Record{{Value: []byte(fmt.Sprintf("%s-%d", prefix, i))}}})
			cancel()
			if err != nil {
				return err
			}
			if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
				return fmt.Errorf("produce: %v", r.GetErrorCode())
			}
			i++
		}
		return nil
	}
	// read is the scratch topic's log on its leader, below the HW.
	read := func() (map[int64]string, error) {
		_, resp, err := n.control(ctx)
		if err != nil {
			return nil, err
		}
		cp := partitionOf(resp, ScratchTopic, 0)
		if cp == nil || cp.GetLeader() <= 0 {
			return nil, errors.New("no leader")
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		r, err := n.c.log(cp.GetLeader()).Consume(cctx, &replicadv1.ConsumeRequest{Topic: ScratchTopic, Offset: 0, MaxBytes: 1 << 20})
		if err != nil {
			return nil, err
		}
		if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			return nil, fmt.Errorf("consume: %v", r.GetErrorCode())
		}
		out := map[int64]string{}
		for _, rec := range r.GetRecords() {
			out[rec.GetOffset()] = string(rec.GetValue())
		}
		return out, nil
	}
	gen := fmt.Sprintf("g%d", n.ops["create "+ScratchTopic])
	if _, err := n.callCtl(ctx, "create "+ScratchTopic, 30*time.Second, create, replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS); err != nil {
		return err
	}
	// Partitions added during the fault before (see growScratch) must be
	// served, whatever the fault did to the change.
	if err := n.checkScratchServed(ctx, gen+"-before"); err != nil {
		return err
	}
	if err := retryFor(ctx, 30*time.Second, func() error { return produce(gen+"-old", 10) }); err != nil {
		return opError{fmt.Errorf("%s: 10 acks=all records not written within 30s: %w", ScratchTopic, err)}
	}
	if _, err := n.callCtl(ctx, "delete "+ScratchTopic, 30*time.Second, func(ctx context.Context, ctl replicadv1.ControllerServiceClient) (replicadv1.ErrorCode, string, error) {
		r, err := ctl.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: ScratchTopic})
		return r.GetErrorCode(), r.GetErrorMessage(), err
	}); err != nil {
		return err
	}
	if _, err := n.callCtl(ctx, "create "+ScratchTopic+" again", 30*time.Second, create); err != nil {
		return err
	}
	// The new topic's records only: written, then read back, each at the
	// offset it was acknowledged at (from 0), and nothing of the old one.
	if err := retryFor(ctx, 30*time.Second, func() error { return produce(gen+"-new", 3) }); err != nil {
		return opError{fmt.Errorf("re-created %s: 3 acks=all records not written within 30s: %w", ScratchTopic, err)}
	}
	var log map[int64]string
	if err := retryFor(ctx, 30*time.Second, func() (err error) {
		log, err = read()
		if err == nil && len(log) < 3 {
			err = fmt.Errorf("%d records below the HW", len(log))
		}
		return err
	}); err != nil {
		return opError{fmt.Errorf("re-created %s: not readable: %w", ScratchTopic, err)}
	}
	// (A retried produce may write a value twice: only the prefix counts.)
	for off, v := range log {
		if !strings.HasPrefix(v, gen+"-new-") {
			return opError{fmt.Errorf("re-created %s serves %q at offset %d: a record of the deleted topic", ScratchTopic, v, off)}
		}
	}
	// The new topic grown by two with the cluster healed: carried out,
	// and every partition served.
	if _, _, err := n.growScratch(ctx, 2, 30*time.Second); err != nil {
		return err
	}
	return n.checkScratchServed(ctx, gen+"-grown")
}

// lowerMinIsrUnderElr is issue 19's path 1 as an operator meets it (harsh
// mix only: three brokers down in turn): min ISR 3, the followers of cp die
// one after the other (the ISR shrinks to the leader, they go to the ELR),
// the operator lowers min ISR to 1 to restore writes, acks=all records are
// acknowledged by the leader alone, the leader dies, and the first follower
// to have died comes back first. An ELR member elected without those
// records loses them: the checker sees it.
func (n *nemesis) lowerMinIsrUnderElr(ctx context.Context, cp *replicadv1.ClusterPartition, hold time.Duration) error {
	p, leader := cp.GetPartition(), cp.GetLeader()
	var followers []int32
	for _, r := range cp.GetReplicas() {
		if r != leader {
			followers = append(followers, r)
		}
	}
	if leader <= 0 || len(followers) != 2 {
		return nil // not the shape the scenario needs: a no-op round
	}
	killed := []*node{}
	defer func() { // whatever happened, everyone back and the override gone
		for _, k := range killed {
			if !k.proc.running() {
				_ = n.c.Restart(k)
			}
		}
		_, _ = n.callCtl(ctx, "alter-config delete min.insync.replicas", 30*time.Second, setMinIsr(""))
	}()
	if _, err := n.callCtl(ctx, "alter-config min.insync.replicas=3", 30*time.Second, setMinIsr("3")); err != nil {
		return err
	}
	for _, f := range followers {
		k := n.c.Broker(f)
		n.h.note("fault", "kill -9 broker %d (a follower of partition %d) while min.insync.replicas is 3", f, p)
		n.c.Kill(k)
		killed = append(killed, k)
		if err := n.waitPartition(ctx, Topic, p, 20*time.Second, fmt.Sprintf("broker %d out of the ISR", f), func(cp *replicadv1.ClusterPartition) bool {
			return !slices.Contains(cp.GetIsr(), f)
		}); err != nil {
			return err
		}
	}
	if _, err := n.callCtl(ctx, "alter-config min.insync.replicas=1", 30*time.Second, setMinIsr("1")); err != nil {
		return err
	}
	time.Sleep(hold) // acks=all records acknowledged by the leader alone
	lk := n.c.Broker(leader)
	n.h.note("fault", "kill -9 broker %d (partition %d's leader)", leader, p)
	n.c.Kill(lk)
	killed = append(killed, lk)
	n.h.note("heal", "restart broker %d first (the first follower to die)", followers[0])
	if err := n.c.Restart(n.c.Broker(followers[0])); err != nil {
		return err
	}
	_ = n.waitPartition(ctx, Topic, p, 15*time.Second, "a leader", func(cp *replicadv1.ClusterPartition) bool { return cp.GetLeader() > 0 })
	_, resp, err := n.control(ctx)
	if err == nil {
		if cp := partitionOf(resp, Topic, p); cp != nil {
			n.h.note("operator", "partition %d after the first restart: leader %d, ISR %v, ELR %v", p, cp.GetLeader(), cp.GetIsr(), cp.GetElr())
		}
	}
	time.Sleep(time.Second)
	for _, b := range []int32{leader, followers[1]} {
		n.h.note("heal", "restart broker %d", b)
		if err := n.c.Restart(n.c.Broker(b)); err != nil {
			return err
		}
	}
	return nil
}

// deleteRecords deletes partition p's records below its HW on its leader
// (DeleteRecords with offset -1), during a fault round: writes in doubt
// are retried on a log whose start moved past their producers' earlier
// batches. A fault may keep it from being carried out (no finding).
func (n *nemesis) deleteRecords(ctx context.Context, p int32) error {
	return retryFor(ctx, 10*time.Second, func() error {
		l := n.w.leader(ctx, p, true)
		if l <= 0 {
			return fmt.Errorf("partition %d has no leader", p)
		}
		cctx, cancel := context.WithTimeout(ctx, 6*time.Second)
		defer cancel()
		resp, err := n.c.log(l).DeleteRecords(cctx, &replicadv1.DeleteRecordsRequest{TimeoutMs: 5000,
			Partitions: []*replicadv1.DeleteRecordsPartition{{Topic: Topic, Partition: p, Offset: -1}}})
		if err != nil {
			return err
		}
		if len(resp.GetPartitions()) != 1 {
			return fmt.Errorf("delete records: %d partitions answered", len(resp.GetPartitions()))
		}
		r := resp.GetPartitions()[0]
		if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			return fmt.Errorf("delete records of partition %d on broker %d: %v", p, l, r.GetErrorCode())
		}
		n.h.note("operator", "delete-records: partition %d on broker %d, low watermark %d", p, l, r.GetLowWatermark())
		return nil
	})
}
