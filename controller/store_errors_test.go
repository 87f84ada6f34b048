package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/controller/store/storetest"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// faultyCluster is startCluster over a fault-injecting memory store.
func faultyCluster(t *testing.T, n int32, opts ...harnessOption) (*harness, *storetest.Faulty) {
	t.Helper()
	f := storetest.NewFaulty(store.NewMemory())
	return startCluster(t, n, append([]harnessOption{withStore(f)}, opts...)...), f
}

// memPart is topic-partition as the controller holds it in memory.
func (h *harness) memPart(topic string, partition int32) store.Partition {
	h.c.lock()
	defer h.c.unlock()
	return h.c.parts[partitionKey{topic, partition}].Clone()
}

// wantMemoryAgrees fails t unless the controller's memory of topic-partition
// is the stored state.
func (h *harness) wantMemoryAgrees(topic string, partition int32) store.Partition {
	h.t.Helper()
	p, m := h.part(topic, partition), h.memPart(topic, partition)
	if !samePartition(p, m) {
		h.t.Fatalf("%s-%d: controller memory %+v, store %+v", topic, partition, m, p)
	}
	return p
}

// completing matches the UpdatePartitions of a reassignment's completion:
// a state with nothing moving whose replicas are target.
func completing(target ...int32) func(storetest.Call) bool {
	return func(c storetest.Call) bool {
		return slices.ContainsFunc(c.Updates, func(u store.PartitionUpdate) bool {
			return len(u.New.AddingReplicas)+len(u.New.RemovingReplicas) == 0 && slices.Equal(u.New.Replicas, target)
		})
	}
}

