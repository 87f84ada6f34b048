package fetcher

import (
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// BenchmarkProcessIdlePartition is the follower's steady state: an answer
// with no records for a caught-up partition, which every fetch carries for
// every idle partition. It must not allocate (no per-partition logger).
func BenchmarkProcessIdlePartition(b *testing.B) {
	p := tp.TopicPartition{Topic: "t", Partition: 0}
	l := openLog(b, p, 0)
	b.Cleanup(func() { _ = l.Close() })
	f := &fetcher{logger: zerolog.New(io.Discard).With().Str("fetcher", "0").Logger()}
	st := &partitionState{replica: NewLogReplica(l, func() int32 { return 1 }), leaderEpoch: 1}
	res := &replicadv1.FetchPartitionResult{Topic: "t", ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NONE}
	b.ReportAllocs()
	for b.Loop() {
		if f.processPartition(p, st, res, time.Time{}) {
			b.Fatal("appended from an empty answer")
		}
	}
}
