package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// electController is a fakeController that also answers ElectLeaders the
// way the controller decides preferred elections, over the partitions its
// DescribeCluster lists: ELECTION_NOT_NEEDED where the first replica leads,
// PREFERRED_LEADER_NOT_AVAILABLE where it is out of the ISR, NONE (and the
// first replica now leads) otherwise.
type electController struct {
	*fakeController
	mu    sync.Mutex
	parts map[string]*replicadv1.ClusterPartition
	reqs  []*replicadv1.ElectLeadersRequest
}

func newElectController(parts ...*replicadv1.ClusterPartition) *electController {
	f := newFakeController()
	ec := &electController{fakeController: f, parts: map[string]*replicadv1.ClusterPartition{}}
	for _, p := range parts {
		ec.parts[fmt.Sprintf("%s-%d", p.GetTopic(), p.GetPartition())] = p
	}
	f.describe = func(int) *replicadv1.DescribeClusterResponse { return clusterWith(parts...) }
	return ec
}

func (ec *electController) ElectLeaders(_ context.Context, req *replicadv1.ElectLeadersRequest) (*replicadv1.ElectLeadersResponse, error) {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	ec.reqs = append(ec.reqs, proto.Clone(req).(*replicadv1.ElectLeadersRequest))
	resp := &replicadv1.ElectLeadersResponse{}
	for _, t := range req.GetTopics() {
		for _, n := range t.GetPartitions() {
			r := &replicadv1.ElectLeadersResult{Topic: t.GetTopic(), Partition: n}
			p, ok := ec.parts[fmt.Sprintf("%s-%d", t.GetTopic(), n)]
			switch {
			case !ok:
				r.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			case p.GetLeader() == p.GetReplicas()[0]:
				r.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED
			case !slices.Contains(p.GetIsr(), p.GetReplicas()[0]):
				r.ErrorCode, r.ErrorMessage = replicadv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE, "the preferred replica is not in the ISR"
			default:
				p.Leader = p.GetReplicas()[0]
			}
			if ok {
				r.State = proto.Clone(p).(*replicadv1.ClusterPartition)
			}
			resp.Results = append(resp.Results, r)
		}
	}
	return resp, nil
}

func (ec *electController) requests() []*replicadv1.ElectLeadersRequest {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return ec.reqs
}

// part is topic-partition with replicas, led by leader, ISR isr.
func part(topic string, n, leader int32, replicas, isr []int32) *replicadv1.ClusterPartition {
	return &replicadv1.ClusterPartition{Topic: topic, Partition: n, Leader: leader, Replicas: replicas, Isr: isr}
}

// TestElectPreferredOnePartition: ELECTION_NOT_NEEDED is a no-op that exits
// 0 with a message; an election prints the new leader.
func TestElectPreferredOnePartition(t *testing.T) {
	ec := newElectController(part("orders", 0, 1, []int32{1, 2}, []int32{1, 2}), part("orders", 1, 1, []int32{2, 1}, []int32{1, 2}))
	addr := startController(t, ec)

	r := ctl(t, "", "", "--controller", addr, "elect", "--preferred", "--topic", "orders", "--partition", "0")
	wantCode(t, r, 0)
	wantContains(t, "stderr", r.stderr, "elect --preferred: nothing to do: orders-0: the preferred leader 1 already leads")
	wantContains(t, "stdout", r.stdout, "ELECTION_NOT_NEEDED")
	want := &replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED,
		Topics: []*replicadv1.ElectLeadersTopic{{Topic: "orders", Partitions: []int32{0}}}}
	if got := ec.requests(); len(got) != 1 || !proto.Equal(got[0], want) {
		t.Fatalf("requests %v, want %v", got, want)
	}
	if n := ec.callCount("DescribeCluster"); n != 0 {
		t.Errorf("one partition asked DescribeCluster %d times", n)
	}

	r = ctl(t, "", "", "--controller", addr, "elect", "--preferred", "--topic", "orders", "--partition", "1")
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.stdout, "orders  1          NONE    2       2,1       1,2")

	r = ctl(t, "", "", "--controller", addr, "elect", "--preferred", "--topic", "orders", "--partition", "7")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "elect --preferred: 1 of 1 partitions not elected: orders-7: UNKNOWN_TOPIC_OR_PARTITION")
}

