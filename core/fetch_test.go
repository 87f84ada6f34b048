package core

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// fetchAt is replica 2's fetch of tp0 at offset in leaderEpoch, with an empty log's last fetched epoch.
func fetchAt(offset int64, leaderEpoch int32) FetchPartition {
	return FetchPartition{TopicPartition: tp0, FetchOffset: offset, CurrentLeaderEpoch: leaderEpoch, LastFetchedEpoch: -1}
}

func (h *harness) fetch(replica int32, fps ...FetchPartition) FetchPartitionResult {
	h.t.Helper()
	resp := h.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: replica, BrokerEpoch: -1, Partitions: fps})
	if len(resp.Partitions) != len(fps) {
		h.t.Fatalf("%d results for %d partitions", len(resp.Partitions), len(fps))
	}
	return resp.Partitions[0]
}

func values(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "v"
	}
	return out
}

// batchBases decodes raw fetched bytes into the base offsets of their batches.
func batchBases(t *testing.T, data []byte) []int64 {
	t.Helper()
	var out []int64
	for len(data) > 0 {
		b, rest, err := record.Next(data)
		if err != nil {
			t.Fatalf("fetched bytes do not parse as batches: %v", err)
		}
		if err := b.Verify(); err != nil {
			t.Fatalf("fetched batch fails its CRC: %v", err)
		}
		out = append(out, b.BaseOffset())
		data = rest
	}
	return out
}

// A fetch is fenced by an older leader epoch, refused for a newer one, and
// refused when this broker does not lead or the replica is not assigned.
func TestFetchLeaderEpochAndRoleChecks(t *testing.T) {
	h := newHarness(t, 1)
	t1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	h.leaderAndIsr(1, state("orders", 0, 1, 5, []int32{1, 2}, []int32{1, 2}), state("orders", 1, 2, 5, []int32{1, 2}, []int32{2}))
	cases := []struct {
		name    string
		replica int32
		fp      FetchPartition
		want    ErrorCode
	}{
		{"current epoch", 2, fetchAt(0, 5), ErrNone},
		{"no epoch given", 2, fetchAt(0, -1), ErrNone},
		{"older epoch", 2, fetchAt(0, 4), ErrFencedLeaderEpoch},
		{"newer epoch", 2, fetchAt(0, 6), ErrUnknownLeaderEpoch},
		{"not the leader", 2, FetchPartition{TopicPartition: t1, CurrentLeaderEpoch: 5, LastFetchedEpoch: -1}, ErrNotLeaderOrFollower},
		{"not hosted", 2, FetchPartition{TopicPartition: tp.TopicPartition{Topic: "nope"}, LastFetchedEpoch: -1}, ErrUnknownTopicOrPartition},
		{"replica not assigned", 9, fetchAt(0, 5), ErrNotLeaderOrFollower},
		{"the leader itself", 1, fetchAt(0, 5), ErrNotLeaderOrFollower},
	}
	for _, tc := range cases {
		if got := h.fetch(tc.replica, tc.fp); got.Error != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got.Error, tc.want)
		}
	}
}

// divergenceHarness leads tp0 with leader epochs 1@0 and 3@10 and LEO 15.
func divergenceHarness(t *testing.T) *harness {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	h.produce(tp0, AcksLeader, values(10)...)
	h.leaderAndIsr(1, state("orders", 0, 1, 3, []int32{1, 2}, []int32{1}))
	h.produce(tp0, AcksLeader, values(5)...)
	if p, _ := h.describe(tp0); p.LogEndOffset != 15 {
		t.Fatalf("LEO %d, want 15", p.LogEndOffset)
	}
	return h
}

