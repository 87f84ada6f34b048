package client

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Reassignment plans in kafka-reassign-partitions' JSON format:
//
//	{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,4]}]}
//
// GeneratePlan proposes one, ValidatePlan checks a whole plan against the
// cluster before any move starts, Admin.StartReassignments starts its
// moves, PlanProgressOf and Admin.WaitReassignments follow them, and
// Admin.CancelReassignments cancels those in flight.

// PlanVersion is the only plan format version (Kafka's too).
const PlanVersion = 1

// ReassignPlan is a reassignment plan; its JSON is Kafka's.
type ReassignPlan struct {
	Version    int             `json:"version"`
	Partitions []PlanPartition `json:"partitions"`
}

// PlanPartition is one partition's target assignment in a plan.
type PlanPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	// LogDirs is accepted for Kafka's files; only "any" is (moving between
	// a broker's log dirs is the AlterLogDir RPC's job).
	LogDirs []string `json:"log_dirs,omitempty"`
}

// Key is the partition the entry names.
func (p PlanPartition) Key() TopicPartition {
	return TopicPartition{Topic: p.Topic, Partition: p.Partition}
}

// PlanError lists every problem of a plan, each naming its entry; nothing
// was started.
type PlanError struct{ Problems []string }

func (e *PlanError) Error() string {
	return fmt.Sprintf("the plan is refused, nothing was started (%d problem(s)):\n  %s", len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// ClusterIndex is a DescribeCluster answer by partition.
type ClusterIndex struct {
	Partitions map[TopicPartition]*replicadv1.ClusterPartition
	Topics     map[string]bool
	Brokers    map[int32]bool // registered, alive or not
}

// IndexCluster indexes a DescribeCluster answer.
func IndexCluster(resp *replicadv1.DescribeClusterResponse) ClusterIndex {
	ix := ClusterIndex{Partitions: map[TopicPartition]*replicadv1.ClusterPartition{}, Topics: map[string]bool{}, Brokers: map[int32]bool{}}
	for _, p := range resp.GetPartitions() {
		ix.Partitions[TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}] = p
		ix.Topics[p.GetTopic()] = true
	}
	for _, b := range resp.GetBrokers() {
		ix.Brokers[b.GetId()] = true
	}
	return ix
}

// CurrentReplicas is a partition's assignment, the target one while a
// reassignment runs (its replicas minus the removing ones).
func CurrentReplicas(p *replicadv1.ClusterPartition) []int32 {
	return slices.DeleteFunc(slices.Clone(p.GetReplicas()), func(r int32) bool { return slices.Contains(p.GetRemovingReplicas(), r) })
}

// IsReassigning reports whether p has replicas being added or removed.
func IsReassigning(p *replicadv1.ClusterPartition) bool {
	return len(p.GetAddingReplicas()) > 0 || len(p.GetRemovingReplicas()) > 0
}

// topicNameRE is the legal topic name (SPEC: validation).
var topicNameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// ValidatePlan checks every entry of plan against the cluster: the
// partition exists, is named once, is not being reassigned already, and
// its replicas are registered brokers, none twice, as many as it has now
// (a plan moves replicas; it does not change the replication factor). It
// returns every problem at once, each naming its entry, as a *PlanError.
func ValidatePlan(plan ReassignPlan, ix ClusterIndex) error {
	var problems []string
	seen := map[TopicPartition]int{}
	for i, e := range plan.Partitions {
		name := fmt.Sprintf("partitions[%d] (%s-%d)", i, e.Topic, e.Partition)
		bad := func(format string, args ...any) { problems = append(problems, name+": "+fmt.Sprintf(format, args...)) }
		if j, dup := seen[e.Key()]; dup {
			bad("the partition is already in partitions[%d]", j)
			continue
		}
		seen[e.Key()] = i
		if !topicNameRE.MatchString(e.Topic) {
			bad("%q is not a legal topic name", e.Topic)
			continue
		}
		p, ok := ix.Partitions[e.Key()]
		switch {
		case !ok && !ix.Topics[e.Topic]:
			bad("unknown topic %q", e.Topic)
			continue
		case !ok:
			bad("unknown partition %d of topic %q", e.Partition, e.Topic)
			continue
		}
		for _, d := range e.LogDirs {
			if d != "any" {
				bad("log_dirs %s: only \"any\" is supported (move between a broker's log dirs with alter-log-dir)", strings.Join(e.LogDirs, ","))
				break
			}
		}
		if len(e.LogDirs) > 0 && len(e.LogDirs) != len(e.Replicas) {
			bad("%d log_dirs for %d replicas", len(e.LogDirs), len(e.Replicas))
		}
		if rf := len(CurrentReplicas(p)); len(e.Replicas) != rf {
			bad("%d replicas %s, but the partition has replication factor %d (%s)", len(e.Replicas), tp.IDList(e.Replicas), rf, tp.IDList(CurrentReplicas(p)))
		}
		for j, r := range e.Replicas {
			switch {
			case slices.Index(e.Replicas, r) != j:
				bad("broker %d is listed twice in %s", r, tp.IDList(e.Replicas))
			case !ix.Brokers[r]:
				bad("broker %d is not a registered broker", r)
			}
		}
		if IsReassigning(p) {
			bad("already being reassigned to %s (cancel it first)", tp.IDList(CurrentReplicas(p)))
		}
	}
	if len(problems) > 0 {
		return &PlanError{problems}
	}
	return nil
}

// CurrentPlan is the current assignment of parts, a rollback plan.
func CurrentPlan(parts []*replicadv1.ClusterPartition) ReassignPlan {
	out := ReassignPlan{Version: PlanVersion}
	for _, p := range parts {
		out.Partitions = append(out.Partitions, PlanPartition{Topic: p.GetTopic(), Partition: p.GetPartition(), Replicas: CurrentReplicas(p)})
	}
	return out
}

// PlanMoves splits a validated plan: before is the current state of each
// of its partitions, in the plan's order (CurrentPlan(before) is its
// rollback), and moves the entries whose replicas differ from the current
// ones, the moves to start.
func PlanMoves(plan ReassignPlan, ix ClusterIndex) (before []*replicadv1.ClusterPartition, moves []PlanPartition) {
	for _, entry := range plan.Partitions {
		p := ix.Partitions[entry.Key()]
		before = append(before, p)
		if !slices.Equal(CurrentReplicas(p), entry.Replicas) {
			moves = append(moves, entry)
		}
	}
	return before, moves
}

// GeneratePlan proposes an assignment of parts (every partition of the
// topics asked for, sorted by topic and partition) over brokers, keeping
// each partition's replication factor, in three steps:
//
//  1. Keep: every current replica on one of brokers stays; the replicas
//     missing go, one at a time, to the broker holding the fewest so far
//     (ties: the lowest id) that the partition does not have.
//  2. Even out: while one broker holds two replicas more than another,
//     move one replica from the fullest broker to the emptiest, taking
//     first a replica step 1 added over one that was there (so a replica
//     already in place moves only when balance needs it). Each step lowers
//     the imbalance, and one always exists: if every partition on the
//     fullest broker had the emptiest too, the emptiest would hold as many.
//  3. Preferred leaders (first replicas): a partition keeps its current
//     preferred leader while that broker leads fewer than
//     ceil(partitions / brokers); the others take the member of their set
//     that leads the fewest; then, while a broker leads two more than
//     another that is in one of its partitions' sets, one leadership moves.
//
// The other replicas keep their order after the leader, the added ones
// last. No brokers, or a partition with more replicas than brokers, is an
// error.
func GeneratePlan(parts []*replicadv1.ClusterPartition, brokers []int32) (ReassignPlan, error) {
	if len(brokers) == 0 {
		return ReassignPlan{}, errors.New("no brokers to assign to")
	}
	for _, p := range parts {
		if rf := len(CurrentReplicas(p)); rf > len(brokers) {
			return ReassignPlan{}, fmt.Errorf("%s-%d has replication factor %d, more than the %d brokers %s", p.GetTopic(), p.GetPartition(), rf, len(brokers), tp.IDList(brokers))
		}
	}
	count := map[int32]int{}
	sets := make([][]int32, len(parts))
	for i, p := range parts {
		for _, r := range CurrentReplicas(p) {
			if slices.Contains(brokers, r) {
				sets[i] = append(sets[i], r)
				count[r]++
			}
		}
	}
	// fewest is the broker of candidates with the fewest of by, lowest id first.
	fewest := func(by map[int32]int, candidates []int32, ok func(int32) bool) int32 {
		best := int32(-1)
		for _, b := range candidates {
			if ok(b) && (best < 0 || by[b] < by[best] || (by[b] == by[best] && b < best)) {
				best = b
			}
		}
		return best
	}
	for i, p := range parts {
		for len(sets[i]) < len(CurrentReplicas(p)) {
			b := fewest(count, brokers, func(b int32) bool { return !slices.Contains(sets[i], b) })
			sets[i] = append(sets[i], b)
			count[b]++
		}
	}
	for {
		lo := fewest(count, brokers, func(int32) bool { return true })
		hi := lo
		for _, b := range brokers {
			if count[b] > count[hi] || (count[b] == count[hi] && b < hi) {
				hi = b
			}
		}
		if count[hi]-count[lo] <= 1 {
			break
		}
		pick := -1
		for i, p := range parts {
			if slices.Contains(sets[i], hi) && !slices.Contains(sets[i], lo) {
				if pick < 0 || (slices.Contains(CurrentReplicas(parts[pick]), hi) && !slices.Contains(CurrentReplicas(p), hi)) {
					pick = i
				}
			}
		}
		sets[pick][slices.Index(sets[pick], hi)] = lo
		count[hi]--
		count[lo]++
	}
	leaderCap := (len(parts) + len(brokers) - 1) / len(brokers)
	leads := map[int32]int{}
	leader := make([]int32, len(parts))
	for i, p := range parts {
		leader[i] = -1
		if cur := CurrentReplicas(p); len(cur) > 0 && slices.Contains(sets[i], cur[0]) && leads[cur[0]] < leaderCap {
			leader[i] = cur[0]
			leads[cur[0]]++
		}
	}
	for i := range parts {
		if leader[i] < 0 {
			leader[i] = fewest(leads, sets[i], func(int32) bool { return true })
			leads[leader[i]]++
		}
	}
	for moved := true; moved; {
		moved = false
		for i := range parts {
			lo := fewest(leads, sets[i], func(int32) bool { return true })
			if leads[leader[i]]-leads[lo] > 1 {
				leads[leader[i]]--
				leads[lo]++
				leader[i] = lo
				moved = true
			}
		}
	}
	out := ReassignPlan{Version: PlanVersion}
	for i, p := range parts {
		replicas := append([]int32{leader[i]}, slices.DeleteFunc(slices.Clone(sets[i]), func(r int32) bool { return r == leader[i] })...)
		out.Partitions = append(out.Partitions, PlanPartition{Topic: p.GetTopic(), Partition: p.GetPartition(), Replicas: replicas})
	}
	return out, nil
}

// MoveCount counts the partitions a plan changes and the replicas it adds.
func MoveCount(plan ReassignPlan, ix ClusterIndex) (partitions, replicas int) {
	for _, e := range plan.Partitions {
		p := ix.Partitions[e.Key()]
		if p == nil {
			continue
		}
		cur := CurrentReplicas(p)
		if !slices.Equal(cur, e.Replicas) {
			partitions++
		}
		for _, r := range e.Replicas {
			if !slices.Contains(cur, r) {
				replicas++
			}
		}
	}
	return partitions, replicas
}

// The Status of a PlanProgress.
const (
	ProgressComplete   = "complete"
	ProgressInProgress = "in progress"
	ProgressNotStarted = "not started or differs"
)

// PlanProgress is one plan entry's state in the cluster, as
// kafka-reassign-partitions --verify reports it.
type PlanProgress struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Target    []int32 `json:"target"`
	Status    string  `json:"status"`
	Replicas  []int32 `json:"replicas"`
	ISR       []int32 `json:"isr"`
	// CatchingUp are the added replicas not in the ISR yet.
	CatchingUp []int32 `json:"catchingUp,omitempty"`
	Detail     string  `json:"detail,omitempty"`
}

