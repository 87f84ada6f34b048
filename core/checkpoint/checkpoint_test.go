package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"

	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

func readString(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Ensures offset checkpoints are written in Kafka's exact text format, sorted by topic then partition number.
func TestWriteOffsetsExactBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "replication-offset-checkpoint")
	offsets := map[tp.TopicPartition]int64{
		{Topic: "b", Partition: 1}:       5,
		{Topic: "a", Partition: 10}:      7,
		{Topic: "a", Partition: 2}:       3,
		{Topic: "a.b_c-d", Partition: 0}: 9223372036854775807,
	}
	if err := WriteOffsets(vfs.OS, path, offsets, true); err != nil {
		t.Fatal(err)
	}
	want := "0\n4\na 2 3\na 10 7\na.b_c-d 0 9223372036854775807\nb 1 5\n"
	if got := readString(t, path); got != want {
		t.Fatalf("file = %q, want %q", got, want)
	}
}

// Ensures an empty offset map is written as version and a zero count, and reads back empty.
func TestWriteOffsetsEmpty(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp")
	if err := WriteOffsets(vfs.OS, path, nil, false); err != nil {
		t.Fatal(err)
	}
	if got := readString(t, path); got != "0\n0\n" {
		t.Fatalf("file = %q", got)
	}
	got, err := ReadOffsets(vfs.OS, path)
	if err != nil || len(got) != 0 {
		t.Fatalf("ReadOffsets = %v, %v", got, err)
	}
}

// Ensures leader-epoch checkpoints are written in Kafka's exact format, in the order given.
func TestWriteEpochsExactBytes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
	entries := []EpochEntry{{0, 0}, {3, 100}, {7, 250}}
	if err := WriteEpochs(vfs.OS, path, entries, true); err != nil {
		t.Fatal(err)
	}
	if got, want := readString(t, path), "0\n3\n0 0\n3 100\n7 250\n"; got != want {
		t.Fatalf("file = %q, want %q", got, want)
	}
	got, err := ReadEpochs(vfs.OS, path)
	if err != nil || !reflect.DeepEqual(got, entries) {
		t.Fatalf("ReadEpochs = %v, %v; want %v", got, err, entries)
	}
}

// Ensures what WriteOffsets writes, with and without sync, reads back equal and leaves no tmp file.
func TestOffsetsRoundTrip(t *testing.T) {
	for _, sync := range []bool{true, false} {
		dir := t.TempDir()
		path := filepath.Join(dir, "cp")
		want := map[tp.TopicPartition]int64{}
		for i := range 100 {
			want[tp.TopicPartition{Topic: "t" + strconv.Itoa(i%7), Partition: int32(i)}] = int64(i * 1000)
		}
		// Write twice: the second write must replace the first.
		if err := WriteOffsets(vfs.OS, path, map[tp.TopicPartition]int64{{Topic: "old", Partition: 0}: 1}, sync); err != nil {
			t.Fatal(err)
		}
		if err := WriteOffsets(vfs.OS, path, want, sync); err != nil {
			t.Fatal(err)
		}
		got, err := ReadOffsets(vfs.OS, path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("sync=%v: read %v, want %v", sync, got, want)
		}
		if _, err := os.Stat(path + ".tmp"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("sync=%v: tmp file left behind: %v", sync, err)
		}
	}
}

// Ensures a missing checkpoint reads as empty without error (a dir that never wrote one).
func TestReadMissing(t *testing.T) {
	dir := t.TempDir()
	offs, err := ReadOffsets(vfs.OS, filepath.Join(dir, "none"))
	if err != nil || offs == nil || len(offs) != 0 {
		t.Fatalf("ReadOffsets = %v, %v; want empty map", offs, err)
	}
	eps, err := ReadEpochs(vfs.OS, filepath.Join(dir, "none"))
	if err != nil || len(eps) != 0 {
		t.Fatalf("ReadEpochs = %v, %v; want none", eps, err)
	}
}

