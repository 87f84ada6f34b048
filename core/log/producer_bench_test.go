package log

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/replicad/replicad/core/log/producerstate"
	"github.com/replicad/replicad/core/record"
)

// BenchmarkAppendProducer is the A/B of idempotence on a leader's append
// (FlushOS, one log, its files open): a batch of 10 100-byte records built
// and appended per op, plain (v0) or an idempotent producer's (v1, the
// sequence checked and the state updated under the log lock). Run both
// alternately: go test -bench 'AppendProducer' -count=6.
func BenchmarkAppendProducer(b *testing.B) {
	recs := make([]record.Record, 10)
	for i := range recs {
		recs[i] = record.Record{Value: make([]byte, 100), TimestampMs: 1}
	}
	for _, idem := range []bool{false, true} {
		name := "plain"
		if idem {
			name = "idempotent"
		}
		b.Run(name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.SegmentBytes, cfg.FlushPolicy = 64<<20, FlushOS
			l := openAt(b, hitOptions(b.TempDir(), cfg))
			defer closeLog(b, l)
			b.ReportAllocs()
			p := record.NoProducer
			if idem {
				p = record.Producer{ID: 1}
			}
			for b.Loop() {
				if _, err := l.AppendAsLeader(record.BuildProducer(recs, 1, p), 0); err != nil {
					b.Fatal(err)
				}
				if idem {
					p.BaseSequence = record.IncrementSequence(p.BaseSequence, int32(len(recs)))
				}
			}
		})
	}
}

// BenchmarkIdleProducerMemory reports the heap an idle producer's state
// takes: n producers, with one batch each and with the full five.
func BenchmarkIdleProducerMemory(b *testing.B) {
	for _, batches := range []int{1, producerstate.MaxBatches} {
		b.Run(fmt.Sprintf("batches=%d", batches), func(b *testing.B) {
			b.ReportMetric(idleProducerHeapBytes(100_000, batches), "bytes/producer")
		})
	}
}

func idleProducerHeapBytes(n, batches int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	m := producerstate.NewManager(0)
	off := int64(0)
	for id := range int64(n) {
		for s := range int32(batches) {
			m.Apply(id+1, 0, producerstate.Batch{FirstSeq: s, LastSeq: s, FirstOffset: off, LastOffset: off, MaxTimestamp: off})
			off++
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(m)
	return float64(int64(after.HeapInuse)-int64(before.HeapInuse)) / float64(n)
}

// TestIdleProducerMemory bounds a producer's state at 400 bytes (the
// figure --max-producers-per-partition's help and README quote is ~200).
func TestIdleProducerMemory(t *testing.T) {
	if per := idleProducerHeapBytes(20_000, producerstate.MaxBatches); per > 400 {
		t.Fatalf("%.0f heap bytes per producer, budget 400", per)
	}
}

// BenchmarkRebuildProducerState times a rebuild from the log start (no
// snapshot: a log written before snapshots existed, or all damaged), over
// a 16 MiB log of batches of 10 100-byte records from 100 producers:
// what an Open pays at most past its newest snapshot. Reported as the
// log's bytes per second.
func BenchmarkRebuildProducerState(b *testing.B) {
	cfg := DefaultConfig()
	cfg.SegmentBytes, cfg.FlushPolicy = 4<<20, FlushOS
	l := openAt(b, hitOptions(b.TempDir(), cfg))
	defer closeLog(b, l)
	recs := make([]record.Record, 10)
	for i := range recs {
		recs[i] = record.Record{Value: make([]byte, 100), TimestampMs: 1}
	}
	seqs := make([]int32, 100)
	for i := 0; l.Size() < 16<<20; i++ {
		id := i % len(seqs)
		if _, err := l.AppendAsLeader(record.BuildProducer(recs, 1, record.Producer{ID: int64(id + 1), BaseSequence: seqs[id]}), 0); err != nil {
			b.Fatal(err)
		}
		seqs[id] += int32(len(recs))
	}
	b.SetBytes(l.Size())
	for b.Loop() {
		l.mu.Lock()
		if err := l.removeProducerSnapshots(); err != nil {
			b.Fatal(err)
		}
		err := l.rebuildProducerStateLocked("")
		l.mu.Unlock()
		if err != nil {
			b.Fatal(err)
		}
	}
	if l.ProducerCount() != len(seqs) {
		b.Fatalf("%d producers", l.ProducerCount())
	}
}
