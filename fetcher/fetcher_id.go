package fetcher

import "github.com/replicad/replicad/core/tp"

// FetcherID picks the fetcher of a partition among numFetchers per leader:
// abs(31*hash(topic) + partition) % numFetchers, with Java's String.hashCode,
// so that a partition lands on the same fetcher id as it would in Kafka.
func FetcherID(t tp.TopicPartition, numFetchers int) int {
	if numFetchers <= 1 {
		return 0
	}
	h := int32(31)*javaStringHash(t.Topic) + t.Partition
	if h < 0 {
		// Kafka's Utils.abs maps MinValue to 0 rather than overflowing.
		if h == -1<<31 {
			h = 0
		} else {
			h = -h
		}
	}
	return int(h) % numFetchers
}

// javaStringHash is Java's String.hashCode over UTF-16 code units; topic names
// are ASCII, so bytes are code units.
func javaStringHash(s string) int32 {
	var h int32
	for i := 0; i < len(s); i++ {
		h = 31*h + int32(s[i])
	}
	return h
}
