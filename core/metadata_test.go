package core

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

func (h *harness) updateMetadata(ctrlEpoch int32, live []Broker, states ...PartitionState) {
	h.t.Helper()
	if code := h.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: ctrlEpoch,
		LiveBrokers: live, PartitionStates: states}); code != ErrNone {
		h.t.Fatalf("UpdateMetadata: %v", code)
	}
}

func brokersUpTo(n int32) []Broker {
	var out []Broker
	for id := int32(1); id <= n; id++ {
		out = append(out, Broker{ID: id, Host: "127.0.0.1", Port: 9090 + id, Epoch: int64(10 + id)})
	}
	return out
}

func partitionOf(t *testing.T, v MetadataView, topic string, part int32) PartitionMetadata {
	t.Helper()
	for _, tm := range v.Topics {
		if tm.Topic != topic {
			continue
		}
		for _, pm := range tm.Partitions {
			if pm.Partition == part {
				return pm
			}
		}
	}
	t.Fatalf("%s-%d not in the view %+v", topic, part, v)
	return PartitionMetadata{}
}

func stateWithID(topic, id string, part, leader, epoch int32, replicas, isr []int32) PartitionState {
	st := state(topic, part, leader, epoch, replicas, isr)
	st.TopicID, st.IsNew = id, false
	return st
}

// The view is what UpdateMetadata said: live brokers, the controller, each
// partition sorted under its topic, a leader that is not live answered
// LEADER_NOT_AVAILABLE (leader -1) and replicas on brokers not live
// offline; topics asked for come in request order, unknown ones with
// UNKNOWN_TOPIC_OR_PARTITION.
func TestMetadataAnswersWhatUpdateMetadataSaid(t *testing.T) {
	h := newHarness(t, 1)
	if v := h.rm.Metadata(nil); v.ControllerID != -1 || v.ControllerEpoch != -1 || len(v.Topics) != 0 || len(v.Brokers) != 0 {
		t.Fatalf("before any request: %+v, want controller -1 and nothing known", v)
	}
	h.updateMetadata(3, brokersUpTo(3),
		stateWithID("orders", "idOrders", 1, 4, 2, []int32{4, 2, 3}, []int32{4, 2}),
		stateWithID("orders", "idOrders", 0, 2, 5, []int32{2, 3, 1}, []int32{2, 3, 1}),
		stateWithID("pay", "idPay", 0, 3, 1, []int32{3}, []int32{3}))
	v := h.rm.Metadata(nil)
	if v.BrokerID != 1 || v.ControllerID != 100 || v.ControllerEpoch != 3 {
		t.Fatalf("broker %d controller %d epoch %d, want 1, 100, 3", v.BrokerID, v.ControllerID, v.ControllerEpoch)
	}
	if len(v.Brokers) != 3 || v.Brokers[0].ID != 1 || v.Brokers[2].Addr() != "127.0.0.1:9093" {
		t.Fatalf("brokers %+v, want 1..3 by id with their endpoints", v.Brokers)
	}
	if len(v.Topics) != 2 || v.Topics[0].Topic != "orders" || v.Topics[1].Topic != "pay" || v.Topics[0].TopicID != "idOrders" {
		t.Fatalf("topics %+v, want orders (idOrders) then pay", v.Topics)
	}
	if ps := v.Topics[0].Partitions; len(ps) != 2 || ps[0].Partition != 0 || ps[1].Partition != 1 {
		t.Fatalf("orders partitions %+v, want 0 then 1", ps)
	}
	p0 := partitionOf(t, v, "orders", 0)
	if p0.Error != ErrNone || p0.Leader != 2 || p0.LeaderEpoch != 5 || !slices.Equal(p0.Replicas, []int32{2, 3, 1}) ||
		!slices.Equal(p0.ISR, []int32{2, 3, 1}) || len(p0.OfflineReplicas) != 0 {
		t.Fatalf("orders-0 %+v, want leader 2 epoch 5, replicas = ISR = [2 3 1], none offline", p0)
	}
	p1 := partitionOf(t, v, "orders", 1)
	if p1.Error != ErrLeaderNotAvailable || p1.Leader != -1 || !slices.Equal(p1.OfflineReplicas, []int32{4}) || p1.LeaderEpoch != 2 {
		t.Fatalf("orders-1 %+v, want LEADER_NOT_AVAILABLE, leader -1, offline [4] (broker 4 is not live)", p1)
	}

	v = h.rm.Metadata([]string{"pay", "nope"})
	if len(v.Topics) != 2 || v.Topics[0].Topic != "pay" || v.Topics[0].Error != ErrNone ||
		v.Topics[1].Topic != "nope" || v.Topics[1].Error != ErrUnknownTopicOrPartition || len(v.Topics[1].Partitions) != 0 {
		t.Fatalf("asked pay, nope: %+v, want pay then nope UNKNOWN_TOPIC_OR_PARTITION", v.Topics)
	}
}

