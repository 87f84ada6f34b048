package logmgr

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// A legal topic can make a dir name longer than Linux's 255 bytes. Deleting
// or moving such a partition must not fail on ENAMETOOLONG, and a name that
// cannot fit is the request's fault: the dir stays online (issue 12).
func TestLongTopicDeleteNamesFitAndDirStaysOnline(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	long := strings.Repeat("t", tp.MaxTopicLength) // 249 characters
	p := tpOf(long, 12345)                         // "topic-12345": exactly 255 bytes
	create(t, m, p)
	appendRecords(t, m, p, 3)

	// Delete: the "-delete" dir name is Kafka's, with the topic cut short.
	if err := m.DeleteLog(p); err != nil {
		t.Fatalf("DeleteLog: %v", err)
	}
	if f, ok := failure(m); ok {
		t.Fatalf("delete reported a dir failure: %v", f)
	}
	for _, d := range m.Dirs() {
		if !d.Online {
			t.Fatalf("dir %s offline after delete: %v", d.Path, d.Err)
		}
	}

	// A partition whose dir name does not fit is refused, as a request error.
	_, err := m.GetOrCreateLog(tpOf(long, 100000), true)
	if !errors.Is(err, log.ErrNameTooLong) || errors.Is(err, log.ErrStorage) {
		t.Fatalf("create of a 256-byte dir: err %v, want ErrNameTooLong and not ErrStorage", err)
	}
	// Moving a partition whose future dir would not fit is refused too.
	q := tpOf(long, 1)
	create(t, m, q)
	curDir, _ := m.DirOf(q)
	dest := dirs[0]
	if curDir == dest {
		dest = dirs[1]
	}
	if _, err := m.GetOrCreateFutureLog(q, dest); !errors.Is(err, log.ErrNameTooLong) {
		t.Fatalf("future log of a long name: err %v, want ErrNameTooLong", err)
	}
	if f, ok := failure(m); ok {
		t.Fatalf("refused names reported a dir failure: %v", f)
	}
	for _, d := range m.Dirs() {
		if !d.Online {
			t.Fatalf("dir %s offline: %v", d.Path, d.Err)
		}
	}
	// Nothing of the deleted log is left once the background removal ran,
	// and no dir was made for the refused ones.
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.IsDir() && e.Name() != q.String() {
				t.Errorf("%s: unexpected dir %q", d, e.Name())
			}
		}
	}
}

// A future log of a long (but fitting) topic can be moved in and its old
// dir deleted: the "-delete" name of the current log is cut short too.
func TestLongTopicMoveDeletesOldDir(t *testing.T) {
	dirs := tempDirs(t, 2)
	m := open(t, dirs...)
	p := tpOf(strings.Repeat("m", 210), 7) // future dir: 212+40 = 252 bytes
	cur, fut, _ := copiedToFuture(t, m, dirs, p)
	_ = cur
	if _, err := m.ReplaceCurrentWithFutureLog(p, fut.LogEndOffset()); err != nil {
		t.Fatalf("ReplaceCurrentWithFutureLog: %v", err)
	}
	if f, ok := failure(m); ok {
		t.Fatalf("move reported a dir failure: %v", f)
	}
}
