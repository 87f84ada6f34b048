package fetcher

import (
	"testing"
	"time"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

var (
	p0 = tp.TopicPartition{Topic: "orders", Partition: 0}
	p1 = tp.TopicPartition{Topic: "orders", Partition: 1}
)

// A follower replicates the leader's batches and epochs byte for byte, keeps
// fetching as new data comes, and sets its HW to min(leader HW, own LEO).
func TestFetchReplicatesAndSetsHighWatermark(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 3, 0)
		appendBatches(t, ll, 1, 2)
		appendBatches(t, ll, 3, 3)
		leader := e.serve(1, fl)
		r := e.follow(p0, 3, 0)
		e.manager()
		e.add(p0, leader, 3)
		waitCaughtUp(t, r, ll)
		fl.append(p0, 4)
		waitCaughtUp(t, r, ll)
		sameLog(t, r.log, ll)
		waitFor(t, "follower HW = leader HW", func() bool { return r.HighWatermark() == ll.LogEndOffset() }, nil)
		waitFor(t, "fetch at offset 9", func() bool { reqs := fl.requestsFor(p0); return reqs[len(reqs)-1].GetFetchOffset() == 9 }, nil)
		reqs := fl.requestsFor(p0)
		last := reqs[len(reqs)-1]
		if last.GetCurrentLeaderEpoch() != 3 || last.GetLastFetchedEpoch() != 3 || last.GetFetchOffset() != 9 {
			t.Fatalf("last fetch = %v, want epoch 3, last fetched epoch 3, offset 9", last)
		}
		fl.with(func(fl *fakeLeader) {
			req := fl.requests[len(fl.requests)-1]
			if req.GetReplicaId() != 100 || req.GetBrokerEpoch() != 7 || req.GetMinBytes() != 1 || req.GetMaxWaitMs() != 200 {
				t.Errorf("request header = %v", req)
			}
		})
	})
}

// Diverging epochs: a follower whose epochs went 1, 2, 4 (4 never reached
// the new leader, whose epochs are 1, 2, 5) truncates to where epoch 2 ends on
// the leader and then takes epoch 5 (lastFetchedEpoch 4 -> 2 -> 5). When it
// does not know the leader's epoch (1, 3, 4 against 1, 2, 5) it first
// truncates to its own end of the epoch below, then to the exact point.
func TestDivergingEpochs(t *testing.T) {
	cases := []struct {
		name           string
		followerEpochs []int32 // two batches each
		wantLastEpochs []int32 // lastFetchedEpoch of the first fetches
	}{
		{"follower knows epoch 2", []int32{1, 2, 4}, []int32{4, 2, 5}},
		{"follower lacks epoch 2", []int32{1, 3, 4}, []int32{4, 1, 5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			forEachTransport(t, func(t *testing.T, e *env) {
				fl := newFakeLeader(t)
				ll := fl.addPartition(p0, 5, 0)
				appendBatches(t, ll, 1, 2) // [0,2)
				appendBatches(t, ll, 2, 1) // [2,3)
				appendBatches(t, ll, 5, 4) // [3,7)
				leader := e.serve(1, fl)
				r := e.follow(p0, 5, 0)
				for _, ep := range c.followerEpochs {
					appendBatches(t, r.log, ep, 2)
				}
				e.manager()
				e.add(p0, leader, 5)
				waitCaughtUp(t, r, ll)
				sameLog(t, r.log, ll)
				waitFor(t, "fetch at epoch 5", func() bool {
					reqs := fl.requestsFor(p0)
					return reqs[len(reqs)-1].GetLastFetchedEpoch() == 5
				}, nil)
				var got []int32
				for _, fp := range fl.requestsFor(p0) {
					if n := len(got); n == 0 || got[n-1] != fp.GetLastFetchedEpoch() {
						got = append(got, fp.GetLastFetchedEpoch())
					}
				}
				if len(got) < len(c.wantLastEpochs) {
					t.Fatalf("lastFetchedEpoch went %v, want %v first", got, c.wantLastEpochs)
				}
				for i, w := range c.wantLastEpochs {
					if got[i] != w {
						t.Fatalf("lastFetchedEpoch went %v, want %v first", got, c.wantLastEpochs)
					}
				}
			})
		})
	}
}

