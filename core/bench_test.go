package core

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

func benchRM(b *testing.B, dirs int) *ReplicaManager {
	b.Helper()
	base := b.TempDir()
	var ds []string
	for i := 0; i < dirs; i++ {
		ds = append(ds, filepath.Join(base, fmt.Sprintf("d%d", i)))
	}
	rm, err := NewReplicaManager(Config{BrokerID: 1, LogDirs: ds, Clock: clock.Real{}, Logger: zerolog.Nop(), HWCheckpointInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rm.Shutdown(context.Background()) })
	return rm
}

func leaderStates(n int, epoch int32) []PartitionState {
	states := make([]PartitionState, n)
	for i := range states {
		states[i] = PartitionState{TopicPartition: tp.TopicPartition{Topic: fmt.Sprintf("t%d", i/100), Partition: int32(i % 100)},
			ControllerEpoch: 1, Leader: 1, LeaderEpoch: epoch, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}, IsNew: true}
	}
	return states
}

// BenchmarkLeaderAndIsrNewPartitions: one LeaderAndIsr making this broker the
// leader of 10,000 new partitions, log creation (and durability) included.
// Target <= 1 s. The stale sub-benchmark sends the same request again: every
// partition is stale; target <= 50 ms.
func BenchmarkLeaderAndIsr10000(b *testing.B) {
	const n = 10_000
	b.Run("new", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			b.StopTimer()
			rm := benchRM(b, 1)
			req := LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1, PartitionStates: leaderStates(n, 1)}
			b.StartTimer()
			resp := rm.BecomeLeaderOrFollower(context.Background(), req)
			b.StopTimer()
			if resp.PartitionErrors[n-1].Error != ErrNone {
				b.Fatal(resp.PartitionErrors[n-1].Error)
			}
			_ = rm.Shutdown(context.Background())
		}
	})
	b.Run("stale", func(b *testing.B) {
		rm := benchRM(b, 1)
		req := LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1, PartitionStates: leaderStates(n, 1)}
		rm.BecomeLeaderOrFollower(context.Background(), req)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			resp := rm.BecomeLeaderOrFollower(context.Background(), req)
			if resp.PartitionErrors[0].Error != ErrStaleControllerEpoch {
				b.Fatal(resp.PartitionErrors[0].Error)
			}
		}
	})
	b.Run("bumped-epoch", func(b *testing.B) {
		rm := benchRM(b, 1)
		rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: leaderStates(n, 1)})
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			resp := rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: leaderStates(n, int32(i+2))})
			if resp.PartitionErrors[0].Error != ErrNone {
				b.Fatal(resp.PartitionErrors[0].Error)
			}
		}
	})
}

// BenchmarkCheckpointHighWatermarks: the HW checkpoint of 100,000 partitions
// over 2 log dirs. Target <= 100 ms. The partitions are hosted through the
// replica manager's own path, so the benchmark measures what a broker does.
func BenchmarkCheckpointHighWatermarks100000(b *testing.B) {
	if testing.Short() {
		b.Skip("creates 100,000 logs")
	}
	rm := benchRM(b, 2)
	const n = 100_000
	for off := 0; off < n; off += 10_000 {
		states := leaderStates(10_000, 1)
		for i := range states {
			states[i].TopicPartition.Topic = fmt.Sprintf("t%d", (off+i)/100)
		}
		rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: states})
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, d := range rm.CheckpointHighWatermarks(context.Background()) {
			if d.Error != ErrNone || d.Partitions != n/2 {
				b.Fatalf("%+v", d)
			}
		}
	}
}

// BenchmarkIdlePartitionMemory reports the heap held per hosted idle
// partition (leader, empty log). Target <= 16 KiB.
func BenchmarkIdlePartitionMemory(b *testing.B) {
	const n = 10_000
	for i := 0; i < b.N; i++ {
		rm := benchRM(b, 1)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: leaderStates(n, 1)})
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapInuse-before.HeapInuse)/n, "heap-bytes/partition")
		runtime.KeepAlive(rm)
		_ = rm.Shutdown(context.Background())
	}
}

// BenchmarkProduceAcks1: the core produce path (no gRPC), 1 KiB records in
// batches of 100, acks=1, on the default flush policy.
func BenchmarkProduceAcks1(b *testing.B) {
	rm := benchRM(b, 1)
	rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: []PartitionState{{
		TopicPartition: tp0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1}, ISR: []int32{1}, IsNew: true}}})
	recs := make([]record.Record, 100)
	for i := range recs {
		recs[i] = record.Record{Value: make([]byte, 1024)}
	}
	b.SetBytes(100 * 1024)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := rm.Produce(context.Background(), ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, Records: recs}); r.Error != ErrNone {
			b.Fatal(r.Error)
		}
	}
}
