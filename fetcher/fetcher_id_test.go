package fetcher

import (
	"testing"

	"github.com/replicad/replicad/core/tp"
)

// FetcherID matches Kafka's abs(31 * topic.hashCode + partition) % numFetchers.
func TestFetcherIDMatchesKafka(t *testing.T) {
	// "orders".hashCode() == -1008770331 in Java.
	if got := javaStringHash("orders"); got != -1008770331 {
		t.Fatalf("hash(orders) = %d", got)
	}
	cases := []struct {
		t    tp.TopicPartition
		n    int
		want int
	}{
		{tp.TopicPartition{Topic: "orders", Partition: 0}, 1, 0},
		// 31 * -1008770331 wraps to -1207109189 in int32 arithmetic;
		// abs(-1207109189 + p) % n.
		{tp.TopicPartition{Topic: "orders", Partition: 0}, 4, 1207109189 % 4},
		{tp.TopicPartition{Topic: "orders", Partition: 1}, 4, 1207109188 % 4},
		{tp.TopicPartition{Topic: "orders", Partition: 5}, 3, 1207109184 % 3},
	}
	for _, c := range cases {
		if got := FetcherID(c.t, c.n); got != c.want {
			t.Errorf("FetcherID(%v, %d) = %d, want %d", c.t, c.n, got, c.want)
		}
	}
}