// Ensures a last line without its newline is accepted, as Kafka's readLine does.
func TestReadWithoutFinalNewline(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp")
	if err := os.WriteFile(path, []byte("0\n1\na 0 5"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := ReadOffsets(vfs.OS, path)
	if err != nil || got[tp.TopicPartition{Topic: "a"}] != 5 || len(got) != 1 {
		t.Fatalf("ReadOffsets = %v, %v", got, err)
	}
}

// Ensures every kind of malformed offset checkpoint is rejected with ErrMalformed and the right line number.
func TestReadOffsetsMalformed(t *testing.T) {
	cases := []struct {
		name, data string
		line       int
	}{
		{"empty file", "", 1},
		{"wrong version", "1\n0\n", 1},
		{"non-numeric version", "x\n0\n", 1},
		{"crlf", "0\r\n0\r\n", 1},
		{"missing count", "0\n", 2},
		{"non-numeric count", "0\nx\n", 2},
		{"negative count", "0\n-1\n", 2},
		{"fewer entries than count", "0\n2\na 0 1\n", 4},
		{"more entries than count", "0\n1\na 0 1\nb 0 2\n", 4},
		{"trailing empty line", "0\n1\na 0 1\n\n", 4},
		{"trailing garbage", "0\n0\ngarbage", 3},
		{"two fields", "0\n1\na 0\n", 3},
		{"four fields", "0\n1\na 0 1 2\n", 3},
		{"double space", "0\n1\na  0 1\n", 3},
		{"tab separated", "0\n1\na\t0\t1\n", 3},
		{"non-numeric partition", "0\n1\na x 1\n", 3},
		{"non-numeric offset", "0\n1\na 0 1x\n", 3},
		{"negative partition", "0\n1\na -1 1\n", 3},
		{"negative offset", "0\n1\na 0 -1\n", 3},
		{"plus sign", "0\n1\na +1 1\n", 3},
		{"partition overflow", "0\n1\na 2147483648 1\n", 3},
		{"offset overflow", "0\n1\na 0 9223372036854775808\n", 3},
		{"empty topic", "0\n1\n 0 1\n", 3},
		{"illegal topic", "0\n2\na 0 1\na/b 0 1\n", 4},
		{"dot topic", "0\n1\n.. 0 1\n", 3},
		{"duplicate entry", "0\n3\na 0 1\nb 0 1\na 0 2\n", 5},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cp")
			if err := os.WriteFile(path, []byte(c.data), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadOffsets(vfs.OS, path)
			checkMalformed(t, err, path, c.line)
			if got != nil {
				t.Fatalf("returned entries %v with the error", got)
			}
		})
	}
}

// Ensures every kind of malformed leader-epoch checkpoint is rejected with ErrMalformed and the right line number.
func TestReadEpochsMalformed(t *testing.T) {
	cases := []struct {
		name, data string
		line       int
	}{
		{"empty file", "", 1},
		{"wrong version", "2\n0\n", 1},
		{"missing count", "0\n", 2},
		{"fewer entries than count", "0\n2\n0 0\n", 4},
		{"trailing garbage", "0\n1\n0 0\n1 5\n", 4},
		{"one field", "0\n1\n0\n", 3},
		{"three fields", "0\n1\n0 0 0\n", 3},
		{"non-numeric epoch", "0\n1\nx 0\n", 3},
		{"non-numeric offset", "0\n1\n0 x\n", 3},
		{"negative epoch", "0\n1\n-1 0\n", 3},
		{"negative offset", "0\n1\n0 -5\n", 3},
		{"epoch overflow", "0\n1\n2147483648 0\n", 3},
		{"duplicate epoch", "0\n2\n1 0\n1 5\n", 4},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "leader-epoch-checkpoint")
			if err := os.WriteFile(path, []byte(c.data), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := ReadEpochs(vfs.OS, path)
			checkMalformed(t, err, path, c.line)
			if got != nil {
				t.Fatalf("returned entries %v with the error", got)
			}
		})
	}
}

