package epoch

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/vfs"
)

// E is a local copy of checkpoint.EpochEntry so tables can use short literals.
type E checkpoint.EpochEntry

func entries(es []E) []checkpoint.EpochEntry {
	out := make([]checkpoint.EpochEntry, len(es))
	for i, e := range es {
		out[i] = checkpoint.EpochEntry(e)
	}
	return out
}

func open(t *testing.T) *Cache {
	t.Helper()
	c, err := Open(vfs.OS, filepath.Join(t.TempDir(), "leader-epoch-checkpoint"), true)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func assign(t *testing.T, c *Cache, entries ...E) {
	t.Helper()
	for _, e := range entries {
		if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatalf("Assign(%d, %d): %v", e.Epoch, e.StartOffset, err)
		}
	}
}

// check asserts the cache's entries and that the checkpoint file holds the same.
func check(t *testing.T, c *Cache, wantE ...E) {
	t.Helper()
	want := entries(wantE)
	if got := c.Entries(); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0) {
		t.Fatalf("entries = %v, want %v", got, want)
	}
	onDisk, err := checkpoint.ReadEpochs(vfs.OS, c.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(onDisk, want) && !(len(onDisk) == 0 && len(want) == 0) {
		t.Fatalf("checkpoint file = %v, want %v", onDisk, want)
	}
}

// Ensures increasing epochs are appended in order, and re-assigning the latest epoch at a later offset changes nothing.
func TestAssignAppends(t *testing.T) {
	c := open(t)
	assign(t, c, E{0, 0}, E{1, 5}, E{1, 9}, E{3, 10})
	check(t, c, E{0, 0}, E{1, 5}, E{3, 10})
	if got := c.LatestEpoch(); got != 3 {
		t.Fatalf("LatestEpoch = %d, want 3", got)
	}
	if e, ok := c.LatestEntry(); !ok || E(e) != (E{3, 10}) {
		t.Fatalf("LatestEntry = %v, %v", e, ok)
	}
	if e, ok := c.EarliestEntry(); !ok || E(e) != (E{0, 0}) {
		t.Fatalf("EarliestEntry = %v, %v", e, ok)
	}
}

// Ensures Assign removes conflicting entries (epoch >= new or start offset >= new start) before appending, as Kafka's assign does.
func TestAssignReplacesConflicts(t *testing.T) {
	cases := []struct {
		name string
		add  E
		want []E
	}{
		{"latest epoch at an earlier offset moves its start back", E{5, 25}, []E{{2, 10}, {4, 20}, {5, 25}}},
		{"older epoch removes the newer ones", E{3, 40}, []E{{2, 10}, {3, 40}}},
		{"newer epoch at an earlier offset removes the entries at or after it", E{6, 20}, []E{{2, 10}, {6, 20}}},
		{"newer epoch at the first offset replaces everything", E{7, 10}, []E{{7, 10}}},
		{"older epoch at an older offset", E{1, 0}, []E{{1, 0}}},
		{"same entry is a no-op", E{5, 30}, []E{{2, 10}, {4, 20}, {5, 30}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := open(t)
			assign(t, c, E{2, 10}, E{4, 20}, E{5, 30})
			assign(t, c, tc.add)
			check(t, c, tc.want...)
		})
	}
}

// Ensures negative epochs and offsets are refused and leave the cache unchanged.
func TestAssignRejectsNegative(t *testing.T) {
	c := open(t)
	assign(t, c, E{1, 0})
	if err := c.Assign(-1, 5); err == nil {
		t.Fatal("Assign(-1, 5) succeeded")
	}
	if err := c.Assign(2, -1); err == nil {
		t.Fatal("Assign(2, -1) succeeded")
	}
	check(t, c, E{1, 0})
}

// Ensures divergence lookups on a leader with epochs 0, 2, 4 -> 5 (a KIP-279 style history) answer the largest epoch <= requested and the start of the next one.
func TestEndOffsetFor(t *testing.T) {
	c := open(t)
	assign(t, c, E{2, 10}, E{4, 20}, E{5, 35})
	const leo = 50
	cases := []struct {
		requested int32
		epoch     int32
		end       int64
	}{
		{5, 5, leo},               // the latest epoch ends at the LEO
		{4, 4, 35},                // ends where 5 starts
		{3, 2, 20},                // unknown epoch 3: the follower's 3 diverges at the end of 2
		{2, 2, 20},                // first entry
		{1, Undefined, Undefined}, // before the first entry
		{6, Undefined, Undefined}, // newer than the latest
		{Undefined, Undefined, Undefined},
	}
	for _, tc := range cases {
		e, off := c.EndOffsetFor(tc.requested, leo)
		if e != tc.epoch || off != tc.end {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tc.requested, e, off, tc.epoch, tc.end)
		}
	}
}