// An AlterPartition whose store write was still in flight when the
// leader's request deadline passed: the write lands all the same (etcd
// commits what it accepted). The controller writes under a deadline of
// its own, so it holds what was stored, and the leader's retry of the same
// change is accepted, as is its next change (issue 19, path 3: before,
// the request's deadline cut the write short, memory stayed behind, and
// every later change of the partition conflicted until a restart).
func TestAlterPartitionWriteOutlivingTheRequestDeadline(t *testing.T) {
	h, f := faultyCluster(t, 3)
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	f.Inject(storetest.Fault{Op: storetest.OpUpdatePartitions, Kind: storetest.Slow, Delay: 100 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	// The leader gives up on the answer; the controller's own deadline
	// lets the write finish, and the controller holds its outcome.
	resp, err := h.c.AlterPartition(ctx, h.alterReq(1, h.item(0, 0, 1, 2)))
	cancel()
	if err != nil || len(resp.GetPartitions()) != 1 || resp.GetPartitions()[0].GetErrorCode() != codeNone {
		t.Fatalf("AlterPartition whose request deadline passed during the write: %v %v, want it committed", resp, err)
	}
	if got := h.part("t", 0); !slices.Equal(got.ISR, []int32{1, 2}) {
		t.Fatalf("stored ISR %v, want [1 2] (the slow write lands)", got.ISR)
	}
	resp, err = h.c.AlterPartition(context.Background(), h.alterReq(1, h.item(0, 0, 1, 2)))
	if err != nil || len(resp.GetPartitions()) != 1 || resp.GetPartitions()[0].GetErrorCode() != codeNone {
		t.Fatalf("the leader's retry: %v %v, want it answered with the committed state", resp, err)
	}
	h.wantMemoryAgrees("t", 0)
	h.mustAlter(1, h.part("t", 0), 1, 2, 3)
	if p := h.wantMemoryAgrees("t", 0); !slices.Equal(p.ISR, []int32{1, 2, 3}) {
		t.Fatalf("ISR %v after the expansion, want [1 2 3]", p.ISR)
	}
}

// An AlterPartition whose write lands but answers an error (etcd's
// "request timed out"): the controller re-reads the partition, so the
// leader's retry is accepted and the partition is not wedged; when the
// leader then dies, a new one is elected (issue 19, path 3).
func TestAlterPartitionWriteLandedWithAnError(t *testing.T) {
	h, f := faultyCluster(t, 3)
	h.createTopic("t", 1, 3)
	f.Inject(storetest.Fault{Op: storetest.OpUpdatePartitions, Kind: storetest.LandThenFail})
	if _, err := h.c.AlterPartition(context.Background(), h.alterReq(1, h.item(0, 0, 1, 2))); err == nil {
		t.Fatal("AlterPartition whose write landed with an error answered no error")
	}
	h.wantMemoryAgrees("t", 0)
	if s := h.c.MetricsSnapshot(); s.StoreResyncs != 1 || s.PartitionsRepaired != 1 {
		t.Errorf("metrics: %d re-reads, %d partitions repaired; want 1, 1", s.StoreResyncs, s.PartitionsRepaired)
	}
	resp, err := h.c.AlterPartition(context.Background(), h.alterReq(1, h.item(0, 0, 1, 2)))
	if err != nil || len(resp.GetPartitions()) != 1 || resp.GetPartitions()[0].GetErrorCode() != codeNone ||
		!slices.Equal(resp.GetPartitions()[0].GetIsr(), []int32{1, 2}) {
		t.Fatalf("the leader's retry: %v %v, want NONE with ISR [1 2]", resp, err)
	}
	// Every broker hears of the stored state.
	waitFor(t, "broker 3 to get the repaired ISR", func() bool {
		for _, um := range h.fake(3).updateMetadatas() {
			for _, s := range um.GetPartitionStates() {
				if s.GetTopic() == "t" && slices.Equal(s.GetIsr(), []int32{1, 2}) {
					return true
				}
			}
		}
		return false
	})
	h.expire(2, 3) // the leader dies
	p := h.wantMemoryAgrees("t", 0)
	if p.Leader != 2 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("after leader 1 died: %+v, want leader 2, ISR [2]", p)
	}
	waitLAI(t, h, 2, p)
}

// A fencing whose move away from the fenced broker lands but answers an
// error: the controller re-reads, tells the new leader, and a later death
// of that leader elects the next one (issue 19, path 3: before, memory kept
// the fenced broker leading and every move conflicted).
func TestFenceMoveLandedWithAnError(t *testing.T) {
	h, f := faultyCluster(t, 3)
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	f.Inject(storetest.Fault{Op: storetest.OpUpdatePartitions, Kind: storetest.LandThenFail})
	h.expire(2, 3) // broker 1 silent: fenced; the move lands unanswered
	p := h.wantMemoryAgrees("t", 0)
	if p.Leader != 2 || slices.Contains(p.ISR, 1) {
		t.Fatalf("after broker 1's fencing: %+v, want leader 2 without 1 in the ISR", p)
	}
	waitLAI(t, h, 2, p)
	h.expire(3) // the new leader dies too
	p = h.wantMemoryAgrees("t", 0)
	if p.Leader != 3 || !slices.Equal(p.ISR, []int32{3}) {
		t.Fatalf("after leader 2 died: %+v, want leader 3, ISR [3]", p)
	}
	waitLAI(t, h, 3, p)
}

// A fencing whose broker record lands but answers an error, after which
// the broker heartbeats again: the store says fenced, so the controller
// finishes the fencing (the broker leaves the ISR, in the store and in
// memory) instead of letting the heartbeat keep it alive in memory only
// (issue 19, path 3).
func TestFenceRecordLandedWithAnError(t *testing.T) {
	h, f := faultyCluster(t, 3)
	h.createTopic("t", 1, 3)
	f.Inject(storetest.Fault{Op: storetest.OpUpdateBroker, Kind: storetest.LandThenFail})
	h.expire(2, 3) // broker 1 fenced in the store, the answer lost
	if bs, err := h.st.Brokers(context.Background()); err != nil || !bs[0].Fenced {
		t.Fatalf("stored brokers %+v, %v: want broker 1 fenced", bs, err)
	}
	// Broker 1 comes back to life and heartbeats; the retry backoff passes.
	h.clk.Advance(time.Second)
	if resp, err := h.c.BrokerHeartbeat(context.Background(), &replicadv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: h.epoch[1]}); err != nil || !resp.GetIsFenced() {
		t.Fatalf("broker 1's heartbeat: %v %v, want it told it is fenced", resp, err)
	}
	h.heartbeat(2, 3)
	h.c.expireSessions(context.Background())
	p := h.wantMemoryAgrees("t", 0)
	if p.Leader == 1 || slices.Contains(p.ISR, 1) {
		t.Fatalf("after the fencing: %+v, want broker 1 out of the ISR and not leading", p)
	}
	h.expire(3) // the new leader dies
	p = h.wantMemoryAgrees("t", 0)
	if p.Leader != 3 {
		t.Fatalf("after the second leader died: %+v, want leader 3", p)
	}
}

