package log

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

func withFS(opts Options, fsys vfs.FS) Options {
	opts.FS = fsys
	return opts
}

// cachedLogOptions are testOptions for log i of a set sharing cache.
func cachedLogOptions(dir string, i int, cfg Config, cache *FileCache) Options {
	opts := testOptions(fmt.Sprintf("%s/p%d", dir, i), cfg)
	opts.TopicPartition = tp.TopicPartition{Topic: "t", Partition: int32(i)}
	opts.FileCache = cache
	return opts
}

// Many logs, rolling and indexing, within a few descriptors: every append,
// read, roll and restart works on files the cache closed and reopens, and
// the cache holds no more than its capacity once nothing runs.
func TestFileCacheBoundsOpenFilesAcrossLogs(t *testing.T) {
	const logs, capacity = 40, 8
	dir := t.TempDir()
	cache := NewFileCache(capacity)
	open := func() []*Log {
		ls := make([]*Log, logs)
		for i := range ls {
			ls[i] = openAt(t, cachedLogOptions(dir, i, smallConfig(), cache))
		}
		return ls
	}
	ls := open()
	want := make([][]byte, logs)
	for round := range 3 {
		for i, l := range ls {
			b := newBatch(fmt.Sprintf("log%d-round%d", i, round), 30)
			if _, err := l.AppendAsLeader(b, 1); err != nil {
				t.Fatalf("log %d round %d: %v", i, round, err)
			}
			want[i] = append(want[i], l.activeSegment().lastBatchForTest(t)...)
		}
	}
	check := func(ls []*Log) {
		t.Helper()
		for i, l := range ls {
			var got []byte
			for _, b := range readAll(t, l, 0, 1<<20) {
				got = append(got, b...)
			}
			if string(got) != string(want[i]) {
				t.Fatalf("log %d: read %d bytes, want %d", i, len(got), len(want[i]))
			}
		}
	}
	check(ls)
	for _, l := range ls {
		closeLog(t, l)
	}
	if st := cache.Stats(); st.Open != 0 {
		t.Fatalf("%d files open after every log closed", st.Open)
	}
	ls = open()
	check(ls)
	// Without appends no roll seals a segment in the background: every
	// open came from this goroutine, and none went past the capacity
	// (background seals of many logs may, for as long as they run).
	st := cache.Stats()
	if st.Open > capacity || st.Evictions == 0 || st.Reopens == 0 {
		t.Fatalf("stats %+v: want at most %d open, evictions and reopens", st, capacity)
	}
	for _, l := range ls {
		closeLog(t, l)
	}
}

// lastBatchForTest reads the segment's last batch (the one just appended).
func (s *segment) lastBatchForTest(t *testing.T) []byte {
	t.Helper()
	end := s.size.Load()
	loc, pos := batchLocation{}, int64(0)
	for pos < end {
		l, found, err := s.locate(-1, pos, end)
		if err != nil || !found {
			t.Fatalf("locate: %v", err)
		}
		loc, pos = l, l.position+int64(l.size)
	}
	buf := make([]byte, loc.size)
	if _, err := s.file.ReadAt(buf, loc.position); err != nil {
		t.Fatal(err)
	}
	return buf
}

// A file the cache closes while it holds writes not yet fsynced is fsynced
// first (FlushOS: the log itself never fsyncs them): the close must not
// leave a write-back failure where no later fsync of the log would see it.
func TestFileCacheFsyncsADirtyFileBeforeClosingIt(t *testing.T) {
	fsys := crashfs.New()
	cache := NewFileCache(1)
	a := openAt(t, withFS(cachedLogOptions("/d", 0, smallConfig(), cache), fsys))
	if _, err := a.AppendAsLeader(newBatch("a", 3), 1); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ops []string
	fsys.SetFault(func(op crashfs.Op) error {
		if strings.HasPrefix(op.Path, "/d/p0/") && strings.HasSuffix(op.Path, logFileSuffix) {
			mu.Lock()
			ops = append(ops, op.Kind.String())
			mu.Unlock()
		}
		return nil
	})
	b := openAt(t, withFS(cachedLogOptions("/d", 1, smallConfig(), cache), fsys)) // evicts a's segment
	fsys.SetFault(nil)
	if got := strings.Join(ops, ","); got != "sync,close" {
		t.Fatalf("a's segment on eviction: %q, want sync,close", got)
	}
	if st := cache.Stats(); st.DirtyEvictions != 1 {
		t.Fatalf("stats %+v: want one dirty eviction", st)
	}
	closeLog(t, b)
	closeLog(t, a)
}