// Ensures an empty cache answers Undefined everywhere.
func TestEmptyCacheUndefined(t *testing.T) {
	c := open(t)
	if e, off := c.EndOffsetFor(0, 10); e != Undefined || off != Undefined {
		t.Fatalf("EndOffsetFor = (%d, %d)", e, off)
	}
	if got := c.LatestEpoch(); got != Undefined {
		t.Fatalf("LatestEpoch = %d", got)
	}
	if got := c.EpochForOffset(0); got != Undefined {
		t.Fatalf("EpochForOffset = %d", got)
	}
	if _, ok := c.LatestEntry(); ok {
		t.Fatal("LatestEntry found an entry")
	}
	if _, ok := c.EarliestEntry(); ok {
		t.Fatal("EarliestEntry found an entry")
	}
}

// Ensures EpochForOffset returns the epoch whose range covers the offset.
func TestEpochForOffset(t *testing.T) {
	c := open(t)
	assign(t, c, E{2, 10}, E{4, 20})
	for off, want := range map[int64]int32{9: Undefined, 10: 2, 19: 2, 20: 4, 1000: 4} {
		if got := c.EpochForOffset(off); got != want {
			t.Errorf("EpochForOffset(%d) = %d, want %d", off, got, want)
		}
	}
}

// Ensures TruncateFromEnd removes exactly the entries starting at or after the new end.
func TestTruncateFromEnd(t *testing.T) {
	cases := []struct {
		end  int64
		want []E
	}{
		{31, []E{{2, 10}, {4, 20}, {5, 30}}},
		{30, []E{{2, 10}, {4, 20}}},
		{21, []E{{2, 10}, {4, 20}}},
		{10, nil},
		{0, nil},
		{-1, []E{{2, 10}, {4, 20}, {5, 30}}}, // undefined offset: no change
	}
	for _, tc := range cases {
		c := open(t)
		assign(t, c, E{2, 10}, E{4, 20}, E{5, 30})
		if err := c.TruncateFromEnd(tc.end); err != nil {
			t.Fatal(err)
		}
		check(t, c, tc.want...)
	}
}

// Ensures TruncateFromStart drops entries wholly below the new log start and moves the covering entry's start up to it.
func TestTruncateFromStart(t *testing.T) {
	cases := []struct {
		start int64
		want  []E
	}{
		{5, []E{{2, 10}, {4, 20}, {5, 30}}},
		{10, []E{{2, 10}, {4, 20}, {5, 30}}},
		{15, []E{{2, 15}, {4, 20}, {5, 30}}},
		{20, []E{{4, 20}, {5, 30}}},
		{25, []E{{4, 25}, {5, 30}}},
		{100, []E{{5, 100}}},
	}
	for _, tc := range cases {
		c := open(t)
		assign(t, c, E{2, 10}, E{4, 20}, E{5, 30})
		if err := c.TruncateFromStart(tc.start); err != nil {
			t.Fatal(err)
		}
		check(t, c, tc.want...)
	}
}

// Ensures Clear empties both the cache and its checkpoint file.
func TestClear(t *testing.T) {
	c := open(t)
	assign(t, c, E{1, 0}, E{2, 7})
	if err := c.Clear(); err != nil {
		t.Fatal(err)
	}
	check(t, c)
	if got := c.LatestEpoch(); got != Undefined {
		t.Fatalf("LatestEpoch after Clear = %d", got)
	}
}

// Ensures a reopened cache reads back exactly what was persisted, in Kafka's file format.
func TestPersistenceRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
	c, err := Open(vfs.OS, path, false)
	if err != nil {
		t.Fatal(err)
	}
	assign(t, c, E{0, 0}, E{3, 100}, E{4, 180}, E{6, 200})
	if err := c.TruncateFromEnd(190); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "0\n3\n0 0\n3 100\n4 180\n"; string(b) != want {
		t.Fatalf("file = %q, want %q", b, want)
	}
	again, err := Open(vfs.OS, path, true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again.Entries(), c.Entries()) {
		t.Fatalf("reopened %v, want %v", again.Entries(), c.Entries())
	}
}

// Ensures a checkpoint whose entries are not strictly increasing, or that does not parse, fails Open with ErrMalformed.
func TestOpenRejectsBadFile(t *testing.T) {
	for _, data := range []string{"0\n2\n3 10\n2 20\n", "0\n2\n2 10\n3 10\n", "0\n1\nx 1\n"} {
		path := filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(vfs.OS, path, true); !errors.Is(err, checkpoint.ErrMalformed) {
			t.Errorf("Open(%q) = %v, want ErrMalformed", data, err)
		}
	}
}

