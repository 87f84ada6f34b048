package core

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// produceAs is an idempotent producer's produce of values.
func (h *harness) produceAs(t tp.TopicPartition, acks int, p record.Producer, values ...string) ProduceResult {
	h.t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	return h.rm.Produce(context.Background(), ProduceRequest{TopicPartition: t, Acks: acks, Timeout: time.Second, Records: recs, Producer: p})
}

func prod(id int64, epoch int16, seq int32) record.Producer {
	return record.Producer{ID: id, Epoch: epoch, BaseSequence: seq}
}

// TestIdempotentProduceOnLeader checks the produce path's answers: a new
// sequence appended, a retry answered with the original offsets and
// Duplicate, the refusals with their codes and a message, plain produces
// as before, and the state in describe and the metrics.
func TestIdempotentProduceOnLeader(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	if r := h.produceAs(tp0, AcksAll, prod(5, 0, 0), "a", "b"); r.Error != ErrNone || r.BaseOffset != 0 || r.Duplicate {
		t.Fatalf("first batch: %+v", r)
	}
	if r := h.produce(tp0, AcksAll, "plain"); r.Error != ErrNone || r.BaseOffset != 2 {
		t.Fatalf("plain batch: %+v", r)
	}
	r := h.produceAs(tp0, AcksAll, prod(5, 0, 0), "a", "b")
	if r.Error != ErrNone || !r.Duplicate || r.BaseOffset != 0 || r.HighWatermark != 3 {
		t.Fatalf("retry: %+v, want the duplicate of offset 0", r)
	}
	// The same retry as a pre-built batch (the service's path).
	b := record.BuildProducer([]record.Record{{Value: []byte("a")}, {Value: []byte("b")}}, 1, prod(5, 0, 0))
	if r := h.rm.Produce(context.Background(), ProduceRequest{TopicPartition: tp0, Acks: AcksLeader, Batch: b}); !r.Duplicate || r.BaseOffset != 0 {
		t.Fatalf("retry as a batch: %+v", r)
	}
	if r := h.produceAs(tp0, AcksAll, prod(5, 0, 2), "c"); r.Error != ErrNone || r.BaseOffset != 3 || r.Duplicate {
		t.Fatalf("next batch: %+v", r)
	}
	for _, c := range []struct {
		p    record.Producer
		want ErrorCode
	}{
		{prod(5, 0, 9), ErrOutOfOrderSequenceNumber},
		{prod(5, 1, 4), ErrOutOfOrderSequenceNumber},
		{prod(6, 0, 3), ErrUnknownProducerID},
	} {
		if r := h.produceAs(tp0, AcksAll, c.p, "x"); r.Error != c.want || r.Message == "" || r.BaseOffset != -1 {
			t.Errorf("%+v: %+v, want %v with a message", c.p, r, c.want)
		}
	}
	if r := h.produceAs(tp0, AcksAll, prod(5, 1, 0), "d"); r.Error != ErrNone {
		t.Fatalf("new epoch: %+v", r)
	}
	if r := h.produceAs(tp0, AcksAll, prod(5, 0, 3), "e"); r.Error != ErrInvalidProducerEpoch {
		t.Fatalf("fenced epoch: %+v", r)
	}
	// Bad producer fields: INVALID_REQUEST naming the field, nothing appended.
	for _, c := range []struct {
		p     record.Producer
		batch bool
		field string
	}{
		{prod(5, -1, 0), false, "producer_epoch"},
		{prod(5, 1, -3), false, "base_sequence"},
		{prod(0, 0, 0), true, "producer_id"}, // a v1 batch of ID 0
	} {
		req := ProduceRequest{TopicPartition: tp0, Acks: AcksAll, Records: []record.Record{{Value: []byte("x")}}, Producer: c.p}
		if c.batch {
			req.Batch, req.Producer = record.BuildProducer(req.Records, 1, c.p), record.Producer{}
		}
		if r := h.rm.Produce(context.Background(), req); r.Error != ErrInvalidRequest || !strings.HasPrefix(r.Message, c.field+":") {
			t.Errorf("%+v: %+v, want INVALID_REQUEST naming %s", c.p, r, c.field)
		}
	}
	p, _ := h.describe(tp0)
	if p.LogEndOffset != 5 || p.ProducerCount != 1 || len(p.Producers) != 1 {
		t.Fatalf("describe: LEO %d, producers %d %+v", p.LogEndOffset, p.ProducerCount, p.Producers)
	}
	if got := p.Producers[0]; got.ID != 5 || got.Epoch != 1 || got.LastSequence != 0 || got.LastOffset != 4 {
		t.Fatalf("producer 5: %+v", got)
	}
	if n := h.rm.MetricsSnapshot().ProducerIDs; n != 1 {
		t.Fatalf("metrics: %d producer IDs", n)
	}
}