// A reassignment whose completion write fails once (nothing written)
// completes at the controller's next periodic check (issue 19, path 4:
// before, completion was tried once, right after the ISR change).
func TestReassignmentCompletionRetriedAfterAFailedWrite(t *testing.T) {
	h, f := faultyCluster(t, 4)
	ctx := context.Background()
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	if resp, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 4}}); err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("reassign: %v %v", resp, err)
	}
	f.Inject(storetest.Fault{Op: storetest.OpUpdatePartitions, Kind: storetest.FailBefore, Err: errors.New("injected: store unreachable"),
		Match: completing(1, 2, 4)})
	h.mustAlter(1, h.part("t", 0), 1, 2, 3, 4) // the added replica caught up; completion fails
	if f.Hits(storetest.OpUpdatePartitions) != 1 {
		t.Fatal("the completion write was not tried")
	}
	if p := h.part("t", 0); len(p.AddingReplicas)+len(p.RemovingReplicas) == 0 {
		t.Fatalf("completed although its write failed: %+v", p)
	}
	h.c.reconcile(ctx)
	p := h.wantMemoryAgrees("t", 0)
	if !slices.Equal(p.Replicas, []int32{1, 2, 4}) || len(p.AddingReplicas)+len(p.RemovingReplicas) != 0 || slices.Contains(p.ISR, 3) {
		t.Fatalf("after the periodic check: %+v, want replicas [1 2 4], nothing moving, 3 out of the ISR", p)
	}
	waitFor(t, "the removed replica to be told to stop and delete", func() bool { return h.fake(3).stoppedAndDeleted("t", 0) })
}

// A controller that stops between a reassignment's ISR change and its
// completion (here: the completion write failed, then the controller
// stopped): the next controller completes it when it activates (issue 19,
// path 4).
func TestReassignmentCompletedOnActivation(t *testing.T) {
	h, f := faultyCluster(t, 4)
	ctx := context.Background()
	h.createTopic("t", 1, 3)
	if resp, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 4}}); err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("reassign: %v %v", resp, err)
	}
	f.Inject(storetest.Fault{Op: storetest.OpUpdatePartitions, Kind: storetest.FailBefore, Err: errors.New("injected: controller crashed"),
		Match: completing(1, 2, 4)})
	h.mustAlter(1, h.part("t", 0), 1, 2, 3, 4)
	h.stop()

	h2 := newHarness(t, withStore(f))
	h2.start()
	p := h2.part("t", 0)
	if !slices.Equal(p.Replicas, []int32{1, 2, 4}) || len(p.AddingReplicas)+len(p.RemovingReplicas) != 0 {
		t.Fatalf("after the new controller activated: %+v, want the reassignment completed", p)
	}
}

