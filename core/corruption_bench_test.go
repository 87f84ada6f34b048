package core

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
)

// BenchmarkLeaderRead measures what checking every batch's CRC before it is
// served (readVerified, issue 10, path 9) costs a leader's read of 1 MiB
// from a random offset: "read" is the log read alone, "read+verify" what
// Consume and Fetch do.
func BenchmarkLeaderRead(b *testing.B) {
	cfg := log.DefaultConfig()
	cfg.SegmentBytes, cfg.FlushPolicy = 8<<20, log.FlushOS
	l, err := log.Open(log.Options{Dir: b.TempDir() + "/t-0", Config: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	recs := make([]record.Record, 100) // 100 records of 1 KiB: a 100 KiB batch
	for i := range recs {
		recs[i] = record.Record{Value: []byte(strings.Repeat("v", 1024))}
	}
	for range 200 { // 20 MiB over 3 segments
		if _, err := l.AppendAsLeader(record.Build(recs, 1), 0); err != nil {
			b.Fatal(err)
		}
	}
	leo := l.LogEndOffset()
	ri, err := l.Read(0, 1<<20, leo)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		read func(offset int64) (int, error)
	}{
		{"read", func(offset int64) (int, error) {
			ri, err := l.Read(offset, 1<<20, leo)
			return len(ri.Data), err
		}},
		{"read+verify", func(offset int64) (int, error) {
			data, _, err := readVerified(l, offset, 1<<20, leo)
			return len(data), err
		}},
		{"verify-only", func(int64) (int, error) { // the same 1 MiB each time: the check alone
			data, bad := verifyBatches(ri.Data, 0)
			if bad != nil {
				return 0, bad
			}
			return len(data), nil
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 2))
			var n int64
			for b.Loop() {
				got, err := c.read(rng.Int64N(leo))
				if err != nil || got == 0 {
					b.Fatalf("read: %d bytes, %v", got, err)
				}
				n += int64(got)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "MB/s")
		})
	}
}