// ProgressOf is e's state given its partition p (nil: none): complete when
// the partition has exactly the target replicas, in order, and nothing
// moving; in progress while a reassignment to the target runs; otherwise
// not started (or another reassignment, or a change since).
func ProgressOf(e PlanPartition, p *replicadv1.ClusterPartition) PlanProgress {
	out := PlanProgress{Topic: e.Topic, Partition: e.Partition, Target: e.Replicas}
	if p == nil {
		out.Status, out.Detail = ProgressNotStarted, "the partition does not exist"
		return out
	}
	out.Replicas, out.ISR = p.GetReplicas(), p.GetIsr()
	switch {
	case !IsReassigning(p) && slices.Equal(p.GetReplicas(), e.Replicas):
		out.Status = ProgressComplete
	case IsReassigning(p) && SameMembers(CurrentReplicas(p), e.Replicas):
		out.Status = ProgressInProgress
		for _, a := range p.GetAddingReplicas() {
			if !slices.Contains(p.GetIsr(), a) {
				out.CatchingUp = append(out.CatchingUp, a)
			}
		}
		out.Detail = ReassignStatus(p, e.Replicas)
	case IsReassigning(p):
		out.Status, out.Detail = ProgressNotStarted, fmt.Sprintf("being reassigned to %s instead", tp.IDList(CurrentReplicas(p)))
	default:
		out.Status, out.Detail = ProgressNotStarted, fmt.Sprintf("replicas are %s", tp.IDList(p.GetReplicas()))
	}
	return out
}

