package log

import (
	"testing"

	"github.com/replicad/replicad/core/record"
)

// tsBatch is a one-record batch stamped ts.
func tsBatch(ts int64) record.Batch {
	return record.Build([]record.Record{{TimestampMs: ts, Value: []byte("v")}}, ts)
}

func segmentBases(l *Log) []int64 {
	var out []int64
	for _, s := range *l.segments.Load() {
		out = append(out, s.baseOffset)
	}
	return out
}

// TestRollByTime checks segment.ms as Kafka measures it: a batch more than
// SegmentMs newer than the active segment's first batch opens a new segment
// (one within it does not), also for an active segment found on disk, and
// SetRoll changes the rule of an open log.
func TestRollByTime(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{SegmentBytes: 1 << 20, FlushPolicy: FlushOS, SegmentMs: 1000}
	l := openTestLog(t, dir, cfg)
	for _, ts := range []int64{10_000, 10_500, 11_000} { // within 1000 of the first
		if _, err := l.AppendAsLeader(tsBatch(ts), 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := segmentBases(l); len(got) != 1 {
		t.Fatalf("segments %v after batches within segment.ms, want one", got)
	}
	if _, err := l.AppendAsLeader(tsBatch(11_001), 1); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(l); len(got) != 2 || got[1] != 3 {
		t.Fatalf("segments %v, want a roll at offset 3", got)
	}
	closeLog(t, l)

	// Reopened, the active segment's first timestamp comes from its file.
	l = openTestLog(t, dir, cfg)
	if _, err := l.AppendAsLeader(tsBatch(11_900), 1); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(l); len(got) != 2 {
		t.Fatalf("segments %v after a batch within segment.ms of the reopened active segment, want 2", got)
	}
	if _, err := l.AppendAsLeader(tsBatch(12_100), 1); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(l); len(got) != 3 || got[2] != 5 {
		t.Fatalf("segments %v, want a roll at offset 5 (12100 - 11001 > 1000)", got)
	}

	// Off by SetRoll: no roll however late; then a small segment.bytes rolls by size.
	if err := l.SetRoll(0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(tsBatch(99_000), 1); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(l); len(got) != 3 {
		t.Fatalf("segments %v with segment.ms off, want 3", got)
	}
	if err := l.SetRoll(100, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendAsLeader(tsBatch(99_001), 1); err != nil {
		t.Fatal(err)
	}
	if got := segmentBases(l); len(got) != 4 {
		t.Fatalf("segments %v after SetRoll(100 bytes), want 4", got)
	}
	if err := l.SetRoll(1<<32, 0); err == nil {
		t.Fatal("SetRoll(4 GiB) accepted")
	}
	closeLog(t, l)
}