// A reassignment whose completion is due when no target replica may lead
// (the target's ISR and ELR members are fenced or stopping) waits, and
// completes once one may, although no ISR change comes: here the ELR
// member of the target registers again and is elected (issue 19, path 4).
func TestReassignmentCompletesWhenATargetBecomesEligibleLater(t *testing.T) {
	h, _ := faultyCluster(t, 3)
	ctx := context.Background()
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	if _, err := h.c.AlterTopicConfig(ctx, &replicadv1.AlterTopicConfigRequest{Topic: "t", Set: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	h.expire(1, 2) // 3 leaves the ISR [1 2], which stays at min ISR
	h.expire(1)    // 2 leaves: ISR [1] below min ISR, 2 is an eligible leader replica
	if p := h.part("t", 0); !slices.Equal(p.ISR, []int32{1}) || !slices.Contains(p.ELR, 2) {
		t.Fatalf("setup: %+v, want ISR [1], 2 in the ELR", p)
	}
	// Shrink to [2 3]: nothing to add, so it is due at once, but neither 2
	// (fenced) nor 3 may lead.
	if resp, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{2, 3}}); err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("reassign: %v %v", resp, err)
	}
	if p := h.part("t", 0); len(p.RemovingReplicas) == 0 {
		t.Fatalf("completed with no target eligible: %+v", p)
	}
	h.expire() // leader 1 dies: leaderless
	h.register(2)
	if p := h.part("t", 0); p.Leader != 2 {
		t.Fatalf("broker 2 back: %+v, want it elected from the ELR", p)
	}
	h.c.reconcile(ctx)
	p := h.wantMemoryAgrees("t", 0)
	if !slices.Equal(p.Replicas, []int32{2, 3}) || len(p.AddingReplicas)+len(p.RemovingReplicas) != 0 || p.Leader != 2 {
		t.Fatalf("after the periodic check: %+v, want replicas [2 3] led by 2, nothing moving", p)
	}
}

// A compare-and-set that conflicts (the store moved on behind this
// controller's back: here another writer) makes the controller read the
// store back, so its next decision on the partition goes through.
func TestConflictRereadsTheStore(t *testing.T) {
	h, _ := faultyCluster(t, 3)
	h.createTopic("t", 1, 3)
	stale := h.part("t", 0)
	next := stale.Clone()
	next.ISR, next.PartitionEpoch = []int32{1, 2}, stale.PartitionEpoch+1
	if err := h.st.UpdatePartitions(context.Background(), []store.PartitionUpdate{{Expected: stale.PartitionEpoch, New: next}}); err != nil {
		t.Fatal(err)
	}
	// The leader, which heard of the change, shrinks again; the
	// controller, at the old partition epoch, proposes from memory.
	if _, err := h.c.AlterPartition(context.Background(), h.alterReq(1, h.item(0, 0, 1, 3))); err == nil {
		t.Fatal("a proposal against the stale state answered no error")
	}
	h.wantMemoryAgrees("t", 0)
	h.mustAlter(1, h.part("t", 0), 1)
	if p := h.wantMemoryAgrees("t", 0); !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("ISR %v, want [1]", p.ISR)
	}
}

