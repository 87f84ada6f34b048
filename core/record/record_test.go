package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"reflect"
	"testing"
)

func sampleRecords() []Record {
	return []Record{
		{TimestampMs: 1700000000000, Key: []byte("k1"), Value: []byte("v1")},
		{Key: nil, Value: []byte("null key")},
		{Key: []byte("null value"), Value: nil},
		{Key: []byte{}, Value: []byte{}, TimestampMs: 1600000000000},
		{Value: bytes.Repeat([]byte("x"), 300), Headers: []Header{
			{Key: "h1", Value: []byte("a")},
			{Key: "", Value: nil},
			{Key: "h3", Value: []byte{}},
		}},
	}
}

// TestRoundTrip ensures Build then Records gives back keys, values, nulls, headers and timestamps with stamped offsets.
func TestRoundTrip(t *testing.T) {
	in := sampleRecords()
	const now = 1800000000000
	b := Build(in, now)
	b.SetBaseOffset(100)
	b.SetLeaderEpoch(7)
	if err := b.Verify(); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if b.BaseOffset() != 100 || b.LastOffset() != 104 || b.NextOffset() != 105 {
		t.Fatalf("offsets %d..%d next %d", b.BaseOffset(), b.LastOffset(), b.NextOffset())
	}
	if b.LeaderEpoch() != 7 || b.RecordCount() != 5 || b.MaxTimestamp() != now {
		t.Fatalf("epoch %d count %d maxTs %d", b.LeaderEpoch(), b.RecordCount(), b.MaxTimestamp())
	}
	out, err := b.Records()
	if err != nil {
		t.Fatalf("Records: %v", err)
	}
	want := make([]Record, len(in))
	for i, r := range in {
		r.Offset, r.LeaderEpoch = int64(100+i), 7
		if r.TimestampMs == 0 {
			r.TimestampMs = now
		}
		want[i] = r
	}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", out, want)
	}
	// Null and empty must stay distinct.
	if out[1].Key != nil || out[2].Value != nil || out[3].Key == nil || out[3].Value == nil {
		t.Fatalf("null/empty confused: %+v", out[1:4])
	}
}

// TestBuildDefaults ensures a fresh batch has base offset 0 and epoch -1 until stamped.
func TestBuildDefaults(t *testing.T) {
	b := Build([]Record{{Value: []byte("v")}}, 5)
	if b.BaseOffset() != 0 || b.LeaderEpoch() != -1 || b.LastOffset() != 0 {
		t.Fatalf("base %d epoch %d last %d", b.BaseOffset(), b.LeaderEpoch(), b.LastOffset())
	}
}

// TestStampKeepsCRC ensures SetBaseOffset and SetLeaderEpoch leave the CRC valid.
func TestStampKeepsCRC(t *testing.T) {
	b := Build(sampleRecords(), 1)
	crc := binary.BigEndian.Uint32(b[crcPos:])
	b.SetBaseOffset(1 << 40)
	b.SetLeaderEpoch(123456)
	if err := b.Verify(); err != nil {
		t.Fatalf("Verify after stamping: %v", err)
	}
	if got := binary.BigEndian.Uint32(b[crcPos:]); got != crc {
		t.Fatalf("crc changed %08x -> %08x", crc, got)
	}
	if b.BaseOffset() != 1<<40 || b.LeaderEpoch() != 123456 {
		t.Fatalf("stamp lost: %d %d", b.BaseOffset(), b.LeaderEpoch())
	}
}

// TestVerifyDetectsCorruption ensures any flipped bit under or in the CRC, or a wrong length, fails Verify.
func TestVerifyDetectsCorruption(t *testing.T) {
	good := Build(sampleRecords(), 1)
	for i := crcPos; i < len(good); i++ {
		b := bytes.Clone(good)
		b[i] ^= 0x10
		if err := Batch(b).Verify(); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("flip at %d: Verify = %v, want ErrCorrupt", i, err)
		}
	}
	if err := Batch(good[:len(good)-1]).Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("short batch: Verify = %v", err)
	}
	empty := Build(nil, 1)
	if err := empty.Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("batch without records: Verify = %v", err)
	}
}

// TestNext ensures Next splits batches, and reports ErrTruncated mid-batch and ErrCorrupt for an impossible length.
func TestNext(t *testing.T) {
	a := Build([]Record{{Value: []byte("a")}}, 1)
	b := Build([]Record{{Value: []byte("bb")}, {Value: []byte("cc")}}, 1)
	buf := append(bytes.Clone(a), b...)

	first, rest, err := Next(buf)
	if err != nil || !bytes.Equal(first, a) {
		t.Fatalf("first: %v", err)
	}
	second, rest, err := Next(rest)
	if err != nil || !bytes.Equal(second, b) || len(rest) != 0 {
		t.Fatalf("second: %v, %d left", err, len(rest))
	}

	for _, n := range []int{0, 1, LogOverhead - 1, LogOverhead, HeaderSize, len(a) - 1} {
		if _, _, err := Next(a[:n]); !errors.Is(err, ErrTruncated) {
			t.Fatalf("Next(%d of %d bytes) = %v, want ErrTruncated", n, len(a), err)
		}
	}
	for _, length := range []int32{-1, 0, HeaderSize - LogOverhead - 1, MaxBatchSize} {
		bad := bytes.Clone(a)
		binary.BigEndian.PutUint32(bad[batchLengthPos:], uint32(length))
		if _, _, err := Next(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("length %d: Next = %v, want ErrCorrupt", length, err)
		}
	}
}

