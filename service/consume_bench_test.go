package service

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
)

// consumeResult is 500 plain records of 100-byte values, as one Consume
// answer holds them.
func consumeResult() core.ConsumeResult {
	res := core.ConsumeResult{HighWatermark: 500, NextOffset: 500}
	for i := range 500 {
		res.Records = append(res.Records, record.Record{Offset: int64(i), LeaderEpoch: 3, TimestampMs: 1_700_000_000_000 + int64(i),
			Value: bytes.Repeat([]byte{'v'}, 100)})
	}
	return res
}

// BenchmarkConsumeAnswer converts and encodes a Consume answer of 500 plain
// records: the cost of the producer fields each consumed record carries
// (a plain record's sequence -1 is 11 bytes on the wire). It reports the
// encoded bytes per record.
func BenchmarkConsumeAnswer(b *testing.B) {
	res := consumeResult()
	var size int
	b.ReportAllocs()
	for b.Loop() {
		msg := consumeToProto(res)
		out, err := proto.Marshal(msg)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size)/500, "wire-bytes/record")
}

// The plain record's producer fields on the wire: 0 and 0 are left out,
// the sequence -1 is a tag and a 10-byte varint.
func TestConsumedPlainRecordWireCost(t *testing.T) {
	r := consumeToProto(core.ConsumeResult{Records: []record.Record{{Offset: 1, Value: []byte("v")}}}).GetRecords()[0]
	with := proto.Size(r)
	r.Sequence = 0
	if d := with - proto.Size(r); d != 11 {
		t.Fatalf("sequence -1 costs %d bytes, want 11", d)
	}
}