// PlanProgressOf is the progress of every entry of plan, in its order, and
// how many are complete.
func PlanProgressOf(plan ReassignPlan, ix ClusterIndex) (progress []PlanProgress, complete int) {
	for _, entry := range plan.Partitions {
		pp := ProgressOf(entry, ix.Partitions[entry.Key()])
		progress = append(progress, pp)
		if pp.Status == ProgressComplete {
			complete++
		}
	}
	return progress, complete
}

func (p PlanProgress) String() string {
	s := fmt.Sprintf("%s-%d: %s", p.Topic, p.Partition, p.Status)
	switch {
	case p.Status == ProgressComplete:
		s += fmt.Sprintf(": replicas %s, ISR %s", tp.IDList(p.Replicas), tp.IDList(p.ISR))
	case p.Detail != "":
		s += ": " + p.Detail
	}
	return s
}

// ReassignStatus describes a partition still being reassigned to target:
// "adding 4, removing 1: ISR 1,2,3, waiting for 4".
func ReassignStatus(p *replicadv1.ClusterPartition, target []int32) string {
	adding, removing := p.GetAddingReplicas(), p.GetRemovingReplicas()
	var head string
	switch {
	case len(adding) > 0 && len(removing) > 0:
		head = fmt.Sprintf("adding %s, removing %s", tp.IDList(adding), tp.IDList(removing))
	case len(adding) > 0:
		head = fmt.Sprintf("adding %s", tp.IDList(adding))
	case len(removing) > 0:
		head = fmt.Sprintf("removing %s", tp.IDList(removing))
	default:
		return fmt.Sprintf("replicas %s, ISR %s, waiting for replicas %s", tp.IDList(p.GetReplicas()), tp.IDList(p.GetIsr()), tp.IDList(target))
	}
	var behind []int32
	for _, a := range adding {
		if !slices.Contains(p.GetIsr(), a) {
			behind = append(behind, a)
		}
	}
	tail := "waiting for the controller to finish"
	if len(behind) > 0 {
		tail = "waiting for " + tp.IDList(behind)
	}
	return fmt.Sprintf("%s: ISR %s, %s", head, tp.IDList(p.GetIsr()), tail)
}

