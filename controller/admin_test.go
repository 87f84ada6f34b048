package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// sentNow checks that broker id has already received (no waiting) a
// LeaderAndIsr with the stored state of p: admin calls return only once the
// brokers were told.
func sentNow(t *testing.T, h *harness, id int32, p store.Partition) *replicadv1.PartitionState {
	t.Helper()
	s, _ := h.fake(id).laiState(p.Topic, p.Partition)
	if s == nil || s.GetLeader() != p.Leader || s.GetLeaderEpoch() != p.LeaderEpoch || s.GetPartitionEpoch() != p.PartitionEpoch ||
		!slices.Equal(s.GetIsr(), p.ISR) || !slices.Equal(s.GetReplicas(), p.Replicas) {
		t.Errorf("broker %d's latest LeaderAndIsr of %s-%d is %v, want the stored %+v", id, p.Topic, p.Partition, s, p)
	}
	return s
}

func TestCreateTopic(t *testing.T) {
	h := startCluster(t, 3)
	ctx := context.Background()
	got := h.createTopic("a", 6, 2)
	leaders := make(map[int32]int)
	for i, cp := range got {
		p := h.part("a", int32(i))
		// Round-robin with Kafka's replica shift: the second replica moves
		// one further once the partitions wrap around the brokers.
		want := []int32{int32(i%3) + 1, int32((i+1+i/3)%3) + 1}
		if !slices.Equal(p.Replicas, want) || !slices.Equal(p.ISR, want) || p.Leader != want[0] || p.LeaderEpoch != 0 || p.PartitionEpoch != 0 {
			t.Errorf("a-%d stored as %+v, want shifted round-robin replicas %v, all in the ISR, the first leading", i, p, want)
		}
		if cp.GetPartition() != int32(i) || cp.GetLeader() != p.Leader || !slices.Equal(cp.GetReplicas(), p.Replicas) || !slices.Equal(cp.GetIsr(), p.ISR) {
			t.Errorf("answer %v is not the stored %+v", cp, p)
		}
		leaders[p.Leader]++
		for _, r := range p.Replicas {
			if s := sentNow(t, h, r, p); s != nil && !s.GetIsNew() {
				t.Errorf("LeaderAndIsr of a new partition to %d without is_new: %v", r, s)
			}
		}
		if s, _ := h.fake(6-want[0]-want[1]).laiState("a", int32(i)); s != nil {
			t.Errorf("a non-replica was sent a LeaderAndIsr of a-%d: %v", i, s)
		}
	}
	if leaders[1] != 2 || leaders[2] != 2 || leaders[3] != 2 {
		t.Errorf("leaders per broker %v, want 2 each", leaders)
	}
	// The next topic starts its assignment on the next broker, shifted.
	b := h.createTopic("b", 1, 3)
	if !slices.Equal(b[0].GetReplicas(), []int32{2, 1, 3}) {
		t.Errorf("second topic assigned %v, want [2 1 3]", b[0].GetReplicas())
	}

	before := h.snapshot()
	resp, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "c", Partitions: 1, ReplicationFactor: 4})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR || resp.GetErrorMessage() == "" {
		t.Errorf("RF > live brokers: %v %v, want INVALID_REPLICATION_FACTOR", resp, err)
	}
	resp, err = h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "a", Partitions: 2, ReplicationFactor: 1})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS {
		t.Errorf("duplicate topic: %v %v, want TOPIC_ALREADY_EXISTS", resp, err)
	}
	h.assertUnchanged(before)

	// Only live brokers get replicas.
	h.expire(1, 2)
	resp, err = h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "c", Partitions: 1, ReplicationFactor: 3})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR {
		t.Errorf("RF 3 with a broker fenced: %v %v, want INVALID_REPLICATION_FACTOR", resp, err)
	}
	for _, cp := range h.createTopic("d", 4, 2) {
		if slices.Contains(cp.GetReplicas(), 3) {
			t.Errorf("fenced broker 3 assigned a replica: %v", cp)
		}
	}
}

