package core

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"

	"github.com/replicad/replicad/core/record"
)

// corruptAt overwrites n bytes at pos of the first segment of t's log (below
// its recovery point: damage at rest, not a torn write).
func (h *harness) corruptAt(pos int64, b []byte) {
	h.t.Helper()
	l := h.rm.getPartition(tp0).partition.Log()
	if rp := l.RecoveryPoint(); rp < 3 {
		h.t.Fatalf("recovery point %d: the damage would not be below it", rp)
	}
	f, err := os.OpenFile(filepath.Join(l.Dir(), "00000000000000000000.log"), os.O_WRONLY, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, pos); err != nil {
		h.t.Fatal(err)
	}
}

// threeBatches is a leader of orders-0 alone in its ISR with three
// one-record batches, committed and fsynced; it returns each batch's size.
func threeBatches(t *testing.T) (*harness, int64) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	for _, v := range []string{"first", "second", "third"} {
		if r := h.produce(tp0, AcksLeader, v+strings.Repeat(".", 59)); r.Error != ErrNone {
			t.Fatalf("produce: %+v", r)
		}
	}
	size := int64(len(record.Build([]record.Record{{Value: []byte("first" + strings.Repeat(".", 59))}}, 1)))
	return h, size
}

func (h *harness) consumeAt(offset int64) ConsumeResult {
	return h.rm.Consume(context.Background(), ConsumeRequest{TopicPartition: tp0, Offset: offset})
}

func (h *harness) dirsOnline() bool {
	for _, d := range h.rm.Describe("", nil).LogDirs {
		if !d.Online {
			return false
		}
	}
	return true
}

// A batch damaged at rest (16 bytes flipped inside a record's value, below
// the recovery point) is never served: the consumer gets the sound records
// before it, then CORRUPT_MESSAGE at its offset; the partition goes offline
// on this broker (a leader with corrupt committed data gives up the
// partition, and its heartbeat reports it), and the log dir stays online
// (issue 10, path 9).
func TestBatchDamagedAtRestIsNeverServed(t *testing.T) {
	h, size := threeBatches(t)
	h.corruptAt(size+record.HeaderSize+20, []byte("XXXXXXXXXXXXXXXX"))
	r := h.consumeAt(0)
	if r.Error != ErrNone || len(r.Records) != 1 || !strings.HasPrefix(string(r.Records[0].Value), "first") {
		t.Fatalf("consume at 0: %v %d records, want the first record alone", r.Error, len(r.Records))
	}
	r = h.consumeAt(1)
	if r.Error != ErrCorruptMessage || len(r.Records) != 0 {
		t.Fatalf("consume at the damaged batch: %v with %d records, want CORRUPT_MESSAGE and none", r.Error, len(r.Records))
	}
	if got := h.rm.OfflinePartitions(); len(got) != 1 || got[0] != tp0 {
		t.Fatalf("offline partitions %v, want [%v]", got, tp0)
	}
	if !h.dirsOnline() {
		t.Fatal("one damaged batch took the log dir offline")
	}
}

// A damaged length field is reported too (CORRUPT_MESSAGE), rather than
// read as nothing at that offset, which left consumers waiting for ever.
func TestDamagedBatchLengthIsReported(t *testing.T) {
	h, size := threeBatches(t)
	h.corruptAt(size+8, []byte{0x7f, 0, 0, 0}) // the second batch claims about 2 GiB
	if r := h.consumeAt(0); r.Error != ErrNone || len(r.Records) != 1 {
		t.Fatalf("consume at 0: %v %d records, want the first record", r.Error, len(r.Records))
	}
	if r := h.consumeAt(1); r.Error != ErrCorruptMessage {
		t.Fatalf("consume at the batch with a damaged length: %v, want CORRUPT_MESSAGE", r.Error)
	}
	if !h.dirsOnline() {
		t.Fatal("one damaged batch took the log dir offline")
	}
}

// A follower fetching across a damaged batch gets CORRUPT_MESSAGE, not the
// damaged bytes (which it would refuse and ask for again for ever), and
// the leader gives the partition up as a consumer's read makes it do.
func TestFollowerFetchOfADamagedBatch(t *testing.T) {
	h, size := threeBatches(t)
	h.corruptAt(size+record.HeaderSize+20, []byte("XXXXXXXXXXXXXXXX"))
	if r := h.fetch(2, fetchAt(1, 1)); r.Error != ErrCorruptMessage || len(r.Records) != 0 {
		t.Fatalf("fetch at the damaged batch: %v with %d bytes, want CORRUPT_MESSAGE", r.Error, len(r.Records))
	}
	if got := h.rm.OfflinePartitions(); len(got) != 1 || got[0] != tp0 {
		t.Fatalf("offline partitions %v, want [%v]", got, tp0)
	}
	if !h.dirsOnline() {
		t.Fatal("one damaged batch took the log dir offline")
	}
}

// The partition taken offline for a damaged batch is traced with where the
// damage is and why, the damage recorded as the span's error.
func TestDamagedBatchOfflineSpan(t *testing.T) {
	h, rec, _ := tracedHarness(t)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	for _, v := range []string{"first", "second", "third"} {
		if r := h.produce(tp0, AcksLeader, v+strings.Repeat(".", 59)); r.Error != ErrNone {
			t.Fatalf("produce: %+v", r)
		}
	}
	size := int64(len(record.Build([]record.Record{{Value: []byte("first" + strings.Repeat(".", 59))}}, 1)))
	h.corruptAt(2*size+record.HeaderSize+20, []byte("XXXXXXXXXXXXXXXX"))
	if r := h.consumeAt(0); r.Error != ErrNone || len(r.Records) != 2 {
		t.Fatalf("consume at 0: %v with %d records, want the two sound ones", r.Error, len(r.Records))
	}
	if r := h.consumeAt(2); r.Error != ErrCorruptMessage {
		t.Fatalf("consume at the damaged batch: %v", r.Error)
	}
	s := oneSpan(t, rec, "ReplicaManager.markPartitionOffline")
	wantAttrs(t, "markPartitionOffline", s.Attributes(), map[string]any{"replicad.reason": string(offlineCorrupt), "replicad.offset": 2})
	if s.Status().Code != codes.Error || len(s.Events()) == 0 {
		t.Fatalf("status %v, events %v: want the damage recorded as an error", s.Status(), s.Events())
	}
}

// The base offset is outside a batch's CRC: damage to it is found by the
// batch's place instead (the first batch read holds the offset asked for,
// each next one starts where the one before ended), and answered
// CORRUPT_MESSAGE rather than served at the wrong offsets.
func TestDamagedBatchBaseOffsetIsReported(t *testing.T) {
	h, size := threeBatches(t)
	h.corruptAt(2*size+7, []byte{9}) // the third batch's base offset becomes 9
	if r := h.consumeAt(0); r.Error != ErrNone || len(r.Records) != 2 {
		t.Fatalf("consume at 0: %v with %d records, want the two sound batches", r.Error, len(r.Records))
	}
	if r := h.consumeAt(2); r.Error != ErrCorruptMessage || len(r.Records) != 0 {
		t.Fatalf("consume at the damaged batch: %v with %d records, want CORRUPT_MESSAGE", r.Error, len(r.Records))
	}
}