// A follower whose last fetched epoch the leader never had is told where its
// log diverges (KIP-279) and gets no records in that answer.
func TestFetchAnswersDivergingEpoch(t *testing.T) {
	h := divergenceHarness(t)
	fp := fetchAt(12, 3)
	fp.LastFetchedEpoch = 2
	r := h.fetch(2, fp)
	if r.Error != ErrNone || r.DivergingEpoch == nil || *r.DivergingEpoch != (EpochEndOffset{Epoch: 1, EndOffset: 10}) || len(r.Records) != 0 {
		t.Fatalf("got %+v, want diverging (1, 10) and no records", r)
	}
	// Epoch 2 never existed here, even though the follower's offset 8 is within epoch 1.
	fp8 := fetchAt(8, 3)
	fp8.LastFetchedEpoch = 2
	if r := h.fetch(2, fp8); r.DivergingEpoch == nil || *r.DivergingEpoch != (EpochEndOffset{Epoch: 1, EndOffset: 10}) {
		t.Fatalf("unknown epoch below the end of epoch 1: %+v", r.DivergingEpoch)
	}
	// Epoch 1 ends at 10 on the leader: a follower with epoch-1 records up to 12 diverges there too.
	fp.LastFetchedEpoch = 1
	if r := h.fetch(2, fp); r.DivergingEpoch == nil || *r.DivergingEpoch != (EpochEndOffset{Epoch: 1, EndOffset: 10}) {
		t.Fatalf("epoch 1 past its end: %+v", r.DivergingEpoch)
	}
	// Consistent logs: no divergence, and the read starts at the fetch offset's batch.
	fp.LastFetchedEpoch = 3
	if r := h.fetch(2, fp); r.DivergingEpoch != nil || r.Error != ErrNone || !slices.Equal(batchBases(t, r.Records), []int64{10}) {
		t.Fatalf("consistent follower: %+v", r)
	}
	fp = fetchAt(10, 3)
	fp.LastFetchedEpoch = 1
	if r := h.fetch(2, fp); r.DivergingEpoch != nil || len(r.Records) == 0 {
		t.Fatalf("follower at the end of epoch 1: %+v", r)
	}
}

// A fetch above the leader's LEO or below its log start is OFFSET_OUT_OF_RANGE
// and carries both bounds, so the follower knows where to truncate or restart.
func TestFetchOffsetOutOfRange(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	h.produce(tp0, AcksLeader, values(3)...)
	if r := h.fetch(2, fetchAt(5, 1)); r.Error != ErrOffsetOutOfRange || r.LogEndOffset != 3 || r.LogStartOffset != 0 {
		t.Fatalf("above the LEO: %+v", r)
	}
	if r := h.fetch(2, fetchAt(3, 1)); r.Error != ErrNone || len(r.Records) != 0 {
		t.Fatalf("at the LEO: %+v", r)
	}
	if err := h.rm.getPartition(tp0).partition.Log().TruncateFullyAndStartAt(7); err != nil {
		t.Fatal(err)
	}
	if r := h.fetch(2, fetchAt(2, 1)); r.Error != ErrOffsetOutOfRange || r.LogStartOffset != 7 || r.LogEndOffset != 7 {
		t.Fatalf("below the log start: %+v", r)
	}
}

