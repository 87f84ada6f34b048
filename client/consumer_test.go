package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestConsumerWholeTopic ensures a Consumer without Partitions reads every
// partition from the earliest offset (resolved from the answer where the
// broker predates Consume's -2) up to the high watermark, with the
// records' producer fields.
func TestConsumerWholeTopic(t *testing.T) {
	c := newFakeCluster(t, 2, 3)
	c.setLeader(1, 2)
	cl, p := testProducer(t, c, ProducerConfig{})
	var recs []*Record
	for i := range 30 {
		recs = append(recs, &Record{Topic: "t", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i))})
	}
	if err := p.ProduceSync(context.Background(), recs...); err != nil {
		t.Fatal(err)
	}
	k, err := NewConsumer(context.Background(), cl, ConsumerConfig{Topic: "t", Offset: OffsetEarliest})
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Partitions(); len(got) != 3 {
		t.Fatalf("partitions %v", got)
	}
	seen := map[string]int32{}
	for polls := 0; !k.CaughtUp(); polls++ {
		if polls > 100 {
			t.Fatal("not caught up after 100 polls")
		}
		f, err := k.Poll(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.Records {
			seen[string(r.Value)] = r.Partition
			if r.ProducerID == 0 || r.Sequence < 0 {
				t.Fatalf("record %s: producer %d sequence %d", r.Value, r.ProducerID, r.Sequence)
			}
		}
	}
	for _, r := range recs {
		if got, ok := seen[string(r.Value)]; !ok || got != KeyPartition(r.Key, 3) {
			t.Fatalf("%s read from partition %d (found %v), want %d", r.Value, got, ok, KeyPartition(r.Key, 3))
		}
	}
}

// TestConsumerOffsetOutOfRangeNamesTheRange ensures OFFSET_OUT_OF_RANGE
// comes back as an *Error naming the valid offsets.
func TestConsumerOffsetOutOfRangeNamesTheRange(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	cl, p := testProducer(t, c, ProducerConfig{})
	if err := p.ProduceSync(context.Background(), &Record{Topic: "t", ManualPartition: true, Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	k, err := NewConsumer(context.Background(), cl, ConsumerConfig{Topic: "t", Partitions: []int32{0}, Offset: 7})
	if err != nil {
		t.Fatal(err)
	}
	_, err = k.Poll(context.Background())
	var cerr *Error
	if !errors.As(err, &cerr) || !strings.Contains(err.Error(), "OFFSET_OUT_OF_RANGE") || !strings.Contains(err.Error(), "[0, 1)") {
		t.Fatalf("err %v", err)
	}
	// Latest starts at the high watermark: nothing to read.
	k, _ = NewConsumer(context.Background(), cl, ConsumerConfig{Topic: "t", Partitions: []int32{0}, Offset: OffsetLatest})
	f, err := k.Poll(context.Background())
	if err != nil || len(f.Records) != 0 || k.Position(0) != 1 {
		t.Fatalf("latest: %v records, position %d, err %v", len(f.Records), k.Position(0), err)
	}
}
