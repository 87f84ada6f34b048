package client

import "testing"

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
