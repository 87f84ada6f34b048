package controller

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
)

func cancelReassign(t *testing.T, h *harness, topic string, partition int32) *replicadv1.ReassignPartitionResponse {
	t.Helper()
	resp, err := h.c.ReassignPartition(context.Background(), &replicadv1.ReassignPartitionRequest{Topic: topic, Partition: partition, Cancel: true})
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	return resp
}

// A cancel puts the original replicas back (the current ones minus those
// being added), keeps the leader, and has the added replica stop and delete
// its log; a second cancel finds nothing in flight.
func TestCancelReassignment(t *testing.T) {
	h := startCluster(t, 4)
	ctx := context.Background()
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	if resp, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{2, 3, 4}}); err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("reassign: %v %v", resp, err)
	}
	moving := h.part("t", 0)
	if !slices.Equal(moving.AddingReplicas, []int32{4}) {
		t.Fatalf("moving: %+v, want 4 being added", moving)
	}
	// The leader learns which replicas are being added: the only ones its
	// replication throttle holds back.
	waitLAI(t, h, 1, moving)
	resp := cancelReassign(t, h, "t", 0)
	if resp.GetErrorCode() != codeNone {
		t.Fatalf("cancel: %v", resp)
	}
	p := h.part("t", 0)
	if !slices.Equal(p.Replicas, []int32{2, 3, 1}) || !slices.Equal(p.ISR, []int32{1, 2, 3}) || p.Leader != 1 ||
		len(p.AddingReplicas)+len(p.RemovingReplicas) != 0 || p.LeaderEpoch != moving.LeaderEpoch+1 || p.PartitionEpoch != moving.PartitionEpoch+1 {
		t.Fatalf("after cancel: %+v; want replicas {1 2 3}, ISR [1 2 3], leader 1, nothing moving, both epochs +1 from %+v", p, moving)
	}
	if cp := resp.GetPartition(); !slices.Equal(cp.GetReplicas(), p.Replicas) {
		t.Errorf("answer %v is not the stored %+v", cp, p)
	}
	for _, id := range []int32{1, 2, 3} {
		waitLAI(t, h, id, p)
	}
	waitFor(t, "the added replica to be told to stop and delete", func() bool { return h.fake(4).stoppedAndDeleted("t", 0) })
	for _, id := range []int32{1, 2, 3} {
		if h.fake(id).stoppedAndDeleted("t", 0) {
			t.Errorf("original replica %d told to delete", id)
		}
	}
	before := h.snapshot()
	if resp := cancelReassign(t, h, "t", 0); resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NO_REASSIGNMENT_IN_PROGRESS {
		t.Errorf("second cancel: %v, want NO_REASSIGNMENT_IN_PROGRESS", resp)
	}
	if resp := cancelReassign(t, h, "t", 7); resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Errorf("cancel of an unknown partition: %v", resp)
	}
	if _, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Cancel: true, Replicas: []int32{1}}); err == nil {
		t.Error("cancel with replicas accepted")
	}
	h.assertUnchanged(before)
}

// revertReassignment drops the adding replicas from the replicas, ISR and
// ELR, moves a leadership held by one of them to an original ISR member,
// and refuses when no original replica is in the ISR.
func TestRevertReassignment(t *testing.T) {
	all := func(int32) bool { return true }
	p := store.Partition{Topic: "t", Replicas: []int32{4, 5, 1, 2, 3}, AddingReplicas: []int32{4, 5}, RemovingReplicas: []int32{2, 3},
		ISR: []int32{1, 4}, ELR: []int32{5}, Leader: 4, LeaderEpoch: 7, PartitionEpoch: 9}
	next, err := revertReassignment(p, all)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(next.Replicas, []int32{1, 2, 3}) || !slices.Equal(next.ISR, []int32{1}) || len(next.ELR) != 0 || next.Leader != 1 ||
		next.LeaderEpoch != 8 || next.PartitionEpoch != 10 || len(next.AddingReplicas)+len(next.RemovingReplicas) != 0 {
		t.Fatalf("reverted %+v", next)
	}
	p.ISR = []int32{4}
	_, err = revertReassignment(p, all)
	var ae *adminError
	if !errors.As(err, &ae) || ae.code != replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA {
		t.Fatalf("revert with only adding replicas in the ISR: %v, want INELIGIBLE_REPLICA", err)
	}
}

