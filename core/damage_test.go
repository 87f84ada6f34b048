package core

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// damagedFollower is a broker restarted with its replica of orders-0 (five
// one-record batches, fetched as a follower of broker 2 and fsynced)
// damaged at rest inside its third batch, below the recovery point, the
// segment's index gone so that recovery reads it.
func damagedFollower(t *testing.T, ndirs int) *harness {
	t.Helper()
	h := newHarness(t, ndirs)
	h.leaderAndIsr(1, state("orders", 0, 2, 1, []int32{1, 2}, []int32{1, 2}))
	l, _ := h.rm.logs.GetLog(tp0)
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		if err := followerAppend(l, v+strings.Repeat(".", 40)); err != nil {
			t.Fatal(err)
		}
	}
	logDir, _ := h.rm.logs.DirOf(tp0)
	dir := filepath.Join(logDir, tp0.String())
	// A clean stop: the recovery point reaches the log end.
	if err := h.rm.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	segment := filepath.Join(dir, "00000000000000000000.log")
	data, err := os.ReadFile(segment)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(data), "c"+strings.Repeat(".", 40))
	copy(data[at+5:], "XXXX")
	if err := os.WriteFile(segment, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "00000000000000000000.index")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	h.open()
	if l, ok := h.rm.logs.GetLog(tp0); !ok {
		t.Fatal("no log after the restart")
	} else if d, ok := l.Damaged(); !ok || d.Offset != 2 {
		t.Fatalf("Damaged() = %+v, %v; want damage at offset 2", d, ok)
	}
	return h
}

// The first LeaderAndIsr after the restart, making the broker a follower
// of a live leader, repairs the damaged log before the fetcher starts:
// it fetches from the damage on (issue 10, path 9). The partition has not
// adopted its log yet at that point; the repair must not wait for it.
func TestFirstLeaderAndIsrRepairsADamagedFollower(t *testing.T) {
	h := damagedFollower(t, 1)
	if code := codeOf(h.leaderAndIsr(1, state("orders", 0, 2, 2, []int32{1, 2}, []int32{1, 2})), tp0); code != ErrNone {
		t.Fatalf("become follower: %v", code)
	}
	l, _ := h.rm.logs.GetLog(tp0)
	if _, ok := l.Damaged(); ok {
		t.Fatal("the log is still damaged after becoming a follower")
	}
	if s, ok := h.fetchers.fetching(tp0); !ok || s.InitOffset != 2 {
		t.Fatalf("fetcher %+v (added %v), want one from offset 2", s, ok)
	}
	if err := followerAppend(l, "c-again"); err != nil {
		t.Fatalf("append after the repair: %v", err)
	}
}

// Asked to lead first, the broker refuses (STORAGE_ERROR) and changes
// nothing: its log is not failed, it is not offline, and it is described
// damaged; the next LeaderAndIsr, as a follower, repairs it.
func TestDamagedLogRefusesLeadership(t *testing.T) {
	h := damagedFollower(t, 1)
	if code := codeOf(h.leaderAndIsr(1, state("orders", 0, 1, 2, []int32{1, 2}, []int32{1, 2})), tp0); code != ErrStorageError {
		t.Fatalf("become leader with a damaged log: %v, want STORAGE_ERROR", code)
	}
	info, ok := h.describe(tp0)
	if !ok || info.Role == RoleLeader || info.LeaderEpoch == 2 || info.DamagedOffset == nil || *info.DamagedOffset != 2 {
		t.Fatalf("after the refusal: %+v, want no leadership, no new epoch, damaged at 2", info)
	}
	if off := h.rm.OfflinePartitions(); len(off) != 0 || !h.dirsOnline() {
		t.Fatalf("offline partitions %v, dirs online %v: a refusal takes nothing offline", off, h.dirsOnline())
	}
	if code := codeOf(h.leaderAndIsr(1, state("orders", 0, 2, 2, []int32{1, 2}, []int32{1, 2})), tp0); code != ErrNone {
		t.Fatalf("become follower: %v", code)
	}
	if l, _ := h.rm.logs.GetLog(tp0); l.Failed() != nil {
		t.Fatal(l.Failed())
	} else if _, ok := l.Damaged(); ok {
		t.Fatal("still damaged as a follower")
	}
}

// A damaged log is not moved between log dirs: the copy would stop at the
// damage and then replace the log, which keeps the records after it, with
// one that lacks them and no longer says so.
func TestDamagedLogIsNotMoved(t *testing.T) {
	h := damagedFollower(t, 2)
	// Hosted, still damaged: it refused to lead.
	if code := codeOf(h.leaderAndIsr(1, state("orders", 0, 1, 2, []int32{1, 2}, []int32{1, 2})), tp0); code != ErrStorageError {
		t.Fatalf("become leader: %v", code)
	}
	cur, _ := h.rm.logs.DirOf(tp0)
	dest := h.dirs[0]
	if dest == cur {
		dest = h.dirs[1]
	}
	errs := h.rm.AlterReplicaLogDirs(t.Context(), []AlterReplicaLogDir{{TopicPartition: tp0, LogDir: dest}})
	if len(errs) != 1 || errs[0].Error != ErrStorageError {
		t.Fatalf("move a damaged log: %+v, want STORAGE_ERROR", errs)
	}
	if _, moving := h.rm.logs.FutureDirOf(tp0); moving {
		t.Fatal("a future log was created for the damaged log")
	}
}
