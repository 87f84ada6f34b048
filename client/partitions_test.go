package client

import (
	"context"
	"testing"
	"time"
)

// A topic grown with partitions (ctlclient alter-topic): the Client picks
// the new count up at its next metadata refresh (MetadataMaxAge, Kafka's
// metadata.max.age.ms), and the Producer's keyless records then spread
// over the new partitions too.
func TestClientSeesATopicGrow(t *testing.T) {
	c := newFakeCluster(t, 1, 2)
	cl, err := New(Config{Bootstrap: c.bootstrap(), MetadataMaxAge: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p, err := NewProducer(cl, ProducerConfig{Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	if n, err := cl.Partitions(ctx, "t"); err != nil || n != 2 {
		t.Fatalf("partitions %d %v, want 2", n, err)
	}
	c.mu.Lock()
	c.partitions = 4
	c.leader[2], c.leader[3] = 1, 1
	c.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if n, _ := cl.Partitions(ctx, "t"); n == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client still sees 2 partitions 10s after the topic grew to 4")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; len(c.log(2)) == 0 || len(c.log(3)) == 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("keyless records never reached the new partitions: %d and %d records", len(c.log(2)), len(c.log(3)))
		}
		if err := p.ProduceSync(ctx, &Record{Topic: "t", Value: []byte("spread")}); err != nil {
			t.Fatal(err)
		}
	}
}