// TestElectPreferredTopicProgress: a topic goes in batches, with a progress
// line per partition, a summary, and exit 1 when a partition failed.
func TestElectPreferredTopicProgress(t *testing.T) {
	var parts []*replicadv1.ClusterPartition
	for i := range int32(25) {
		p := part("orders", i, 2, []int32{1, 2}, []int32{1, 2})
		if i == 7 {
			p.Isr = []int32{2}
		}
		if i%5 == 0 {
			p.Leader = 1
		}
		parts = append(parts, p)
	}
	parts = append(parts, part("other", 0, 2, []int32{1, 2}, []int32{1, 2}))
	ec := newElectController(parts...)
	addr := startController(t, ec)

	r := ctl(t, "", "", "--controller", addr, "elect", "--preferred", "--topic", "orders")
	wantCode(t, r, 1)
	reqs := ec.requests()
	if len(reqs) != 2 || len(reqs[0].GetTopics()[0].GetPartitions()) != client.PreferredElectBatch || len(reqs[1].GetTopics()[0].GetPartitions()) != 5 {
		t.Fatalf("requests %v, want batches of %d and 5 partitions of orders", reqs, client.PreferredElectBatch)
	}
	for _, req := range reqs {
		for _, tp := range req.GetTopics() {
			if tp.GetTopic() != "orders" {
				t.Errorf("elect --topic orders asked for %v", tp)
			}
		}
	}
	wantContains(t, "stderr", r.stderr,
		"[1/25] orders-0: the preferred leader 1 already leads\n[2/25] orders-1: elected the preferred leader 1\n",
		"[8/25] orders-7: PREFERRED_LEADER_NOT_AVAILABLE: the preferred replica is not in the ISR\n",
		"[25/25] orders-24: elected the preferred leader 1\n",
		"elect --preferred: 25 partitions: 19 elected, 5 already led by their preferred replica, 1 failed\n",
		"elect --preferred: 1 of 25 partitions not elected: orders-7: PREFERRED_LEADER_NOT_AVAILABLE")
	wantContains(t, "stdout", r.stdout, "TOPIC   PARTITION  RESULT", "orders  7          PREFERRED_LEADER_NOT_AVAILABLE  2       1,2       2    the preferred replica is not in the ISR")

	// Again: everything is where it should be, apart from orders-7.
	r = ctl(t, "", "", "--controller", addr, "elect", "--preferred", "--topic", "orders")
	wantContains(t, "stderr", r.stderr, "25 partitions: 0 elected, 24 already led by their preferred replica, 1 failed")

	r = ctl(t, "", "", "--controller", addr, "elect", "--preferred", "--topic", "nope")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "UNKNOWN_TOPIC_OR_PARTITION: topic \"nope\" does not exist")
}

// TestElectPreferredAllJSON: --all covers every topic and, with -o json,
// prints one ElectLeadersResponse holding every result.
func TestElectPreferredAllJSON(t *testing.T) {
	var parts []*replicadv1.ClusterPartition
	for i := range int32(3) {
		parts = append(parts, part("a", i, 2, []int32{1, 2}, []int32{1, 2}), part("b", i, 1, []int32{1, 2}, []int32{1, 2}))
	}
	ec := newElectController(parts...)
	addr := startController(t, ec)
	r := ctl(t, "", "", "--controller", addr, "-o", "json", "elect", "--preferred", "--all")
	wantCode(t, r, 0)
	var got replicadv1.ElectLeadersResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout is not one ElectLeadersResponse: %v\n%s", err, r.stdout)
	}
	var outcomes []string
	for _, res := range got.GetResults() {
		outcomes = append(outcomes, fmt.Sprintf("%s-%d:%s:%d", res.GetTopic(), res.GetPartition(), codeName(res.GetErrorCode()), res.GetState().GetLeader()))
	}
	want := "a-0:NONE:1 a-1:NONE:1 a-2:NONE:1 b-0:ELECTION_NOT_NEEDED:1 b-1:ELECTION_NOT_NEEDED:1 b-2:ELECTION_NOT_NEEDED:1"
	if strings.Join(outcomes, " ") != want {
		t.Errorf("results %v, want %s", outcomes, want)
	}
	wantContains(t, "stderr", r.stderr, "[6/6] b-2: the preferred leader 1 already leads", "6 partitions: 3 elected, 3 already led")
}

func TestElectPreferredUsage(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--all"}, "--all elects the preferred leaders: give --preferred too"},
		{[]string{"--preferred", "--topic", "t", "--leader", "1"}, "--leader and --preferred exclude each other"},
		{[]string{"--preferred"}, "--preferred needs --topic T"},
		{[]string{"--preferred", "--all", "--topic", "t"}, "--all and --topic/--partition exclude each other"},
		{[]string{"--preferred", "--topic", "t", "--partition", "-1"}, "--partition must not be negative"},
		{[]string{"--preferred", "--topic", "bad name"}, "not a legal topic name"},
	} {
		r := ctl(t, "", "", append([]string{"--controller", "127.0.0.1:1", "elect"}, tt.args...)...)
		wantCode(t, r, 2)
		wantContains(t, "stderr", r.stderr, tt.want)
	}
}

func TestControllerRunRebalanceFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--leader-imbalance-per-broker-percentage", "101"}, "--leader-imbalance-per-broker-percentage: want 0 to 100 (got 101)"},
		{[]string{"--leader-imbalance-per-broker-percentage", "-1"}, "want 0 to 100 (got -1)"},
		{[]string{"--leader-imbalance-check-interval", "0s"}, "--leader-imbalance-check-interval: must be at least 10ms"},
	} {
		r := ctl(t, "", "", append([]string{"controller", "run", "--store", t.TempDir()}, tt.args...)...)
		wantCode(t, r, 2)
		wantContains(t, "stderr", r.stderr, tt.want)
	}
}