// The HW advances when the ISR follower fetches at the leader's LEO, and a
// waiting acks=-1 produce then completes.
func TestFollowerFetchAdvancesHighWatermarkAndCompletesProduce(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	done := make(chan ProduceResult, 1)
	go func() { done <- h.produce(tp0, AcksAll, "a", "b") }()
	// The leader's own share of the HW is what it has fsynced (every-batch),
	// so wait for the fsync too, not only the append: a fetch at the LEO
	// before it would rightly leave the HW where it is.
	waitFor(t, func() bool {
		p, _ := h.describe(tp0)
		return p.LogEndOffset == 2 && h.rm.getPartition(tp0).partition.Log().DurableEndOffset() == 2
	})

	r := h.fetch(2, fetchAt(0, 1))
	if r.Error != ErrNone || !slices.Equal(batchBases(t, r.Records), []int64{0}) || r.HighWatermark != 0 || r.LogEndOffset != 2 {
		t.Fatalf("first fetch: %+v", r)
	}
	select {
	case res := <-done:
		t.Fatalf("acks=-1 completed before the follower had the batch: %+v", res)
	default:
	}
	if r := h.fetch(2, fetchAt(2, 1)); r.HighWatermark != 2 || len(r.Records) != 0 {
		t.Fatalf("fetch at the LEO: HW %d, %d bytes; want HW 2, none", r.HighWatermark, len(r.Records))
	}
	select {
	case res := <-done:
		if res.Error != ErrNone || res.BaseOffset != 0 {
			t.Fatalf("acks=-1 produce: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("acks=-1 produce did not complete after the HW moved")
	}
}

// A follower joins the ISR only once its LEO reaches the HW; the expansion
// bumps the partition epoch, visible in Describe.
func TestFollowerJoinsIsrOnceCaughtUpToHighWatermark(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	h.produce(tp0, AcksLeader, values(3)...)
	h.fetch(2, fetchAt(2, 1))
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1}) || p.PartitionEpoch != 0 || p.HighWatermark != 3 {
		t.Fatalf("follower below the HW: ISR %v partition epoch %d HW %d", p.ISR, p.PartitionEpoch, p.HighWatermark)
	}
	h.fetch(2, fetchAt(3, 1))
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != 1 {
		t.Fatalf("caught-up follower: ISR %v partition epoch %d, want [1 2] and 1", p.ISR, p.PartitionEpoch)
	}
}

// A follower at the HW but below the current leader epoch's start offset
// stays out of the ISR (KAFKA-7128), and joins once it reaches it.
func TestFollowerJoinsIsrOnlyPastEpochStartOffset(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) { c.MinInsyncReplicas = 2 })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	h.produce(tp0, AcksLeader, values(5)...) // HW stays 0: the ISR is under min.insync.replicas
	h.leaderAndIsr(1, state("orders", 0, 1, 2, []int32{1, 2}, []int32{1}))
	h.fetch(2, fetchAt(3, 2))
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1}) || p.HighWatermark != 0 {
		t.Fatalf("follower below the epoch start offset 5: ISR %v HW %d", p.ISR, p.HighWatermark)
	}
	h.fetch(2, fetchAt(5, 2))
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != 1 || p.HighWatermark != 5 {
		t.Fatalf("follower at the epoch start: ISR %v partition epoch %d HW %d", p.ISR, p.PartitionEpoch, p.HighWatermark)
	}
}

// A lagging follower leaves the ISR only after replica-lag-time-max, and the
// HW then stays put because the ISR is under min.insync.replicas.
func TestIsrShrinksOnlyAfterLagTime(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) { c.MinInsyncReplicas = 2; c.ReplicaLagTimeMax = 10 * time.Second })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	h.fetch(2, fetchAt(0, 1)) // caught up now
	h.produce(tp0, AcksLeader, "a")
	for range 2 { // the check runs every 5s: at 5s and 10s the lag is not over 10s
		h.clock.Advance(5 * time.Second)
		if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1, 2}) {
			t.Fatalf("ISR shrank to %v before the lag time", p.ISR)
		}
	}
	h.clock.Advance(5 * time.Second)
	p, _ := h.describe(tp0)
	if !slices.Equal(p.ISR, []int32{1}) || p.PartitionEpoch != 1 {
		t.Fatalf("after the lag time: ISR %v partition epoch %d, want [1] and 1", p.ISR, p.PartitionEpoch)
	}
	if p.HighWatermark != 0 {
		t.Fatalf("HW moved to %d with the ISR under min.insync.replicas", p.HighWatermark)
	}
}

// A follower that keeps fetching up to the LEO stays in the ISR however long it runs.
func TestCaughtUpFollowerStaysInIsr(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) { c.ReplicaLagTimeMax = 10 * time.Second })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	for i := range 6 {
		h.produce(tp0, AcksLeader, "a")
		h.fetch(2, fetchAt(int64(i), 1)) // one batch behind, at the LEO of its previous fetch
		h.clock.Advance(5 * time.Second)
	}
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("a follower trailing by one fetch left the ISR: %v", p.ISR)
	}
}