func TestElectLeader(t *testing.T) {
	h := startCluster(t, 4)
	ctx := context.Background()
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	elect := func(leader *int32) *replicadv1.ElectLeaderResponse {
		t.Helper()
		resp, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0, Leader: leader})
		if err != nil {
			t.Fatalf("ElectLeader: %v", err)
		}
		return resp
	}
	id := func(i int32) *int32 { return &i }

	// A chosen ISR member.
	resp := elect(id(3))
	p := wantPartition(t, h, "t", 0, 3, 1, 1, 1, 2, 3)
	if resp.GetErrorCode() != codeNone || resp.GetPartition().GetLeader() != 3 || resp.GetPartition().GetLeaderEpoch() != 1 {
		t.Errorf("ElectLeader(3): %v", resp)
	}
	for _, r := range p.Replicas {
		sentNow(t, h, r, p)
	}
	// The preferred replica: the first live ISR member in assignment order.
	resp = elect(nil)
	p = wantPartition(t, h, "t", 0, 1, 2, 2, 1, 2, 3)
	if resp.GetErrorCode() != codeNone {
		t.Errorf("preferred election: %v", resp)
	}
	for _, r := range p.Replicas {
		sentNow(t, h, r, p)
	}

	refused := []struct {
		name   string
		leader *int32
		want   replicadv1.ErrorCode
	}{
		{"preferred already leads", nil, replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED},
		{"chosen already leads", id(1), replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED},
		{"not a replica", id(4), replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA},
		{"never registered", id(9), replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA},
	}
	check := func(name string, leader *int32, want replicadv1.ErrorCode) {
		t.Helper()
		before := h.snapshot()
		resp := elect(leader)
		if resp.GetErrorCode() != want || resp.GetErrorMessage() == "" {
			t.Errorf("%s: %v, want %v", name, resp, want)
		}
		h.assertUnchanged(before)
	}
	for _, tt := range refused {
		check(tt.name, tt.leader, tt.want)
	}
	// A replica out of the ISR may not lead.
	h.mustAlter(1, h.part("t", 0), 1, 2)
	check("replica not in the ISR", id(3), replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA)
	// Nor may a fenced one, or one shutting down.
	h.expire(1, 3, 4)
	wantPartition(t, h, "t", 0, 1, 3, 4, 1)
	check("fenced ISR member", id(2), replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA)

	resp2, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 1})
	if err != nil || resp2.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Errorf("unknown partition: %v %v", resp2, err)
	}
}

func TestElectLeaderNoEligibleLeader(t *testing.T) {
	h := startCluster(t, 2)
	h.createTopic("t", 1, 1) // [1]
	h.expire(2)
	wantPartition(t, h, "t", 0, store.NoLeader, 1, 1)
	wantElr(t, h, "t", 0, 1)
	before := h.snapshot()
	resp, err := h.c.ElectLeader(context.Background(), &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_ELIGIBLE_LEADERS_NOT_AVAILABLE {
		t.Errorf("preferred election with no live ISR member: %v %v", resp, err)
	}
	h.assertUnchanged(before)
}

func TestDeleteTopic(t *testing.T) {
	h := startCluster(t, 3)
	ctx := context.Background()
	h.createTopic("t", 2, 2) // t-0 [1 2], t-1 [2 3]
	h.createTopic("keep", 1, 1)
	keep := h.part("keep", 0)
	resp, err := h.c.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: "t"})
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("DeleteTopic: %v %v", resp, err)
	}
	if _, err := h.st.Topic(ctx, "t"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted topic still stored: %v", err)
	}
	// Every replica was told (before DeleteTopic returned) to stop and
	// delete its log; nobody else.
	replicas := map[int32][]int32{1: {0}, 2: {0, 1}, 3: {1}}
	for id, parts := range replicas {
		for p := int32(0); p < 2; p++ {
			if got, want := h.fake(id).stoppedAndDeleted("t", p), slices.Contains(parts, p); got != want {
				t.Errorf("broker %d told to stop and delete t-%d: %v, want %v", id, p, got, want)
			}
		}
	}
	if p := h.part("keep", 0); !equalPartition(p, keep) {
		t.Errorf("other topic changed: %+v, was %+v", p, keep)
	}
	dc, err := h.c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	if err != nil || len(dc.GetPartitions()) != 1 || dc.GetPartitions()[0].GetTopic() != "keep" {
		t.Errorf("DescribeCluster after delete: %v %v", dc, err)
	}
	before := h.snapshot()
	resp, err = h.c.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: "t"})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Errorf("deleting again: %v %v, want UNKNOWN_TOPIC_OR_PARTITION", resp, err)
	}
	h.assertUnchanged(before)
	// The name can be used again.
	h.createTopic("t", 1, 1)
}

