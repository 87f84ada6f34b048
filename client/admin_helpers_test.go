package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// clusterFake is an active controller over a DescribeCluster answer it
// keeps: ElectLeaders moves leadership to the first replica, a
// ReassignPartition starts a move (adding and removing replicas) or
// cancels one, and every completeAfter-th DescribeCluster finishes the
// moves under way.
type clusterFake struct {
	adminFake
	mu            sync.Mutex
	cluster       *replicadv1.DescribeClusterResponse
	elects        []*replicadv1.ElectLeadersRequest
	reassigns     []*replicadv1.ReassignPartitionRequest
	describes     int
	completeAfter int                                     // 0: moves never complete
	refuse        map[TopicPartition]replicadv1.ErrorCode // ReassignPartition answers
}

func (f *clusterFake) part(topic string, p int32) *replicadv1.ClusterPartition {
	for _, cp := range f.cluster.GetPartitions() {
		if cp.GetTopic() == topic && cp.GetPartition() == p {
			return cp
		}
	}
	return nil
}

func (f *clusterFake) DescribeCluster(context.Context, *replicadv1.DescribeClusterRequest) (*replicadv1.DescribeClusterResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.describes++
	if f.completeAfter > 0 && f.describes%f.completeAfter == 0 {
		for _, p := range f.cluster.GetPartitions() {
			p.Replicas = CurrentReplicas(p)
			p.Isr = slices.Clone(p.Replicas)
			p.AddingReplicas, p.RemovingReplicas = nil, nil
		}
	}
	return proto.Clone(f.cluster).(*replicadv1.DescribeClusterResponse), nil
}

func (f *clusterFake) ElectLeaders(_ context.Context, req *replicadv1.ElectLeadersRequest) (*replicadv1.ElectLeadersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.elects = append(f.elects, req)
	resp := &replicadv1.ElectLeadersResponse{}
	for _, t := range req.GetTopics() {
		for _, n := range t.GetPartitions() {
			r := &replicadv1.ElectLeadersResult{Topic: t.GetTopic(), Partition: n}
			p := f.part(t.GetTopic(), n)
			switch {
			case p == nil:
				r.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
			case p.GetLeader() == p.GetReplicas()[0]:
				r.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED
			default:
				p.Leader = p.GetReplicas()[0]
			}
			if p != nil {
				r.State = proto.Clone(p).(*replicadv1.ClusterPartition)
			}
			resp.Results = append(resp.Results, r)
		}
	}
	return resp, nil
}

func (f *clusterFake) ReassignPartition(_ context.Context, req *replicadv1.ReassignPartitionRequest) (*replicadv1.ReassignPartitionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reassigns = append(f.reassigns, req)
	if code, ok := f.refuse[TopicPartition{req.GetTopic(), req.GetPartition()}]; ok {
		return &replicadv1.ReassignPartitionResponse{ErrorCode: code, ErrorMessage: "refused"}, nil
	}
	p := f.part(req.GetTopic(), req.GetPartition())
	switch {
	case p == nil:
		return &replicadv1.ReassignPartitionResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}, nil
	case req.GetCancel() && !IsReassigning(p):
		return &replicadv1.ReassignPartitionResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS}, nil
	case req.GetCancel():
		p.Replicas = slices.DeleteFunc(p.Replicas, func(r int32) bool { return slices.Contains(p.AddingReplicas, r) })
		p.AddingReplicas, p.RemovingReplicas = nil, nil
	default:
		cur := p.GetReplicas()
		p.Replicas = slices.Clone(req.GetReplicas())
		p.AddingReplicas, p.RemovingReplicas = nil, nil
		for _, r := range req.GetReplicas() {
			if !slices.Contains(cur, r) {
				p.AddingReplicas = append(p.AddingReplicas, r)
			}
		}
		for _, r := range cur {
			if !slices.Contains(req.GetReplicas(), r) {
				p.Replicas = append(p.Replicas, r)
				p.RemovingReplicas = append(p.RemovingReplicas, r)
			}
		}
	}
	return &replicadv1.ReassignPartitionResponse{Partition: proto.Clone(p).(*replicadv1.ClusterPartition)}, nil
}

