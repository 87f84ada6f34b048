package client

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestMurmur2MatchesKafka ensures the hash equals Kafka's for the keys of
// Kafka's own UtilsTest.testMurmur2.
func TestMurmur2MatchesKafka(t *testing.T) {
	for key, want := range map[string]int32{
		"21":                         -973932308,
		"foobar":                     -790332482,
		"a-little-bit-long-string":   -985981536,
		"a-little-bit-longer-string": -1486304829,
		"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
		"abc": 479470107,
	} {
		if got := Murmur2([]byte(key)); got != want {
			t.Errorf("murmur2(%q) = %d, want %d", key, got, want)
		}
	}
}

// TestKeyPartition ensures keys map as Kafka's default partitioner maps
// them: toPositive(murmur2(key)) % partitions.
func TestKeyPartition(t *testing.T) {
	for _, c := range []struct {
		key  string
		n    int32
		want int32
	}{
		// toPositive(-973932308) = 1173551340; % 3 = 0, % 10 = 0, % 7 = 1
		{"21", 3, 1173551340 % 3},
		{"foobar", 10, (-790332482 & 0x7fffffff) % 10},
		{"abc", 7, 479470107 % 7},
	} {
		if got := KeyPartition([]byte(c.key), c.n); got != c.want {
			t.Errorf("KeyPartition(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
}

// TestStickyPartitionerMovesOnWhenABatchCloses ensures keyless records
// stick to one partition until its batch closes, then go to the next
// partition round-robin (KIP-480), and keyed ones follow their key.
func TestStickyPartitionerMovesOnWhenABatchCloses(t *testing.T) {
	c := newFakeCluster(t, 1, 4)
	_, p := testProducer(t, c, ProducerConfig{BatchRecords: 5, Linger: time.Hour})
	var recs []*Record
	for i := range 20 {
		r := &Record{Topic: "t", Value: []byte(fmt.Sprint(i))}
		recs = append(recs, r)
		p.Produce(context.Background(), r, nil)
	}
	keyed := &Record{Topic: "t", Key: []byte("foobar"), Value: []byte("k")}
	p.Produce(context.Background(), keyed, nil)
	if err := p.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		first := recs[i/5*5].Partition
		if r.Partition != first {
			t.Fatalf("record %d on partition %d, its batch's first on %d", i, r.Partition, first)
		}
		if i >= 5 && i%5 == 0 && r.Partition != (recs[i-1].Partition+1)%4 {
			t.Fatalf("batch %d on partition %d after %d, want the next one", i/5, r.Partition, recs[i-1].Partition)
		}
	}
	if want := KeyPartition([]byte("foobar"), 4); keyed.Partition != want {
		t.Fatalf("keyed record on %d, want %d", keyed.Partition, want)
	}
}
