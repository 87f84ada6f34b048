package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testProducer is a Producer on c's brokers with small batches and short
// timeouts, closed with the test.
func testProducer(t *testing.T, c *fakeCluster, cfg ProducerConfig) (*Client, *Producer) {
	t.Helper()
	cl, err := New(Config{Bootstrap: c.bootstrap(), RequestTimeout: 300 * time.Millisecond, RetryBackoff: 5 * time.Millisecond,
		RetryBackoffMax: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.BatchRecords == 0 {
		cfg.BatchRecords = 10
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 200 * time.Millisecond
	}
	if cfg.DeliveryTimeout == 0 {
		cfg.DeliveryTimeout = 20 * time.Second
	}
	p, err := NewProducer(cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.Close()
		_ = cl.Close()
	})
	return cl, p
}

// produceN produces values v0..v(n-1) to partition 0 asynchronously and
// waits for every callback; it returns the records' errors by value.
func produceN(t *testing.T, p *Producer, n int) ([]*Record, map[int]error) {
	t.Helper()
	var mu sync.Mutex
	errs := map[int]error{}
	recs := make([]*Record, n)
	var wg sync.WaitGroup
	for i := range n {
		recs[i] = &Record{Topic: "t", Partition: 0, ManualPartition: true, Value: []byte(fmt.Sprintf("v%d", i))}
		wg.Add(1)
		p.Produce(context.Background(), recs[i], func(_ *Record, err error) {
			if err != nil {
				mu.Lock()
				errs[i] = err
				mu.Unlock()
			}
			wg.Done()
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	wg.Wait()
	return recs, errs
}

// wantExactlyOnce checks the partition's log holds v0..v(n-1) once each,
// in order, at the offsets their callbacks reported.
func wantExactlyOnce(t *testing.T, c *fakeCluster, recs []*Record) {
	t.Helper()
	log := c.log(0)
	if len(log) != len(recs) {
		var vs []string
		for _, r := range log {
			vs = append(vs, r.value)
		}
		t.Fatalf("log holds %d records, want %d: %s", len(log), len(recs), strings.Join(vs, " "))
	}
	for i, r := range recs {
		if log[i].value != string(r.Value) {
			t.Fatalf("offset %d holds %s, want %s", i, log[i].value, r.Value)
		}
		if r.Offset != int64(i) {
			t.Fatalf("record %s delivered at offset %d, want %d", r.Value, r.Offset, i)
		}
	}
}

// TestProducerIdempotentInOrder ensures a plain run numbers the batches
// from 0 without gaps under one producer ID and delivers in order.
func TestProducerIdempotentInOrder(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	_, p := testProducer(t, c, ProducerConfig{})
	recs, errs := produceN(t, p, 200)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	wantExactlyOnce(t, c, recs)
	for i, r := range c.log(0) {
		if r.pid == 0 || r.seq != int32(i) {
			t.Fatalf("offset %d: producer %d sequence %d, want sequence %d", i, r.pid, r.seq, i)
		}
	}
	if len(c.inits) != 1 {
		t.Fatalf("%d InitProducerId calls, want 1", len(c.inits))
	}
}

// TestProducerRetriesThroughLeaderChange ensures batches refused by a
// deposed leader (NOT_LEADER_OR_FOLLOWER, the later in-flight ones too)
// go to the new leader in order, with their sequences.
func TestProducerRetriesThroughLeaderChange(t *testing.T) {
	c := newFakeCluster(t, 2, 1)
	c.hook = func(n int, id int32, _ *replicadv1.ProduceRequest) action {
		if n == 5 {
			c.leader[0] = 2 // under c.mu: the hook runs with it held
			return notLeader
		}
		return normal
	}
	_, p := testProducer(t, c, ProducerConfig{})
	recs, errs := produceN(t, p, 300)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	wantExactlyOnce(t, c, recs)
}

// TestProducerRetriesWhenLeaderDies ensures a leader that dies with
// batches in flight, and that lookups still name for a while (no new
// leader elected yet), is looked up again until the new one takes the
// batches: every record once, in order.
func TestProducerRetriesWhenLeaderDies(t *testing.T) {
	c := newFakeCluster(t, 2, 1)
	c.hook = func(n int, _ int32, _ *replicadv1.ProduceRequest) action {
		if n == 5 {
			go func() {
				c.servers[1].Stop()
				time.Sleep(300 * time.Millisecond) // the election
				c.setLeader(0, 2)
			}()
			return hangAfter
		}
		return normal
	}
	_, p := testProducer(t, c, ProducerConfig{})
	recs, errs := produceN(t, p, 300)
	for i, err := range errs {
		t.Fatalf("%d records failed, record %d: %v", len(errs), i, err)
	}
	wantExactlyOnce(t, c, recs)
}

// TestProducerAmbiguousFailuresResendSameSequence ensures a batch whose
// answer was lost (a reset after the append, an answer that never comes,
// REQUEST_TIMED_OUT) is sent again with the same sequence and taken as
// the duplicate it is: every record once, in order.
func TestProducerAmbiguousFailuresResendSameSequence(t *testing.T) {
	for _, act := range []action{resetAfter, hangAfter, timedOutAfter, resetBefore, storageErrorAfter} {
		t.Run(fmt.Sprint(act), func(t *testing.T) {
			c := newFakeCluster(t, 1, 1)
			c.hook = func(n int, _ int32, _ *replicadv1.ProduceRequest) action {
				if n == 3 || n == 9 {
					return act
				}
				return normal
			}
			var mu sync.Mutex
			var dups int
			_, p := testProducer(t, c, ProducerConfig{OnBatch: func(r BatchResult) {
				mu.Lock()
				defer mu.Unlock()
				if r.Duplicate {
					dups++
				}
			}})
			recs, errs := produceN(t, p, 200)
			if len(errs) > 0 {
				t.Fatalf("errors: %v", errs)
			}
			wantExactlyOnce(t, c, recs)
			if act != resetBefore && dups == 0 {
				t.Fatalf("no batch was answered as a duplicate")
			}
		})
	}
}

// TestProducerOutOfOrderAfterEarlierRetryIsRetried ensures that when a
// batch is refused while later ones are in flight, the later ones'
// OUT_OF_ORDER_SEQUENCE_NUMBER answers are retried after it, not failed.
func TestProducerOutOfOrderAfterEarlierRetryIsRetried(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	var ooo int
	var p *Producer
	c.hook = func(n int, _ int32, _ *replicadv1.ProduceRequest) action {
		if n == 4 {
			// Refuse batch 4 once the batch after it is in flight too.
			waitInflight(t, p, TopicPartition{"t", 0}, 2)
			return notLeader // the leader stays: a transient refusal
		}
		return normal
	}
	_, p = testProducer(t, c, ProducerConfig{OnBatch: func(r BatchResult) {
		if r.Attempts > 1 {
			ooo++
		}
	}})
	recs, errs := produceN(t, p, 300)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	wantExactlyOnce(t, c, recs)
	if c.answers[replicadv1.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER] == 0 {
		t.Fatalf("no OUT_OF_ORDER_SEQUENCE_NUMBER answer: the batches after the refused one were not in flight")
	}
	if ooo < 2 {
		t.Fatalf("%d batches were sent more than once, want the refused one and the ones in flight after it", ooo)
	}
}

// waitInflight waits until k has at least n batches in flight.
func waitInflight(t *testing.T, p *Producer, k TopicPartition, n int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		q := p.parts[k]
		p.mu.Unlock()
		if q != nil && q.sendMu.TryLock() {
			got := len(q.inflight)
			q.sendMu.Unlock()
			if got >= n {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Errorf("fewer than %d batches in flight after 5s", n)
}

// TestProducerDefiniteFailureShiftsSequences ensures a batch refused
// outright (NOT_ENOUGH_REPLICAS: nothing appended) fails alone, and the
// batches after it move into its sequence numbers and are delivered.
func TestProducerDefiniteFailureShiftsSequences(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	c.hook = func(n int, _ int32, _ *replicadv1.ProduceRequest) action {
		if n == 3 {
			return notEnough
		}
		return normal
	}
	var failedBatch int
	_, p := testProducer(t, c, ProducerConfig{OnBatch: func(r BatchResult) {
		if r.Err != nil {
			failedBatch += r.Records
		}
	}})
	recsAll, errs := produceN(t, p, 100)
	if len(errs) == 0 || len(errs) != failedBatch {
		t.Fatalf("%d records failed, want those of the one batch refused (%d): %v", len(errs), failedBatch, errs)
	}
	var delivered []*Record
	for i, r := range recsAll {
		if errs[i] == nil {
			delivered = append(delivered, r)
		} else if !strings.Contains(errs[i].Error(), "NOT_ENOUGH_REPLICAS") {
			t.Fatalf("record %d: %v", i, errs[i])
		}
	}
	log := c.log(0)
	if len(log) != len(delivered) {
		t.Fatalf("log holds %d, want %d", len(log), len(delivered))
	}
	for i, r := range log {
		if r.value != string(delivered[i].Value) || r.seq != int32(i) {
			t.Fatalf("offset %d: %s seq %d, want %s seq %d", i, r.value, r.seq, delivered[i].Value, i)
		}
	}
}

// TestProducerUnknownProducerIDBumpsEpoch ensures UNKNOWN_PRODUCER_ID (the
// partition lost the producer's state) bumps the epoch with the ID and
// restarts the partition's sequence at 0.
func TestProducerUnknownProducerIDBumpsEpoch(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	c.hook = func(n int, _ int32, _ *replicadv1.ProduceRequest) action {
		if n == 6 {
			return forgetProducer
		}
		return normal
	}
	_, p := testProducer(t, c, ProducerConfig{MaxInFlight: 1})
	recs, errs := produceN(t, p, 100)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	wantExactlyOnce(t, c, recs)
	if len(c.inits) != 2 || c.inits[1].GetProducerId() == 0 || c.inits[1].GetProducerEpoch() != 0 {
		t.Fatalf("InitProducerId calls %v, want a new ID then a bump from epoch 0", c.inits)
	}
	// Epoch 0 numbers from offset 0; epoch 1 from 0 again where it starts.
	var start int
	for i, r := range c.log(0) {
		if r.epoch == 1 && start == 0 {
			start = i
		}
		if want := int32(i - start); r.seq != want {
			t.Fatalf("offset %d: epoch %d sequence %d, want %d", i, r.epoch, r.seq, want)
		}
	}
	if start == 0 {
		t.Fatal("no record under epoch 1")
	}
}

// TestProducerFencedIsFatal ensures INVALID_PRODUCER_EPOCH (a newer
// instance bumped the epoch) fails the records with ErrProducerFenced, and
// every later one too.
func TestProducerFencedIsFatal(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	cl, p := testProducer(t, c, ProducerConfig{})
	if err := p.ProduceSync(context.Background(), &Record{Topic: "t", ManualPartition: true, Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	pid, epoch := p.ProducerID()
	// A newer instance with the same ID, and its batch on the partition.
	if _, _, err := cl.InitProducerID(context.Background(), pid, epoch); err != nil {
		t.Fatal(err)
	}
	c.mu.Lock()
	c.pstate[0][pid].epoch = epoch + 1
	c.mu.Unlock()
	err := p.ProduceSync(context.Background(), &Record{Topic: "t", ManualPartition: true, Value: []byte("b")})
	if !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("produce after fencing: %v, want ErrProducerFenced", err)
	}
	err = p.ProduceSync(context.Background(), &Record{Topic: "t", ManualPartition: true, Value: []byte("c")})
	if !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("produce later: %v, want ErrProducerFenced", err)
	}
}

// TestProducerIdempotenceUnsupported ensures a cluster without
// InitProducerId fails an idempotent producer naming the cause, and a
// producer with idempotence off sends plain batches.
func TestProducerIdempotenceUnsupported(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	c.noInit = true
	_, p := testProducer(t, c, ProducerConfig{})
	err := p.Init(context.Background())
	if !errors.Is(err, ErrIdempotenceUnsupported) || !strings.Contains(err.Error(), "InitProducerId") {
		t.Fatalf("Init: %v", err)
	}
	err = p.ProduceSync(context.Background(), &Record{Topic: "t", ManualPartition: true, Value: []byte("a")})
	if !errors.Is(err, ErrIdempotenceUnsupported) {
		t.Fatalf("produce: %v", err)
	}
	_, plain := testProducer(t, c, ProducerConfig{DisableIdempotence: true})
	if err := plain.ProduceSync(context.Background(), &Record{Topic: "t", ManualPartition: true, Value: []byte("a")}); err != nil {
		t.Fatal(err)
	}
	if log := c.log(0); len(log) != 1 || log[0].pid != 0 {
		t.Fatalf("log %v, want one plain record", log)
	}
}

// TestProducerDeliveryTimeout ensures a record no leader takes fails
// within the delivery timeout, naming the last answer.
func TestProducerDeliveryTimeout(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	c.hook = func(int, int32, *replicadv1.ProduceRequest) action { return notLeader }
	cl, err := New(Config{Bootstrap: c.bootstrap(), RequestTimeout: time.Second, MaxAttempts: 1000, RetryBackoff: 10 * time.Millisecond, RetryBackoffMax: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	p, err := NewProducer(cl, ProducerConfig{DeliveryTimeout: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	start := time.Now()
	err = p.ProduceSync(context.Background(), &Record{Topic: "t", ManualPartition: true, Value: []byte("a")})
	if !errors.Is(err, ErrDeliveryTimeout) || !strings.Contains(err.Error(), "NOT_LEADER_OR_FOLLOWER") {
		t.Fatalf("err %v", err)
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Fatalf("failed after %s", el)
	}
}

// TestProducerEpochBumpKeepsInDoubtBatchesOfOtherPartitions: found by the
// chaos suite. UNKNOWN_PRODUCER_ID on one partition bumps the producer's
// epoch; a batch of another partition whose answer was lost (appended,
// unanswered) must be retried under the epoch and sequence it was sent
// with, so the leader answers it as a duplicate. Renumbered under the new
// epoch from 0, it was appended a second time.
func TestProducerEpochBumpKeepsInDoubtBatchesOfOtherPartitions(t *testing.T) {
	c := newFakeCluster(t, 1, 2)
	var mu sync.Mutex
	hung, forgot := false, false
	c.hook = func(_ int, _ int32, req *replicadv1.ProduceRequest) action {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case req.GetPartition() == 0 && req.GetBaseSequence() >= 20 && !hung:
			hung = true
			return hangAfter
		case req.GetPartition() == 1 && hung && !forgot:
			forgot = true
			return forgetProducer
		}
		return normal
	}
	// The hung batch waits 2 s for its answer: partition 1's
	// UNKNOWN_PRODUCER_ID and the epoch bump come in the meantime.
	_, p := testProducer(t, c, ProducerConfig{MaxInFlight: 1, AckTimeout: 2 * time.Second})
	var wg sync.WaitGroup
	var emu sync.Mutex
	var errs []error
	const n = 100
	produce := func(part int32, from, to int) {
		for i := from; i < to; i++ {
			wg.Add(1)
			p.Produce(context.Background(), &Record{Topic: "t", Partition: part, ManualPartition: true, Value: []byte(fmt.Sprintf("p%d-v%d", part, i))},
				func(_ *Record, err error) {
					if err != nil {
						emu.Lock()
						errs = append(errs, err)
						emu.Unlock()
					}
					wg.Done()
				})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	produce(1, 0, 10) // partition 1 holds the producer's state
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	produce(0, 0, n)
	testutil.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !hung {
			return fmt.Errorf("partition 0's batch not hung yet")
		}
		return nil
	})
	produce(1, 10, n) // its first request finds the state gone
	if err := p.Flush(ctx); err != nil {
		t.Fatalf("flush: %v", err)
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	mu.Lock()
	if !forgot {
		t.Fatal("partition 1's state was not dropped")
	}
	mu.Unlock()
	if len(c.inits) < 2 {
		t.Fatalf("InitProducerId calls %v, want a bump", c.inits)
	}
	for part := range int32(2) {
		seen := map[string]int{}
		log := c.log(part)
		for off, r := range log {
			if prev, dup := seen[r.value]; dup {
				t.Fatalf("partition %d: %s at offsets %d and %d (epoch %d sequence %d)", part, r.value, prev, off, r.epoch, r.seq)
			}
			seen[r.value] = off
		}
		if len(log) != n {
			t.Fatalf("partition %d holds %d records, want %d", part, len(log), n)
		}
	}
}

// TestProducerResumeFencesTheEarlierInstance: a producer restarted with
// ResumeID/ResumeEpoch bumps the epoch of the earlier instance's ID; its
// first batch fences the earlier instance on the partition, and a second
// resume from the same epoch is itself fenced.
func TestProducerResumeFencesTheEarlierInstance(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	_, old := testProducer(t, c, ProducerConfig{})
	rec := func(v string) *Record { return &Record{Topic: "t", ManualPartition: true, Value: []byte(v)} }
	if err := old.ProduceSync(context.Background(), rec("a")); err != nil {
		t.Fatal(err)
	}
	pid, epoch := old.ProducerID()
	_, next := testProducer(t, c, ProducerConfig{ResumeID: pid, ResumeEpoch: epoch})
	if err := next.ProduceSync(context.Background(), rec("b")); err != nil {
		t.Fatal(err)
	}
	if id, e := next.ProducerID(); id != pid || e != epoch+1 {
		t.Fatalf("resumed as producer %d epoch %d, want %d epoch %d", id, e, pid, epoch+1)
	}
	if err := old.ProduceSync(context.Background(), rec("c")); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("the earlier instance after the resume: %v, want ErrProducerFenced", err)
	}
	_, again := testProducer(t, c, ProducerConfig{ResumeID: pid, ResumeEpoch: epoch})
	if err := again.Init(context.Background()); !errors.Is(err, ErrProducerFenced) {
		t.Fatalf("a second resume from epoch %d: %v, want ErrProducerFenced", epoch, err)
	}
	log := c.log(0)
	if len(log) != 2 || log[0].value != "a" || log[1].value != "b" || log[1].epoch != epoch+1 || log[1].seq != 0 {
		t.Fatalf("log %+v, want a (epoch %d) then b (epoch %d, sequence 0)", log, epoch, epoch+1)
	}
}

// TestProducerLostBumpAnswerTakesANewID: found in review. A bump carried
// out whose answer was lost (a timeout, a controller failover) left the
// producer at the old epoch, and the next bump from it was refused
// INVALID_PRODUCER_EPOCH: the producer took itself for fenced and failed
// every record from then on (the chaos suite's etcd case stalled on it). A
// producer whose ID is its own takes a new ID instead.
func TestProducerLostBumpAnswerTakesANewID(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	c.loseBumps = 1
	var mu sync.Mutex
	forgets := 0
	c.hook = func(_ int, _ int32, req *replicadv1.ProduceRequest) action {
		mu.Lock()
		defer mu.Unlock()
		if req.GetBaseSequence() > 0 && forgets < 2 {
			forgets++
			return forgetProducer
		}
		return normal
	}
	_, p := testProducer(t, c, ProducerConfig{MaxInFlight: 1})
	recs, errs := produceN(t, p, 60)
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	wantExactlyOnce(t, c, recs)
	c.mu.Lock()
	defer c.mu.Unlock()
	var newIDs int
	for _, r := range c.inits {
		if r.GetProducerId() == 0 {
			newIDs++
		}
	}
	if newIDs != 2 {
		t.Fatalf("InitProducerId calls %v: want a new ID after the refused bump", c.inits)
	}
}

// TestProducerFencedByAResumingInstanceStaysFenced: another instance
// resumed this producer's ID and bumped its epoch. When this one then needs
// a bump (its state forgotten at the leader), the refusal is a fence, not
// its own lost bump: it must fail with ErrProducerFenced rather than take a
// new ID and write on beside the instance that fenced it (the chaos suite's
// etcd case, seed 4, found such a zombie appending under a new ID).
func TestProducerFencedByAResumingInstanceStaysFenced(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	_, p := testProducer(t, c, ProducerConfig{MaxInFlight: 1})
	if _, errs := produceN(t, p, 3); len(errs) > 0 {
		t.Fatalf("errors before the fence: %v", errs)
	}
	c.mu.Lock()
	for pid := range c.epochs {
		c.epochs[pid]++ // a newer instance resumed the ID
	}
	c.mu.Unlock()
	var mu sync.Mutex
	forgot := false
	c.hook = func(_ int, _ int32, req *replicadv1.ProduceRequest) action {
		mu.Lock()
		defer mu.Unlock()
		if !forgot {
			forgot = true
			return forgetProducer
		}
		return normal
	}
	_, errs := produceN(t, p, 5)
	if len(errs) == 0 {
		t.Fatal("the fenced producer's records were all appended")
	}
	for i, err := range errs {
		if !errors.Is(err, ErrProducerFenced) {
			t.Errorf("record %d: %v, want ErrProducerFenced", i, err)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.inits[1:] {
		if r.GetProducerId() == 0 {
			t.Fatalf("InitProducerId calls %v: the fenced producer took a new ID", c.inits)
		}
	}
}

// TestProducerBrokersLostBumpNoteTakesANewID: the bump is refused, but the
// broker says its own resent bump found the epoch bumped (the first
// attempt's answer was lost between broker and controller): the producer's
// own bump landed, so it takes a new ID and goes on, where a refusal
// without the note would fence it (TestProducerFencedByAResumingInstanceStaysFenced).
func TestProducerBrokersLostBumpNoteTakesANewID(t *testing.T) {
	c := newFakeCluster(t, 1, 1)
	c.noteStale = true
	_, p := testProducer(t, c, ProducerConfig{MaxInFlight: 1})
	if _, errs := produceN(t, p, 3); len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	c.mu.Lock()
	for pid := range c.epochs {
		c.epochs[pid]++ // the lost bump landed at the controller
	}
	c.mu.Unlock()
	var mu sync.Mutex
	forgot := false
	c.hook = func(_ int, _ int32, req *replicadv1.ProduceRequest) action {
		mu.Lock()
		defer mu.Unlock()
		if !forgot {
			forgot = true
			return forgetProducer
		}
		return normal
	}
	if _, errs := produceN(t, p, 5); len(errs) > 0 {
		t.Fatalf("errors after the lost bump: %v", errs)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	newIDs := 0
	for _, r := range c.inits {
		if r.GetProducerId() == 0 {
			newIDs++
		}
	}
	if newIDs != 2 {
		t.Fatalf("InitProducerId calls %v: want a new ID after the noted refusal", c.inits)
	}
}