// KIP-279: records that come with a diverging epoch are not applied; the
// next fetch starts at the truncation point (Kafka's
// testTruncateOnFetchDoesNotProcessPartitionData).
func TestTruncateOnFetchDoesNotProcessPartitionData(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 5, 0)
		appendBatches(t, ll, 1, 3) // [0,3)
		appendBatches(t, ll, 5, 2) // [3,5)
		tail, err := ll.Read(3, 1<<20, ll.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		// The first answer says "diverged at 3" and also carries the leader's
		// batches from 3, which would append cleanly if applied.
		fl.script = func(n int, fp *replicadv1.FetchPartition) *replicadv1.FetchPartitionResult {
			if n != 1 {
				return nil
			}
			return &replicadv1.FetchPartitionResult{
				DivergingEpoch: &replicadv1.EpochEndOffset{Epoch: 1, EndOffset: 3},
				Records:        tail.Data, HighWatermark: 5, LogEndOffset: 5,
			}
		}
		leader := e.serve(1, fl)
		r := e.follow(p0, 5, 0)
		appendBatches(t, r.log, 1, 3)
		appendBatches(t, r.log, 4, 3) // [3,6) never reached the leader
		e.manager()
		e.add(p0, leader, 5)
		waitFor(t, "second fetch", func() bool { return len(fl.requestsFor(p0)) >= 2 }, nil)
		second := fl.requestsFor(p0)[1]
		if second.GetFetchOffset() != 3 || second.GetLastFetchedEpoch() != 1 {
			t.Fatalf("second fetch at offset %d epoch %d, want 3 and 1: records of the diverging answer were applied",
				second.GetFetchOffset(), second.GetLastFetchedEpoch())
		}
		waitCaughtUp(t, r, ll)
		sameLog(t, r.log, ll)
	})
}

// Out of range high: a follower ahead of a leader that does not answer with
// a diverging epoch truncates to the leader's LEO, then follows it.
func TestOutOfRangeHighTruncatesToLeaderEnd(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		fl.noDivergence = true
		ll := fl.addPartition(p0, 1, 0)
		appendBatches(t, ll, 1, 5)
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		appendBatches(t, r.log, 1, 8)
		e.manager()
		e.add(p0, leader, 1)
		waitFor(t, "truncation to the leader's end", func() bool { return r.LogEndOffset() == 5 }, nil)
		fl.append(p0, 2)
		waitCaughtUp(t, r, ll)
		sameLog(t, r.log, ll)
		if got := fl.requestsFor(p0)[1].GetFetchOffset(); got != 5 {
			t.Fatalf("fetch after out of range at %d, want 5", got)
		}
	})
}

// Out of range low: a follower behind the leader's log start restarts its
// log empty at the leader's log start, then fetches from there.
func TestOutOfRangeLowStartsAtLeaderLogStart(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 1, 100)
		appendBatches(t, ll, 1, 4)
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		appendBatches(t, r.log, 1, 2) // [0,2), behind the leader's start
		e.manager()
		e.add(p0, leader, 1)
		waitCaughtUp(t, r, ll)
		if r.LogStartOffset() != 100 {
			t.Fatalf("follower log start %d, want 100", r.LogStartOffset())
		}
		sameLog(t, r.log, ll)
	})
}

// FENCED_LEADER_EPOCH sets that partition aside as failed while the other
// partition of the same fetcher keeps replicating; the next
// AddFetcherForPartitions with the new epoch resumes it.
func TestFencedPartitionFailsOthersContinue(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		l0 := fl.addPartition(p0, 2, 0)
		l1 := fl.addPartition(p1, 1, 0)
		appendBatches(t, l0, 2, 2)
		leader := e.serve(1, fl)
		r0, r1 := e.follow(p0, 1, 0), e.follow(p1, 1, 0)
		m := e.manager()
		e.add(p0, leader, 1) // epoch 1 < leader's 2: fenced
		e.add(p1, leader, 1)
		waitFor(t, "p0 failed", func() bool { return m.IsFailed(p0) }, nil)
		if _, ok := m.FetchState(p0); ok {
			t.Fatal("failed partition still fetched")
		}
		fl.append(p1, 3)
		waitCaughtUp(t, r1, l1)
		if got := len(m.Fetchers()); got != 1 {
			t.Fatalf("%d fetchers, want 1", got)
		}
		if r0.LogEndOffset() != 0 {
			t.Fatalf("fenced partition appended up to %d", r0.LogEndOffset())
		}
		r0.epoch.Store(2)
		e.add(p0, leader, 2)
		if m.IsFailed(p0) {
			t.Fatal("p0 still failed after a new AddFetcherForPartitions")
		}
		waitCaughtUp(t, r0, l0)
	})
}