func newClusterFake(t *testing.T, cluster *replicadv1.DescribeClusterResponse) (*clusterFake, *Admin) {
	t.Helper()
	f := &clusterFake{cluster: cluster}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	replicadv1.RegisterControllerServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return f, newAdmin(t, 5*time.Second, lis.Addr().String())
}

func describe(t *testing.T, a *Admin) *replicadv1.DescribeClusterResponse {
	t.Helper()
	resp, err := a.DescribeCluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// ClusterHealth: healthy only with brokers, none down, every partition
// led by a live broker and with a full ISR; a reassignment's removing
// replicas do not count towards the ISR it needs.
func TestClusterHealth(t *testing.T) {
	brokers := func(down ...int32) []*replicadv1.BrokerDescription {
		var bs []*replicadv1.BrokerDescription
		for _, id := range []int32{3, 1, 2} {
			bs = append(bs, &replicadv1.BrokerDescription{Id: id, Alive: !slices.Contains(down, id)})
		}
		return bs
	}
	moving := rpart("t", 2, 1, 2, 3)
	moving.Isr, moving.RemovingReplicas = []int32{1, 2}, []int32{3}
	under := rpart("t", 1, 1, 2, 3)
	under.Isr = []int32{1, 2}
	leaderless := rpart("u", 0, 2, 3)
	leaderless.Leader = -1
	for _, tc := range []struct {
		name string
		resp *replicadv1.DescribeClusterResponse
		want string
	}{
		{"healthy", &replicadv1.DescribeClusterResponse{Brokers: brokers(), Partitions: []*replicadv1.ClusterPartition{rpart("t", 0, 1, 2, 3), moving}},
			"true [] [1 2 3] [] [] []"},
		{"no brokers", &replicadv1.DescribeClusterResponse{}, "false [no_brokers] [] [] [] []"},
		{"everything", &replicadv1.DescribeClusterResponse{Brokers: brokers(2),
			Partitions: []*replicadv1.ClusterPartition{leaderless, under, rpart("t", 0, 2, 1, 3), moving}},
			"false [brokers_down leaderless_partitions under_replicated_partitions] [1 2 3] [2] [t-0 u-0] [t-1]"},
	} {
		h := ClusterHealth(tc.resp)
		got := fmt.Sprint(h.Healthy, " ", h.UnhealthyReasons, " ", h.Brokers, " ", h.BrokersDown, " ", h.Leaderless, " ", h.UnderReplicated)
		if got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if h.UnhealthyReasons == nil || h.Brokers == nil || h.BrokersDown == nil || h.Leaderless == nil || h.UnderReplicated == nil {
			t.Errorf("%s: a nil list (JSON null): %+v", tc.name, h)
		}
	}
}

// ElectPreferredLeaders sends a topic's partitions in order, 20 to a
// request, reports each result, and names an unknown topic.
func TestElectPreferredLeaders(t *testing.T) {
	cluster := &replicadv1.DescribeClusterResponse{}
	for i := range int32(25) {
		p := rpart("orders", 24-i, 1, 2, 3) // listed out of order
		if i%2 == 0 {
			p.Leader = 2
		}
		cluster.Partitions = append(cluster.Partitions, p)
	}
	cluster.Partitions = append(cluster.Partitions, rpart("logs", 0, 1, 2))
	f, a := newClusterFake(t, cluster)
	var seen []string
	results, err := a.ElectPreferredLeaders(context.Background(), "orders", func(r *replicadv1.ElectLeadersResult, done, total int) {
		seen = append(seen, fmt.Sprintf("%d/%d %s-%d", done, total, r.GetTopic(), r.GetPartition()))
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.elects) != 2 || len(f.elects[0].GetTopics()) != 1 || len(f.elects[0].GetTopics()[0].GetPartitions()) != PreferredElectBatch ||
		len(f.elects[1].GetTopics()[0].GetPartitions()) != 5 || f.elects[0].GetElectionType() != replicadv1.ElectionType_ELECTION_TYPE_PREFERRED {
		t.Fatalf("requests %v, want orders' partitions in batches of 20 and 5", f.elects)
	}
	if len(results) != 25 || len(seen) != 25 || seen[0] != "1/25 orders-0" || seen[24] != "25/25 orders-24" {
		t.Fatalf("results %d, progress %v", len(results), seen)
	}
	elected := 0
	for _, r := range results {
		if r.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
			elected++
		}
	}
	if elected != 13 { // those led by 2
		t.Fatalf("%d elected, want 13", elected)
	}

	f.elects = nil
	if results, err = a.ElectPreferredLeaders(context.Background(), "", nil); err != nil || len(results) != 26 ||
		len(f.elects) != 2 || f.elects[0].GetTopics()[0].GetTopic() != "logs" || len(f.elects[0].GetTopics()) != 2 {
		t.Fatalf("all topics: %d results, %v, requests %v", len(results), err, f.elects)
	}

	_, err = a.ElectPreferredLeaders(context.Background(), "nope", nil)
	var ae *Error
	if !errors.As(err, &ae) || ae.Code != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("unknown topic: %v", err)
	}
}

