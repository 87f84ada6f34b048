package core

import (
	"context"
	"testing"
)

// A partition with fewer replicas than --min-insync-replicas uses Kafka's
// effective min ISR, min(min.insync.replicas, replicas): an RF=1 partition on
// a broker with min ISR 2 commits its acks=1 writes (consumers see them) and
// takes acks=all, instead of freezing its HW for good.
func TestEffectiveMinIsrCapsAtReplicationFactor(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) { c.MinInsyncReplicas = 2 })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	if r := h.produce(tp0, AcksLeader, "a"); r.Error != ErrNone {
		t.Fatalf("acks=1: %+v", r)
	}
	if p, _ := h.describe(tp0); p.HighWatermark != 1 {
		t.Fatalf("HW %d after an acks=1 write to an RF=1 partition, want 1", p.HighWatermark)
	}
	res := h.rm.Consume(context.Background(), ConsumeRequest{TopicPartition: tp0, Offset: 0})
	if res.Error != ErrNone || len(res.Records) != 1 || string(res.Records[0].Value) != "a" {
		t.Fatalf("consume: %v %d records, want the acks=1 record", res.Error, len(res.Records))
	}
	if r := h.produce(tp0, AcksAll, "b"); r.Error != ErrNone || r.HighWatermark != 2 {
		t.Fatalf("acks=all on RF=1 with min ISR 2: %+v, want NONE with HW 2", r)
	}

	// With as many replicas as the minimum, the minimum holds as configured.
	h.leaderAndIsr(1, state("orders", 1, 1, 1, []int32{1, 2}, []int32{1}))
	tp1 := tp0
	tp1.Partition = 1
	if r := h.produce(tp1, AcksAll, "c"); r.Error != ErrNotEnoughReplicas {
		t.Fatalf("acks=all on RF=2 with ISR {1} and min ISR 2: %v, want NOT_ENOUGH_REPLICAS", r.Error)
	}
}