// Ensures a failed checkpoint write returns an error and leaves the in-memory entries as they were.
func TestFailedWriteKeepsEntries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "leader-epoch-checkpoint")
	c, err := Open(vfs.OS, path, true)
	if err != nil {
		t.Fatal(err)
	}
	assign(t, c, E{1, 0})
	// A directory in the tmp file's place makes every write fail.
	if err := os.MkdirAll(filepath.Join(path+".tmp", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(2, 10); err == nil {
		t.Fatal("Assign succeeded despite the failed write")
	}
	if got := c.Entries(); !reflect.DeepEqual(got, entries([]E{{1, 0}})) {
		t.Fatalf("entries = %v after a failed write", got)
	}
}

// Ensures concurrent assigns and lookups are race-free and keep the entries strictly increasing.
func TestConcurrentUse(t *testing.T) {
	c := open(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				_ = c.Assign(int32(i), int64(i*10+g))
				c.EndOffsetFor(int32(i), 1000)
				c.EpochForOffset(int64(i))
			}
		})
	}
	wg.Wait()
	es := c.Entries()
	if len(es) == 0 {
		t.Fatal("no entries")
	}
	for i := 1; i < len(es); i++ {
		if es[i].Epoch <= es[i-1].Epoch || es[i].StartOffset <= es[i-1].StartOffset {
			t.Fatalf("entries not strictly increasing: %v", es)
		}
	}
	onDisk, err := checkpoint.ReadEpochs(vfs.OS, c.Path())
	if err != nil || !reflect.DeepEqual(onDisk, es) {
		t.Fatalf("checkpoint file = %v, %v; want %v", onDisk, err, es)
	}
}

// Ensures AssignDeferred changes only the in-memory cache, Persist writes it,
// and any later change writes the deferred entry along with its own.
func TestAssignDeferredPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
	c, err := Open(vfs.OS, path, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(1, 0); err != nil {
		t.Fatal(err)
	}
	if err := c.AssignDeferred(3, 10); err != nil {
		t.Fatal(err)
	}
	if c.LatestEpoch() != 3 || !c.Dirty() {
		t.Fatalf("latest %d dirty %v, want 3 and dirty", c.LatestEpoch(), c.Dirty())
	}
	reopen := func() []checkpoint.EpochEntry {
		re, err := Open(vfs.OS, path, true)
		if err != nil {
			t.Fatal(err)
		}
		return re.Entries()
	}
	if got := reopen(); len(got) != 1 {
		t.Fatalf("file has %v before Persist, want only {1 0}", got)
	}
	if err := c.Persist(); err != nil {
		t.Fatal(err)
	}
	if got := reopen(); len(got) != 2 || got[1] != (checkpoint.EpochEntry{Epoch: 3, StartOffset: 10}) || c.Dirty() {
		t.Fatalf("after Persist: file %v dirty %v", got, c.Dirty())
	}
	if err := c.AssignDeferred(4, 20); err != nil {
		t.Fatal(err)
	}
	if err := c.Assign(5, 30); err != nil {
		t.Fatal(err)
	}
	if got := reopen(); len(got) != 4 || got[2].Epoch != 4 || c.Dirty() {
		t.Fatalf("Assign after a deferred entry wrote %v", got)
	}
}

// Checkpoint writes what AssignDeferred left in memory, durably, without
// holding the lock AssignDeferred and readers take; an assignment that
// lands while it writes leaves the cache dirty for the next call.
func TestCheckpointWritesDeferredEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
	c, err := Open(vfs.OS, path, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Checkpoint(); err != nil { // nothing to write
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("Checkpoint of a clean cache wrote the file: %v", err)
	}
	if err := c.AssignDeferred(3, 10); err != nil {
		t.Fatal(err)
	}
	if got, _ := checkpoint.ReadEpochs(vfs.OS, path); len(got) != 0 {
		t.Fatalf("AssignDeferred wrote %v", got)
	}
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if got, err := checkpoint.ReadEpochs(vfs.OS, path); err != nil || !reflect.DeepEqual(got, []checkpoint.EpochEntry{{Epoch: 3, StartOffset: 10}}) || c.Dirty() {
		t.Fatalf("after Checkpoint: file %v %v, dirty %v; want [3 10], clean", got, err, c.Dirty())
	}

	// Assignments racing checkpoints: every one ends up in the file once
	// the last Checkpoint after them has run.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for e := int32(4); e < 200; e++ {
			if err := c.AssignDeferred(e, int64(e)*10); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 50 {
		if err := c.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if err := c.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	got, err := checkpoint.ReadEpochs(vfs.OS, path)
	if err != nil || len(got) != 197 || got[len(got)-1] != (checkpoint.EpochEntry{Epoch: 199, StartOffset: 1990}) || c.Dirty() {
		t.Fatalf("after the race: %d entries %v, dirty %v; want 197 ending [199 1990], clean", len(got), err, c.Dirty())
	}
}
