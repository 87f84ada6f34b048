package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	rclient "github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// Issue 21: an idempotent producer (client.Producer) writes N records to a
// partition of RF 3, in small batches with several in flight, and the
// test kills its leader (-9) mid-stream, with batches unanswered. The
// producer retries them, with the same producer ID and sequences, on the
// leader the controller elects; every record is acknowledged, and the
// partition (read from the new leader, and from the old one once it is
// back in the ISR) holds every record exactly once, in order, each with
// the producer's ID and its sequence.
func TestIdempotentProducerThroughLeaderKill(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second)
	const topic = "idem-failover"
	c.createTopic(topic, 1, 3)
	for _, id := range clusterIDs {
		c.waitInIsr(topic, 0, id, 30*time.Second)
	}
	var addrs []string
	for _, id := range clusterIDs {
		b, _ := c.broker(id)
		addrs = append(addrs, b.Addr)
	}
	cl, err := rclient.New(rclient.Config{Bootstrap: addrs, RequestTimeout: 2 * time.Second, RetryBackoffMax: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	var mu sync.Mutex
	retried, duplicates := 0, 0
	p, err := rclient.NewProducer(cl, rclient.ProducerConfig{BatchRecords: 20, AckTimeout: 3 * time.Second, DeliveryTimeout: time.Minute,
		OnBatch: func(b rclient.BatchResult) {
			mu.Lock()
			defer mu.Unlock()
			if b.Attempts > 1 {
				retried++
			}
			if b.Duplicate {
				duplicates++
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Init(ctx(t)); err != nil {
		t.Fatal(err)
	}
	pid, epoch := p.ProducerID()

	const n = 4000
	const killAt = n / 4 // acknowledged records before the kill
	before, err := c.partitionState(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	oldLeader := before.GetLeader()
	acked := make(chan struct{}, n)
	var errs []string
	window := make(chan struct{}, 200) // records unanswered at most
	killed := false
	pctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range n {
		if !killed && len(acked) >= killAt {
			b, _ := c.broker(oldLeader)
			b.Kill()
			killed = true
			t.Logf("killed leader %d with %d records acknowledged, %d unanswered", oldLeader, len(acked), len(window))
		}
		select {
		case window <- struct{}{}:
		case <-pctx.Done():
			t.Fatalf("record %d: %d records unanswered for 3 minutes", i, len(window))
		}
		want := fmt.Sprintf("r-%05d", i)
		p.Produce(pctx, &rclient.Record{Topic: topic, Partition: 0, ManualPartition: true, Value: []byte(want)}, func(r *rclient.Record, err error) {
			if err != nil {
				mu.Lock()
				errs = append(errs, fmt.Sprintf("%s: %v", want, err))
				mu.Unlock()
			}
			<-window
			acked <- struct{}{}
		})
	}
	if err := p.Flush(pctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	if !killed {
		t.Fatalf("the leader was not killed: %d records acknowledged of %d", len(acked), n)
	}
	if len(errs) > 0 {
		t.Fatalf("%d records failed, first %s", len(errs), errs[0])
	}
	mu.Lock()
	t.Logf("producer %d epoch %d: %d batches retried, %d answered as duplicates", pid, epoch, retried, duplicates)
	if retried == 0 {
		t.Errorf("no batch was retried: the kill found nothing in flight")
	}
	mu.Unlock()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}

	check := func(broker int32) {
		t.Helper()
		_, bc := c.broker(broker)
		recs := bc.consumeFrom(topic, 0, 0)
		if len(recs) != n {
			t.Errorf("broker %d holds %d records below its HW, want %d", broker, len(recs), n)
		}
		seen := map[string]int64{}
		for i, r := range recs {
			v := string(r.GetValue())
			if prev, dup := seen[v]; dup {
				t.Fatalf("broker %d: %s at offsets %d and %d", broker, v, prev, r.GetOffset())
			}
			seen[v] = r.GetOffset()
			if want := fmt.Sprintf("r-%05d", i); v != want || r.GetOffset() != int64(i) {
				t.Fatalf("broker %d: offset %d holds %s, want %s at %d", broker, r.GetOffset(), v, want, i)
			}
			if r.GetProducerId() != pid || r.GetProducerEpoch() != int32(epoch) || r.GetSequence() != int32(i) {
				t.Fatalf("broker %d: %s from producer %d epoch %d sequence %d, want %d, %d, %d", broker, v,
					r.GetProducerId(), r.GetProducerEpoch(), r.GetSequence(), pid, epoch, i)
			}
		}
	}
	after := c.waitNewLeader(topic, 0, oldLeader, 30*time.Second)
	check(after.GetLeader())

	// The old leader comes back, truncates what it held beyond the new
	// leader's log and catches up; made leader again, it serves the same.
	c.startBroker(oldLeader)
	c.waitInIsr(topic, 0, oldLeader, 60*time.Second)
	var resp *replicadv1.ElectLeaderResponse
	testutil.Eventually(t, 30*time.Second, func() error {
		l := oldLeader
		resp, err = c.ctlAPI.ElectLeader(ctx(t), &replicadv1.ElectLeaderRequest{Topic: topic, Partition: 0, Leader: &l})
		if err != nil {
			return err
		}
		switch resp.GetErrorCode() {
		case replicadv1.ErrorCode_ERROR_CODE_NONE, replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED:
		default:
			return fmt.Errorf("elect %d: %v %s", l, resp.GetErrorCode(), resp.GetErrorMessage())
		}
		_, bc := c.broker(oldLeader)
		d, err := bc.partition(topic, 0)
		if err != nil {
			return err
		}
		if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER || d.GetHighWatermark() < n {
			return fmt.Errorf("broker %d: %v, HW %d", oldLeader, d.GetRole(), d.GetHighWatermark())
		}
		return nil
	})
	check(oldLeader)
}