// A topic creation, a config change and a throttle change that land with
// an error: the controller learns them from the store and tells the
// brokers (the replicas get the new topic's LeaderAndIsr, with is_new),
// and an operator's retry is answered as for a change already made.
func TestAdminWritesLandedWithAnError(t *testing.T) {
	h, f := faultyCluster(t, 3)
	ctx := context.Background()
	f.Inject(storetest.Fault{Op: storetest.OpCreateTopic, Kind: storetest.LandThenFail})
	if _, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "t", Partitions: 1, ReplicationFactor: 3}); err == nil {
		t.Fatal("CreateTopic whose write landed with an error answered no error")
	}
	p := h.wantMemoryAgrees("t", 0)
	for _, id := range p.Replicas {
		waitFor(t, "the new topic's replicas to be told to create it", func() bool {
			s, _ := h.fake(id).laiState("t", 0)
			return s != nil && s.GetIsNew() && s.GetLeader() == p.Leader
		})
	}
	if resp, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "t", Partitions: 1, ReplicationFactor: 3}); err != nil ||
		resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS {
		t.Fatalf("the operator's retry: %v %v, want TOPIC_ALREADY_EXISTS", resp, err)
	}

	// The controller writes a config change with AlterTopicConfig (the
	// config and the partitions it makes stale, as one).
	f.Inject(storetest.Fault{Op: storetest.OpAlterTopicConfig, Kind: storetest.LandThenFail})
	if _, err := h.c.AlterTopicConfig(ctx, &replicadv1.AlterTopicConfigRequest{Topic: "t", Set: map[string]string{"retention.ms": "60000"}}); err == nil {
		t.Fatal("AlterTopicConfig whose write landed with an error answered no error")
	}
	waitFor(t, "the brokers to get the stored config", func() bool {
		for _, um := range h.fake(2).updateMetadatas() {
			for _, s := range um.GetPartitionStates() {
				if s.GetTopic() == "t" && s.GetTopicConfigs()["retention.ms"] == "60000" {
					return true
				}
			}
		}
		return false
	})
	h.c.lock()
	cfg := h.c.configs["t"]
	h.c.unlock()
	if cfg.Version != 2 || cfg.Configs["retention.ms"] != "60000" {
		t.Fatalf("config in memory %+v, want version 2 with retention.ms", cfg)
	}

	f.Inject(storetest.Fault{Op: storetest.OpSetReplicationThrottle, Kind: storetest.LandThenFail})
	if _, err := h.c.AlterReplicationThrottle(ctx, &replicadv1.AlterReplicationThrottleRequest{BytesPerSec: 1 << 20}); err == nil {
		t.Fatal("AlterReplicationThrottle whose write landed with an error answered no error")
	}
	if rate, _ := h.c.currentWireThrottle(); rate != 1<<20 {
		t.Fatalf("throttle sent %d, want the stored %d", rate, 1<<20)
	}

	f.Inject(storetest.Fault{Op: storetest.OpDeleteTopic, Kind: storetest.LandThenFail})
	if _, err := h.c.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: "t"}); err == nil {
		t.Fatal("DeleteTopic whose write landed with an error answered no error")
	}
	h.c.lock()
	_, known := h.c.parts[partitionKey{"t", 0}]
	h.c.unlock()
	if known {
		t.Fatal("the deleted topic is still in memory")
	}
	for _, id := range p.Replicas {
		waitFor(t, "the replicas to be told to delete the topic", func() bool { return h.fake(id).stoppedAndDeleted("t", 0) })
	}
}

// A registration stored whose election write then failed: the broker's
// retry of it (the same incarnation, answered as a retry) runs the
// elections and sends the state again, instead of answering the stored
// epoch and leaving the partition leaderless (issue 19, path 3: a decision
// lost to a failed write is driven again).
func TestRegistrationElectionRetriedWithTheRegistration(t *testing.T) {
	h, f := faultyCluster(t, 3)
	ctx := context.Background()
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	if _, err := h.c.AlterTopicConfig(ctx, &replicadv1.AlterTopicConfigRequest{Topic: "t", Set: map[string]string{"min.insync.replicas": "2"}}); err != nil {
		t.Fatal(err)
	}
	h.expire(1, 2)
	h.expire(1) // 2 in the ELR
	h.expire()  // leaderless
	if p := h.part("t", 0); p.Leader != store.NoLeader || !slices.Contains(p.ELR, 2) {
		t.Fatalf("setup: %+v, want leaderless with 2 in the ELR", p)
	}
	f.Inject(storetest.Fault{Op: storetest.OpUpdatePartitions, Kind: storetest.FailBefore, Err: errors.New("injected: store unreachable"),
		Match: func(c storetest.Call) bool { return len(c.Updates) == 1 && c.Updates[0].New.Leader == 2 }})
	req := &replicadv1.RegisterBrokerRequest{BrokerId: 2, Host: brokerHost(2), Port: brokerPort(2), PreviousBrokerEpoch: h.epoch[2], IncarnationId: "life-2"}
	if resp, err := h.c.RegisterBroker(ctx, req); err == nil && resp.GetErrorCode() == codeNone {
		t.Fatalf("registration whose election failed: %v, want an error", resp)
	}
	resp, err := h.c.RegisterBroker(ctx, req)
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("the broker's retry: %v %v", resp, err)
	}
	p := h.wantMemoryAgrees("t", 0)
	if p.Leader != 2 {
		t.Fatalf("after the retried registration: %+v, want 2 elected from the ELR", p)
	}
	waitLAI(t, h, 2, p)
}
