package client

import (
	"time"

	"github.com/replicad/replicad/core/record"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Record is one record to produce, or one consumed.
type Record struct {
	Topic string
	// Partition: with ManualPartition set, the partition the record goes
	// to; otherwise the producer's partitioner picks it (by Key, else
	// sticky) and sets it. A consumed record's partition.
	Partition       int32
	ManualPartition bool
	// Key: nil is no key (the record is spread by the sticky
	// partitioner); an empty, non-nil key is hashed like any other.
	Key     []byte
	Value   []byte
	Headers []Header

	// Set when the record was delivered or consumed.
	Offset int64
	// Timestamp: when the leader appended it (the broker stamps records).
	Timestamp   time.Time
	LeaderEpoch int32
	// The idempotent producer's ID and epoch and the record's sequence
	// number on its partition; 0, 0, -1 for a plain produce.
	ProducerID    int64
	ProducerEpoch int16
	Sequence      int32
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// recordOverhead bounds a record's encoding beyond its key, value and
// headers: length, timestamp and offset deltas, key and value lengths,
// header count.
const recordOverhead = 5 + 10 + 5 + 5 + 5 + 5

// batchHeaderSize is the v1 batch header: the v0 one and the producer
// fields.
const batchHeaderSize = record.HeaderSize + record.ProducerFieldsSize

func (r *Record) size() int {
	n := len(r.Key) + len(r.Value) + recordOverhead
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return n
}

func (r *Record) wire() *replicadv1.Record {
	w := &replicadv1.Record{Key: r.Key, Value: r.Value}
	for _, h := range r.Headers {
		w.Headers = append(w.Headers, &replicadv1.Header{Key: h.Key, Value: h.Value})
	}
	return w
}

func fromConsumed(topic string, partition int32, c *replicadv1.ConsumedRecord) *Record {
	r := &Record{Topic: topic, Partition: partition, Key: c.GetKey(), Value: c.GetValue(), Offset: c.GetOffset(),
		Timestamp: time.UnixMilli(c.GetTimestampMs()), LeaderEpoch: c.GetLeaderEpoch(),
		ProducerID: c.GetProducerId(), ProducerEpoch: int16(c.GetProducerEpoch()), Sequence: c.GetSequence()}
	for _, h := range c.GetHeaders() {
		r.Headers = append(r.Headers, Header{Key: h.GetKey(), Value: h.GetValue()})
	}
	return r
}