// A caught-up follower's long-polling fetch returns as soon as data is appended.
func TestLongPollFetchWokenByAppend(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	done := make(chan FetchResponse, 1)
	go func() {
		done <- h.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: 2, BrokerEpoch: -1, MinBytes: 1, MaxWait: time.Hour,
			Partitions: []FetchPartition{fetchAt(0, 1)}})
	}()
	p := h.rm.getPartition(tp0).partition
	waitFor(t, func() bool { // the fetch has been recorded, so it is waiting
		p.mu.RLock()
		defer p.mu.RUnlock()
		return !p.remoteReplicas[2].lastFetchTime.IsZero()
	})
	select {
	case r := <-done:
		t.Fatalf("fetch returned with no data and max wait not reached: %+v", r)
	default:
	}
	h.produce(tp0, AcksLeader, "late")
	select {
	case r := <-done:
		if !slices.Equal(batchBases(t, r.Partitions[0].Records), []int64{0}) {
			t.Fatalf("woken fetch: %+v", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the append did not wake the fetch (the manual clock never reaches max wait)")
	}
}

// A caught-up follower's long-polling fetch returns as soon as the leader's
// log start rises (retention, DeleteRecords), with the new log start: the
// follower deletes what the leader deleted at once, not a max wait later.
func TestLongPollFetchWokenByLogStart(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	for range 3 {
		h.produce(tp0, AcksLeader, "r")
	}
	if r := h.fetch(2, fetchAt(3, 1)); r.Error != ErrNone || r.HighWatermark != 3 {
		t.Fatalf("caught-up fetch: %+v", r)
	}
	h.clock.Advance(time.Millisecond) // tells this fetch's record from the last one's
	done := make(chan FetchResponse, 1)
	go func() {
		done <- h.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: 2, BrokerEpoch: -1, MinBytes: 1, MaxWait: time.Hour,
			Partitions: []FetchPartition{fetchAt(3, 1)}})
	}()
	p := h.rm.getPartition(tp0).partition
	waitFor(t, func() bool { // the fetch has read and been recorded, so it is waiting
		p.mu.RLock()
		defer p.mu.RUnlock()
		return p.remoteReplicas[2].lastFetchTime.Equal(h.clock.Now())
	})
	if _, code := p.deleteRecordsOnLeader(2); code != ErrNone {
		t.Fatal(code)
	}
	select {
	case r := <-done:
		if r.Partitions[0].Error != ErrNone || r.Partitions[0].LogStartOffset != 2 {
			t.Fatalf("woken fetch: %+v, want log start 2", r.Partitions[0])
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the log start rise did not wake the fetch (the manual clock never reaches max wait)")
	}
}

// A long-polling fetch with nothing to read returns when max wait passes.
func TestLongPollFetchExpires(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	done := make(chan FetchResponse, 1)
	go func() {
		done <- h.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: 2, BrokerEpoch: -1, MinBytes: 1, MaxWait: time.Second,
			Partitions: []FetchPartition{fetchAt(0, 1)}})
	}()
	waitFor(t, func() bool {
		h.clock.Advance(time.Second)
		select {
		case r := <-done:
			if r.Partitions[0].Error != ErrNone || len(r.Partitions[0].Records) != 0 {
				t.Fatalf("expired fetch: %+v", r)
			}
			return true
		default:
			return false
		}
	})
}