// harnessAs is a harness for broker id.
func harnessAs(t *testing.T, id int32, mutate ...func(*Config)) *harness {
	return newHarness(t, 1, append([]func(*Config){func(c *Config) { c.BrokerID = id }}, mutate...)...)
}

// replicate appends to follower's log what leader serves to it from its
// log end, and returns the fetch's result.
func replicate(t *testing.T, leader, follower *harness, leaderEpoch int32) FetchPartitionResult {
	t.Helper()
	l, _ := follower.rm.logs.GetLog(tp0)
	res := leader.fetch(follower.cfg.BrokerID, FetchPartition{TopicPartition: tp0, FetchOffset: l.LogEndOffset(),
		CurrentLeaderEpoch: leaderEpoch, LastFetchedEpoch: l.LatestEpoch()})
	if res.Error != ErrNone {
		t.Fatalf("fetch: %v", res.Error)
	}
	if _, err := l.AppendAsFollower(res.Records); err != nil {
		t.Fatal(err)
	}
	return res
}

// TestNewLeaderAnswersRetryAsDuplicate: a producer's batch appended by the
// old leader and replicated, but not committed; the leader changes; the
// producer's retry at the new leader is a duplicate with the original
// offsets, and at acks=-1 it waits for the new leader's HW to pass the
// original batch, as the original append would have.
func TestNewLeaderAnswersRetryAsDuplicate(t *testing.T) {
	h1, h2 := harnessAs(t, 1), harnessAs(t, 2)
	h1.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	h2.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	h1.produceAs(tp0, AcksLeader, prod(9, 0, 0), "a")
	last := h1.produceAs(tp0, AcksLeader, prod(9, 0, 1), "b", "c")
	if last.Error != ErrNone || last.BaseOffset != 1 {
		t.Fatalf("old leader: %+v", last)
	}
	replicate(t, h1, h2, 1)
	l1, _ := h1.rm.logs.GetLog(tp0)
	l2, _ := h2.rm.logs.GetLog(tp0)
	if !l2.ProducerState().Equal(l1.ProducerState()) {
		t.Fatalf("follower state %+v, leader %+v", l2.ProducerState().Describe(0), l1.ProducerState().Describe(0))
	}
	// Broker 2 leads epoch 2; its HW is still 0.
	st := state("orders", 0, 2, 2, []int32{1, 2}, []int32{1, 2})
	st.IsNew = false
	h2.leaderAndIsr(1, st)
	// A retry before the HW passes the original waits, and times out.
	done := make(chan ProduceResult, 1)
	go func() { done <- h2.produceAs(tp0, AcksAll, prod(9, 0, 1), "b", "c") }()
	var r ProduceResult
	waitFor(t, func() bool {
		h2.clock.Advance(time.Second)
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	if r.Error != ErrRequestTimedOut || !r.Duplicate || l2.LogEndOffset() != 3 {
		t.Fatalf("retry before the HW passed its original: %+v, log end %d; want REQUEST_TIMED_OUT", r, l2.LogEndOffset())
	}
	go func() { done <- h2.produceAs(tp0, AcksAll, prod(9, 0, 1), "b", "c") }()
	// Broker 1 follows and fetches at the new leader's end: the HW passes.
	h2.fetch(1, FetchPartition{TopicPartition: tp0, FetchOffset: l2.LogEndOffset(), CurrentLeaderEpoch: 2, LastFetchedEpoch: 1})
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the duplicate never completed")
	}
	if r.Error != ErrNone || !r.Duplicate || r.BaseOffset != last.BaseOffset || r.HighWatermark != 3 {
		t.Fatalf("retry at the new leader: %+v, want the duplicate of offset %d", r, last.BaseOffset)
	}
	if l2.LogEndOffset() != 3 {
		t.Fatalf("the duplicate appended: log end %d", l2.LogEndOffset())
	}
}

// TestDuplicateWaitFailsWhenLeadershipLost: a duplicate's acks=-1 wait
// is the original batch's: when the leader loses leadership it fails with
// NOT_LEADER_OR_FOLLOWER, as the original's would (or the retry comes
// after the change, and is refused the same way).
func TestDuplicateWaitFailsWhenLeadershipLost(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	h.produceAs(tp0, AcksLeader, prod(3, 0, 0), "a")
	done := make(chan ProduceResult, 1)
	go func() { done <- h.produceAs(tp0, AcksAll, prod(3, 0, 0), "a") }()
	st := state("orders", 0, 2, 2, []int32{1, 2}, []int32{2})
	st.IsNew = false
	h.leaderAndIsr(1, st)
	select {
	case r := <-done:
		if r.Error != ErrNotLeaderOrFollower {
			t.Fatalf("got %+v, want NOT_LEADER_OR_FOLLOWER", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the duplicate's wait never ended")
	}
}

// TestProducerStateChangesLoggedAndTraced: fencing an epoch, a rebuild
// after a truncation and an expiry each log a state.change line and make
// a span.
func TestProducerStateChangesLoggedAndTraced(t *testing.T) {
	out := &logBuffer{}
	h, rec, _ := tracedHarness(t, func(c *Config) {
		c.Logger = zerolog.New(out).Level(zerolog.TraceLevel)
		c.ProducerIDExpiration = time.Hour
	})
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	h.produceAs(tp0, AcksAll, prod(4, 0, 0), "a")
	h.produceAs(tp0, AcksAll, prod(4, 1, 0), "b")
	h.produceAs(tp0, AcksAll, prod(5, 0, 0), "c")
	lines := out.take(t)
	wantLine(t, lines, "info", "Producer epoch fenced: the producer's older epoch is refused from now on", "orders", 0,
		map[string]any{"producer_id": 4, "producer_epoch": 1, "fenced_epoch": 0, "offset": 1, "leader_epoch": 1})
	wantAttrs(t, "fence", oneSpan(t, rec, "Partition.fenceProducerEpoch").Attributes(),
		map[string]any{"replicad.producer_id": 4, "replicad.fenced_epoch": 0, "replicad.topic": "orders"})

	l, _ := h.rm.logs.GetLog(tp0)
	if err := l.TruncateTo(2); err != nil {
		t.Fatal(err)
	}
	lines = out.take(t)
	wantLine(t, lines, "info", "Producer state rebuilt from the remaining log after a truncation", "orders", 0,
		map[string]any{"reason": "truncate", "log_end_offset": 2, "producers_before": 2, "producers": 1})
	wantAttrs(t, "rebuild", oneSpan(t, rec, "Log.rebuildProducerState").Attributes(),
		map[string]any{"replicad.producers": 1, "replicad.producers_before": 2, "replicad.reason": "truncate"})

	h.clock.Advance(2 * time.Hour) // past the batches' timestamps (the harness clock) by more than the expiration
	h.rm.applyRetention()
	lines = out.take(t)
	wantLine(t, lines, "info", "Producer IDs expired: idle past the producer ID expiration", "orders", 0,
		map[string]any{"producers": 1})
	wantAttrs(t, "expiry", oneSpan(t, rec, "ReplicaManager.expireProducerIds").Attributes(),
		map[string]any{"replicad.partitions": 1, "replicad.producers": 1})
	if p, _ := h.describe(tp0); p.ProducerCount != 0 {
		t.Fatalf("%d producers after expiry", p.ProducerCount)
	}
	if r := h.produceAs(tp0, AcksAll, prod(4, 1, 1), "d"); r.Error != ErrUnknownProducerID {
		t.Fatalf("expired producer: %+v", r)
	}
}

// TestProducerStateSurvivesBrokerRestart: after a clean restart the
// leader still answers a retry as a duplicate, and takes the next
// sequence.
func TestProducerStateSurvivesBrokerRestart(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	for i := range 3 {
		if r := h.produceAs(tp0, AcksAll, prod(5, 0, int32(2*i)), "a", "b"); r.Error != ErrNone {
			t.Fatalf("batch %d: %+v", i, r)
		}
	}
	h.restart()
	st := state("orders", 0, 1, 2, []int32{1}, []int32{1})
	st.IsNew = false
	h.leaderAndIsr(1, st)
	if r := h.produceAs(tp0, AcksAll, prod(5, 0, 2), "a", "b"); r.Error != ErrNone || !r.Duplicate || r.BaseOffset != 2 {
		t.Fatalf("retry after the restart: %+v, want the duplicate of offset 2", r)
	}
	if r := h.produceAs(tp0, AcksAll, prod(5, 0, 6), "c"); r.Error != ErrNone || r.Duplicate || r.BaseOffset != 6 {
		t.Fatalf("next batch after the restart: %+v", r)
	}
}
