package core

import (
	"testing"
)

const (
	topicA = "vXbx7Hc8TC2-LWVSwTLY7g"
	topicB = "AQIDBAUGBwgJCgsMDQ4PEA"
)

func stateOf(id string, leader, epoch int32, replicas, isr []int32) PartitionState {
	st := state("orders", 0, leader, epoch, replicas, isr)
	st.TopicID = id
	return st
}

// A LeaderAndIsr naming another topic ID than the replica here (a topic of
// the name was deleted and created again, and its leader epochs restarted
// at 0) deletes the replica's log and starts the partition over, whatever
// the epochs; the same topic ID keeps the epoch checks (issue 10, path 2).
func TestLeaderAndIsrOfAnotherTopicIDDeletesTheStrayLog(t *testing.T) {
	h := newHarness(t, 1)
	if code := codeOf(h.leaderAndIsr(1, stateOf(topicA, 1, 5, []int32{1}, []int32{1})), tp0); code != ErrNone {
		t.Fatalf("first LeaderAndIsr: %v", code)
	}
	h.produce(tp0, AcksLeader, "old-0", "old-1")
	if code := codeOf(h.leaderAndIsr(1, stateOf(topicA, 1, 0, []int32{1}, []int32{1})), tp0); code != ErrStaleControllerEpoch {
		t.Fatalf("older epoch of the same topic: %v, want STALE_CONTROLLER_EPOCH", code)
	}
	if code := codeOf(h.leaderAndIsr(1, stateOf(topicB, 1, 0, []int32{1}, []int32{1})), tp0); code != ErrNone {
		t.Fatalf("LeaderAndIsr of the new topic: %v, want NONE", code)
	}
	p, _ := h.describe(tp0)
	if p.LogEndOffset != 0 || p.LeaderEpoch != 0 || p.TopicID != topicB {
		t.Fatalf("after the new topic's LeaderAndIsr: %+v, want an empty log of %s at leader epoch 0", p, topicB)
	}
	if got := h.rm.logs.TopicID(tp0); got != topicB {
		t.Fatalf("log's topic ID %q, want %q", got, topicB)
	}
	// After a restart the log is still the new topic's.
	h.restart()
	if got := h.rm.logs.TopicID(tp0); got != topicB {
		t.Fatalf("log's topic ID after a restart %q, want %q", got, topicB)
	}
}

// A log created before topic IDs takes the first one it is given.
func TestLogWithoutTopicIDAdoptsOne(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	h.produce(tp0, AcksLeader, "kept")
	if code := codeOf(h.leaderAndIsr(1, stateOf(topicA, 1, 2, []int32{1}, []int32{1})), tp0); code != ErrNone {
		t.Fatalf("LeaderAndIsr with a topic ID: %v", code)
	}
	if p, _ := h.describe(tp0); p.LogEndOffset != 1 || p.TopicID != topicA || h.rm.logs.TopicID(tp0) != topicA {
		t.Fatalf("%+v (log topic ID %q), want the log kept, of %s", p, h.rm.logs.TopicID(tp0), topicA)
	}
}

// A StopReplica naming another topic ID leaves the replica alone (it is of
// a topic created since) and answers NONE: nothing of the stopped topic is
// here. A fetch naming another topic ID is refused.
func TestStopReplicaAndFetchOfAnotherTopicID(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, stateOf(topicB, 1, 1, []int32{1, 2}, []int32{1, 2}))
	resp := h.rm.StopReplicas(t.Context(), StopReplicaRequest{ControllerEpoch: 1,
		Partitions: []StopReplicaPartition{{TopicPartition: tp0, LeaderEpoch: NoEpoch, Delete: true, TopicID: topicA}}})
	if resp.Error != ErrNone || resp.PartitionErrors[0].Error != ErrNone {
		t.Fatalf("StopReplica of the old topic ID: %+v", resp)
	}
	if p, ok := h.describe(tp0); !ok || p.TopicID != topicB {
		t.Fatalf("the new topic's replica was stopped: %+v %v", p, ok)
	}
	fp := fetchAt(0, 1)
	fp.TopicID = topicA
	if r := h.fetch(2, fp); r.Error != ErrInconsistentTopicID {
		t.Fatalf("fetch naming another topic ID: %v, want INCONSISTENT_TOPIC_ID", r.Error)
	}
	fp.TopicID = topicB
	if r := h.fetch(2, fp); r.Error != ErrNone {
		t.Fatalf("fetch naming the topic ID: %v", r.Error)
	}
	// With its own topic ID, the StopReplica deletes it.
	resp = h.rm.StopReplicas(t.Context(), StopReplicaRequest{ControllerEpoch: 1,
		Partitions: []StopReplicaPartition{{TopicPartition: tp0, LeaderEpoch: NoEpoch, Delete: true, TopicID: topicB}}})
	if resp.PartitionErrors[0].Error != ErrNone {
		t.Fatalf("StopReplica: %+v", resp)
	}
	if _, ok := h.rm.logs.GetLog(tp0); ok {
		t.Fatal("the log is still there after its StopReplica with delete")
	}
}
