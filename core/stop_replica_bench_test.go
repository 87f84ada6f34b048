package core

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkStopReplicaDelete: one StopReplica deleting every partition this
// broker hosts in one log dir (a topic deletion of 1,000 and of 10,000
// partitions), up to the answer. The background removal of the renamed
// dirs is not timed: the broker answers once the logs are renamed away and
// the checkpoints no longer name them. Before batching, a topic deletion
// ran at about 12 partitions a second per broker on a disk. Run with TMPDIR
// on tmpfs and on a disk.
func BenchmarkStopReplicaDelete(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchStopReplicaDelete(b, n) })
	}
}

func benchStopReplicaDelete(b *testing.B, n int) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		rm := benchRM(b, 1)
		states := leaderStates(n, 1)
		if resp := rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1,
			PartitionStates: states}); resp.PartitionErrors[n-1].Error != ErrNone {
			b.Fatalf("LeaderAndIsr: %v", resp.PartitionErrors[n-1])
		}
		req := StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1}
		for _, st := range states {
			req.Partitions = append(req.Partitions, StopReplicaPartition{TopicPartition: st.TopicPartition, LeaderEpoch: -1, Delete: true})
		}
		b.StartTimer()
		resp := rm.StopReplicas(context.Background(), req)
		b.StopTimer()
		for _, pe := range resp.PartitionErrors {
			if pe.Error != ErrNone {
				b.Fatalf("StopReplica: %v", pe)
			}
		}
		if got := len(rm.logs.LogsByDir()[rm.cfg.LogDirs[0]]); got != 0 {
			b.Fatalf("%d logs left", got)
		}
		_ = rm.Shutdown(context.Background())
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "partitions/s")
}
