package core

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replicad/replicad/core/logmgr"
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

// A log created before topic IDs takes the first one it is given, when its
// partition is not new and its epochs are not ahead of the state's.
func TestLogWithoutTopicIDAdoptsOne(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	h.produce(tp0, AcksLeader, "kept")
	st := stateOf(topicA, 1, 2, []int32{1}, []int32{1})
	st.IsNew = false
	if code := codeOf(h.leaderAndIsr(1, st), tp0); code != ErrNone {
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

// A log of no topic ID written by a standalone broker (records at leader
// epoch 1) is not taken by a topic created since by a controller (leader
// epoch 0): its records would be served as the new topic's, and its epoch
// cache would go 1 then 0, which followers truncate by forever. It is set
// aside (renamed *-stray, kept, counted), and the partition starts empty;
// after a restart the set-aside dir is still there and not loaded (issue
// 19, path 5). The same holds for a new replica (is_new) at any epoch.
func TestLogWithoutTopicIDIsSetAsideNotAdopted(t *testing.T) {
	rec := &recordedMetrics{}
	h := newHarness(t, 1, func(c *Config) { c.Metrics = rec })
	old := state("orders", 0, 1, 1, []int32{1}, []int32{1})
	old.IsNew = false
	h.leaderAndIsr(1, old)
	h.produce(tp0, AcksLeader, "standalone-0", "standalone-1")
	h.restart()

	st := stateOf(topicA, 1, 0, []int32{1}, []int32{1})
	st.IsNew = false // the broker joined after the topic was created
	if code := codeOf(h.leaderAndIsr(1, st), tp0); code != ErrNone {
		t.Fatalf("LeaderAndIsr of the new topic: %v", code)
	}
	p, _ := h.describe(tp0)
	if p.LogEndOffset != 0 || p.LeaderEpoch != 0 || p.TopicID != topicA {
		t.Fatalf("%+v, want an empty log of %s at leader epoch 0", p, topicA)
	}
	if got := h.rm.logs.TopicID(tp0); got != topicA {
		t.Fatalf("log's topic ID %q, want %q", got, topicA)
	}
	if r := h.produce(tp0, AcksLeader, "new-0"); r.Error != ErrNone || r.BaseOffset != 0 {
		t.Fatalf("produce to the new topic: %+v, want offset 0", r)
	}
	strays := func() []string {
		entries, err := os.ReadDir(h.dirs[0])
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), logmgr.StrayDirSuffix) {
				out = append(out, e.Name())
			}
		}
		return out
	}
	aside := strays()
	if len(aside) != 1 || !strings.HasPrefix(aside[0], "orders-0.") {
		t.Fatalf("set-aside dirs %v, want one orders-0.*%s", aside, logmgr.StrayDirSuffix)
	}
	if segs, _ := filepath.Glob(filepath.Join(h.dirs[0], aside[0], "*.log")); len(segs) == 0 {
		t.Fatalf("the set-aside dir %s has no segment: the records were not kept", aside[0])
	}
	rec.mu.Lock()
	counted := len(rec.setAside)
	rec.mu.Unlock()
	if counted != 1 {
		t.Fatalf("%d logs counted set aside, want 1", counted)
	}
	h.restart()
	if got := strays(); len(got) != 1 || got[0] != aside[0] {
		t.Fatalf("after a restart the set-aside dirs are %v, want %v", got, aside)
	}
	if code := codeOf(h.leaderAndIsr(1, stateOf(topicA, 1, 1, []int32{1}, []int32{1})), tp0); code != ErrNone {
		t.Fatalf("LeaderAndIsr after the restart: %v", code)
	}
	if p, _ := h.describe(tp0); p.LogEndOffset != 1 {
		t.Fatalf("after a restart: %+v, want the new topic's one record", p)
	}

	// A new replica given a log of no topic ID: set aside whatever the epochs.
	h2 := newHarness(t, 1)
	old.TopicPartition = tp0
	h2.leaderAndIsr(1, old)
	h2.produce(tp0, AcksLeader, "standalone")
	h2.restart()
	if code := codeOf(h2.leaderAndIsr(1, stateOf(topicB, 1, 5, []int32{1}, []int32{1})), tp0); code != ErrNone {
		t.Fatalf("LeaderAndIsr of a new replica: %v", code)
	}
	if p, _ := h2.describe(tp0); p.LogEndOffset != 0 || p.TopicID != topicB {
		t.Fatalf("new replica: %+v, want an empty log of %s", p, topicB)
	}
}

// After a restart, a state whose leader epoch is below the latest epoch of
// the log here (same topic, or no topic IDs at all) is stale: it is refused
// and the log kept as it is, rather than taken with an epoch cache that
// would go down (issue 19, path 5).
func TestStateBelowTheLogsLatestEpochIsRefused(t *testing.T) {
	for _, id := range []string{"", topicA} {
		h := newHarness(t, 1)
		st := stateOf(id, 1, 3, []int32{1}, []int32{1})
		h.leaderAndIsr(1, st)
		h.produce(tp0, AcksLeader, "e3-0", "e3-1")
		h.restart()
		old := stateOf(id, 1, 2, []int32{1}, []int32{1})
		old.IsNew = false
		if code := codeOf(h.leaderAndIsr(1, old), tp0); code != ErrStaleControllerEpoch {
			t.Fatalf("topic ID %q: state at epoch 2 on a log at epoch 3: %v, want STALE_CONTROLLER_EPOCH", id, code)
		}
		if _, hosted := h.describe(tp0); hosted {
			t.Fatalf("topic ID %q: the refused state left the partition hosted", id)
		}
		st.IsNew = false
		if code := codeOf(h.leaderAndIsr(1, st), tp0); code != ErrNone {
			t.Fatalf("topic ID %q: state at the log's epoch: %v", id, code)
		}
		if p, _ := h.describe(tp0); p.LogEndOffset != 2 || p.LeaderEpoch != 3 {
			t.Fatalf("topic ID %q: %+v, want the log kept at epoch 3", id, p)
		}
	}
}
