package log

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/replicad/replicad/core/record"
)

// TestGroupCommit ensures concurrent FlushEveryBatch appends get unique contiguous offsets and return only once fsynced.
func TestGroupCommit(t *testing.T) {
	cfg := Config{SegmentBytes: 16 << 10, IndexIntervalBytes: 512, FlushPolicy: FlushEveryBatch}
	l := openTestLog(t, t.TempDir(), cfg)
	defer closeLog(t, l)
	const writers, perWriter = 8, 40
	infos := make([][]AppendInfo, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				info, err := l.AppendAsLeader(newBatch(fmt.Sprintf("w%d-%d", w, i), 1+i%3), 0)
				if err != nil {
					t.Errorf("append: %v", err)
					return
				}
				if rp := l.RecoveryPoint(); rp <= info.LastOffset {
					t.Errorf("append of %d returned with recovery point %d", info.LastOffset, rp)
				}
				infos[w] = append(infos[w], info)
			}
		})
	}
	wg.Wait()

	var all []AppendInfo
	for _, in := range infos {
		all = append(all, in...)
	}
	slices.SortFunc(all, func(a, b AppendInfo) int { return int(a.FirstOffset - b.FirstOffset) })
	next := int64(0)
	for _, info := range all {
		if info.FirstOffset != next {
			t.Fatalf("append at %d, expected %d: offsets not unique and contiguous", info.FirstOffset, next)
		}
		next = info.LastOffset + 1
	}
	if next != l.LogEndOffset() {
		t.Fatalf("appends end at %d, LEO %d", next, l.LogEndOffset())
	}
	batches := readAll(t, l, 0, 4096)
	byOffset := map[int64]record.Batch{}
	for _, b := range batches {
		byOffset[b.BaseOffset()] = b
	}
	for w, in := range infos {
		for i, info := range in {
			recs, err := byOffset[info.FirstOffset].Records()
			if err != nil || string(recs[0].Key) != fmt.Sprintf("w%d-%d", w, i) {
				t.Fatalf("offset %d holds %q (%v), want writer %d's batch %d", info.FirstOffset, recs[0].Key, err, w, i)
			}
		}
	}
}

// TestReadsDuringTruncation ensures reads racing appends and truncations return only whole valid batches from the offset.
func TestReadsDuringTruncation(t *testing.T) {
	l := openTestLog(t, t.TempDir(), smallConfig())
	defer closeLog(t, l)
	appendBatches(t, l, 1, 20, 3)

	var done atomic.Bool
	var readers sync.WaitGroup
	for r := range 3 {
		readers.Go(func() {
			for i := int64(r); !done.Load(); i += 7 {
				start := i % max(l.LogEndOffset(), 1)
				info, err := l.Read(start, 600, 1<<40)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // truncated below start meanwhile
				}
				if err != nil {
					t.Errorf("Read(%d): %v", start, err)
					return
				}
				if err := checkReadResult(info.Data, start); err != nil {
					t.Errorf("Read(%d): %v", start, err)
					return
				}
			}
		})
	}
	for round := range 40 {
		if err := l.TruncateTo(l.LogEndOffset() / 2); err != nil {
			t.Fatal(err)
		}
		appendBatches(t, l, int32(2+round), 15, 3)
	}
	done.Store(true)
	readers.Wait()
}

// checkReadResult says what is wrong with data returned for start.
func checkReadResult(data []byte, start int64) error {
	var prev record.Batch
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err != nil {
			return err
		}
		if err := b.Verify(); err != nil {
			return err
		}
		if prev == nil && (b.BaseOffset() > start || b.LastOffset() < start) {
			return fmt.Errorf("first batch holds [%d, %d]", b.BaseOffset(), b.LastOffset())
		}
		if prev != nil && b.BaseOffset() != prev.NextOffset() {
			return fmt.Errorf("batch at %d follows one ending at %d", b.BaseOffset(), prev.LastOffset())
		}
		prev, data = b, rest
	}
	return nil
}
