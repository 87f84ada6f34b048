package service

import (
	"fmt"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// BenchmarkValidateFetch is what checking a follower's fetch costs, with
// one partition (a single partition's replication) and with 1,000.
func BenchmarkValidateFetch(b *testing.B) {
	for _, n := range []int{1, 1000} {
		req := &replicadv1.FetchRequest{ReplicaId: 2, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 1 << 20}
		for i := range n {
			req.Partitions = append(req.Partitions, &replicadv1.FetchPartition{Topic: "perf", Partition: int32(i), FetchOffset: 42})
		}
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := validateFetch(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
