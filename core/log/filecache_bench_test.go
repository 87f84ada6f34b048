package log

import (
	"fmt"
	"testing"
)

// BenchmarkFileCache measures a produce (AppendAsLeader of one batch of
// 100 1-KiB records, FlushOS) and a tailing fetch (Read of the last
// batch) when the log's files are open (hit) and when the cache closed
// them since the log's last call (miss). Two logs take turns on a cache
// of capacity 1 (miss) or of thousands (hit), so a miss is a reopen plus
// the eviction of the other log's file: for a produce that file holds
// writes not yet fsynced, which the eviction fsyncs (the worst case); for
// a fetch it is clean.
func BenchmarkFileCache(b *testing.B) {
	for _, miss := range []bool{false, true} {
		capacity, name := 1<<20, "hit"
		if miss {
			capacity, name = 1, "miss"
		}
		open := func(b *testing.B) [2]*Log {
			cache := NewFileCache(capacity)
			cfg := DefaultConfig()
			cfg.SegmentBytes, cfg.FlushPolicy = 64<<20, FlushOS
			cfg.IndexIntervalBytes = 1 << 30 // one file per segment: one descriptor per log
			var ls [2]*Log
			dir := b.TempDir()
			for i := range ls {
				ls[i] = openAt(b, cachedLogOptions(dir, i, cfg, cache))
				b.Cleanup(func() { _ = ls[i].Close() })
			}
			return ls
		}
		b.Run(fmt.Sprintf("produce/%s", name), func(b *testing.B) {
			ls := open(b)
			batch := benchBatch()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := ls[i%2].AppendAsLeader(batch, 0); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
		b.Run(fmt.Sprintf("fetch/%s", name), func(b *testing.B) {
			ls := open(b)
			for _, l := range ls {
				for range 10 {
					if _, err := l.AppendAsLeader(benchBatch(), 0); err != nil {
						b.Fatal(err)
					}
				}
				if err := l.Flush(); err != nil { // clean: a miss evicts without an fsync
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				l := ls[i%2]
				leo := l.LogEndOffset()
				if _, err := l.Read(leo-100, 1<<20, leo); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
