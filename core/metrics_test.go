package core

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/replicad/replicad/core/tp"
)

// recordedMetrics is a MetricsRecorder that counts what it is told.
type recordedMetrics struct {
	mu          sync.Mutex
	shrinks     []tp.TopicPartition
	expands     []tp.TopicPartition
	checkpoints int
	setAside    []tp.TopicPartition
}

func (r *recordedMetrics) LogSetAside(t tp.TopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setAside = append(r.setAside, t)
}

func (r *recordedMetrics) IsrShrunk(t tp.TopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shrinks = append(r.shrinks, t)
}

func (r *recordedMetrics) IsrExpanded(t tp.TopicPartition) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expands = append(r.expands, t)
}

func (r *recordedMetrics) HighWatermarkCheckpointed(time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkpoints++
}

func (r *recordedMetrics) counts() (shrinks, expands, checkpoints int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.shrinks), len(r.expands), r.checkpoints
}

func topicMetrics(s MetricsSnapshot, topic string) (TopicMetrics, bool) {
	for _, tm := range s.Topics {
		if tm.Topic == topic {
			return tm, true
		}
	}
	return TopicMetrics{}, false
}

// The snapshot counts hosted partitions, leaders, under-replicated and
// leaderless ones, and per topic the partitions of each role and the led
// partitions' log end offsets and bytes.
func TestMetricsSnapshotCountsRolesAndTopics(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1,
		state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}),
		state("orders", 1, 1, 1, []int32{1, 2, 3}, []int32{1, 2}), // under-replicated
		state("orders", 2, 2, 1, []int32{1, 2, 3}, []int32{1, 2, 3}),
		state("events", 0, 2, 1, []int32{1, 2}, []int32{1, 2}),
		state("lost", 0, noLeader, 1, []int32{1, 2}, []int32{2}), // the controller found no leader
	)
	if r := h.produce(tp0, AcksLeader, "a", "b", "c"); r.Error != ErrNone {
		t.Fatalf("produce: %v", r.Error)
	}
	s := h.rm.MetricsSnapshot()
	if s.Partitions != 5 || s.Leaders != 2 || s.UnderReplicated != 1 || s.Offline != 1 {
		t.Fatalf("snapshot %+v, want 5 partitions, 2 leaders, 1 under-replicated, 1 offline", s)
	}
	if len(s.Topics) != 3 || s.Topics[0].Topic != "events" || s.Topics[1].Topic != "lost" || s.Topics[2].Topic != "orders" {
		t.Fatalf("topics %+v, want events, lost, orders in order", s.Topics)
	}
	orders, _ := topicMetrics(s, "orders")
	if orders.LeaderPartitions != 2 || orders.UnderReplicated != 1 || orders.FollowerPartitions != 1 {
		t.Fatalf("orders %+v, want 2 led (1 under-replicated) and 1 followed", orders)
	}
	if orders.LeaderLogEndOffset != 3 || orders.LeaderLogBytes <= 0 {
		t.Fatalf("orders %+v, want leader LEO 3 and some bytes", orders)
	}
	events, _ := topicMetrics(s, "events")
	if events.LeaderPartitions != 0 || events.FollowerPartitions != 1 || events.UnderReplicated != 0 {
		t.Fatalf("events %+v, want 1 followed, none led", events)
	}
}

