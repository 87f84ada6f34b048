package controller

import (
	"context"
	"slices"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// A leader whose AlterPartition was committed but whose answer was lost
// retries it. When the committed ISR is what it proposes, the retry is
// answered with the committed state, whatever changed since (here the leader
// epoch, bumped by a reassignment that kept leader and ISR): the leader epoch
// check must not come first, or the leader hears FENCED_LEADER_EPOCH for a
// change the controller holds (issue 10, path 1).
func TestAlterPartitionRetryOfCommittedChangeIsAnsweredWithItsState(t *testing.T) {
	h := startCluster(t, 4)
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	h.mustAlter(1, h.part("t", 0), 1, 2)
	proposal := h.item(0, 1, 1, 2, 3)       // the expansion, at partition epoch 1...
	h.mustAlter(1, h.part("t", 0), 1, 2, 3) // ...committed (partition epoch 2), its answer lost
	// The leader epoch moves on, leader and ISR unchanged.
	resp, err := h.c.ReassignPartition(context.Background(), &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{3, 2, 1}})
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("ReassignPartition: %v %v", resp, err)
	}
	committed := h.part("t", 0)
	if committed.LeaderEpoch == 0 || committed.Leader != 1 || !slices.Equal(committed.ISR, []int32{1, 2, 3}) {
		t.Fatalf("after the reassignment %+v, want leader 1, ISR [1 2 3] at a newer leader epoch", committed)
	}
	before := h.snapshot()
	ar, err := h.c.AlterPartition(context.Background(), h.alterReq(1, proposal))
	if err != nil || ar.GetErrorCode() != codeNone || len(ar.GetPartitions()) != 1 {
		t.Fatalf("AlterPartition retry: %v %v", ar, err)
	}
	r := ar.GetPartitions()[0]
	if r.GetErrorCode() != codeNone || r.GetLeader() != 1 || r.GetLeaderEpoch() != committed.LeaderEpoch ||
		r.GetPartitionEpoch() != committed.PartitionEpoch || !slices.Equal(r.GetIsr(), committed.ISR) {
		t.Fatalf("retry answered %v, want NONE with the committed state %+v", r, committed)
	}
	h.assertUnchanged(before)
}

// A leader at the current leader epoch whose partition epoch is stale (it
// missed a state the controller committed) is answered
// INVALID_UPDATE_VERSION and sent the committed state in a LeaderAndIsr at
// the same leader epoch, which the broker takes as an ISR refresh: its
// change, left pending by the unclear answer, is settled without waiting for
// the next leader epoch.
func TestAlterPartitionStalePartitionEpochResendsCommittedState(t *testing.T) {
	h := startCluster(t, 4)
	h.createTopic("t", 1, 3)
	h.mustAlter(1, h.part("t", 0), 1, 2) // partition epoch 1
	h.fake(1).reset()
	ar, err := h.c.AlterPartition(context.Background(), h.alterReq(1, h.item(0, 0, 1)))
	if err != nil || len(ar.GetPartitions()) != 1 || ar.GetPartitions()[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION {
		t.Fatalf("AlterPartition at a stale partition epoch: %v %v, want INVALID_UPDATE_VERSION", ar, err)
	}
	waitFor(t, "broker 1 to get the committed state at leader epoch 0, partition epoch 1", func() bool {
		st, _ := h.fake(1).laiState("t", 0)
		return st != nil && st.GetLeader() == 1 && st.GetLeaderEpoch() == 0 && st.GetPartitionEpoch() == 1 && slices.Equal(st.GetIsr(), []int32{1, 2})
	})
}
