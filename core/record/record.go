// Package record is the on-disk and on-wire record batch format.
//
// A batch is stored, fetched and appended by followers as the same bytes. Layout
// (big-endian), modelled on Kafka's v2 batch:
//
//	baseOffset      int64   offset of the first record
//	batchLength     int32   bytes that follow this field
//	leaderEpoch     int32   epoch of the leader that appended the batch
//	crc             uint32  CRC-32C (Castagnoli) of everything after this field
//	attributes      int16   bit 8 (0x0100): format v1, producer fields follow
//	                        recordCount; every other bit 0
//	lastOffsetDelta int32   offset of the last record minus baseOffset
//	firstTimestamp  int64   ms since the epoch
//	maxTimestamp    int64
//	recordCount     int32
//	producerId      int64   format v1 only (issue 21): the idempotent
//	producerEpoch   int16   producer's ID and epoch, and the sequence
//	baseSequence    int32   number of the first record
//	records...              each: varint length, then timestampDelta varint,
//	                        offsetDelta varint, key (varint length, -1 = null),
//	                        value (same), header count varint, headers
//	                        (key string, value bytes, both varint-length-prefixed)
//
// Varints are zig-zag encoded, as in Kafka. A header value may be null (-1).
//
// baseOffset and leaderEpoch sit before the CRC so the leader can stamp them on a
// batch it received without re-computing the checksum (as Kafka does).
//
// Format v0 (attributes 0) is the batch of a plain produce and every batch
// written before issue 21; v1 adds the producer fields after the v0 header,
// so every v0 field keeps its position and a reader of headers (the index,
// recovery, the segment scan) reads both alike. A log holds both, in any
// order. The producer fields are covered by the CRC. Kafka keeps them in
// every v2 batch (-1 when unused); replicad spends the 14 bytes only on
// batches that carry a producer.
package record

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// HeaderSize is the size of the batch header up to and including recordCount.
const HeaderSize = 8 + 4 + 4 + 4 + 2 + 4 + 8 + 8 + 4

// ProducerFieldsSize is the size of the v1 producer fields after recordCount.
const ProducerFieldsSize = 8 + 2 + 4

// AttrProducer is the attributes bit of a v1 batch: producer fields follow
// recordCount.
const AttrProducer = 0x0100

// LogOverhead is the size of baseOffset and batchLength: the bytes to read
// before the size of a batch is known (Kafka's Records.LOG_OVERHEAD).
const LogOverhead = 8 + 4

// MaxBatchSize bounds a batch's total size. A length field above it cannot
// have been written by replicad (whose batch limit is far lower), so it is
// read as corruption rather than as a batch to wait for.
const MaxBatchSize = 64 << 20

// Field positions in the header.
const (
	baseOffsetPos      = 0
	batchLengthPos     = 8
	leaderEpochPos     = 12
	crcPos             = 16
	attributesPos      = 20
	lastOffsetDeltaPos = 22
	firstTimestampPos  = 26
	maxTimestampPos    = 34
	recordCountPos     = 42
	producerIDPos      = HeaderSize
	producerEpochPos   = HeaderSize + 8
	baseSequencePos    = HeaderSize + 10
)

// Producer is the idempotent producer of a batch: its ID, its epoch, and the
// sequence number of the batch's first record (the producer numbers its
// records per partition from 0). NoProducer marks a plain batch.
type Producer struct {
	ID           int64
	Epoch        int16
	BaseSequence int32
}

// NoProducer is the Producer of a v0 (plain) batch, with Kafka's -1s.
var NoProducer = Producer{ID: -1, Epoch: -1, BaseSequence: -1}

// IsSet reports whether p names a producer (an ID of 0 or more).
func (p Producer) IsSet() bool { return p.ID >= 0 }

