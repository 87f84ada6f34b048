package log

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/replicad/replicad/core/record"
)

// benchBatch is 100 records of 1 KiB.
func benchBatch() record.Batch {
	recs := make([]record.Record, 100)
	for i := range recs {
		recs[i] = record.Record{Key: []byte(fmt.Sprint(i)), Value: bytes.Repeat([]byte{byte(i)}, 1024)}
	}
	return record.Build(recs, 1)
}

// hitOptions open a log whose files the cache never closes (it holds far
// more than the log's files): every call is a cache hit, the hot path's
// cost (compare with BenchmarkFileCache's misses).
func hitOptions(dir string, cfg Config) Options {
	opts := testOptions(dir, cfg)
	opts.FileCache = NewFileCache(1 << 20)
	return opts
}

// BenchmarkAppendAsLeader measures appending batches of 100 1-KiB records under each flush policy.
func BenchmarkAppendAsLeader(b *testing.B) {
	policies := []struct {
		name     string
		policy   FlushPolicy
		parallel bool
	}{
		{"every-batch", FlushEveryBatch, false},
		{"every-batch-parallel", FlushEveryBatch, true}, // group commit at work
		{"interval", FlushInterval, false},
		{"os", FlushOS, false},
	}
	for _, p := range policies {
		b.Run(p.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes, cfg.FlushPolicy = 64<<20, p.policy
			l := openAt(b, hitOptions(b.TempDir(), cfg))
			defer closeLog(b, l)
			b.SetBytes(int64(len(benchBatch())))
			b.ReportAllocs()
			if p.parallel {
				b.SetParallelism(4)
				b.RunParallel(func(pb *testing.PB) {
					batch := benchBatch() // stamped in place: one per goroutine
					for pb.Next() {
						if _, err := l.AppendAsLeader(batch, 0); err != nil {
							b.Error(err)
							return
						}
					}
				})
				return
			}
			batch := benchBatch()
			for b.Loop() {
				if _, err := l.AppendAsLeader(batch, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead measures reads of whole batches from random offsets and from the log end.
func BenchmarkRead(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes, cfg.FlushPolicy = 8<<20, FlushOS
	l := openAt(b, hitOptions(b.TempDir(), cfg))
	defer closeLog(b, l)
	for range 200 { // 20 MiB over 3 segments
		if _, err := l.AppendAsLeader(benchBatch(), 0); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	for _, c := range []struct {
		name     string
		maxBytes int
	}{{"1MiB", 1 << 20}, {"one-batch", 1}} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var n int64
			for b.Loop() {
				info, err := l.Read(rng.Int64N(leo), c.maxBytes, leo)
				if err != nil {
					b.Fatal(err)
				}
				n += int64(len(info.Data))
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
	b.Run("tail", func(b *testing.B) { // a follower or consumer at the log end
		start := leo - 100 // the last batch: answered from the cached last index entry
		for b.Loop() {
			if _, err := l.Read(start, 1<<20, leo); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOpenEmpty measures creating a new empty log without per-file fsync, as a big LeaderAndIsr does.
func BenchmarkOpenEmpty(b *testing.B) {
	root := b.TempDir()
	var open []*Log
	closeAll := func() {
		for _, l := range open {
			closeLog(b, l)
		}
		open = open[:0]
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		opts := testOptions(filepath.Join(root, fmt.Sprintf("t-%d", i)), DefaultConfig())
		opts.SyncMetadata = false
		open = append(open, openAt(b, opts))
		i++
		if len(open) == 1000 { // keep open files within the process limit
			b.StopTimer()
			closeAll()
			b.StartTimer()
		}
	}
	closeAll()
}

// BenchmarkIdleLogMemory reports the heap one open idle log holds (measured once, whatever b.N).
func BenchmarkIdleLogMemory(b *testing.B) {
	b.ReportMetric(idleLogHeapBytes(b, 2000), "heap-bytes/log")
}

// TestIdleLogMemory ensures an idle log stays within the 16 KiB per-partition memory budget.
func TestIdleLogMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("opens 2,000 logs")
	}
	perLog := idleLogHeapBytes(t, 2000)
	t.Logf("%.0f heap bytes per idle log", perLog)
	if perLog > 16<<10 {
		t.Fatalf("%.0f heap bytes per idle log, budget 16 KiB", perLog)
	}
}

// idleLogHeapBytes opens n empty logs and returns the HeapInuse growth per log.
func idleLogHeapBytes(tb testing.TB, n int) float64 {
	root := tb.TempDir()
	logs := make([]*Log, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range logs {
		opts := testOptions(filepath.Join(root, fmt.Sprintf("t-%d", i)), DefaultConfig())
		logs[i] = openAt(tb, opts)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	for _, l := range logs {
		closeLog(tb, l)
	}
	return float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / float64(n)
}

// BenchmarkSmallRecord measures the per-call cost of the hot path: an
// append of one 100-byte record (FlushOS) and a tailing read of it, one
// log whose files stay open. Copied into a tree without the file cache
// (with testOptions for hitOptions), it is the A/B of what the cache costs
// a hit.
func BenchmarkSmallRecord(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes, cfg.FlushPolicy = 512<<20, FlushOS
	l := openAt(b, hitOptions(b.TempDir(), cfg))
	defer closeLog(b, l)
	batch := record.Build([]record.Record{{Value: make([]byte, 100)}}, 1)
	b.Run("produce", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.AppendAsLeader(batch, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fetch", func(b *testing.B) {
		for b.Loop() {
			leo := l.LogEndOffset()
			if _, err := l.Read(leo-1, 1<<20, leo); err != nil {
				b.Fatal(err)
			}
		}
	})
}