func TestReassignPartition(t *testing.T) {
	h := startCluster(t, 4)
	ctx := context.Background()
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	reassign := func(replicas ...int32) *replicadv1.ReassignPartitionResponse {
		t.Helper()
		resp, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: replicas})
		if err != nil {
			t.Fatalf("ReassignPartition: %v", err)
		}
		return resp
	}

	resp := reassign(2, 3, 4)
	if resp.GetErrorCode() != codeNone {
		t.Fatalf("ReassignPartition: %v", resp)
	}
	p := wantPartition(t, h, "t", 0, 1, 1, 1, 1, 2, 3)
	if !slices.Equal(p.Replicas, []int32{2, 3, 4, 1}) || !slices.Equal(p.AddingReplicas, []int32{4}) || !slices.Equal(p.RemovingReplicas, []int32{1}) {
		t.Errorf("reassigning: replicas %v adding %v removing %v, want [2 3 4 1], [4], [1]", p.Replicas, p.AddingReplicas, p.RemovingReplicas)
	}
	if cp := resp.GetPartition(); !slices.Equal(cp.GetReplicas(), p.Replicas) || !slices.Equal(cp.GetAddingReplicas(), []int32{4}) ||
		!slices.Equal(cp.GetRemovingReplicas(), []int32{1}) {
		t.Errorf("answer %v is not the stored %+v", cp, p)
	}
	// Old and new replicas hear of the union; the added one may create its log.
	for _, id := range []int32{1, 2, 3, 4} {
		sentNow(t, h, id, p)
	}
	if s, _ := h.fake(4).laiState("t", 0); !s.GetIsNew() {
		t.Errorf("the added replica's LeaderAndIsr lacks is_new: %v", s)
	}
	// The replicas that have the log must not be allowed to create it empty:
	// a leader whose log dir is offline would lead with an empty log.
	for _, id := range []int32{1, 2, 3} {
		if s, _ := h.fake(id).laiState("t", 0); s.GetIsNew() {
			t.Errorf("existing replica %d told is_new by the reassignment: %v", id, s)
		}
	}

	before := h.snapshot()
	if resp := reassign(1, 2, 3); resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS {
		t.Errorf("second reassignment: %v, want REASSIGNMENT_IN_PROGRESS", resp)
	}
	h.assertUnchanged(before)

	// The leader sees 4 catch up: the reassignment completes.
	h.mustAlter(1, p, 1, 2, 3, 4)
	p = h.part("t", 0)
	if !slices.Equal(p.Replicas, []int32{2, 3, 4}) || !slices.Equal(p.ISR, []int32{2, 3, 4}) || p.Leader != 2 ||
		len(p.AddingReplicas) != 0 || len(p.RemovingReplicas) != 0 || p.LeaderEpoch != 2 || p.PartitionEpoch != 3 {
		t.Errorf("after the reassignment: %+v, want replicas and ISR [2 3 4], leader 2, epochs 2 and 3, nothing adding or removing", p)
	}
	for _, id := range []int32{2, 3, 4} {
		waitLAI(t, h, id, p)
	}
	waitFor(t, "the removed replica to be told to stop and delete", func() bool { return h.fake(1).stoppedAndDeleted("t", 0) })
	for _, r := range h.fake(1).stopReplicas() {
		for _, sp := range r.GetPartitions() {
			if sp.GetLeaderEpoch() != p.LeaderEpoch {
				t.Errorf("StopReplica to the removed replica with leader epoch %d, want %d", sp.GetLeaderEpoch(), p.LeaderEpoch)
			}
		}
	}
	for _, id := range []int32{2, 3, 4} {
		if h.fake(id).stoppedAndDeleted("t", 0) {
			t.Errorf("target replica %d told to delete", id)
		}
	}

	// A reassignment that only removes completes at once; the leader stays.
	resp = reassign(2, 3)
	p = h.part("t", 0)
	if resp.GetErrorCode() != codeNone || !slices.Equal(p.Replicas, []int32{2, 3}) || !slices.Equal(p.ISR, []int32{2, 3}) || p.Leader != 2 ||
		len(p.RemovingReplicas) != 0 {
		t.Errorf("shrinking reassignment: %v, stored %+v", resp, p)
	}
	if cp := resp.GetPartition(); !slices.Equal(cp.GetReplicas(), []int32{2, 3}) {
		t.Errorf("shrinking reassignment answered %v, want the completed state", cp)
	}
	waitFor(t, "broker 4 to be told to stop and delete", func() bool { return h.fake(4).stoppedAndDeleted("t", 0) })

	before = h.snapshot()
	if resp := reassign(2, 9); resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICA_ASSIGNMENT {
		t.Errorf("reassigning to an unknown broker: %v, want INVALID_REPLICA_ASSIGNMENT", resp)
	}
	if resp := reassign(2, 3); resp.GetErrorCode() != codeNone {
		t.Errorf("reassigning to the current replicas: %v, want NONE", resp)
	}
	resp2, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 4, Replicas: []int32{1}})
	if err != nil || resp2.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Errorf("unknown partition: %v %v", resp2, err)
	}
	h.assertUnchanged(before)
}