// Errors returned when reading batches.
var (
	// ErrTruncated: the buffer ends inside a batch (a torn write, or a read cut at max bytes).
	ErrTruncated = errors.New("record: truncated batch")
	// ErrCorrupt: the batch's length is impossible or its CRC does not match.
	ErrCorrupt = errors.New("record: corrupt batch")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is an application header on a record.
type Header struct {
	Key   string
	Value []byte
}

// Record is one decoded record.
type Record struct {
	Offset      int64 // absolute offset (set when decoded from a batch)
	LeaderEpoch int32 // the batch's leader epoch (set when decoded)
	TimestampMs int64
	Key         []byte // nil = null key
	Value       []byte // nil = null value
	Headers     []Header
	// Set when decoded from a v1 batch: its producer, and the record's
	// sequence number (the batch's base sequence plus the record's offset
	// delta). Zero for a v0 batch: issued producer IDs start at 1.
	ProducerID    int64
	ProducerEpoch int16
	Sequence      int32
}

// Build encodes records into one v0 batch with baseOffset 0 and leaderEpoch -1;
// the leader stamps both on append. A record with TimestampMs 0 gets nowMs.
// records must not be empty: a batch without records fails Verify.
func Build(records []Record, nowMs int64) Batch {
	return BuildProducer(records, nowMs, NoProducer)
}

// BuildProducer is Build for an idempotent producer's batch: a v1 batch
// carrying p when p.IsSet, else a v0 batch.
func BuildProducer(records []Record, nowMs int64, p Producer) Batch {
	first, maxTs := int64(0), int64(0)
	hdr := HeaderSize
	if p.IsSet() {
		hdr += ProducerFieldsSize
	}
	size := hdr
	for i := range records {
		ts := timestamp(records[i], nowMs)
		if i == 0 {
			first, maxTs = ts, ts
		}
		maxTs = max(maxTs, ts)
		body := bodySize(&records[i], ts-first, int64(i))
		size += varintLen(int64(body)) + body
	}

	b := make([]byte, hdr, size)
	if p.IsSet() {
		binary.BigEndian.PutUint16(b[attributesPos:], AttrProducer)
		binary.BigEndian.PutUint64(b[producerIDPos:], uint64(p.ID))
		binary.BigEndian.PutUint16(b[producerEpochPos:], uint16(p.Epoch))
		binary.BigEndian.PutUint32(b[baseSequencePos:], uint32(p.BaseSequence))
	}
	binary.BigEndian.PutUint32(b[batchLengthPos:], uint32(size-LogOverhead))
	binary.BigEndian.PutUint32(b[leaderEpochPos:], 0xffffffff) // -1
	binary.BigEndian.PutUint32(b[lastOffsetDeltaPos:], uint32(int32(len(records)-1)))
	binary.BigEndian.PutUint64(b[firstTimestampPos:], uint64(first))
	binary.BigEndian.PutUint64(b[maxTimestampPos:], uint64(maxTs))
	binary.BigEndian.PutUint32(b[recordCountPos:], uint32(len(records)))
	for i := range records {
		r := &records[i]
		tsDelta := timestamp(*r, nowMs) - first
		b = binary.AppendVarint(b, int64(bodySize(r, tsDelta, int64(i))))
		b = binary.AppendVarint(b, tsDelta)
		b = binary.AppendVarint(b, int64(i))
		b = appendBytes(b, r.Key)
		b = appendBytes(b, r.Value)
		b = binary.AppendVarint(b, int64(len(r.Headers)))
		for _, h := range r.Headers {
			b = binary.AppendVarint(b, int64(len(h.Key)))
			b = append(b, h.Key...)
			b = appendBytes(b, h.Value)
		}
	}
	binary.BigEndian.PutUint32(b[crcPos:], crc32.Checksum(b[attributesPos:], castagnoli))
	return b
}

func timestamp(r Record, nowMs int64) int64 {
	if r.TimestampMs == 0 {
		return nowMs
	}
	return r.TimestampMs
}

// bodySize is the size of a record after its length prefix.
func bodySize(r *Record, tsDelta, offsetDelta int64) int {
	n := varintLen(tsDelta) + varintLen(offsetDelta) + bytesLen(r.Key) + bytesLen(r.Value) +
		varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += varintLen(int64(len(h.Key))) + len(h.Key) + bytesLen(h.Value)
	}
	return n
}

// appendBytes appends a nullable byte string: its varint length (-1 for nil), then the bytes.
func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	return append(binary.AppendVarint(b, int64(len(v))), v...)
}

func bytesLen(v []byte) int {
	if v == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(v))) + len(v)
}

// varintLen is the size of x as a zig-zag varint.
func varintLen(x int64) int {
	ux := uint64(x)<<1 ^ uint64(x>>63)
	n := 1
	for ux >= 0x80 {
		ux >>= 7
		n++
	}
	return n
}

// Batch is a view over one encoded batch. The accessors and setters expect at
// least HeaderSize bytes: a batch that came from Next and passed Verify.
type Batch []byte

func (b Batch) BaseOffset() int64 { return int64(binary.BigEndian.Uint64(b[baseOffsetPos:])) }
func (b Batch) LastOffset() int64 { return b.BaseOffset() + int64(b.LastOffsetDelta()) }
func (b Batch) NextOffset() int64 { return b.LastOffset() + 1 }
func (b Batch) LeaderEpoch() int32 {
	return int32(binary.BigEndian.Uint32(b[leaderEpochPos:]))
}
func (b Batch) RecordCount() int32 { return int32(binary.BigEndian.Uint32(b[recordCountPos:])) }
func (b Batch) MaxTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b[maxTimestampPos:]))
}

// Attributes is the batch's attributes field.
func (b Batch) Attributes() int16 { return int16(binary.BigEndian.Uint16(b[attributesPos:])) }

