package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Reassignment plans in kafka-reassign-partitions' JSON format:
//
//	{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,4]}]}
//
// --generate proposes one (generatePlan), --execute validates a whole plan
// against the cluster before it starts any move (validatePlan), --verify
// and --cancel act on the partitions a plan names.

// planVersion is the only plan format version (Kafka's too).
const planVersion = 1

type reassignPlan struct {
	Version    int             `json:"version"`
	Partitions []planPartition `json:"partitions"`
}

type planPartition struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`
	// LogDirs is accepted for Kafka's files; only "any" is (moving between
	// a broker's log dirs is alter-log-dir's job).
	LogDirs []string `json:"log_dirs,omitempty"`
}

func (p planPartition) key() partitionKey { return partitionKey{p.Topic, p.Partition} }

// planJSON is the plan on one line, as Kafka prints it.
func planJSON(p reassignPlan) string {
	if p.Partitions == nil {
		p.Partitions = []planPartition{}
	}
	b, _ := json.Marshal(p) // plain structs: cannot fail
	return string(b)
}

// readPlan reads and parses a plan file (- for stdin). Unknown fields and
// a version other than 1 are refused: a typo must not turn into a partial
// plan.
func readPlan(path string, stdin io.Reader) (reassignPlan, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return reassignPlan{}, usagef("--plan: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p reassignPlan
	if err := dec.Decode(&p); err != nil {
		return reassignPlan{}, usagef("--plan %s: not a reassignment plan: %v", path, err)
	}
	if p.Version != planVersion {
		return reassignPlan{}, usagef("--plan %s: version %d, want %d", path, p.Version, planVersion)
	}
	if len(p.Partitions) == 0 {
		return reassignPlan{}, usagef("--plan %s: no partitions", path)
	}
	return p, nil
}

// planError lists every problem of a plan, each naming its entry; nothing
// was started.
type planError struct{ problems []string }

func (e planError) Error() string {
	return fmt.Sprintf("the plan is refused, nothing was started (%d problem(s)):\n  %s", len(e.problems), strings.Join(e.problems, "\n  "))
}

// clusterIndex is a DescribeCluster answer by partition.
type clusterIndex struct {
	parts   map[partitionKey]*replicadv1.ClusterPartition
	topics  map[string]bool
	brokers map[int32]bool
}

func indexCluster(resp *replicadv1.DescribeClusterResponse) clusterIndex {
	ix := clusterIndex{parts: map[partitionKey]*replicadv1.ClusterPartition{}, topics: map[string]bool{}, brokers: map[int32]bool{}}
	for _, p := range resp.GetPartitions() {
		ix.parts[partitionKey{p.GetTopic(), p.GetPartition()}] = p
		ix.topics[p.GetTopic()] = true
	}
	for _, b := range resp.GetBrokers() {
		ix.brokers[b.GetId()] = true
	}
	return ix
}

// currentReplicas is a partition's assignment, the target one while a
// reassignment runs (its replicas minus the removing ones).
func currentReplicas(p *replicadv1.ClusterPartition) []int32 {
	return slices.DeleteFunc(slices.Clone(p.GetReplicas()), func(r int32) bool { return slices.Contains(p.GetRemovingReplicas(), r) })
}

// originalReplicas is what a partition had before its reassignment: its
// replicas minus the adding ones (what a cancel restores).
func originalReplicas(p *replicadv1.ClusterPartition) []int32 {
	return slices.DeleteFunc(slices.Clone(p.GetReplicas()), func(r int32) bool { return slices.Contains(p.GetAddingReplicas(), r) })
}

func isReassigning(p *replicadv1.ClusterPartition) bool {
	return len(p.GetAddingReplicas()) > 0 || len(p.GetRemovingReplicas()) > 0
}

// validatePlan checks every entry of plan against the cluster: the
// partition exists, is named once, is not being reassigned already, and
// its replicas are registered brokers, none twice, as many as it has now
// (a plan moves replicas; it does not change the replication factor). It
// returns every problem at once, each naming its entry.
func validatePlan(plan reassignPlan, ix clusterIndex) error {
	var problems []string
	seen := map[partitionKey]int{}
	for i, e := range plan.Partitions {
		name := fmt.Sprintf("partitions[%d] (%s-%d)", i, e.Topic, e.Partition)
		bad := func(format string, args ...any) { problems = append(problems, name+": "+fmt.Sprintf(format, args...)) }
		if j, dup := seen[e.key()]; dup {
			bad("the partition is already in partitions[%d]", j)
			continue
		}
		seen[e.key()] = i
		if err := checkTopicName(e.Topic); err != nil {
			bad("%q is not a legal topic name", e.Topic)
			continue
		}
		p, ok := ix.parts[e.key()]
		switch {
		case !ok && !ix.topics[e.Topic]:
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
		if rf := len(currentReplicas(p)); len(e.Replicas) != rf {
			bad("%d replicas %s, but the partition has replication factor %d (%s)", len(e.Replicas), idList(e.Replicas), rf, idList(currentReplicas(p)))
		}
		for j, r := range e.Replicas {
			switch {
			case slices.Index(e.Replicas, r) != j:
				bad("broker %d is listed twice in %s", r, idList(e.Replicas))
			case !ix.brokers[r]:
				bad("broker %d is not a registered broker", r)
			}
		}
		if isReassigning(p) {
			bad("already being reassigned to %s (cancel it first)", idList(currentReplicas(p)))
		}
	}
	if len(problems) > 0 {
		return planError{problems}
	}
	return nil
}

// currentPlan is the current assignment of the partitions plan names (or,
// with plan empty, of parts), for a rollback.
func currentPlan(parts []*replicadv1.ClusterPartition) reassignPlan {
	out := reassignPlan{Version: planVersion}
	for _, p := range parts {
		out.Partitions = append(out.Partitions, planPartition{Topic: p.GetTopic(), Partition: p.GetPartition(), Replicas: currentReplicas(p)})
	}
	return out
}

// generatePlan proposes an assignment of parts (every partition of the
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
// last.
func generatePlan(parts []*replicadv1.ClusterPartition, brokers []int32) (reassignPlan, error) {
	if len(brokers) == 0 {
		return reassignPlan{}, usagef("--brokers must name at least one broker")
	}
	for _, p := range parts {
		if rf := len(currentReplicas(p)); rf > len(brokers) {
			return reassignPlan{}, usagef("%s-%d has replication factor %d, more than the %d brokers %s", p.GetTopic(), p.GetPartition(), rf, len(brokers), idList(brokers))
		}
	}
	count := map[int32]int{}
	sets := make([][]int32, len(parts))
	for i, p := range parts {
		for _, r := range currentReplicas(p) {
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
		for len(sets[i]) < len(currentReplicas(p)) {
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
				if pick < 0 || (slices.Contains(currentReplicas(parts[pick]), hi) && !slices.Contains(currentReplicas(p), hi)) {
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
		if cur := currentReplicas(p); len(cur) > 0 && slices.Contains(sets[i], cur[0]) && leads[cur[0]] < leaderCap {
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
	out := reassignPlan{Version: planVersion}
	for i, p := range parts {
		replicas := append([]int32{leader[i]}, slices.DeleteFunc(slices.Clone(sets[i]), func(r int32) bool { return r == leader[i] })...)
		out.Partitions = append(out.Partitions, planPartition{Topic: p.GetTopic(), Partition: p.GetPartition(), Replicas: replicas})
	}
	return out, nil
}

// partitionsOfTopics are the partitions of topics, sorted; an unknown
// topic is an error naming it.
func partitionsOfTopics(resp *replicadv1.DescribeClusterResponse, topics []string) ([]*replicadv1.ClusterPartition, error) {
	ix := indexCluster(resp)
	var unknown []string
	for _, t := range topics {
		if !ix.topics[t] {
			unknown = append(unknown, t)
		}
	}
	if len(unknown) > 0 {
		return nil, answerError{fmt.Sprintf("reassign --generate: unknown topic(s) %s", strings.Join(unknown, ", "))}
	}
	var out []*replicadv1.ClusterPartition
	for _, p := range resp.GetPartitions() {
		if slices.Contains(topics, p.GetTopic()) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *replicadv1.ClusterPartition) int {
		return cmp.Or(cmp.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	return out, nil
}

// moveCount counts the replicas a plan adds, and the partitions it changes.
func moveCount(plan reassignPlan, ix clusterIndex) (partitions, replicas int) {
	for _, e := range plan.Partitions {
		p := ix.parts[e.key()]
		if p == nil {
			continue
		}
		cur := currentReplicas(p)
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

// Progress of one plan entry, as --verify and --execute --wait report it.
const (
	progressComplete   = "complete"
	progressInProgress = "in progress"
	progressNotStarted = "not started or differs"
)

// planProgress is one plan entry's state in the cluster.
type planProgress struct {
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

// progressOf is e's state: complete when the partition has exactly the
// target replicas, in order, and nothing moving; in progress while a
// reassignment to the target runs; otherwise not started (or another
// reassignment, or a change since).
func progressOf(e planPartition, p *replicadv1.ClusterPartition) planProgress {
	out := planProgress{Topic: e.Topic, Partition: e.Partition, Target: e.Replicas}
	if p == nil {
		out.Status, out.Detail = progressNotStarted, "the partition does not exist"
		return out
	}
	out.Replicas, out.ISR = p.GetReplicas(), p.GetIsr()
	switch {
	case !isReassigning(p) && slices.Equal(p.GetReplicas(), e.Replicas):
		out.Status = progressComplete
	case isReassigning(p) && sameMembers(currentReplicas(p), e.Replicas):
		out.Status = progressInProgress
		for _, a := range p.GetAddingReplicas() {
			if !slices.Contains(p.GetIsr(), a) {
				out.CatchingUp = append(out.CatchingUp, a)
			}
		}
		out.Detail = reassignProgress(p, e.Replicas)
	case isReassigning(p):
		out.Status, out.Detail = progressNotStarted, fmt.Sprintf("being reassigned to %s instead", idList(currentReplicas(p)))
	default:
		out.Status, out.Detail = progressNotStarted, fmt.Sprintf("replicas are %s", idList(p.GetReplicas()))
	}
	return out
}

func (p planProgress) String() string {
	s := fmt.Sprintf("%s-%d: %s", p.Topic, p.Partition, p.Status)
	switch {
	case p.Status == progressComplete:
		s += fmt.Sprintf(": replicas %s, ISR %s", idList(p.Replicas), idList(p.ISR))
	case p.Detail != "":
		s += ": " + p.Detail
	}
	return s
}

// errIncomplete is --verify's and --wait's failure when a move is not done.
var errIncomplete = errors.New("not every reassignment of the plan is complete")