// With HardMaxBytes a first batch larger than MaxBytes is not served (a
// soft limit serves it whole), and the long poll answers at once instead of
// waiting for MinBytes, so the fetcher can ask again with more.
func TestFetchHardMaxBytes(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	big := string(make([]byte, 4000))
	h.produce(tp0, AcksLeader, big)
	h.produce(tp0, AcksLeader, "small")
	fetch := func(hard bool, maxBytes int) FetchPartitionResult {
		t.Helper()
		done := make(chan FetchResponse, 1)
		go func() {
			done <- h.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: 2, BrokerEpoch: -1, MinBytes: 1, MaxWait: time.Hour,
				MaxBytes: maxBytes, HardMaxBytes: hard, Partitions: []FetchPartition{fetchAt(0, 1)}})
		}()
		select {
		case r := <-done:
			return r.Partitions[0]
		case <-time.After(10 * time.Second):
			t.Fatalf("hard %v, max bytes %d: the fetch waited (the manual clock never reaches max wait)", hard, maxBytes)
			return FetchPartitionResult{}
		}
	}
	r := fetch(false, 100)
	if r.Error != ErrNone || !slices.Equal(batchBases(t, r.Records), []int64{0}) {
		t.Fatalf("soft limit: %+v, want the first batch whole", r)
	}
	first := len(r.Records)
	if r := fetch(true, 100); r.Error != ErrNone || len(r.Records) != 0 || r.LogEndOffset != 2 {
		t.Fatalf("hard limit below the first batch: %d bytes, %+v; want none, answered at once", len(r.Records), r)
	}
	if r := fetch(true, first+1); !slices.Equal(batchBases(t, r.Records), []int64{0}) {
		t.Fatalf("hard limit above the first batch only: got batches %v, want [0]", batchBases(t, r.Records))
	}
	if r := fetch(true, 1<<20); !slices.Equal(batchBases(t, r.Records), []int64{0, 1}) {
		t.Fatalf("hard limit above both: got batches %v, want [0 1]", batchBases(t, r.Records))
	}
}

// A fetch carrying a broker epoch older than the one the controller gave for
// that follower is STALE_BROKER_EPOCH and records nothing. What a fetch
// claims is never believed: a forged fetch with the largest epoch, even for
// a partition that does not exist, fences no one (issue 12).
func TestFetchStaleBrokerEpoch(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	h.produce(tp0, AcksLeader, "a")
	fetchOf := func(t tp.TopicPartition, brokerEpoch int64, offset int64) FetchPartitionResult {
		fp := fetchAt(offset, 1)
		fp.TopicPartition = t
		return h.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: 2, BrokerEpoch: brokerEpoch,
			Partitions: []FetchPartition{fp}}).Partitions[0]
	}
	fetch := func(brokerEpoch int64, offset int64) FetchPartitionResult { return fetchOf(tp0, brokerEpoch, offset) }

	// Forged claims, on a partition that does not exist and on one that does.
	if r := fetchOf(tp.TopicPartition{Topic: "nope", Partition: 0}, math.MaxInt64, 0); r.Error != ErrNotLeaderOrFollower && r.Error != ErrUnknownTopicOrPartition {
		t.Fatalf("forged fetch of a missing partition: %v", r.Error)
	}
	if r := fetch(math.MaxInt64, 0); r.Error != ErrNone {
		t.Fatalf("forged epoch: %v", r.Error)
	}
	if r := fetch(7, 0); r.Error != ErrNone {
		t.Fatalf("the real broker after a forged claim: got %v, want NONE", r.Error)
	}

	// The controller says broker 2 is at epoch 7.
	if code := h.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1,
		LiveBrokers: []Broker{{ID: 1, Host: "h", Port: 1, Epoch: 3}, {ID: 2, Host: "h", Port: 2, Epoch: 7}}}); code != ErrNone {
		t.Fatalf("UpdateMetadata: %v", code)
	}
	if r := fetch(6, 1); r.Error != ErrStaleBrokerEpoch {
		t.Fatalf("older epoch: got %v, want STALE_BROKER_EPOCH", r.Error)
	}
	if p, _ := h.describe(tp0); !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("a stale fetcher joined the ISR: %v", p.ISR)
	}
	if r := fetch(math.MaxInt64, 1); r.Error != ErrNone {
		t.Fatalf("newer epoch than known: %v", r.Error)
	}
	// ... and it raised nothing: the known epoch is still 7.
	if r := fetch(7, 1); r.Error != ErrNone {
		t.Fatalf("known epoch after a newer claim: %v", r.Error)
	}
	// A LeaderAndIsr's live leaders teach epochs too; they never go down.
	h.rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1,
		LiveLeaders: []Broker{{ID: 2, Host: "h", Port: 2, Epoch: 9}}})
	if r := fetch(8, 1); r.Error != ErrStaleBrokerEpoch {
		t.Fatalf("epoch 8 after the controller said 9: %v", r.Error)
	}
	h.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: 1,
		LiveBrokers: []Broker{{ID: 2, Host: "h", Port: 2, Epoch: 5}}})
	if r := fetch(8, 1); r.Error != ErrStaleBrokerEpoch {
		t.Fatalf("a reordered older epoch lowered the known one: %v", r.Error)
	}
	// Without epochs (standalone: negative), nothing is fenced.
	if r := fetch(-1, 1); r.Error != ErrNone {
		t.Fatalf("unknown epoch: %v", r.Error)
	}
}