// TestRecordsRejectsMalformed ensures structural damage under a valid CRC fails Verify and Records.
func TestRecordsRejectsMalformed(t *testing.T) {
	good := Build(sampleRecords(), 1)
	recount := func(b []byte) Batch {
		binary.BigEndian.PutUint32(b[crcPos:], crc32.Checksum(b[attributesPos:], castagnoli))
		return b
	}
	cases := map[string]func(b []byte) []byte{
		"count too high": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[recordCountPos:], 6)
			return b
		},
		"count too low": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[recordCountPos:], 4)
			return b
		},
		"last delta too low": func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[lastOffsetDeltaPos:], 3)
			return b
		},
		"record length past end": func(b []byte) []byte {
			b[HeaderSize] = 0x7e // varint 63, longer than the first record
			return b
		},
	}
	for name, damage := range cases {
		b := recount(damage(bytes.Clone(good)))
		if err := b.Verify(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Verify = %v", name, err)
		}
		if _, err := b.Records(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Records = %v", name, err)
		}
	}
}

// FuzzRecords ensures decoding arbitrary bytes never panics and a batch passing Verify decodes fully.
func FuzzRecords(f *testing.F) {
	f.Add([]byte(Build(sampleRecords(), 1)), false)
	f.Add([]byte(Build([]Record{{Value: []byte("v")}}, 1)), true)
	f.Add(make([]byte, HeaderSize), true)
	f.Fuzz(func(t *testing.T, data []byte, fixCRC bool) {
		if len(data) >= LogOverhead {
			// Make the length field agree so decoding gets past the framing.
			binary.BigEndian.PutUint32(data[batchLengthPos:], uint32(len(data)-LogOverhead))
		}
		if fixCRC && len(data) >= HeaderSize {
			binary.BigEndian.PutUint32(data[crcPos:], crc32.Checksum(data[attributesPos:], castagnoli))
		}
		b, _, err := Next(data)
		if err != nil {
			return
		}
		recs, decodeErr := b.Records()
		if b.Verify() == nil && (decodeErr != nil || len(recs) != int(b.RecordCount())) {
			t.Fatalf("verified batch does not decode: %v", decodeErr)
		}
	})
}

func TestProducerBatchRoundTrip(t *testing.T) {
	recs := []Record{{Key: []byte("k"), Value: []byte("a")}, {Value: []byte("b")}, {Value: []byte("c")}}
	p := Producer{ID: 7, Epoch: 3, BaseSequence: 10}
	b := BuildProducer(recs, 1000, p)
	if err := b.Verify(); err != nil {
		t.Fatal(err)
	}
	if !b.HasProducer() || b.Producer() != p {
		t.Fatalf("producer %+v, want %+v", b.Producer(), p)
	}
	if got := b.LastSequence(); got != 12 {
		t.Fatalf("last sequence %d, want 12", got)
	}
	if len(b) != len(Build(recs, 1000))+ProducerFieldsSize {
		t.Fatalf("v1 batch is %d bytes, v0 %d: want %d more", len(b), len(Build(recs, 1000)), ProducerFieldsSize)
	}
	b.SetBaseOffset(100)
	got, err := b.Records()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got {
		if r.Offset != int64(100+i) || string(r.Value) != string(recs[i].Value) || r.ProducerID != 7 || r.ProducerEpoch != 3 || r.Sequence != int32(10+i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}
	// A v0 batch reports no producer.
	v0 := Build(recs, 1000)
	if v0.HasProducer() || v0.Producer() != NoProducer || v0.LastSequence() != -1 {
		t.Fatalf("v0 batch: producer %+v", v0.Producer())
	}
	// A corrupt attributes field (an unknown bit) fails the checksum or the check after it.
	bad := append(Batch(nil), b...)
	bad[attributesPos] |= 0x02
	if err := bad.Verify(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("unknown attribute bit: %v", err)
	}
}

func TestSequenceWraps(t *testing.T) {
	if got := IncrementSequence(math.MaxInt32, 1); got != 0 {
		t.Fatalf("MaxInt32+1 = %d, want 0", got)
	}
	if got := IncrementSequence(math.MaxInt32-1, 3); got != 1 {
		t.Fatalf("MaxInt32-1+3 = %d, want 1", got)
	}
	b := BuildProducer([]Record{{Value: []byte("a")}, {Value: []byte("b")}}, 1, Producer{ID: 1, BaseSequence: math.MaxInt32})
	if got := b.LastSequence(); got != 0 {
		t.Fatalf("last sequence %d, want 0", got)
	}
}
