package core

import (
	"context"
	"testing"
	"time"

	"github.com/replicad/replicad/core/log"
)

func withConfigs(st PartitionState, version int64, configs map[string]string) PartitionState {
	st.TopicID, st.TopicConfigVersion, st.TopicConfigs = "topic-id-1", version, configs
	return st
}

// TestTopicMinIsrComesFromTheTopic checks that a topic's min.insync.replicas
// overrides the broker's (1 here) from the first LeaderAndIsr, that an
// UpdateMetadata with a newer version changes it, and that an older one
// delivered late is ignored.
func TestTopicMinIsrComesFromTheTopic(t *testing.T) {
	h := newHarness(t, 1)
	st := state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}) // the follower is out of the ISR
	h.leaderAndIsr(1, withConfigs(st, 1, map[string]string{"min.insync.replicas": "2"}))
	if r := h.produce(tp0, AcksAll, "v"); r.Error != ErrNotEnoughReplicas {
		t.Fatalf("acks=all with ISR [1] under the topic's min.insync.replicas 2: %v, want NOT_ENOUGH_REPLICAS", r.Error)
	}
	um := func(version int64, configs map[string]string) {
		t.Helper()
		if code := h.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1,
			PartitionStates: []PartitionState{withConfigs(st, version, configs)}}); code != ErrNone {
			t.Fatalf("UpdateMetadata: %v", code)
		}
	}
	um(2, nil) // the override removed: the broker's 1 applies
	if r := h.produce(tp0, AcksAll, "v"); r.Error != ErrNone {
		t.Fatalf("acks=all after min.insync.replicas went back to 1: %v", r.Error)
	}
	um(1, map[string]string{"min.insync.replicas": "2"}) // late: older than what the broker holds
	if r := h.produce(tp0, AcksAll, "v"); r.Error != ErrNone {
		t.Fatalf("an older config version brought min.insync.replicas 2 back: %v", r.Error)
	}
	if p, _ := h.describe(tp0); p.TopicConfigVersion != 2 || p.TopicConfig.MinInsyncReplicas != 1 {
		t.Fatalf("describe: version %d, min ISR %d; want 2 and 1", p.TopicConfigVersion, p.TopicConfig.MinInsyncReplicas)
	}
	// A value this broker cannot read is ignored; the config in effect stays.
	um(3, map[string]string{"retention.ms": "soon"})
	if p, _ := h.describe(tp0); p.TopicConfigVersion != 2 {
		t.Fatalf("an unreadable config was taken: version %d", p.TopicConfigVersion)
	}
}

// TestTopicRetentionOverridesTheBroker checks that a topic's retention.ms
// and segment.bytes replace the broker's (7 days, 1 MiB segments here): its
// leader deletes what an hour's retention no longer keeps, which the
// broker's retention would keep.
func TestTopicRetentionOverridesTheBroker(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) {
		c.RetentionCheckInterval = time.Minute
		c.LogConfig = log.Config{SegmentBytes: 1 << 20, IndexIntervalBytes: 256, MaxBatchBytes: 1024, FlushPolicy: log.FlushOS}
		c.ReplicaLagTimeMax = 24 * time.Hour
	})
	h.leaderAndIsr(1, withConfigs(state("orders", 0, 1, 1, []int32{1}, []int32{1}), 1,
		map[string]string{"retention.ms": "3600000", "segment.bytes": "1024"}))
	for range 30 {
		h.produce(tp0, AcksLeader, "an old record, padded to fill segments quickly")
	}
	h.clock.Advance(2 * time.Hour)
	h.produce(tp0, AcksLeader, "a new record")
	waitFor(t, func() bool {
		h.clock.Advance(time.Minute)
		p, _ := h.describe(tp0)
		return p.LogStartOffset > 0
	})
	if p, _ := h.describe(tp0); p.LogStartOffset > 30 || p.TopicConfig.SegmentBytes != 1024 || p.TopicConfig.RetentionMs != 3600000 {
		t.Fatalf("log start %d (want <= 30), config %+v", p.LogStartOffset, p.TopicConfig)
	}
}

// TestZombieLeaderTakesNoLoweredMinIsr checks that a leader that an
// UpdateMetadata says is no longer leader (a newer leader epoch elected
// elsewhere while this one was fenced) does not take a lowered
// min.insync.replicas from it: with its stale ISR of itself alone it would
// move its HW over an append nobody else has, which the new leader's log
// then replaces (issue 19 simulation seed 325941231). The LeaderAndIsr that
// makes it a follower brings the config.
func TestZombieLeaderTakesNoLoweredMinIsr(t *testing.T) {
	h := newHarness(t, 1)
	st := state("orders", 0, 1, 3, []int32{1, 2, 3}, []int32{1})
	h.leaderAndIsr(1, withConfigs(st, 1, map[string]string{"min.insync.replicas": "2"}))
	if r := h.produce(tp0, AcksLeader, "only here"); r.Error != ErrNone {
		t.Fatalf("acks=1 produce: %v", r.Error)
	}
	newer := state("orders", 0, 3, 5, []int32{1, 2, 3}, []int32{3})
	if code := h.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1,
		PartitionStates: []PartitionState{withConfigs(newer, 2, map[string]string{"min.insync.replicas": "1"})}}); code != ErrNone {
		t.Fatalf("UpdateMetadata: %v", code)
	}
	if p, _ := h.describe(tp0); p.HighWatermark != 0 || p.TopicConfig.MinInsyncReplicas != 2 {
		t.Fatalf("after an UpdateMetadata naming leader 3 at epoch 5: HW %d, min ISR %d; want 0 and 2 (the old leader took the lowered value)",
			p.HighWatermark, p.TopicConfig.MinInsyncReplicas)
	}
	// A leader the same request confirms takes it, as before.
	h2 := newHarness(t, 1)
	h2.leaderAndIsr(1, withConfigs(st, 1, map[string]string{"min.insync.replicas": "2"}))
	h2.produce(tp0, AcksLeader, "here")
	if code := h2.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1,
		PartitionStates: []PartitionState{withConfigs(st, 2, map[string]string{"min.insync.replicas": "1"})}}); code != ErrNone {
		t.Fatalf("UpdateMetadata: %v", code)
	}
	if p, _ := h2.describe(tp0); p.HighWatermark != 1 || p.TopicConfig.MinInsyncReplicas != 1 {
		t.Fatalf("the confirmed leader: HW %d, min ISR %d; want 1 and 1", p.HighWatermark, p.TopicConfig.MinInsyncReplicas)
	}
}
