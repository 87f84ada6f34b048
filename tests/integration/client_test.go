package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	rclient "github.com/replicad/replicad/client"
)

// newLibClient is the client library's Client on the cluster's brokers.
func (c *ctlCluster) newLibClient() *rclient.Client {
	c.t.Helper()
	var addrs []string
	for _, id := range clusterIDs {
		b, _ := c.broker(id)
		addrs = append(addrs, b.Addr)
	}
	cl, err := rclient.New(rclient.Config{Bootstrap: addrs, RequestTimeout: 5 * time.Second, RetryTimeout: 30 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// consumeTopic reads every partition of topic from the earliest offset to
// the high watermark with the library's Consumer.
func consumeTopic(t *testing.T, cl *rclient.Client, topic string) []*rclient.Record {
	t.Helper()
	k, err := rclient.NewConsumer(ctx(t), cl, rclient.ConsumerConfig{Topic: topic, Offset: rclient.OffsetEarliest})
	if err != nil {
		t.Fatal(err)
	}
	var out []*rclient.Record
	for !k.CaughtUp() {
		f, err := k.Poll(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, f.Records...)
	}
	return out
}

// TestClientKeysLandWhereKafkaPutsThem ensures, with real brokers, that the
// library's producer puts a keyed record on Kafka's murmur2 partition of
// its key and spreads keyless ones, that a whole-topic Consumer reads them
// all back with their keys and headers, and that ctlclient produce --key
// and consume without --partition do the same.
func TestClientKeysLandWhereKafkaPutsThem(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second)
	c.createTopic("keys", 3, 3)
	for p := int32(0); p < 3; p++ {
		c.waitInIsr("keys", p, 1, 30*time.Second)
	}
	cl := c.newLibClient()
	// Plain batches: the key mapping does not depend on idempotence, which
	// the other test covers.
	p, err := rclient.NewProducer(cl, rclient.ProducerConfig{DisableIdempotence: true, Linger: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	var recs []*rclient.Record
	for i := range 60 {
		recs = append(recs, &rclient.Record{Topic: "keys", Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(fmt.Sprintf("v%d", i)),
			Headers: []rclient.Header{{Key: "i", Value: []byte(fmt.Sprint(i))}}})
	}
	for i := range 30 {
		recs = append(recs, &rclient.Record{Topic: "keys", Value: []byte(fmt.Sprintf("nokey%d", i))})
	}
	if err := p.ProduceSync(ctx(t), recs...); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[:60] {
		if want := rclient.KeyPartition(r.Key, 3); r.Partition != want {
			t.Fatalf("key %s went to partition %d, want %d", r.Key, r.Partition, want)
		}
	}
	got := consumeTopic(t, cl, "keys")
	if len(got) != len(recs) {
		t.Fatalf("consumed %d records, want %d", len(got), len(recs))
	}
	seen := map[string]bool{}
	for _, r := range got {
		seen[string(r.Value)] = true
		if r.Key != nil {
			if want := rclient.KeyPartition(r.Key, 3); r.Partition != want {
				t.Fatalf("key %s read from partition %d, want %d", r.Key, r.Partition, want)
			}
			if len(r.Headers) != 1 || r.Headers[0].Key != "i" || "v"+string(r.Headers[0].Value) != string(r.Value) {
				t.Fatalf("record %s: headers %v", r.Value, r.Headers)
			}
		}
		if r.Timestamp.IsZero() || time.Since(r.Timestamp) > time.Hour {
			t.Fatalf("record %s: timestamp %v", r.Value, r.Timestamp)
		}
	}
	if len(seen) != len(recs) {
		t.Fatalf("%d distinct values, want %d", len(seen), len(recs))
	}

	// The same through ctlclient.
	b, _ := c.broker(1)
	want := rclient.KeyPartition([]byte("customer-7"), 3)
	runCtlclient(t, nil, "", "--bootstrap", b.Addr, "produce", "--topic", "keys", "--key", "customer-7", "--header", "h=1",
		"--idempotence=false", "--value", "from-cli").want(t, 0)
	r := runCtlclient(t, nil, "", "--bootstrap", b.Addr, "consume", "--topic", "keys", "--offset", "earliest", "--print-key", "--print-headers").want(t, 0)
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != len(recs)+1 {
		t.Fatalf("ctlclient consume printed %d lines, want %d:\n%s", len(lines), len(recs)+1, r.stdout)
	}
	if !strings.Contains(r.stdout, fmt.Sprintf("%d\t", want)) || !strings.Contains(r.stdout, "\tcustomer-7\th=1\tfrom-cli\n") {
		t.Fatalf("ctlclient consume lacks the --key record on partition %d:\n%s", want, r.stdout)
	}
	for _, l := range lines {
		if strings.HasSuffix(l, "\tfrom-cli") && !strings.HasPrefix(l, fmt.Sprintf("%d\t", want)) {
			t.Fatalf("the --key record is on %q, want partition %d", l, want)
		}
	}
	// An offset past the end names the valid range.
	r = runCtlclient(t, nil, "", "--bootstrap", b.Addr, "consume", "--topic", "keys", "--partition", "0", "--offset", "100000").want(t, 1)
	if !strings.Contains(r.stderr, "OFFSET_OUT_OF_RANGE") || !strings.Contains(r.stderr, "[0, ") {
		t.Fatalf("consume past the end: stderr %q", r.stderr)
	}
}

// TestClientIdempotentProducerThroughLeaderKill ensures that an idempotent
// producer whose partition leader is killed (-9) mid-stream retries its
// batches with their sequences on the new leader, so that every record is
// in the log exactly once, in order. It needs the brokers' side of
// idempotent produce (InitProducerId and the sequence checks) and skips
// where they answer Unimplemented.
func TestClientIdempotentProducerThroughLeaderKill(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second)
	c.createTopic("once", 1, 3)
	for _, id := range clusterIDs {
		c.waitInIsr("once", 0, id, 30*time.Second)
	}
	cl := c.newLibClient()
	p, err := rclient.NewProducer(cl, rclient.ProducerConfig{BatchRecords: 20, Linger: time.Millisecond, DeliveryTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.Init(ctx(t)); errors.Is(err, rclient.ErrIdempotenceUnsupported) {
		t.Skipf("the brokers do not serve idempotent produce yet: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	const n = 3000
	var mu sync.Mutex
	var failed []error
	var wg sync.WaitGroup
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			p.Produce(context.Background(), &rclient.Record{Topic: "once", ManualPartition: true, Value: []byte(fmt.Sprintf("v%05d", i))},
				func(_ *rclient.Record, err error) {
					if err != nil {
						mu.Lock()
						failed = append(failed, err)
						mu.Unlock()
					}
					wg.Done()
				})
		}
	}
	produce(0, n/2)
	before, err := c.partitionState("once", 0)
	if err != nil {
		t.Fatal(err)
	}
	leader, _ := c.broker(before.GetLeader())
	leader.Kill()
	produce(n/2, n)
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d records failed, first: %v", len(failed), failed[0])
	}
	c.waitNewLeader("once", 0, before.GetLeader(), 30*time.Second)
	got := consumeTopic(t, cl, "once")
	if len(got) != n {
		t.Fatalf("the log holds %d records, want %d (exactly once)", len(got), n)
	}
	pid, _ := p.ProducerID()
	for i, r := range got {
		if want := fmt.Sprintf("v%05d", i); string(r.Value) != want || r.ProducerID != pid {
			t.Fatalf("offset %d holds %s of producer %d, want %s of %d", r.Offset, r.Value, r.ProducerID, want, pid)
		}
	}
}