// OffsetsForLeaderEpoch answers the largest epoch <= the requested one and its
// end offset, with the same leader epoch fencing as a fetch.
func TestOffsetsForLeaderEpoch(t *testing.T) {
	h := divergenceHarness(t)
	ask := func(current, requested int32) OffsetForLeaderEpochResult {
		return h.rm.OffsetsForLeaderEpoch(context.Background(), OffsetsForLeaderEpochRequest{ReplicaID: 2,
			Partitions: []OffsetForLeaderEpochPartition{{TopicPartition: tp0, CurrentLeaderEpoch: current, LeaderEpoch: requested}}}).Partitions[0]
	}
	want := []struct {
		current, requested int32
		code               ErrorCode
		epoch              int32
		end                int64
	}{
		{3, 2, ErrNone, 1, 10},
		{3, 3, ErrNone, 3, 15},
		{-1, 1, ErrNone, 1, 10},
		{2, 1, ErrFencedLeaderEpoch, -1, -1},
		{4, 1, ErrUnknownLeaderEpoch, -1, -1},
	}
	for _, w := range want {
		if r := ask(w.current, w.requested); r.Error != w.code || r.LeaderEpoch != w.epoch || r.EndOffset != w.end {
			t.Errorf("current %d requested %d: got %+v", w.current, w.requested, r)
		}
	}
}

// armClock is a clock that says on armed when a timer of duration d is set.
type armClock struct {
	clock.Clock
	d     time.Duration
	armed chan struct{}
}

func (c *armClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	if d == c.d {
		select {
		case c.armed <- struct{}{}:
		default:
		}
	}
	return c.Clock.AfterFunc(d, f)
}

// parkFetch starts a long-polling fetch of replica at offset and waits
// until it has read and been recorded, so it is waiting.
func (h *harness) parkFetch(replica int32, offset int64) <-chan FetchResponse {
	h.t.Helper()
	h.clock.Advance(time.Millisecond) // tells this fetch's record from the last one's
	done := make(chan FetchResponse, 1)
	go func() {
		done <- h.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: replica, BrokerEpoch: -1, MinBytes: 1, MaxWait: time.Hour,
			Partitions: []FetchPartition{fetchAt(offset, 1)}})
	}()
	p := h.rm.getPartition(tp0).partition
	waitFor(h.t, func() bool {
		p.mu.RLock()
		defer p.mu.RUnlock()
		return p.remoteReplicas[replica].lastFetchTime.Equal(h.clock.Now())
	})
	return done
}