// SameMembers reports whether a and b hold the same broker ids, in any
// order.
func SameMembers(a, b []int32) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

// MoveError is a move of a plan that did not start (StartReassignments),
// or a cancel that failed (CancelReassignments): Err is an *Error (an
// answer's error code; Op "reassign t-0" or "cancel t-0") or the call's
// error.
type MoveError struct {
	Partition TopicPartition
	Err       error
}

// StartReassignments sends a ReassignPartition request for each of moves
// (PlanMoves' moves of a validated plan), in order. A move that fails does
// not stop the others: a plan is many independent moves, and
// PlanProgressOf or CancelReassignments deal with those started. It
// returns how many started and the failures.
func (a *Admin) StartReassignments(ctx context.Context, moves []PlanPartition) (started int, failed []MoveError) {
	for _, m := range moves {
		r, err := a.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: m.Topic, Partition: m.Partition, Replicas: m.Replicas})
		if err == nil {
			err = answerErr("reassign "+m.Key().String(), m.Key(), r.GetErrorCode(), r.GetErrorMessage())
		}
		if err != nil {
			failed = append(failed, MoveError{m.Key(), err})
			continue
		}
		started++
	}
	return started, failed
}

// The Outcome of a CancelResult.
const (
	CancelCancelled = "cancelled"
	CancelNothing   = "nothing in flight"
	CancelFailed    = "failed"
)