// An fsync the cache runs before closing a dirty file that fails is the
// log's failure at its next flush: its recovery point never counts the
// lost writes durable (Linux may report the next fsync of the file as a
// success: "fsyncgate").
func TestFileCacheFailedFsyncOnEvictionFailsTheNextFlush(t *testing.T) {
	fsys := crashfs.New()
	cache := NewFileCache(1)
	cfg := smallConfig()
	cfg.FlushPolicy = FlushInterval
	rep := &failures{}
	opts := withFS(cachedLogOptions("/d", 0, cfg, cache), fsys)
	opts.OnStorageError = rep.report
	a := openAt(t, opts)
	if _, err := a.AppendAsLeader(newBatch("a", 3), 1); err != nil {
		t.Fatal(err)
	}
	failOnce(fsys, crashfs.OpSync, "/d/p0/", syscall.EIO)
	b := openAt(t, withFS(cachedLogOptions("/d", 1, cfg, cache), fsys)) // evicts a's segment
	fsys.SetFault(nil)
	if err := a.Flush(); !errors.Is(err, ErrStorage) {
		t.Fatalf("flush after a failed fsync on eviction: %v, want ErrStorage", err)
	}
	if rp := a.RecoveryPoint(); rp != 0 {
		t.Fatalf("recovery point %d after the failed fsync, want 0", rp)
	}
	if rep.count() != 1 {
		t.Fatalf("%d failures reported, want 1", rep.count())
	}
	closeLog(t, b)
	_ = a.Close()
}

// A file pinned by a call in progress is never closed by the cache: an open
// that finds every file pinned goes past the capacity instead of failing.
func TestFileCachePinnedFileIsNotEvicted(t *testing.T) {
	dir := t.TempDir()
	cache := NewFileCache(1)
	f1, err := openCached(cache, vfs.OS, dir+"/a", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	h, err := f1.get() // pinned, as during a read
	if err != nil {
		t.Fatal(err)
	}
	f2, err := openCached(cache, vfs.OS, dir+"/b", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if st := cache.Stats(); st.Open != 2 || st.Overflows != 1 || st.Evictions != 0 {
		t.Fatalf("stats %+v: want the pinned file kept and one overflow", st)
	}
	if _, err := h.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("pinned file closed under its user: %v", err)
	}
	f1.put()
	// Unpinned now: the next open closes it, and a use reopens it.
	f3, err := openCached(cache, vfs.OS, dir+"/c", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1)
	if _, err := f1.ReadAt(buf, 0); err != nil || buf[0] != 'x' {
		t.Fatalf("read after reopen: %q, %v", buf, err)
	}
	if st := cache.Stats(); st.Reopens != 1 {
		t.Fatalf("stats %+v: want one reopen", st)
	}
	for _, f := range []*cachedFile{f1, f2, f3} {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f1.ReadAt(buf, 0); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("read after Close: %v, want ErrClosed", err)
	}
	if st := cache.Stats(); st.Open != 0 {
		t.Fatalf("%d files open after closing all", st.Open)
	}
}

// Readers, appenders, truncations and retention of many logs run at once
// on two descriptors: no read ever sees a file closed under it, and every
// read returns whole batches (run with -race).
func TestFileCacheConcurrentLogs(t *testing.T) {
	const logs = 6
	dir := t.TempDir()
	cache := NewFileCache(2)
	ls := make([]*Log, logs)
	for i := range ls {
		ls[i] = openAt(t, cachedLogOptions(dir, i, smallConfig(), cache))
	}
	var wg sync.WaitGroup
	errc := make(chan error, 4*logs)
	for i, l := range ls {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := range 60 {
				if _, err := l.AppendAsLeader(newBatch(fmt.Sprintf("l%d-%d", i, j), 5), 1); err != nil {
					errc <- err
					return
				}
				l.UpdateHighWatermark(l.LogEndOffset())
				switch j % 20 {
				case 10:
					if err := l.TruncateTo(l.LogEndOffset() - 5); err != nil {
						errc <- err
						return
					}
				case 19:
					if _, err := l.IncrementLogStartOffset(l.HighWatermark() / 2); err != nil {
						errc <- err
						return
					}
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				start := l.LogStartOffset()
				info, err := l.Read(start, 4096, l.HighWatermark())
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // the log start moved past start meanwhile
				}
				if err != nil {
					errc <- fmt.Errorf("read at %d: %w", start, err)
					return
				}
				for rest := info.Data; len(rest) > 0; {
					if _, rest, err = record.Next(rest); err != nil {
						errc <- fmt.Errorf("read at %d: part of a batch: %w", start, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for _, l := range ls {
		closeLog(t, l)
	}
}

// The cache closes an idle clean file before an idle one with unsynced
// writes: closing the latter costs an fsync.
func TestFileCachePrefersCleanVictims(t *testing.T) {
	dir := t.TempDir()
	cache := NewFileCache(2)
	dirty, err := openCached(cache, vfs.OS, dir+"/dirty", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dirty.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	clean, err := openCached(cache, vfs.OS, dir+"/clean", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	third, err := openCached(cache, vfs.OS, dir+"/third", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if dirty.state.Load()&closedBit != 0 || clean.state.Load()&closedBit == 0 {
		t.Fatalf("dirty file closed %v, clean file closed %v: want the clean one evicted",
			dirty.state.Load()&closedBit != 0, clean.state.Load()&closedBit != 0)
	}
	if st := cache.Stats(); st.Evictions != 1 || st.DirtyEvictions != 0 {
		t.Fatalf("stats %+v: want one eviction, of a clean file", st)
	}
	for _, f := range []*cachedFile{dirty, clean, third} {
		_ = f.Close()
	}
}