// UNKNOWN_LEADER_EPOCH (the leader has not applied the new epoch yet) is
// retried, not set aside: once the leader catches up, replication resumes
// without another AddFetcherForPartitions.
func TestUnknownLeaderEpochIsRetried(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 1, 0)
		appendBatches(t, ll, 1, 2)
		leader := e.serve(1, fl)
		r := e.follow(p0, 2, 0)
		m := e.manager()
		e.add(p0, leader, 2)
		waitFor(t, "UNKNOWN_LEADER_EPOCH answered", func() bool { return len(fl.requestsFor(p0)) >= 2 }, nil)
		if m.IsFailed(p0) {
			t.Fatal("partition failed on UNKNOWN_LEADER_EPOCH")
		}
		fl.setEpoch(p0, 2)
		fl.append(p0, 1)
		waitCaughtUp(t, r, ll)
	})
}

// A corrupt batch is not appended; the partition is fetched again from the
// same offset on the same stream and then gets the good data.
func TestCorruptBatchIsRetried(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 1, 0)
		appendBatches(t, ll, 1, 3)
		fl.corrupt[p0] = 2
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		m := e.manager()
		e.add(p0, leader, 1)
		waitCaughtUp(t, r, ll)
		sameLog(t, r.log, ll)
		reqs := fl.requestsFor(p0)
		for i := range 3 {
			if reqs[i].GetFetchOffset() != 0 {
				t.Fatalf("fetch %d at offset %d, want 0 (corrupt data appended?)", i, reqs[i].GetFetchOffset())
			}
		}
		if n := e.client.opens.Load(); n != 1 {
			t.Fatalf("%d streams opened, want 1: the fetcher did not survive", n)
		}
		if m.IsFailed(p0) {
			t.Fatal("partition failed on a corrupt batch")
		}
	})
}

// A broken stream is reopened after a backoff on the injected clock, and
// fetching resumes where it was.
func TestReconnectAfterBrokenStream(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		clk := clock.NewManual(time.Unix(0, 0))
		e.cfg.Clock = clk
		e.cfg.ReconnectBackoff, e.cfg.MaxReconnectBackoff = time.Second, 4*time.Second
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 1, 0)
		appendBatches(t, ll, 1, 2)
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		e.manager()
		e.add(p0, leader, 1)
		waitCaughtUp(t, r, ll)
		fl.with(func(fl *fakeLeader) { fl.breakNext = 2 })
		fl.append(p0, 3)
		// The fetch in flight returns the new data; the next two break the stream.
		waitFor(t, "two reconnects and catch up", func() bool {
			return e.client.opens.Load() == 3 && r.LogEndOffset() == ll.LogEndOffset()
		}, func() { clk.Advance(500 * time.Millisecond) })
		fl.append(p0, 1)
		waitCaughtUp(t, r, ll)
		if n := e.client.opens.Load(); n != 3 {
			t.Fatalf("%d streams opened, want 3", n)
		}
		sameLog(t, r.log, ll)
	})
}

// A partition whose replica moved to a newer leader epoch than its fetch
// state's is dropped from the fetcher (stale), without being marked failed.
func TestStalePartitionIsDropped(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 1, 0)
		appendBatches(t, ll, 1, 1)
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		m := e.manager()
		e.add(p0, leader, 1)
		waitCaughtUp(t, r, ll)
		r.epoch.Store(2)
		fl.append(p0, 1) // wakes the long poll
		waitFor(t, "stale partition dropped", func() bool { _, ok := m.FetchState(p0); return !ok }, nil)
		if m.IsFailed(p0) {
			t.Fatal("stale partition marked failed")
		}
	})
}
