package fetcher

import (
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/tp"
)

// Truncations that make no progress (the replica fetched back to no further
// than it had reached, and is told to truncate again) wait a backoff that
// doubles from the stuckBackoffAfter-th on, up to maxStuckBackoff, and the
// stuckLimit-th sets the partition aside. A convergence (each truncation
// below the last, nothing fetched in between) never waits.
func TestNoteTruncationBacksOffAndEnds(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	f := &fetcher{cfg: &Config{Clock: clk, PartitionBackoff: 10 * time.Millisecond}, failed: &failedPartitions{},
		partitions: map[tp.TopicPartition]*partitionState{}}
	st := &partitionState{}
	f.partitions[p0] = st
	lg := zerolog.Nop()

	// Converging: 10 -> 6 -> 3, no records fetched between.
	for _, c := range [][2]int64{{10, 6}, {6, 3}} {
		if !f.noteTruncation(p0, st, c[0], c[1], lg) || !st.delayedUntil.IsZero() {
			t.Fatalf("converging truncation %v: delayed until %v", c, st.delayedUntil)
		}
	}
	// Stuck: it fetches back to 5 each time and is told to truncate to 0.
	for k := 1; k < stuckLimit; k++ {
		st.delayedUntil = time.Time{}
		if !f.noteTruncation(p0, st, 5, 0, lg) {
			t.Fatalf("truncation %d without progress ended the partition, want %d first", k, stuckLimit)
		}
		var want time.Duration
		if k >= stuckBackoffAfter {
			want = min(10*time.Millisecond<<(k-stuckBackoffAfter), maxStuckBackoff)
		}
		if got := st.delayedUntil.Sub(clk.Now()); (want == 0 && !st.delayedUntil.IsZero()) || (want > 0 && got != want) {
			t.Fatalf("truncation %d without progress: backoff %v, want %v", k, got, want)
		}
	}
	if f.noteTruncation(p0, st, 5, 0, lg) {
		t.Fatalf("truncation %d without progress went on", stuckLimit)
	}
	if !f.failed.contains(p0) {
		t.Fatal("partition not set aside after stuckLimit truncations without progress")
	}
}

// Out of descriptors, a partition waits its backoff and fetches on from
// its log's end (an append may have let a prefix in).
func TestOutOfDescriptorsWaitsTheBackoff(t *testing.T) {
	clk := clock.NewManual(time.Unix(0, 0))
	f := &fetcher{cfg: &Config{Clock: clk, PartitionBackoff: 10 * time.Millisecond}, failed: &failedPartitions{}}
	l := openLog(t, p0, 0)
	appendBatches(t, l, 1, 3)
	st := &partitionState{replica: NewLogReplica(l, func() int32 { return 1 }), fetchOffset: 1}
	f.retryOutOfDescriptors(st, zerolog.Nop(), nil)
	if st.fetchOffset != 3 || st.delayedUntil != clk.Now().Add(10*time.Millisecond) {
		t.Fatalf("fetch offset %d, delayed until %v; want 3 and one backoff from now", st.fetchOffset, st.delayedUntil)
	}
}
