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