// HasProducer reports whether b is a v1 batch, with producer fields.
func (b Batch) HasProducer() bool { return b.Attributes()&AttrProducer != 0 }

// headerLen is where b's records start: after the producer fields in v1.
func (b Batch) headerLen() int {
	if b.HasProducer() {
		return HeaderSize + ProducerFieldsSize
	}
	return HeaderSize
}

// Producer returns a v1 batch's producer fields, and NoProducer for a v0
// batch. The batch must have passed Verify (or VerifyChecksum).
func (b Batch) Producer() Producer {
	if !b.HasProducer() {
		return NoProducer
	}
	return Producer{
		ID:           int64(binary.BigEndian.Uint64(b[producerIDPos:])),
		Epoch:        int16(binary.BigEndian.Uint16(b[producerEpochPos:])),
		BaseSequence: int32(binary.BigEndian.Uint32(b[baseSequencePos:])),
	}
}

// LastSequence is the sequence number of a v1 batch's last record: the base
// sequence plus the last offset delta, wrapping past MaxInt32 to 0 as
// Kafka's does. -1 for a v0 batch.
func (b Batch) LastSequence() int32 {
	p := b.Producer()
	if !p.IsSet() {
		return -1
	}
	return IncrementSequence(p.BaseSequence, b.LastOffsetDelta())
}

// IncrementSequence adds n to sequence s, wrapping past MaxInt32 to 0.
func IncrementSequence(s, n int32) int32 {
	if s > math.MaxInt32-n {
		return n - (math.MaxInt32 - s) - 1
	}
	return s + n
}

// LastOffsetDelta is the offset of the last record minus the base offset.
func (b Batch) LastOffsetDelta() int32 {
	return int32(binary.BigEndian.Uint32(b[lastOffsetDeltaPos:]))
}

// FirstTimestamp is the timestamp the records' deltas are relative to.
func (b Batch) FirstTimestamp() int64 {
	return int64(binary.BigEndian.Uint64(b[firstTimestampPos:]))
}

// SetBaseOffset and SetLeaderEpoch write fields outside the CRC: the checksum stays valid.
func (b Batch) SetBaseOffset(o int64) { binary.BigEndian.PutUint64(b[baseOffsetPos:], uint64(o)) }
func (b Batch) SetLeaderEpoch(e int32) {
	binary.BigEndian.PutUint32(b[leaderEpochPos:], uint32(e))
}

// Verify checks the length field and the CRC, then that the records parse:
// at least one record, exactly recordCount of them filling the batch, offset
// deltas strictly increasing within [0, lastOffsetDelta]. A batch that passes
// Verify decodes with Records. Failures wrap ErrCorrupt.
func (b Batch) Verify() error {
	if err := b.VerifyChecksum(); err != nil {
		return err
	}
	if b.RecordCount() < 1 {
		return fmt.Errorf("%w: %d records", ErrCorrupt, b.RecordCount())
	}
	return b.decode(nil)
}

// VerifyChecksum is the part of Verify that finds damage to a batch that
// passed Verify once: its length field and its CRC, without decoding the
// records. A batch read back from a log (appended verified) that passes it
// is the batch appended; core checks this much of every batch it serves
// (verifyBatches).
func (b Batch) VerifyChecksum() error {
	if len(b) < HeaderSize {
		return fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorrupt, len(b))
	}
	if n := int(binary.BigEndian.Uint32(b[batchLengthPos:])); n != len(b)-LogOverhead {
		return fmt.Errorf("%w: length field %d, batch holds %d", ErrCorrupt, n, len(b)-LogOverhead)
	}
	stored, computed := binary.BigEndian.Uint32(b[crcPos:]), crc32.Checksum(b[attributesPos:], castagnoli)
	if stored != computed {
		return fmt.Errorf("%w: crc %08x, computed %08x", ErrCorrupt, stored, computed)
	}
	if a := b.Attributes(); a&^AttrProducer != 0 {
		return fmt.Errorf("%w: attributes %#04x", ErrCorrupt, uint16(a))
	}
	if len(b) < b.headerLen() {
		return fmt.Errorf("%w: %d bytes, shorter than the v1 header", ErrCorrupt, len(b))
	}
	return nil
}

// Records decodes the batch's records with absolute offsets. It checks the
// structure but not the CRC (call Verify). Keys, values and header values
// alias b rather than being copied.
func (b Batch) Records() ([]Record, error) {
	if len(b) < HeaderSize {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", ErrCorrupt, len(b))
	}
	if n := int(binary.BigEndian.Uint32(b[batchLengthPos:])); n != len(b)-LogOverhead {
		return nil, fmt.Errorf("%w: length field %d, batch holds %d", ErrCorrupt, n, len(b)-LogOverhead)
	}
	// Every record takes at least minRecordSize bytes, so a huge count in a
	// corrupt header cannot make us allocate more than the batch justifies.
	if len(b) < b.headerLen() {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the v1 header", ErrCorrupt, len(b))
	}
	count := int(max(0, b.RecordCount()))
	out := make([]Record, 0, min(count, (len(b)-b.headerLen())/minRecordSize))
	if err := b.decode(&out); err != nil {
		return nil, err
	}
	return out, nil
}