// A plan's moves start (a refused one does not stop the others), are
// followed until complete, and a cancel tells cancelled from nothing in
// flight and from a refusal.
func TestReassignmentsStartWaitCancel(t *testing.T) {
	cluster := &replicadv1.DescribeClusterResponse{
		Brokers:    []*replicadv1.BrokerDescription{{Id: 1, Alive: true}, {Id: 2, Alive: true}, {Id: 3, Alive: true}, {Id: 4, Alive: true}},
		Partitions: []*replicadv1.ClusterPartition{rpart("t", 0, 1, 2, 3), rpart("t", 1, 2, 3, 1), rpart("t", 2, 3, 1, 2)},
	}
	f, a := newClusterFake(t, cluster)
	f.refuse = map[TopicPartition]replicadv1.ErrorCode{{"t", 2}: replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT}
	plan := ReassignPlan{Version: PlanVersion, Partitions: []PlanPartition{
		{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 3}}, // as it is
		{Topic: "t", Partition: 1, Replicas: []int32{2, 4, 1}},
		{Topic: "t", Partition: 2, Replicas: []int32{4, 1, 2}},
	}}
	ix := IndexCluster(cluster)
	if err := ValidatePlan(plan, ix); err != nil {
		t.Fatal(err)
	}
	before, moves := PlanMoves(plan, ix)
	if len(before) != 3 || len(moves) != 2 || moves[0].Partition != 1 {
		t.Fatalf("before %v, moves %v", before, moves)
	}
	started, failed := a.StartReassignments(context.Background(), moves)
	var ae *Error
	if started != 1 || len(failed) != 1 || failed[0].Partition != (TopicPartition{"t", 2}) || !errors.As(failed[0].Err, &ae) ||
		ae.Error() != "reassign t-2: INVALID_REPLICA_ASSIGNMENT: refused" || ae.Partition != (TopicPartition{"t", 2}) {
		t.Fatalf("started %d, failed %v", started, failed)
	}

	// t-2 never moves: the wait ends with its context (ctx.Err() between
	// rounds, the channel's error during one).
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	progress, err := a.WaitReassignments(ctx, plan, 20*time.Millisecond, nil)
	if err == nil || ctx.Err() == nil || len(progress) != 3 || progress[1].Status != ProgressInProgress || progress[1].Detail != "adding 4, removing 3: ISR 2,3,1, waiting for 4" {
		t.Fatalf("wait: %v, %+v", err, progress)
	}

	// Cancel t-1 (in flight) and t-0 (nothing in flight); t-2 is refused.
	results := a.CancelReassignments(context.Background(), []TopicPartition{{"t", 1}, {"t", 0}, {"t", 2}}, IndexCluster(describe(t, a)))
	if got := fmt.Sprint(results[0].Outcome, results[0].Replicas, " ", results[1].Outcome, results[1].Replicas, " ", results[2].Outcome); got != "cancelled[2 1 3] nothing in flight[1 2 3] nothing in flight" {
		t.Fatalf("cancel: %s", got)
	}
	if k := Reassigning(describe(t, a)); len(k) != 0 {
		t.Fatalf("still reassigning after the cancel: %v", k)
	}

	// Started again, the moves complete on the third describe: the wait
	// reports each round and returns with every entry complete.
	f.mu.Lock()
	f.refuse, f.completeAfter, f.describes = nil, 3, 0
	f.mu.Unlock()
	if started, failed = a.StartReassignments(context.Background(), moves); started != 2 || failed != nil {
		t.Fatalf("started %d, failed %v", started, failed)
	}
	rounds := 0
	progress, err = a.WaitReassignments(context.Background(), plan, 10*time.Millisecond, func([]PlanProgress) { rounds++ })
	if err != nil || rounds != 3 {
		t.Fatalf("wait: %v after %d rounds", err, rounds)
	}
	for _, pp := range progress {
		if pp.Status != ProgressComplete {
			t.Fatalf("%s", pp)
		}
	}
	// A refused cancel is the answer's error.
	moving := rpart("t", 0, 1, 2, 3, 4)
	moving.AddingReplicas = []int32{4}
	f.mu.Lock()
	f.cluster.Partitions[0] = moving
	f.mu.Unlock()
	f.mu.Lock()
	f.refuse = map[TopicPartition]replicadv1.ErrorCode{{"t", 0}: replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST}
	f.mu.Unlock()
	results = a.CancelReassignments(context.Background(), Reassigning(describe(t, a)), IndexCluster(describe(t, a)))
	if len(results) != 1 || results[0].Outcome != CancelFailed || results[0].Err.Error() != "cancel t-0: INVALID_REQUEST: refused" {
		t.Fatalf("refused cancel: %+v", results)
	}
}

