package service

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/protoconv"
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
// (none for a plain record, whose fields are all 0). It reports the encoded
// bytes per record.
func BenchmarkConsumeAnswer(b *testing.B) {
	res := consumeResult()
	var size int
	b.ReportAllocs()
	for b.Loop() {
		msg := protoconv.ConsumeToProto(res)
		out, err := proto.Marshal(msg)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size)/500, "wire-bytes/record")
}

// A plain record's producer fields cost nothing on the wire: all three are
// 0, which proto3 leaves out. (The first contract had sequence -1: 11 bytes
// a record, +9.5% on a 100-byte record.)
func TestConsumedPlainRecordWireCost(t *testing.T) {
	r := protoconv.ConsumeToProto(core.ConsumeResult{Records: []record.Record{{Offset: 1, Value: []byte("v")}}}).GetRecords()[0]
	with := proto.Size(r)
	r.ProducerId, r.ProducerEpoch, r.Sequence = 0, 0, 0
	if d := with - proto.Size(r); d != 0 {
		t.Fatalf("a plain record's producer fields cost %d bytes, want 0", d)
	}
}