func checkMalformed(t *testing.T, err error, path string, line int) {
	t.Helper()
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("err = %v, want ErrMalformed", err)
	}
	var pe *ParseError
	if !errors.As(err, &pe) {
		t.Fatalf("err %v is not a *ParseError", err)
	}
	if pe.Line != line || pe.Path != path {
		t.Fatalf("error at %s line %d, want line %d (%v)", pe.Path, pe.Line, line, err)
	}
}

// Ensures the writers refuse entries the readers would reject, and leave the existing file untouched.
func TestWriteRejectsInvalidEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cp")
	if err := WriteOffsets(vfs.OS, path, map[tp.TopicPartition]int64{{Topic: "ok"}: 1}, false); err != nil {
		t.Fatal(err)
	}
	bad := []map[tp.TopicPartition]int64{
		{{Topic: "a b", Partition: 0}: 1},
		{{Topic: "", Partition: 0}: 1},
		{{Topic: "a\nb", Partition: 0}: 1},
		{{Topic: "a", Partition: -1}: 1},
		{{Topic: "a", Partition: 0}: -1},
	}
	for _, m := range bad {
		if err := WriteOffsets(vfs.OS, path, m, false); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("WriteOffsets(vfs.OS, %v) = %v, want ErrInvalidEntry", m, err)
		}
	}
	for _, e := range []EpochEntry{{-1, 0}, {0, -1}} {
		if err := WriteEpochs(vfs.OS, path, []EpochEntry{e}, false); !errors.Is(err, ErrInvalidEntry) {
			t.Errorf("WriteEpochs(vfs.OS, %v) = %v, want ErrInvalidEntry", e, err)
		}
	}
	if got := readString(t, path); got != "0\n1\nok 0 1\n" {
		t.Fatalf("file changed to %q", got)
	}
}

// Ensures a write that fails (here: the tmp file cannot be created) returns an error and keeps the old checkpoint.
func TestFailedWriteKeepsOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "cp")
	if err := WriteEpochs(vfs.OS, path, []EpochEntry{{1, 10}}, true); err != nil {
		t.Fatal(err)
	}
	// A directory where the tmp file should go makes the create fail.
	if err := os.MkdirAll(filepath.Join(path+".tmp", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteEpochs(vfs.OS, path, []EpochEntry{{2, 20}}, true); err == nil {
		t.Fatal("write succeeded, want an error")
	}
	if got := readString(t, path); got != "0\n1\n1 10\n" {
		t.Fatalf("file = %q, want the old contents", got)
	}
	if err := WriteOffsets(vfs.OS, filepath.Join(dir, "missing", "cp"), nil, true); err == nil {
		t.Fatal("write into a missing dir succeeded")
	}
}

func benchOffsets(n int) map[tp.TopicPartition]int64 {
	m := make(map[tp.TopicPartition]int64, n)
	for i := range n {
		m[tp.TopicPartition{Topic: "topic-" + strconv.Itoa(i/100), Partition: int32(i % 100)}] = int64(i) * 7919
	}
	return m
}

// BenchmarkWriteOffsets50k writes one dir's share of a 100,000-partition HW checkpoint.
func BenchmarkWriteOffsets50k(b *testing.B) {
	offsets := benchOffsets(50_000)
	for _, sync := range []bool{true, false} {
		b.Run("sync="+strconv.FormatBool(sync), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "replication-offset-checkpoint")
			b.ReportAllocs()
			for b.Loop() {
				if err := WriteOffsets(vfs.OS, path, offsets, sync); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReadOffsets50k reads a 50,000-entry checkpoint, as a dir does at start-up.
func BenchmarkReadOffsets50k(b *testing.B) {
	path := filepath.Join(b.TempDir(), "cp")
	if err := WriteOffsets(vfs.OS, path, benchOffsets(50_000), false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadOffsets(vfs.OS, path); err != nil {
			b.Fatal(err)
		}
	}
}
