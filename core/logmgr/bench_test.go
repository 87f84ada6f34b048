package logmgr

import (
	"strconv"
	"testing"
)

// BenchmarkCreateLogs creates 1,000 logs over 2 dirs, fsyncing each
// (syncMetadata) or all at once with SyncDirs, as one big LeaderAndIsr does.
func BenchmarkCreateLogs(b *testing.B) {
	for _, mode := range []string{"fsync-each", "syncfs-once"} {
		b.Run(mode, func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				root := b.TempDir()
				m, err := Open(config(root+"/a", root+"/b"))
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				for i := range 1000 {
					if _, err := m.GetOrCreateLog(tpOf("t"+strconv.Itoa(i%10), int32(i)), mode == "fsync-each"); err != nil {
						b.Fatal(err)
					}
				}
				if mode == "syncfs-once" {
					if err := m.SyncDirs(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				_ = m.Shutdown()
			}
		})
	}
}

// BenchmarkOpen loads 1,000 existing logs over 2 dirs, as a broker start does.
func BenchmarkOpen(b *testing.B) {
	root := b.TempDir()
	cfg := config(root+"/a", root+"/b")
	m, err := Open(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for i := range 1000 {
		if _, err := m.GetOrCreateLog(tpOf("t"+strconv.Itoa(i%10), int32(i)), false); err != nil {
			b.Fatal(err)
		}
	}
	if err := m.Shutdown(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		m, err := Open(cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if len(m.Logs()) != 1000 {
			b.Fatalf("loaded %d logs", len(m.Logs()))
		}
		_ = m.Shutdown()
		b.StartTimer()
	}
}