// UpdateMetadata carries the partitions that changed: the others keep
// their state. A state older (by leader epoch, then partition epoch) than
// the one held never replaces it, whatever order requests are handled in;
// another topic ID (the topic deleted and created again) always does.
func TestMetadataKeepsTheNewestStateOfEachPartition(t *testing.T) {
	h := newHarness(t, 1)
	live := brokersUpTo(3)
	h.updateMetadata(1, live, stateWithID("orders", "A", 0, 2, 5, []int32{2, 3}, []int32{2, 3}),
		stateWithID("orders", "A", 1, 3, 1, []int32{3, 2}, []int32{3, 2}))
	// Only orders-1 changed: orders-0 stays.
	h.updateMetadata(1, live, stateWithID("orders", "A", 1, 2, 2, []int32{3, 2}, []int32{2}))
	if p := partitionOf(t, h.rm.Metadata(nil), "orders", 0); p.Leader != 2 || p.LeaderEpoch != 5 {
		t.Fatalf("orders-0 %+v after an update without it, want leader 2 epoch 5", p)
	}
	if p := partitionOf(t, h.rm.Metadata(nil), "orders", 1); p.Leader != 2 || p.LeaderEpoch != 2 || !slices.Equal(p.ISR, []int32{2}) {
		t.Fatalf("orders-1 %+v, want leader 2 epoch 2 ISR [2]", p)
	}
	// Late and older: ignored.
	h.updateMetadata(1, live, stateWithID("orders", "A", 0, 3, 4, []int32{2, 3}, []int32{3}))
	if p := partitionOf(t, h.rm.Metadata(nil), "orders", 0); p.Leader != 2 || p.LeaderEpoch != 5 {
		t.Fatalf("orders-0 %+v after an older state, want leader 2 epoch 5 kept", p)
	}
	// Same leader epoch, newer partition epoch (an ISR change): taken.
	st := stateWithID("orders", "A", 0, 2, 5, []int32{2, 3}, []int32{2})
	st.PartitionEpoch = 1
	h.updateMetadata(1, live, st)
	if p := partitionOf(t, h.rm.Metadata(nil), "orders", 0); !slices.Equal(p.ISR, []int32{2}) || p.PartitionEpoch != 1 {
		t.Fatalf("orders-0 %+v after an ISR change, want ISR [2] partition epoch 1", p)
	}
	// The topic again, under a new ID: its epochs start over.
	h.updateMetadata(1, live, stateWithID("orders", "B", 0, 3, 0, []int32{3}, []int32{3}))
	v := h.rm.Metadata([]string{"orders"})
	if p := partitionOf(t, v, "orders", 0); p.Leader != 3 || p.LeaderEpoch != 0 {
		t.Fatalf("orders-0 %+v of the new topic ID, want leader 3 epoch 0", p)
	}
}

// LeaderAndIsr feeds the view too (a broker may hear of its own partitions
// before any UpdateMetadata), and a hosted leader's own ISR change, which it
// learns from the controller's AlterPartition answer, shows at once.
func TestMetadataShowsHostedPartitionsOwnState(t *testing.T) {
	changer := &heldIsrChanger{}
	h := newHarness(t, 1, func(c *Config) { c.IsrChanger = changer })
	h.updateMetadata(1, brokersUpTo(3))
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1}))
	if p := partitionOf(t, h.rm.Metadata(nil), "orders", 0); p.Leader != 1 || p.LeaderEpoch != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("orders-0 %+v after LeaderAndIsr alone, want leader 1 epoch 1 ISR [1]", p)
	}
	h.produce(tp0, AcksLeader, "a")
	h.fetch(2, fetchAt(1, 1))
	if got := changer.submitted(); len(got) != 1 {
		t.Fatalf("submitted %+v, want one ISR expansion", got)
	}
	changer.answer(0, IsrChangeResult{Isr: []int32{1, 2}, PartitionEpoch: 1})
	if p := partitionOf(t, h.rm.Metadata([]string{"orders"}), "orders", 0); !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != 1 {
		t.Fatalf("orders-0 %+v after the expansion, want ISR [1 2] partition epoch 1 (the leader's own state)", p)
	}
	// The controller's UpdateMetadata of that change, late: nothing moves back.
	h.updateMetadata(1, brokersUpTo(3), state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1}))
	if p := partitionOf(t, h.rm.Metadata(nil), "orders", 0); !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("orders-0 %+v after an older UpdateMetadata, want ISR [1 2] kept", p)
	}
}

// A follower keeps no ISR of its own: its view shows the controller's.
func TestMetadataOfAFollowerShowsTheControllersISR(t *testing.T) {
	h := newHarness(t, 1)
	h.updateMetadata(1, brokersUpTo(3))
	h.leaderAndIsr(1, state("orders", 0, 2, 1, []int32{2, 1, 3}, []int32{2, 1, 3}))
	if p := partitionOf(t, h.rm.Metadata(nil), "orders", 0); p.Leader != 2 || !slices.Equal(p.ISR, []int32{2, 1, 3}) {
		t.Fatalf("orders-0 %+v on a follower, want leader 2 ISR [2 1 3]", p)
	}
}

