package metrics

import (
	"math"
	"syscall"
	"testing"
)

// TestLogDirFreeBytes: each log dir's filesystem is statted at each scrape,
// with the figures statfs gives; a dir that cannot be statted has no series.
func TestLogDirFreeBytes(t *testing.T) {
	m := newMetrics(t)
	dir, gone := t.TempDir(), t.TempDir()+"/missing"
	if err := m.ObserveLogDirs([]string{dir, gone}); err != nil {
		t.Fatal(err)
	}
	if err := m.ObserveLogDirs(nil); err == nil {
		t.Error("ObserveLogDirs without a dir accepted")
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	s := get(t, serve(t, m))
	free := s.value(t, `replicad_log_dir_free_bytes{dir="`+dir+`"}`)
	capacity := s.value(t, `replicad_log_dir_capacity_bytes{dir="`+dir+`"}`)
	if want := float64(st.Blocks) * float64(st.Bsize); capacity != want {
		t.Errorf("capacity %v, statfs says %v", capacity, want)
	}
	// Others write to the same filesystem meanwhile: within 1 GiB.
	if want := float64(st.Bavail) * float64(st.Bsize); free <= 0 || free > capacity || math.Abs(free-want) > 1<<30 {
		t.Errorf("free %v of %v, statfs said %v", free, capacity, want)
	}
	if s.has(`replicad_log_dir_free_bytes{dir="` + gone + `"}`) {
		t.Errorf("a missing dir has a free bytes series")
	}
}