// The throttle is stored, sent to every live broker with
// replication_throttle_present, answered with the previous rate, and kept
// by the next controller, which sends it to a broker that registers.
func TestReplicationThrottleIsStoredAndSent(t *testing.T) {
	h := startCluster(t, 2)
	ctx := context.Background()
	set := func(h *harness, rate int64) int64 {
		t.Helper()
		resp, err := h.c.AlterReplicationThrottle(ctx, &replicadv1.AlterReplicationThrottleRequest{BytesPerSec: rate})
		if err != nil || resp.GetErrorCode() != codeNone {
			t.Fatalf("AlterReplicationThrottle(%d): %v %v", rate, resp, err)
		}
		return resp.GetPreviousBytesPerSec()
	}
	lastThrottle := func(h *harness, id int32) (int64, bool) {
		ums := h.fake(id).updateMetadatas()
		if len(ums) == 0 {
			return 0, false
		}
		um := ums[len(ums)-1]
		return um.GetReplicationThrottleBytesPerSec(), um.GetReplicationThrottlePresent()
	}
	if prev := set(h, 1<<20); prev != 0 {
		t.Errorf("previous throttle %d, want 0", prev)
	}
	for _, id := range []int32{1, 2} {
		if rate, present := lastThrottle(h, id); !present || rate != 1<<20 {
			t.Errorf("broker %d: last UpdateMetadata throttle %d present %v, want 1MiB", id, rate, present)
		}
	}
	if got, err := h.st.ReplicationThrottle(ctx); err != nil || got != 1<<20 {
		t.Fatalf("stored throttle %d %v", got, err)
	}
	if _, err := h.c.AlterReplicationThrottle(ctx, &replicadv1.AlterReplicationThrottleRequest{BytesPerSec: -1}); err == nil {
		t.Error("a negative throttle was accepted")
	}

	// A new controller on the same store sends it from its first request.
	h.stop()
	h2 := newHarness(t, withStore(h.st))
	h2.start()
	h2.register(1)
	waitFor(t, "broker 1 to get the throttle from the new controller", func() bool {
		rate, present := lastThrottle(h2, 1)
		return present && rate == 1<<20
	})
	if prev := set(h2, 0); prev != 1<<20 {
		t.Errorf("previous throttle %d at removal, want 1MiB", prev)
	}
	if rate, present := lastThrottle(h2, 1); !present || rate != 0 {
		t.Errorf("after removal: throttle %d present %v, want 0 present", rate, present)
	}
}

// TestCancelAndThrottleAreTraced checks that a cancel made under a client's
// span is one Controller.cancelReassignment span in that trace, naming the
// partition and recording the state change, that reaches the original
// replicas; and that a throttle change is a Controller.alterReplicationThrottle
// span with the rates.
func TestCancelAndThrottleAreTraced(t *testing.T) {
	h, rec, client := tracedCluster(t, 4)
	ctx := context.Background()
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	if resp, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{2, 3, 4}}); err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("reassign: %v %v", resp, err)
	}
	cctx, span := client.Start(ctx, "ctlclient reassign --cancel")
	resp, err := h.c.ReassignPartition(cctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Cancel: true})
	span.End()
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("cancel: %v %v", resp, err)
	}
	cancels := spantest.Named(rec, "Controller.cancelReassignment")
	if len(cancels) != 1 || cancels[0].Parent().SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("Controller.cancelReassignment spans %v, want one under the client's", cancels)
	}
	a := spantest.Attrs(cancels[0].Attributes())
	if a["replicad.topic"].AsString() != "t" || a["replicad.partition"].AsInt64() != 0 || a["replicad.leader"].AsInt64() != 1 {
		t.Errorf("Controller.cancelReassignment attributes %v", a)
	}
	if evs := cancels[0].Events(); len(evs) != 1 || evs[0].Name != "partition state change" {
		t.Errorf("Controller.cancelReassignment events %v, want one partition state change", evs)
	}
	p := h.part("t", 0)
	for _, id := range p.Replicas {
		wantSentUnder(t, h, rec, id, p, cancels[0])
	}

	if _, err := h.c.AlterReplicationThrottle(ctx, &replicadv1.AlterReplicationThrottleRequest{BytesPerSec: 4096}); err != nil {
		t.Fatal(err)
	}
	throttles := spantest.Named(rec, "Controller.alterReplicationThrottle")
	if len(throttles) != 1 {
		t.Fatalf("%d Controller.alterReplicationThrottle spans, want 1", len(throttles))
	}
	if a := spantest.Attrs(throttles[0].Attributes()); a["replicad.throttle_bytes_per_sec"].AsInt64() != 4096 ||
		a["replicad.previous_throttle_bytes_per_sec"].AsInt64() != 0 || a["replicad.brokers_told"].AsInt64() != 4 {
		t.Errorf("Controller.alterReplicationThrottle attributes %v", a)
	}
}