// The view carries each topic's config overrides at the newest version
// heard: an alter's UpdateMetadata delivered after a later one (same
// epochs, older configs) does not bring the old value back.
func TestMetadataCarriesTheNewestTopicConfigs(t *testing.T) {
	h := newHarness(t, 1)
	live := brokersUpTo(3)
	with := func(version int64, configs map[string]string) PartitionState {
		st := stateWithID("orders", "A", 0, 2, 5, []int32{2, 3}, []int32{2, 3})
		st.TopicConfigVersion, st.TopicConfigs = version, configs
		return st
	}
	topic := func() TopicMetadata {
		for _, tm := range h.rm.Metadata([]string{"orders"}).Topics {
			return tm
		}
		t.Fatal("orders not in the view")
		return TopicMetadata{}
	}
	h.updateMetadata(1, live, with(2, map[string]string{"retention.ms": "1000"}))
	if tm := topic(); tm.ConfigVersion != 2 || tm.Configs["retention.ms"] != "1000" {
		t.Fatalf("configs %v version %d, want retention.ms=1000 version 2", tm.Configs, tm.ConfigVersion)
	}
	h.updateMetadata(1, live, with(1, map[string]string{"retention.ms": "5"}))
	if tm := topic(); tm.ConfigVersion != 2 || tm.Configs["retention.ms"] != "1000" {
		t.Fatalf("an older config version was taken: %v version %d", tm.Configs, tm.ConfigVersion)
	}
	h.updateMetadata(1, live, with(3, nil))
	if tm := topic(); tm.ConfigVersion != 3 || len(tm.Configs) != 0 {
		t.Fatalf("configs %v version %d, want none at version 3", tm.Configs, tm.ConfigVersion)
	}
}

// A topic grown to 4 partitions, deleted and created again with 2: the
// view shows the new topic's 2 partitions only, not the deleted one's
// orders-2 and orders-3 (no controller sends their state again), on a
// broker that hosts none of them and on one still hosting a replica of the
// deleted topic; and the new topic grown again shows its own.
func TestMetadataShowsOnlyTheTopicsCurrentIncarnation(t *testing.T) {
	h := newHarness(t, 1)
	live := brokersUpTo(3)
	var old []PartitionState
	for p := int32(0); p < 4; p++ {
		old = append(old, stateWithID("orders", "A", p, 2, 0, []int32{2, 3}, []int32{2, 3}))
	}
	h.updateMetadata(1, live, old...)
	// This broker leads the deleted topic's orders-3, not stopped yet.
	h.leaderAndIsr(1, stateWithID("orders", "A", 3, 1, 1, []int32{1, 2}, []int32{1, 2}))
	if n := len(h.rm.Metadata([]string{"orders"}).Topics[0].Partitions); n != 4 {
		t.Fatalf("%d partitions of orders before the delete, want 4", n)
	}
	h.updateMetadata(1, live, stateWithID("orders", "B", 0, 3, 0, []int32{3, 2}, []int32{3, 2}),
		stateWithID("orders", "B", 1, 2, 0, []int32{2, 3}, []int32{2, 3}))
	v := h.rm.Metadata([]string{"orders"})
	var parts []int32
	for _, p := range v.Topics[0].Partitions {
		parts = append(parts, p.Partition)
	}
	if v.Topics[0].TopicID != "B" || !slices.Equal(parts, []int32{0, 1}) {
		t.Fatalf("orders after it was created again: topic ID %s, partitions %v; want B with [0 1]", v.Topics[0].TopicID, parts)
	}
	if all := h.rm.Metadata(nil); len(all.Topics) != 1 || len(all.Topics[0].Partitions) != 2 {
		t.Fatalf("every topic: %+v, want orders with 2 partitions", all.Topics)
	}
	h.updateMetadata(1, live, stateWithID("orders", "B", 2, 3, 0, []int32{3, 2}, []int32{3, 2}))
	if p := partitionOf(t, h.rm.Metadata([]string{"orders"}), "orders", 2); p.Leader != 3 {
		t.Fatalf("orders-2 of the grown topic %+v, want leader 3", p)
	}
	if n := len(h.rm.Metadata([]string{"orders"}).Topics[0].Partitions); n != 3 {
		t.Fatalf("%d partitions of orders after it grew, want 3", n)
	}
}

// BenchmarkMetadataSnapshot is the metadata cache's part of a client's
// Metadata of one topic of 1,000 partitions, on a broker that holds
// 10,000 (ten such topics).
func BenchmarkMetadataSnapshot(b *testing.B) {
	c := newMetadataCache()
	for topic := range 10 {
		var states []PartitionState
		name := fmt.Sprintf("topic-%d", topic)
		for p := int32(0); p < 1000; p++ {
			states = append(states, stateWithID(name, name+"-id", p, 1+p%3, 0, []int32{1 + p%3, 1 + (p+1)%3}, []int32{1 + p%3}))
		}
		c.updatePartitions(states)
	}
	want := map[string]bool{"topic-3": true}
	b.ResetTimer()
	for range b.N {
		if _, _, states := c.snapshot(want); len(states) != 1000 {
			b.Fatalf("%d partitions", len(states))
		}
	}
}
