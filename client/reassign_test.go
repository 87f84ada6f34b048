package client

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// planJSON is the plan as Kafka's tools write it.
func planJSON(p ReassignPlan) string {
	b, _ := json.Marshal(p)
	return string(b)
}

func rpart(topic string, p int32, replicas ...int32) *replicadv1.ClusterPartition {
	return &replicadv1.ClusterPartition{Topic: topic, Partition: p, Leader: replicas[0], Replicas: replicas, Isr: replicas}
}

// spread counts each broker's replicas and preferred leaderships in plan.
func spread(plan ReassignPlan) (replicas, leaders map[int32]int) {
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, e := range plan.Partitions {
		leaders[e.Replicas[0]]++
		for _, r := range e.Replicas {
			replicas[r]++
		}
	}
	return replicas, leaders
}

func wantEven(t *testing.T, what string, counts map[int32]int, brokers []int32) {
	t.Helper()
	lo, hi := -1, 0
	for _, b := range brokers {
		n := counts[b]
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	for b := range counts {
		if !slices.Contains(brokers, b) {
			t.Fatalf("%s on broker %d, not one of %v: %v", what, b, brokers, counts)
		}
	}
	if hi-lo > 1 {
		t.Fatalf("%s uneven over %v: %v", what, brokers, counts)
	}
}

// Moving off broker 3 onto broker 4 moves only broker 3's replicas, and
// the result is even in replicas and preferred leaders.
func TestGeneratePlanMovesOnlyWhatItMust(t *testing.T) {
	parts := []*replicadv1.ClusterPartition{
		rpart("t", 0, 1, 2, 3), rpart("t", 1, 2, 3, 1), rpart("t", 2, 3, 1, 2),
	}
	plan, err := GeneratePlan(parts, []int32{1, 2, 4})
	if err != nil {
		t.Fatal(err)
	}
	ix := IndexCluster(&replicadv1.DescribeClusterResponse{Partitions: parts})
	moved, added := MoveCount(plan, ix)
	if added != 3 {
		t.Fatalf("%d replicas copied, want 3 (broker 3's only): %s", added, planJSON(plan))
	}
	if moved != 3 {
		t.Fatalf("%d partitions changed, want 3", moved)
	}
	for i, e := range plan.Partitions {
		if !SameMembers(e.Replicas, []int32{1, 2, 4}) {
			t.Fatalf("partition %d: %v, want {1 2 4}", i, e.Replicas)
		}
	}
	// The kept preferred leaders stay: 1 and 2 led t-0 and t-1.
	if plan.Partitions[0].Replicas[0] != 1 || plan.Partitions[1].Replicas[0] != 2 || plan.Partitions[2].Replicas[0] != 4 {
		t.Fatalf("preferred leaders %s, want 1, 2, then 4 for the one 3 led", planJSON(plan))
	}
	if want := `{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,4]},`; !strings.HasPrefix(planJSON(plan), want) {
		t.Fatalf("plan JSON %s, want Kafka's format starting %s", planJSON(plan), want)
	}
}

// A plan already balanced over the brokers changes nothing; growing the
// cluster, or piling everything on few brokers, ends even.
func TestGeneratePlanSpreadsEvenly(t *testing.T) {
	var balanced []*replicadv1.ClusterPartition
	for i := range int32(6) {
		balanced = append(balanced, rpart("t", i, 1+i%3, 1+(i+1)%3))
	}
	plan, err := GeneratePlan(balanced, []int32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if moved, _ := MoveCount(plan, IndexCluster(&replicadv1.DescribeClusterResponse{Partitions: balanced})); moved != 0 {
		t.Fatalf("a balanced assignment moves %d partitions: %s", moved, planJSON(plan))
	}

	for _, tc := range []struct {
		name    string
		parts   int32
		rf      int
		brokers []int32
		// minAdded is the fewest replicas any even plan copies.
		minAdded int
	}{
		{"grow 3 to 5 brokers", 10, 3, []int32{1, 2, 3, 4, 5}, 12},
		{"all on 1-2, spread on 1-4", 8, 2, []int32{1, 2, 3, 4}, 8},
		{"odd counts", 7, 2, []int32{2, 5, 9}, 9},
		{"rf 1", 5, 1, []int32{1, 2}, 2},
	} {
		var parts []*replicadv1.ClusterPartition
		for i := range tc.parts {
			replicas := []int32{1, 2, 3}[:tc.rf]
			parts = append(parts, rpart("a", i, replicas...))
		}
		plan, err := GeneratePlan(parts, tc.brokers)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if _, added := MoveCount(plan, IndexCluster(&replicadv1.DescribeClusterResponse{Partitions: parts})); added != tc.minAdded {
			t.Errorf("%s: %d replicas copied, want the minimum %d", tc.name, added, tc.minAdded)
		}
		replicas, leaders := spread(plan)
		wantEven(t, tc.name+": replicas", replicas, tc.brokers)
		wantEven(t, tc.name+": leaders", leaders, tc.brokers)
		for _, e := range plan.Partitions {
			distinct := slices.Clone(e.Replicas)
			slices.Sort(distinct)
			if len(e.Replicas) != tc.rf || len(slices.Compact(distinct)) != tc.rf {
				t.Fatalf("%s: %v is not %d distinct brokers", tc.name, e.Replicas, tc.rf)
			}
		}
	}
	if _, err := GeneratePlan([]*replicadv1.ClusterPartition{rpart("t", 0, 1, 2, 3)}, []int32{1, 2}); err == nil {
		t.Fatal("rf 3 over 2 brokers accepted")
	}
}

// validatePlan names every bad entry and accepts a good plan.
func TestValidatePlan(t *testing.T) {
	moving := rpart("t", 1, 1, 2, 4, 3)
	moving.AddingReplicas, moving.RemovingReplicas = []int32{4}, []int32{3}
	resp := &replicadv1.DescribeClusterResponse{
		Partitions: []*replicadv1.ClusterPartition{rpart("t", 0, 1, 2, 3), moving, rpart("u", 0, 1, 2)},
		Brokers:    []*replicadv1.BrokerDescription{{Id: 1}, {Id: 2}, {Id: 3}, {Id: 4}},
	}
	ix := IndexCluster(resp)
	entry := func(topic string, p int32, replicas ...int32) PlanPartition {
		return PlanPartition{Topic: topic, Partition: p, Replicas: replicas}
	}
	good := ReassignPlan{Version: 1, Partitions: []PlanPartition{entry("t", 0, 4, 2, 3), entry("u", 0, 3, 4)}}
	if err := ValidatePlan(good, ix); err != nil {
		t.Fatalf("good plan refused: %v", err)
	}
	bad := ReassignPlan{Version: 1, Partitions: []PlanPartition{
		entry("nope", 0, 1, 2, 3),
		entry("t", 9, 1, 2, 3),
		entry("t", 0, 1, 1, 2),
		entry("u", 0, 1, 2, 3),
		entry("t", 0, 1, 2, 3),
		entry("u", 0, 1, 7),
		entry("t", 1, 1, 2, 3),
		{Topic: "u", Partition: 0, Replicas: []int32{1, 2}, LogDirs: []string{"/d", "any"}},
	}}
	err := ValidatePlan(bad, ix)
	if err == nil {
		t.Fatal("bad plan accepted")
	}
	for _, want := range []string{
		`partitions[0] (nope-0): unknown topic "nope"`,
		`partitions[1] (t-9): unknown partition 9 of topic "t"`,
		`partitions[2] (t-0): broker 1 is listed twice`,
		`partitions[3] (u-0): 3 replicas 1,2,3, but the partition has replication factor 2`,
		`partitions[4] (t-0): the partition is already in partitions[2]`,
		`partitions[5] (u-0): the partition is already in partitions[3]`,
		`partitions[6] (t-1): already being reassigned to 1,2,4`,
		`partitions[7] (u-0): the partition is already in partitions[3]`,
		"nothing was started",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
	if err := ValidatePlan(ReassignPlan{Version: 1, Partitions: []PlanPartition{entry("u", 0, 1, 7)}}, ix); err == nil ||
		!strings.Contains(err.Error(), "broker 7 is not a registered broker") {
		t.Errorf("unknown broker: %v", err)
	}
	if err := ValidatePlan(ReassignPlan{Version: 1, Partitions: []PlanPartition{{Topic: "u", Partition: 0, Replicas: []int32{1, 2}, LogDirs: []string{"/d", "any"}}}}, ix); err == nil ||
		!strings.Contains(err.Error(), `only "any"`) {
		t.Errorf("log dirs: %v", err)
	}
}

// progressOf tells complete (exact replicas, in order), in progress (with
// who is catching up), and not started or another target.
func TestPlanProgress(t *testing.T) {
	e := PlanPartition{Topic: "t", Partition: 0, Replicas: []int32{2, 3, 4}}
	moving := rpart("t", 0, 2, 3, 4, 1)
	moving.Isr = []int32{1, 2, 3}
	moving.AddingReplicas, moving.RemovingReplicas = []int32{4}, []int32{1}
	other := rpart("t", 0, 2, 3, 5, 1)
	other.AddingReplicas, other.RemovingReplicas = []int32{5}, []int32{1}
	for _, tc := range []struct {
		p      *replicadv1.ClusterPartition
		status string
		detail string
	}{
		{rpart("t", 0, 2, 3, 4), ProgressComplete, ""},
		{rpart("t", 0, 3, 2, 4), ProgressNotStarted, "replicas are 3,2,4"},
		{moving, ProgressInProgress, "waiting for 4"},
		{other, ProgressNotStarted, "being reassigned to 2,3,5 instead"},
		{nil, ProgressNotStarted, "does not exist"},
	} {
		got := ProgressOf(e, tc.p)
		if got.Status != tc.status || !strings.Contains(got.Detail, tc.detail) {
			t.Errorf("%v: %+v, want %s with %q", tc.p, got, tc.status, tc.detail)
		}
	}
	if got := ProgressOf(e, moving); fmt.Sprint(got.CatchingUp) != "[4]" {
		t.Errorf("catching up %v, want [4]", got.CatchingUp)
	}
}