// minRecordSize is the smallest encoded record: one byte for each of length,
// timestampDelta, offsetDelta, key length, value length and header count.
const minRecordSize = 6

// decode walks the records. With out nil it only validates (no allocation).
func (b Batch) decode(out *[]Record) error {
	count := b.RecordCount()
	if count < 0 {
		return fmt.Errorf("%w: record count %d", ErrCorrupt, count)
	}
	base, epoch := b.BaseOffset(), b.LeaderEpoch()
	prod := b.Producer()
	first, lastDelta := b.FirstTimestamp(), int64(b.LastOffsetDelta())
	d := decoder{buf: b[b.headerLen():]}
	prevDelta := int64(-1)
	for i := int32(0); i < count; i++ {
		length := d.varint()
		if d.err != nil || length < 0 || length > int64(len(d.buf)) {
			return fmt.Errorf("%w: record %d: bad length", ErrCorrupt, i)
		}
		rd := decoder{buf: d.buf[:length]}
		d.buf = d.buf[length:]
		var r Record
		r.TimestampMs = first + rd.varint()
		offsetDelta := rd.varint()
		r.Key = rd.bytes()
		r.Value = rd.bytes()
		nh := rd.varint()
		if rd.err == nil && (nh < 0 || nh > int64(len(rd.buf))/2) {
			rd.err = ErrCorrupt // each header takes at least two bytes
		}
		if out != nil && nh > 0 && rd.err == nil {
			r.Headers = make([]Header, 0, nh)
		}
		for j := int64(0); j < nh && rd.err == nil; j++ {
			key, value := rd.bytes(), rd.bytes()
			if key == nil {
				rd.err = ErrCorrupt // header keys are strings: never null
			}
			if out != nil {
				r.Headers = append(r.Headers, Header{Key: string(key), Value: value})
			}
		}
		if rd.err != nil || len(rd.buf) != 0 {
			return fmt.Errorf("%w: record %d: malformed", ErrCorrupt, i)
		}
		if offsetDelta <= prevDelta || offsetDelta > lastDelta {
			return fmt.Errorf("%w: record %d: offset delta %d out of order", ErrCorrupt, i, offsetDelta)
		}
		prevDelta = offsetDelta
		if out != nil {
			r.Offset, r.LeaderEpoch = base+offsetDelta, epoch
			if prod.IsSet() {
				r.ProducerID, r.ProducerEpoch = prod.ID, prod.Epoch
				r.Sequence = IncrementSequence(prod.BaseSequence, int32(offsetDelta))
			}
			*out = append(*out, r)
		}
	}
	if len(d.buf) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrCorrupt, len(d.buf))
	}
	return nil
}

// decoder reads varint fields; the first failure sticks in err and later
// reads return zero values, so callers check once.
type decoder struct {
	buf []byte
	err error
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.buf)
	if n <= 0 {
		d.err = ErrCorrupt
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// bytes reads a nullable byte string; the result aliases the buffer and is
// capped so that appending to it cannot overwrite the bytes that follow.
func (d *decoder) bytes() []byte {
	n := d.varint()
	switch {
	case d.err != nil:
		return nil
	case n == -1:
		return nil
	case n < -1 || n > int64(len(d.buf)):
		d.err = ErrCorrupt
		return nil
	}
	v := d.buf[:n:n]
	d.buf = d.buf[n:]
	return v
}

// Size returns the total size of the batch whose first LogOverhead bytes are
// in header: ErrTruncated when header is shorter than that, ErrCorrupt when
// the length field is impossible.
func Size(header []byte) (int, error) {
	if len(header) < LogOverhead {
		return 0, ErrTruncated
	}
	n := int64(int32(binary.BigEndian.Uint32(header[batchLengthPos:])))
	if n < HeaderSize-LogOverhead || n > MaxBatchSize-LogOverhead {
		return 0, fmt.Errorf("%w: length field %d", ErrCorrupt, n)
	}
	return int(n) + LogOverhead, nil
}

// Next splits the first batch off buf. It returns ErrTruncated when buf ends
// inside the batch and ErrCorrupt when the header is impossible; it does not
// verify the CRC (call Verify).
func Next(buf []byte) (b Batch, rest []byte, err error) {
	size, err := Size(buf)
	if err != nil {
		return nil, buf, err
	}
	if len(buf) < size {
		return nil, buf, ErrTruncated
	}
	return Batch(buf[:size:size]), buf[size:], nil
}