// WaitReassignment follows one partition until it holds the target's
// replicas, in any order, and names a partition that went away.
func TestWaitReassignment(t *testing.T) {
	cluster := &replicadv1.DescribeClusterResponse{Partitions: []*replicadv1.ClusterPartition{rpart("t", 0, 1, 2, 3)}}
	f, a := newClusterFake(t, cluster)
	if _, failed := a.StartReassignments(context.Background(), []PlanPartition{{Topic: "t", Partition: 0, Replicas: []int32{4, 2, 3}}}); failed != nil {
		t.Fatal(failed)
	}
	f.mu.Lock()
	f.completeAfter = 3
	f.mu.Unlock()
	var seen []string
	p, err := a.WaitReassignment(context.Background(), TopicPartition{"t", 0}, []int32{2, 3, 4}, 10*time.Millisecond, func(p *replicadv1.ClusterPartition) {
		seen = append(seen, ReassignStatus(p, []int32{2, 3, 4}))
	})
	if err != nil || fmt.Sprint(p.GetReplicas()) != "[4 2 3]" || len(seen) != 2 || seen[0] != "adding 4, removing 1: ISR 1,2,3, waiting for 4" {
		t.Fatalf("wait: %v, %v, rounds %q", err, p, seen)
	}
	if _, err := a.WaitReassignment(context.Background(), TopicPartition{"t", 9}, []int32{1}, 10*time.Millisecond, nil); !errors.Is(err, ErrPartitionGone) {
		t.Fatalf("gone: %v", err)
	}
}
