package controller

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Every topic gets an ID at creation, the same in all its partitions and in
// the LeaderAndIsr that tells the brokers; a topic created again under the
// same name gets another.
func TestCreateTopicGivesATopicID(t *testing.T) {
	h := startCluster(t, 3)
	parts := h.createTopic("t", 2, 3)
	id := parts[0].GetTopicId()
	if b, err := base64.RawURLEncoding.DecodeString(id); err != nil || len(b) != 16 || parts[1].GetTopicId() != id {
		t.Fatalf("topic IDs %q %q, want one 16-byte ID in Kafka's form for both partitions", id, parts[1].GetTopicId())
	}
	if p := h.part("t", 1); p.TopicID != id {
		t.Fatalf("stored topic ID %q, want %q", p.TopicID, id)
	}
	st, _ := h.fake(2).laiState("t", 0)
	if st == nil || st.GetTopicId() != id {
		t.Fatalf("LeaderAndIsr state %v, want topic ID %q", st, id)
	}
	if _, err := h.c.DeleteTopic(context.Background(), &replicadv1.DeleteTopicRequest{Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	if again := h.createTopic("t", 1, 3); again[0].GetTopicId() == id || again[0].GetTopicId() == "" {
		t.Fatalf("recreated topic's ID %q, want a new one (was %q)", again[0].GetTopicId(), id)
	}
}

// A topic deleted while a replica's broker is down stays pending deletion
// for that replica (describe-cluster shows it); the broker gets the
// StopReplica, naming the topic ID, when it registers again, before its full
// state, and the deletion completes once it answered (issue 10, path 2).
func TestTopicDeletionPendsUntilEveryReplicaDeleted(t *testing.T) {
	h := startCluster(t, 3)
	id := h.createTopic("t", 1, 3)[0].GetTopicId()
	h.expire(1, 2) // broker 3 down
	ctx := context.Background()
	resp, err := h.c.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: "t"})
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("DeleteTopic: %v %v", resp, err)
	}
	for _, b := range []int32{1, 2} {
		waitFor(t, "the StopReplica with the topic ID to a live replica", func() bool {
			for _, r := range h.fake(b).stopReplicas() {
				for _, p := range r.GetPartitions() {
					if p.GetTopic() == "t" && p.GetDeletePartition() && p.GetTopicId() == id {
						return true
					}
				}
			}
			return false
		})
	}
	pending := func() []*replicadv1.DeletedTopic {
		dc, err := h.c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return dc.GetPendingDeletions()
	}
	waitFor(t, "the deletion to pend for broker 3 only", func() bool {
		p := pending()
		return len(p) == 1 && p[0].GetTopicId() == id && len(p[0].GetPending()) == 1 &&
			len(p[0].GetPending()[0].GetBrokers()) == 1 && p[0].GetPending()[0].GetBrokers()[0] == 3
	})
	if d, err := h.st.DeletedTopics(ctx); err != nil || len(d) != 1 || len(d[0].Pending) != 1 {
		t.Fatalf("store's pending deletions %+v %v, want broker 3's replica", d, err)
	}

	f3 := h.fake(3)
	f3.reset()
	h.register(3)
	waitFor(t, "the deletion to complete", func() bool { return len(pending()) == 0 })
	if d, err := h.st.DeletedTopics(ctx); err != nil || len(d) != 0 {
		t.Fatalf("store's pending deletions %+v %v, want none", d, err)
	}
	var stopped bool
	for _, r := range f3.stopReplicas() {
		for _, p := range r.GetPartitions() {
			stopped = stopped || (p.GetTopic() == "t" && p.GetDeletePartition() && p.GetTopicId() == id)
		}
	}
	if !stopped {
		t.Fatalf("broker 3 was not sent the StopReplica of t-0 (topic ID %s) when it came back", id)
	}
}

// A topic stored before topic IDs gets one when a controller activates.
func TestActivationGivesLegacyTopicsAnID(t *testing.T) {
	st := store.NewMemory()
	if err := st.CreateTopic(context.Background(), "old", []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}, nil); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withStore(st))
	h.start()
	if p := h.part("old", 0); p.TopicID == "" || p.PartitionEpoch != 1 {
		t.Fatalf("legacy topic after activation: %+v, want an ID at partition epoch 1", p)
	}
}
