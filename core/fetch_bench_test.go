package core

import (
	"context"
	"testing"
)

// BenchmarkFetchRoundIdle10000 is one idle follower fetch round on the
// leader: 10,000 caught-up partitions, no records, no wait (the part of a
// round that walks the partition list; a real round walks it again when its
// max_wait ends).
func BenchmarkFetchRoundIdle10000(b *testing.B) {
	const n = 10_000
	rm := benchRM(b, 1)
	states := leaderStates(n, 1)
	rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1, PartitionStates: states})
	req := FetchRequest{ReplicaID: 2, BrokerEpoch: -1, MinBytes: 1, Partitions: make([]FetchPartition, n)}
	for i, s := range states {
		req.Partitions[i] = FetchPartition{TopicPartition: s.TopicPartition, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}
	}
	b.ReportAllocs()
	for b.Loop() {
		resp := rm.FetchMessages(context.Background(), req)
		if resp.Partitions[n-1].Error != ErrNone {
			b.Fatal(resp.Partitions[n-1].Error)
		}
	}
}