func TestControlledShutdown(t *testing.T) {
	h := startCluster(t, 3)
	ctx := context.Background()
	h.createTopic("t", 4, 2) // t-0 [1 2] L1, t-1 [2 3] L2, t-2 [3 1] L3, t-3 [1 2] L1
	h.mustAlter(1, h.part("t", 3), 1)
	p1 := h.part("t", 1)

	shutdown := func(epoch int64) *replicadv1.ControlledShutdownResponse {
		t.Helper()
		resp, err := h.c.ControlledShutdown(ctx, &replicadv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: epoch})
		if err != nil {
			t.Fatalf("ControlledShutdown: %v", err)
		}
		return resp
	}
	before := h.snapshot()
	if resp := shutdown(h.epoch[1] - 1); resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
		t.Errorf("stale epoch: %v, want STALE_BROKER_EPOCH", resp)
	}
	h.assertUnchanged(before)

	resp := shutdown(h.epoch[1])
	if resp.GetErrorCode() != codeNone {
		t.Fatalf("ControlledShutdown: %v", resp)
	}
	// t-3 cannot move (its only ISR member is the stopping broker): it is
	// not reported, so the broker does not wait out its timeout for it.
	if rem := resp.GetRemainingPartitions(); len(rem) != 0 {
		t.Errorf("remaining %v, want none", rem)
	}
	p0 := wantPartition(t, h, "t", 0, 2, 1, 1, 2)
	p2 := wantPartition(t, h, "t", 2, 3, 1, 1, 3)
	wantPartition(t, h, "t", 3, 1, 0, 1, 1)
	if p := h.part("t", 1); !equalPartition(p, p1) {
		t.Errorf("t-1, which broker 1 does not host, changed: %+v", p)
	}
	// The brokers taking over were told before the answer; the stopping
	// one is told too, but not waited for (it may be gone already).
	sentNow(t, h, 2, p0)
	sentNow(t, h, 3, p2)
	waitLAI(t, h, 1, p0)
	waitLAI(t, h, 1, p2)

	// Asking again moves nothing more and answers the same.
	before = h.snapshot()
	if resp := shutdown(h.epoch[1]); len(resp.GetRemainingPartitions()) != 0 {
		t.Errorf("second request: %v", resp)
	}
	h.assertUnchanged(before)
	// A stopping broker gets no new replicas and may not lead.
	if resp, _ := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "u", Partitions: 1, ReplicationFactor: 3}); resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR {
		t.Errorf("CreateTopic RF 3 with a broker stopping: %v", resp)
	}
	one := int32(1)
	if resp, _ := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 3, Leader: &one}); resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA {
		t.Errorf("ElectLeader of the stopping broker: %v, want INELIGIBLE_REPLICA", resp)
	}
	// Nor rejoin an ISR.
	if resp := h.alter(2, p0, 2, 1); resp.GetPartitions()[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA {
		t.Errorf("the stopping broker rejoining an ISR: %v, want INELIGIBLE_REPLICA", resp)
	}
	// Registering again ends the shutdown state.
	h.register(1)
	h.createTopic("u", 1, 3)
}

// TestControlledShutdownCompleteNotAlive ensures a broker whose controlled
// shutdown completed is shown not alive by DescribeCluster at once (not
// only when its session expires), while one still moving leaderships is
// alive, and that registering again shows it alive.
func TestControlledShutdownCompleteNotAlive(t *testing.T) {
	h := startCluster(t, 3)
	ctx := context.Background()
	h.createTopic("t", 3, 2)
	alive := func() map[int32]bool {
		t.Helper()
		resp, err := h.c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[int32]bool{}
		for _, b := range resp.GetBrokers() {
			m[b.GetId()] = b.GetAlive()
		}
		return m
	}
	if a := alive(); !a[1] || !a[2] || !a[3] {
		t.Fatalf("before: alive %v", a)
	}
	resp, err := h.c.ControlledShutdown(ctx, &replicadv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: h.epoch[1]})
	if err != nil || resp.GetErrorCode() != codeNone || len(resp.GetRemainingPartitions()) != 0 {
		t.Fatalf("ControlledShutdown: %v %v", resp, err)
	}
	if a := alive(); a[1] || !a[2] || !a[3] {
		t.Fatalf("after broker 1's controlled shutdown: alive %v, want 1 not alive", a)
	}
	// Its heartbeats until it stops change nothing.
	h.heartbeat(1)
	if a := alive(); a[1] {
		t.Fatalf("a heartbeat after the shutdown showed broker 1 alive again")
	}
	h.register(1)
	if a := alive(); !a[1] {
		t.Fatalf("registered again: alive %v", a)
	}
}