// CancelResult is one partition's outcome of CancelReassignments.
type CancelResult struct {
	Partition TopicPartition
	Outcome   string
	// Replicas are the partition's replicas after (a cancel restores
	// those before the reassignment).
	Replicas []int32
	Err      error // with CancelFailed
}

// CancelReassignments cancels the reassignment in flight of each of keys,
// as ix (IndexCluster of a DescribeCluster answer) shows them. A
// partition with nothing in flight, or whose reassignment completed
// before its cancel (NO_REASSIGNMENT_IN_PROGRESS), is CancelNothing: a
// cancel run twice succeeds.
func (a *Admin) CancelReassignments(ctx context.Context, keys []TopicPartition, ix ClusterIndex) []CancelResult {
	var results []CancelResult
	for _, k := range keys {
		res := CancelResult{Partition: k}
		if !IsReassigning(ix.Partitions[k]) {
			res.Outcome, res.Replicas = CancelNothing, ix.Partitions[k].GetReplicas()
			results = append(results, res)
			continue
		}
		r, err := a.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: k.Topic, Partition: k.Partition, Cancel: true})
		switch {
		case err != nil:
			res.Outcome, res.Err = CancelFailed, err
		case r.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS:
			// It completed between the describe and the cancel.
			res.Outcome, res.Replicas = CancelNothing, r.GetPartition().GetReplicas()
		case r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
			res.Outcome, res.Err = CancelFailed, answerErr("cancel "+k.String(), k, r.GetErrorCode(), r.GetErrorMessage())
		default:
			res.Outcome, res.Replicas = CancelCancelled, r.GetPartition().GetReplicas()
		}
		results = append(results, res)
	}
	return results
}

// Reassigning are the partitions with a reassignment in flight in resp,
// in its order.
func Reassigning(resp *replicadv1.DescribeClusterResponse) []TopicPartition {
	var keys []TopicPartition
	for _, p := range resp.GetPartitions() {
		if IsReassigning(p) {
			keys = append(keys, TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()})
		}
	}
	return keys
}

// WaitReassignments asks DescribeCluster every interval until every entry
// of plan is complete, calling onPoll (if not nil) with each round's
// progress. It returns the last progress, and nil once every entry is
// complete. It stops when ctx ends: with ctx.Err() itself when ctx ended
// between rounds, with the call's error when a DescribeCluster failed
// (an *Error for an answer's error code).
func (a *Admin) WaitReassignments(ctx context.Context, plan ReassignPlan, interval time.Duration, onPoll func(progress []PlanProgress)) ([]PlanProgress, error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var progress []PlanProgress
	for {
		resp, err := a.describeClusterOK(ctx)
		if err != nil {
			return progress, err
		}
		var done int
		progress, done = PlanProgressOf(plan, IndexCluster(resp))
		if onPoll != nil {
			onPoll(progress)
		}
		if done == len(plan.Partitions) {
			return progress, nil
		}
		select {
		case <-ctx.Done():
			return progress, ctx.Err()
		case <-tick.C:
		}
	}
}

// ErrPartitionGone: the partition a wait follows is no longer in the
// controller's description (its topic was deleted).
var ErrPartitionGone = errors.New("the partition is gone")

// WaitReassignment asks DescribeCluster every interval until partition k
// holds the replicas of target (in any order: the controller may put
// another first) with nothing being added or removed, and returns its
// state then. onPoll (if not nil) sees each round's state before that. It
// stops as WaitReassignments does, with ErrPartitionGone when k is no
// longer described.
func (a *Admin) WaitReassignment(ctx context.Context, k TopicPartition, target []int32, interval time.Duration, onPoll func(p *replicadv1.ClusterPartition)) (*replicadv1.ClusterPartition, error) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		resp, err := a.describeClusterOK(ctx)
		if err != nil {
			return nil, err
		}
		p := IndexCluster(resp).Partitions[k]
		switch {
		case p == nil:
			return nil, ErrPartitionGone
		case !IsReassigning(p) && SameMembers(p.GetReplicas(), target):
			return p, nil
		case onPoll != nil:
			onPoll(p)
		}
		select {
		case <-ctx.Done():
			return p, ctx.Err()
		case <-tick.C:
		}
	}
}