// A parked follower fetch is not answered the moment another follower's
// report moves the HW: it waits HighWatermarkLinger for records to carry the
// HW, and only then answers with the HW alone. Answered at once, every
// acks=-1 record cost a round trip more per follower.
func TestParkedFetchAnswersHighWatermarkAfterLinger(t *testing.T) {
	armed := make(chan struct{}, 1)
	h := newHarness(t, 1, func(c *Config) { c.Clock = &armClock{Clock: c.Clock, d: HighWatermarkLinger, armed: armed} })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	// Both followers' log starts are known: a report that changes one
	// wakes the parked fetches at once, as it should.
	h.fetch(2, fetchAt(0, 1))
	h.fetch(3, fetchAt(0, 1))
	h.produce(tp0, AcksLeader, "a")
	if r := h.fetch(2, fetchAt(1, 1)); r.Error != ErrNone || r.HighWatermark != 0 {
		t.Fatalf("follower 2 at the LEO: %+v", r)
	}
	done := h.parkFetch(2, 1)
	if r := h.fetch(3, fetchAt(1, 1)); r.Error != ErrNone || r.HighWatermark != 1 {
		t.Fatalf("follower 3's report: %+v, want HW 1", r)
	}
	select {
	case r := <-done:
		t.Fatalf("the parked fetch answered the HW alone at once: %+v", r.Partitions[0])
	case <-armed:
	case <-time.After(10 * time.Second):
		t.Fatal("the HW move did not reach the parked fetch")
	}
	select {
	case r := <-done:
		t.Fatalf("the parked fetch answered before the linger: %+v", r.Partitions[0])
	default:
	}
	h.clock.Advance(HighWatermarkLinger)
	select {
	case r := <-done:
		if p := r.Partitions[0]; p.Error != ErrNone || p.HighWatermark != 1 || len(p.Records) != 0 {
			t.Fatalf("answer after the linger: %+v, want HW 1 and no records", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the parked fetch did not answer after the linger")
	}
}

// Records that come within the linger answer the parked fetch at once, and
// carry the HW that moved before them.
func TestParkedFetchRecordsCarryLingeringHighWatermark(t *testing.T) {
	armed := make(chan struct{}, 1)
	h := newHarness(t, 1, func(c *Config) { c.Clock = &armClock{Clock: c.Clock, d: HighWatermarkLinger, armed: armed} })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2, 3}))
	// Both followers' log starts are known: a report that changes one
	// wakes the parked fetches at once, as it should.
	h.fetch(2, fetchAt(0, 1))
	h.fetch(3, fetchAt(0, 1))
	h.produce(tp0, AcksLeader, "a")
	h.fetch(2, fetchAt(1, 1))
	done := h.parkFetch(2, 1)
	h.fetch(3, fetchAt(1, 1))
	select {
	case r := <-done:
		t.Fatalf("the parked fetch answered the HW alone at once: %+v", r.Partitions[0])
	case <-armed:
	case <-time.After(10 * time.Second):
		t.Fatal("the HW move did not reach the parked fetch")
	}
	h.produce(tp0, AcksLeader, "b")
	select {
	case r := <-done:
		if p := r.Partitions[0]; p.Error != ErrNone || p.HighWatermark != 1 || !slices.Equal(batchBases(t, p.Records), []int64{1}) {
			t.Fatalf("answer with records: %+v, want HW 1 and the batch at 1", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the append did not answer the parked fetch (the manual clock never reaches the linger)")
	}
}

// A follower's report completes the waiting acks=-1 produce by itself: the
// fetch that carries it parks (it has nothing to read) and is not answered,
// no timer fires (the manual clock never moves), and the produce is done.
func TestAcksAllCompletesOnParkedReport(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	produced := make(chan ProduceResult, 1)
	go func() { produced <- h.produce(tp0, AcksAll, "a") }()
	p := h.rm.getPartition(tp0).partition
	waitFor(t, func() bool { return p.Log().DurableEndOffset() == 1 })
	if r := h.fetch(2, fetchAt(0, 1)); r.Error != ErrNone || !slices.Equal(batchBases(t, r.Records), []int64{0}) {
		t.Fatalf("the follower's fetch of the record: %+v", r)
	}
	report := h.parkFetch(2, 1)
	select {
	case res := <-produced:
		if res.Error != ErrNone || res.BaseOffset != 0 || res.HighWatermark != 1 {
			t.Fatalf("acks=-1 produce: %+v", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the report did not complete the acks=-1 produce")
	}
	select {
	case r := <-report:
		t.Fatalf("the report's fetch was answered with nothing to read: %+v", r.Partitions[0])
	default:
	}
}
