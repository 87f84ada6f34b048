package log

import (
	"slices"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
)

// TestTruncateAtLogEndDropsEmptyEpoch ensures that truncating to the LEO or
// beyond keeps every record but drops an epoch entry that starts at the LEO
// (an epoch this broker led without appending), as Kafka's
// UnifiedLog.truncateTo does; otherwise the follower keeps sending that epoch
// as its last fetched epoch and the leader answers the same diverging epoch
// forever.
func TestTruncateAtLogEndDropsEmptyEpoch(t *testing.T) {
	for _, offset := range []int64{180, 200} {
		l, _ := truncationFixture(t)
		if err := l.MaybeAssignEpochStartOffset(4, l.LogEndOffset()); err != nil {
			t.Fatal(err)
		}
		if err := l.TruncateTo(offset); err != nil {
			t.Fatalf("TruncateTo(%d): %v", offset, err)
		}
		if l.LogEndOffset() != 180 {
			t.Fatalf("TruncateTo(%d): LEO %d, want 180", offset, l.LogEndOffset())
		}
		want := []checkpoint.EpochEntry{ep(1, 0), ep(2, 90)}
		if got := l.EpochCache().Entries(); !slices.Equal(got, want) {
			t.Fatalf("TruncateTo(%d): epochs %v, want %v", offset, got, want)
		}
		if l.LatestEpoch() != 2 {
			t.Fatalf("TruncateTo(%d): latest epoch %d, want 2", offset, l.LatestEpoch())
		}
		closeLog(t, l)
	}
}