// When LeaderAndIsr moves a topic's last partition out of a role, the
// topic's figures for that role are gone from the next snapshot (the seed's
// KAFKA-8392 step); while one partition remains in the role they stay.
func TestMetricsSnapshotDropsRoleWithItsLastPartition(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1,
		state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}),
		state("orders", 1, 1, 1, []int32{1, 2}, []int32{1, 2}),
		state("events", 0, 2, 1, []int32{1, 2}, []int32{1, 2}),
	)
	h.leaderAndIsr(1, state("orders", 0, 2, 2, []int32{1, 2}, []int32{1, 2}))
	orders, ok := topicMetrics(h.rm.MetricsSnapshot(), "orders")
	if !ok || orders.LeaderPartitions != 1 || orders.FollowerPartitions != 1 {
		t.Fatalf("one of two partitions moved to follower: %+v, want 1 led and 1 followed", orders)
	}
	h.leaderAndIsr(1, state("orders", 1, 2, 2, []int32{1, 2}, []int32{1, 2}))
	orders, ok = topicMetrics(h.rm.MetricsSnapshot(), "orders")
	if !ok || orders.LeaderPartitions != 0 || orders.LeaderLogEndOffset != 0 || orders.FollowerPartitions != 2 {
		t.Fatalf("last led partition moved to follower: %+v, want nothing led and 2 followed", orders)
	}
	h.leaderAndIsr(1, state("events", 0, 1, 2, []int32{1, 2}, []int32{1, 2}))
	events, ok := topicMetrics(h.rm.MetricsSnapshot(), "events")
	if !ok || events.FollowerPartitions != 0 || events.LeaderPartitions != 1 {
		t.Fatalf("last followed partition became leader: %+v, want nothing followed and 1 led", events)
	}
	h.rm.StopReplicas(t.Context(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1,
		Partitions: []StopReplicaPartition{{TopicPartition: tp.TopicPartition{Topic: "events", Partition: 0}, LeaderEpoch: NoEpoch}}})
	if s := h.rm.MetricsSnapshot(); s.Partitions != 2 {
		t.Fatalf("after StopReplica: %d partitions, want 2", s.Partitions)
	} else if _, ok := topicMetrics(s, "events"); ok {
		t.Fatalf("a stopped topic is still in the snapshot: %+v", s.Topics)
	}
}

// A partition in a failed log dir counts as hosted and offline, in no role.
func TestMetricsSnapshotCountsOfflineReplicas(t *testing.T) {
	h := newHarness(t, 2)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	dir, _ := h.rm.logs.DirOf(tp0)
	h.rm.handleLogDirFailure(dir, errors.New("disk gone"))
	s := h.rm.MetricsSnapshot()
	if s.Partitions != 1 || s.Offline != 1 || s.Leaders != 0 || len(s.Topics) != 0 {
		t.Fatalf("snapshot %+v, want 1 partition, offline, in no role", s)
	}
}

// The recorder hears of committed ISR expansions and shrinks only (not of a
// rejected proposal), and of each HW checkpoint.
func TestMetricsRecorderCountsCommittedIsrChanges(t *testing.T) {
	rec := &recordedMetrics{}
	h := newHarness(t, 1, func(c *Config) { c.ReplicaLagTimeMax = 10 * time.Second; c.Metrics = rec })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	h.fetch(2, fetchAt(0, 1)) // caught up: joins the ISR
	if s, e, _ := rec.counts(); s != 0 || e != 1 {
		t.Fatalf("after the follower caught up: %d shrinks %d expansions, want 0 and 1", s, e)
	}
	h.produce(tp0, AcksLeader, "a")
	h.clock.Advance(15 * time.Second) // the follower lags past the lag time
	if s, e, _ := rec.counts(); s != 1 || e != 1 {
		t.Fatalf("after the lag time: %d shrinks %d expansions, want 1 and 1", s, e)
	}
	if rec.shrinks[0] != tp0 || rec.expands[0] != tp0 {
		t.Fatalf("recorded %v / %v, want %v", rec.shrinks, rec.expands, tp0)
	}
	_, _, before := rec.counts()
	h.rm.CheckpointHighWatermarks(t.Context())
	if _, _, after := rec.counts(); after != before+1 {
		t.Fatalf("HW checkpoints recorded %d -> %d, want one more", before, after)
	}

	changer := &heldIsrChanger{}
	rec2 := &recordedMetrics{}
	h2 := newHarness(t, 1, func(c *Config) { c.IsrChanger = changer; c.Metrics = rec2 })
	h2.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	h2.fetch(2, fetchAt(0, 1))
	changer.answer(0, IsrChangeResult{Error: ErrInvalidUpdateVersion})
	if s, e, _ := rec2.counts(); s != 0 || e != 0 {
		t.Fatalf("a rejected expansion was counted: %d shrinks %d expansions", s, e)
	}
}
