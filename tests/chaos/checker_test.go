package chaos

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// logOf builds a final log from values at offsets 0, 1, ..., each record
// from producer ID 100+its producer number at epoch 7 plus its
// incarnation, as an idempotent producer writes them.
func logOf(values ...string) map[int64]logRec {
	m := map[int64]logRec{}
	for i, v := range values {
		r := logRec{Value: v}
		if id, ok := parseValue(v); ok {
			r.PID, r.Epoch, r.Sequence = int64(100+id.Producer), int32(7+id.Incarnation), int32(i)
		}
		m[int64(i)] = r
	}
	return m
}

// The checker's comparison finds each kind of wrong history, and nothing in
// a right one.
func TestCompareLog(t *testing.T) {
	// Producer 1 restarted (incarnation 1) after w1.i0.2, whose write was
	// ambiguous and is absent, as is w1.i0.3 its fenced old instance sent;
	// w2.i0.5 (ambiguous, retried) is there once. Two producers interleave.
	final := logOf("w1.i0.0", "w2.i0.4", "w1.i0.1", "w2.i0.5", "w1.i1.4", "w2.i0.6")
	acks := []ack{{partition: 0, offset: 0, value: "w1.i0.0"}, {partition: 0, offset: 4, value: "w1.i1.4"}, {partition: 1, offset: 0, value: "w9.i0.0"}}
	reads := map[int64]string{0: "w1.i0.0", 1: "w2.i0.4"}
	var f Findings
	compareLog(0, final, 0, 6, acks, reads, &f)
	if n := len(f.Lost) + len(f.Moved) + len(f.Divergent) + len(f.Changed) + len(f.Duplicates) + len(f.Reordered) + len(f.Fenced); n != 0 {
		t.Fatalf("a right history: %+v", f)
	}
	// A record of an older epoch after a newer one's, as a fenced instance
	// whose write was let through leaves it.
	fenced := logOf("w1.i0.0", "w1.i1.1", "w1.i0.2")
	fenced[2] = logRec{Value: "w1.i2.2", PID: 101, Epoch: 7}
	// Records 0 and 1 deleted (DeleteRecords): the log starts at 2.
	deleted := logOf("w1.i0.0", "w1.i0.1", "w1.i0.2", "w1.i0.3")
	delete(deleted, 0)
	delete(deleted, 1)
	f = Findings{}
	compareLog(0, deleted, 2, 4, []ack{{offset: 0, value: "w1.i0.0"}, {offset: 3, value: "w1.i0.3"}}, map[int64]string{1: "w1.i0.1", 2: "w1.i0.2"}, &f)
	if n := len(f.Lost) + len(f.Moved) + len(f.Divergent) + len(f.Changed) + len(f.Duplicates) + len(f.Reordered) + len(f.Fenced); n != 0 {
		t.Fatalf("records acknowledged and read below the log start, then deleted: %+v", f)
	}
	// A record acknowledged at a deleted offset and in the log again: the
	// window left open, reported apart and not failed.
	f = Findings{}
	again := logOf("w1.i0.0", "w1.i0.1", "w1.i0.0")
	delete(again, 0)
	delete(again, 1)
	compareLog(0, again, 2, 3, []ack{{offset: 0, value: "w1.i0.0"}}, nil, &f)
	if len(f.Reappended) != 1 || !strings.Contains(f.Reappended[0], `"w1.i0.0" at offset 0, deleted since, again at 2`) || len(f.Duplicates) != 0 {
		t.Fatalf("a deleted record appended again: %+v", f)
	}
	cases := []struct {
		name   string
		final  map[int64]logRec
		start  int64
		hw     int64
		acks   []ack
		reads  map[int64]string
		list   func(Findings) []string
		substr string
	}{
		{"lost", logOf("w1.i0.0", "w1.i0.1"), 0, 2, []ack{{offset: 2, value: "w1.i0.2"}}, nil, func(f Findings) []string { return f.Lost }, `"w1.i0.2" acknowledged at offset 2`},
		{"lost above the HW", logOf("w1.i0.0", "w1.i0.1"), 0, 1, []ack{{offset: 1, value: "w1.i0.1"}}, nil, func(f Findings) []string { return f.Lost }, `"w1.i0.1"`},
		{"moved", logOf("w2.i0.0", "w1.i0.0"), 0, 2, []ack{{offset: 0, value: "w1.i0.0"}}, nil, func(f Findings) []string { return f.Moved }, "is at 1"},
		// An ambiguous write retried and appended twice, not acknowledged.
		{"duplicate", logOf("w1.i0.0", "w1.i0.1", "w1.i0.1"), 0, 3, nil, nil, func(f Findings) []string { return f.Duplicates }, `"w1.i0.1" at offsets 1 and 2 (producer 101 epoch 7 sequence 1, then 101, 7, 2)`},
		{"reorder", logOf("w1.i0.0", "w2.i0.0", "w1.i0.2", "w1.i0.1"), 0, 4, nil, nil, func(f Findings) []string { return f.Reordered }, `"w1.i0.1" at offset 3 after "w1.i0.2" at offset 2`},
		{"old incarnation after the new", logOf("w1.i1.5", "w1.i0.6"), 0, 2, nil, nil, func(f Findings) []string { return f.Reordered }, `"w1.i0.6" at offset 1 after "w1.i1.5"`},
		{"older epoch after newer", fenced, 0, 3, nil, nil, func(f Findings) []string { return f.Fenced }, "epoch 7 at offset 2"},
		{"hole", map[int64]logRec{0: {Value: "w1.i0.0"}, 2: {Value: "w1.i0.2"}}, 0, 3, nil, nil, func(f Findings) []string { return f.Divergent }, "offset 1: missing"},
		{"never sent", logOf("w1.i0.0", "x"), 0, 2, nil, nil, func(f Findings) []string { return f.Divergent }, `"x" is no value`},
		{"changed read", logOf("w1.i0.0"), 0, 1, nil, map[int64]string{0: "w1.i0.9"}, func(f Findings) []string { return f.Changed }, `read "w1.i0.9"`},
		{"lost after a deletion", deleted, 2, 4, []ack{{offset: 1, value: "w1.i0.1"}, {offset: 3, value: "w1.i0.9"}}, nil, func(f Findings) []string { return f.Lost }, `"w1.i0.9" acknowledged at offset 3`},
		{"read gone", logOf("w1.i0.0"), 0, 1, nil, map[int64]string{1: "w1.i0.1"}, func(f Findings) []string { return f.Changed }, `read "w1.i0.1"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f Findings
			compareLog(0, c.final, c.start, c.hw, c.acks, c.reads, &f)
			got := c.list(f)
			if len(got) != 1 || !strings.Contains(got[0], c.substr) {
				t.Fatalf("findings %+v, want one containing %q", f, c.substr)
			}
		})
	}
}

// A value names its record and reads back as it; nothing else reads as one.
func TestParseValue(t *testing.T) {
	id := recordID{Producer: 3, Incarnation: 2, Index: 41}
	if got, ok := parseValue(id.String()); !ok || got != id {
		t.Fatalf("parseValue(%q) = %v %v", id, got, ok)
	}
	for _, v := range []string{"", "w1.i0", "w1.i0.1x", "p0-w1-3", "w01.i0.1", " w1.i0.1"} {
		if _, ok := parseValue(v); ok {
			t.Errorf("parseValue(%q) ok", v)
		}
	}
}

// The longest time without an acknowledgement counts the start and end of
// the workload, and excused spans come out of a gap.
func TestGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	acks := []ack{{partition: 0, at: at(1)}, {partition: 0, at: at(2)}, {partition: 0, at: at(12)}, {partition: 1, at: at(5)}}
	raw, unexcused := gaps(acks, 2, at(0), at(14), [][2]time.Time{{at(3), at(7)}})
	if !slices.Equal(raw, []time.Duration{10 * time.Second, 9 * time.Second}) {
		t.Fatalf("raw gaps %v, want [10s 9s]", raw)
	}
	if !slices.Equal(unexcused, []time.Duration{6 * time.Second, 7 * time.Second}) {
		t.Fatalf("unexcused gaps %v, want [6s 7s]", unexcused)
	}
}

// One seed gives one schedule; another seed another.
func TestScheduleIsTheSeeds(t *testing.T) {
	a := Schedule(7, 50, DefaultMix(true, true), 3, 4, 3*time.Second)
	b := Schedule(7, 50, DefaultMix(true, true), 3, 4, 3*time.Second)
	c := Schedule(8, 50, DefaultMix(true, true), 3, 4, 3*time.Second)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed drew two schedules")
	}
	if slices.Equal(a, c) {
		t.Fatal("two seeds drew one schedule")
	}
	kinds := map[string]bool{}
	for _, f := range Schedule(1, 500, HarshMix(true, true), 3, 4, 3*time.Second) {
		kinds[f.Kind] = true
		if f.Hold <= 0 || f.Hold > 10*time.Second {
			t.Fatalf("fault %v holds out of bounds", f)
		}
	}
	if len(kinds) != len(HarshMix(true, true)) {
		t.Fatalf("500 rounds drew kinds %v, want all of %v", kinds, HarshMix(true, true))
	}
}

// The checker reads a fencing decision's broker count from the
// controller's "fencing brokers" line, as it logs it.
func TestFencedIn(t *testing.T) {
	for line, want := range map[string]int{
		`2026-12-04T13:55:21.387Z WRN fencing brokers brokers=[1,2,3] controller=127.0.0.1:36079 logger=controller reason="session expired: silent for [4.1s 4.1s 4.1s]"`: 3,
		`... WRN fencing brokers brokers=[2] reason="registered again (new incarnation)"`:                                                                                 1,
		`... WRN fencing brokers brokers=[] reason=x`: 0,
	} {
		if got := fencedIn(line); got != want {
			t.Errorf("fencedIn(%q) = %d, want %d", line, got, want)
		}
	}
}

// Extra rounds come from a stream of their own: adding them leaves a
// seed's fault schedule (and every fixed seed's replay) as it was; with
// every, each kind comes once in len(mix) rounds.
func TestExtraSchedule(t *testing.T) {
	mix := ExtraMix()
	every := ExtraSchedule(1, len(mix), 0, true, mix, 3, 4)
	var kinds []string
	for _, f := range every {
		kinds = append(kinds, f.Kind)
	}
	slices.Sort(kinds)
	if want := sortedKeys(mix); !slices.Equal(kinds, want) {
		t.Fatalf("every: kinds %v, want each of %v once", kinds, want)
	}
	n := 0
	for _, f := range ExtraSchedule(7, 400, DefaultExtraPercent, false, mix, 3, 4) {
		if f != nil {
			n++
			if f.Kind == LongCut && (f.Hold < 20*time.Second || f.Hold > 40*time.Second) {
				t.Errorf("a long cut of %v", f.Hold)
			}
		}
	}
	if n < 60 || n > 140 {
		t.Errorf("%d extras in 400 rounds at %d%%", n, DefaultExtraPercent)
	}
	if none := ExtraSchedule(7, 50, 0, false, mix, 3, 4); slices.ContainsFunc(none, func(f *Fault) bool { return f != nil }) {
		t.Errorf("extras at 0%%")
	}
}

// Producer restarts come from a stream of their own, at the asked rate,
// each naming a producer and a time into the fault.
func TestRestartSchedule(t *testing.T) {
	a, b := RestartSchedule(7, 400, DefaultRestartPercent, 3), RestartSchedule(7, 400, DefaultRestartPercent, 3)
	n := 0
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || (a[i] != nil && *a[i] != *b[i]) {
			t.Fatalf("round %d: the same seed drew %v and %v", i, a[i], b[i])
		}
		if r := a[i]; r != nil {
			n++
			if r.Producer < 1 || r.Producer > 3 || r.After <= 0 || r.After > 3*time.Second {
				t.Errorf("round %d: %+v out of bounds", i, *r)
			}
		}
	}
	if n < 160 || n > 240 {
		t.Errorf("%d restarts in 400 rounds at %d%%", n, DefaultRestartPercent)
	}
	if none := RestartSchedule(7, 50, 0, 3); slices.ContainsFunc(none, func(r *ProducerRestart) bool { return r != nil }) {
		t.Error("restarts at 0%")
	}
}

// Deletions during fault rounds come from a stream of their own, at the
// asked rate, each a time into the fault.
func TestDeleteSchedule(t *testing.T) {
	a, b := DeleteSchedule(7, 400, DefaultDeletePercent), DeleteSchedule(7, 400, DefaultDeletePercent)
	n := 0
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || (a[i] != nil && *a[i] != *b[i]) {
			t.Fatalf("round %d: the same seed drew two deletions", i)
		}
		if d := a[i]; d != nil {
			n++
			if *d <= 0 || *d > 3*time.Second {
				t.Errorf("round %d: a deletion %v into the fault", i, *d)
			}
		}
	}
	if n < 80 || n > 160 {
		t.Errorf("%d deletions in 400 rounds at %d%%", n, DefaultDeletePercent)
	}
}

func TestRetentionSchedule(t *testing.T) {
	a, b := RetentionSchedule(7, 400, DefaultRetentionPercent), RetentionSchedule(7, 400, DefaultRetentionPercent)
	n := 0
	for i := range a {
		if (a[i] == nil) != (b[i] == nil) || a[i] != nil && *a[i] != *b[i] {
			t.Fatalf("round %d: the schedule is not the seed's", i)
		}
		if a[i] != nil {
			n++
			if *a[i] < 300*time.Millisecond || *a[i] >= 3*time.Second {
				t.Errorf("round %d: after %v", i, *a[i])
			}
		}
	}
	if n < 50 || n > 110 {
		t.Errorf("%d retention runs in 400 rounds at %d%%", n, DefaultRetentionPercent)
	}
	if d := DeleteSchedule(7, 400, DefaultDeletePercent); slices.EqualFunc(d, a, func(x, y *time.Duration) bool { return (x == nil) == (y == nil) }) {
		t.Error("the retention schedule is the delete schedule's: a stream of its own is wanted")
	}
}

// ackedEnd is what a freshly elected leader's HW must reach before the
// checker reads it: past the partition's last acknowledged record, others'
// records not counted.
func TestAckedEnd(t *testing.T) {
	acks := []ack{{partition: 0, offset: 15019}, {partition: 1, offset: 40}, {partition: 0, offset: 7}}
	if got := ackedEnd(acks, 0); got != 15020 {
		t.Errorf("ackedEnd(0) = %d, want 15020", got)
	}
	if got := ackedEnd(acks, 2); got != 0 {
		t.Errorf("ackedEnd(2) = %d, want 0 (nothing acknowledged)", got)
	}
}
