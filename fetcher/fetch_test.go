package fetcher

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

var (
	p0 = tp.TopicPartition{Topic: "orders", Partition: 0}
	p1 = tp.TopicPartition{Topic: "orders", Partition: 1}
)

// A follower replicates the leader's batches and epochs byte for byte, keeps
// fetching as new data comes, and sets its HW to min(leader HW, own LEO):
// neither the leader's HW when its own LEO is below it, nor its own LEO when
// the leader's HW is below that.
func TestFetchReplicatesAndSetsHighWatermark(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 3, 0)
		appendBatches(t, ll, 1, 2)
		appendBatches(t, ll, 3, 3)
		// Leader HW 5 = its LEO, but it serves only [0,3): follower LEO 3 < 5.
		fl.with(func(fl *fakeLeader) { fl.readLimit[p0] = 3 })
		leader := e.serve(1, fl)
		r := e.follow(p0, 3, 0)
		e.manager()
		e.add(p0, leader, 3)
		// A fetch at offset n is sent after the answer that brought the LEO to
		// n was applied, HW included.
		waitFor(t, "fetch at offset 3", func() bool { return fl.lastFetchAt(p0, 3) }, nil)
		if leo, hw := r.LogEndOffset(), r.HighWatermark(); leo != 3 || hw != 3 {
			t.Fatalf("follower LEO %d HW %d with leader HW 5, want 3 and 3 (min(leader HW, own LEO))", leo, hw)
		}
		// Now the leader serves everything, but its HW (7) is below its LEO (9).
		fl.with(func(fl *fakeLeader) {
			delete(fl.readLimit, p0)
			fl.hw[p0] = 7
		})
		fl.append(p0, 4)
		waitCaughtUp(t, r, ll)
		sameLog(t, r.log, ll)
		waitFor(t, "fetch at offset 9", func() bool { return fl.lastFetchAt(p0, 9) }, nil)
		if hw := r.HighWatermark(); hw != 7 {
			t.Fatalf("follower HW %d with leader HW 7 and own LEO 9, want 7", hw)
		}
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

// Every fetch request carries the broker epoch current when it is built: a
// broker that re-registers with the controller fetches with its new epoch
// without restarting its fetchers.
func TestFetchCarriesLiveBrokerEpoch(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		var epoch atomic.Int64
		epoch.Store(7)
		e.cfg.BrokerEpoch = epoch.Load
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 3, 0)
		appendBatches(t, ll, 3, 2)
		leader := e.serve(1, fl)
		r := e.follow(p0, 3, 0)
		e.manager()
		e.add(p0, leader, 3)
		waitCaughtUp(t, r, ll)
		lastEpoch := func() int64 {
			var got int64
			fl.with(func(fl *fakeLeader) { got = fl.requests[len(fl.requests)-1].GetBrokerEpoch() })
			return got
		}
		if got := lastEpoch(); got != 7 {
			t.Fatalf("broker_epoch %d, want 7", got)
		}
		epoch.Store(12)
		fl.append(p0, 1)
		waitFor(t, "a fetch with broker epoch 12", func() bool { return lastEpoch() == 12 }, nil)
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

// Out of range low, with the leader's log start inside a batch (DeleteRecords
// to an offset within one): the follower restarts its log at the leader's
// log start, the leader answers with the whole batch, which starts below it;
// the follower restarts its empty log at the batch's base and appends it, as
// Kafka's Partition.appendRecordsToFollowerOrFutureReplica does. Before, the
// append failed (offset mismatch) and the partition stayed failed: the
// follower never rejoined the ISR (found by the simulation, seed 14).
func TestOutOfRangeLowLogStartInsideBatch(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 1, 0)
		appendBatch(t, ll, 1, 4) // [0,4)
		appendBatch(t, ll, 1, 2) // [4,6)
		ll.UpdateHighWatermark(6)
		if _, err := ll.IncrementLogStartOffset(2); err != nil {
			t.Fatal(err)
		}
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		m := e.manager()
		e.add(p0, leader, 1)
		waitCaughtUp(t, r, ll)
		if m.IsFailed(p0) {
			t.Fatal("partition failed")
		}
		if r.LogStartOffset() != 2 {
			t.Fatalf("follower log start %d, want the leader's, 2", r.LogStartOffset())
		}
		fl.append(p0, 1)
		waitCaughtUp(t, r, ll)
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

// INCONSISTENT_TOPIC_ID and UNKNOWN_TOPIC_ID (a topic of the name was
// deleted and created again, and the leader has not applied the new topic's
// LeaderAndIsr yet, while this broker has) are retried, not set aside: no
// LeaderAndIsr with a new leader epoch comes to this broker once the leader
// catches up, and a partition set aside then never fetched again (seed
// 244401447 of the simulation: the ISR never filled).
func TestTopicIDMismatchIsRetried(t *testing.T) {
	for _, code := range []replicadv1.ErrorCode{replicadv1.ErrorCode_ERROR_CODE_INCONSISTENT_TOPIC_ID,
		replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_ID} {
		t.Run(code.String(), func(t *testing.T) {
			forEachTransport(t, func(t *testing.T, e *env) {
				fl := newFakeLeader(t)
				ll := fl.addPartition(p0, 0, 0)
				appendBatches(t, ll, 0, 2)
				fl.with(func(fl *fakeLeader) { fl.errs[p0] = code })
				leader := e.serve(1, fl)
				r := e.follow(p0, 0, 0)
				m := e.manager()
				e.add(p0, leader, 0)
				waitFor(t, code.String()+" answered twice", func() bool { return len(fl.requestsFor(p0)) >= 2 }, nil)
				if m.IsFailed(p0) {
					t.Fatalf("partition set aside on %v", code)
				}
				// The leader takes the new topic's LeaderAndIsr.
				fl.with(func(fl *fakeLeader) { delete(fl.errs, p0) })
				fl.append(p0, 1)
				waitCaughtUp(t, r, ll)
				sameLog(t, r.log, ll)
			})
		})
	}
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

// A diverging epoch older than every epoch the follower holds makes it drop
// everything from its first epoch, so the next fetch carries another last
// fetched epoch and progresses, instead of truncating to the leader's end
// offset, keeping its epoch and livelocking.
func TestDivergingEpochOlderThanFollowerEpochs(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 6, 10)
		appendBatches(t, ll, 3, 10) // [10,20)
		appendBatches(t, ll, 6, 3)  // [20,23)
		leader := e.serve(1, fl)
		r := e.follow(p0, 6, 10)
		appendBatch(t, r.log, 5, 7) // [10,17)
		appendBatch(t, r.log, 5, 8) // [17,25)
		e.manager()
		e.add(p0, leader, 6)
		waitCaughtUp(t, r, ll)
		sameLog(t, r.log, ll)
		reqs := fl.requestsFor(p0)
		if len(reqs) < 2 {
			t.Fatalf("%d fetches, want at least 2", len(reqs))
		}
		if first := reqs[0]; first.GetFetchOffset() != 25 || first.GetLastFetchedEpoch() != 5 {
			t.Fatalf("first fetch at offset %d epoch %d, want 25 and 5", first.GetFetchOffset(), first.GetLastFetchedEpoch())
		}
		if second := reqs[1]; second.GetFetchOffset() != 10 || second.GetLastFetchedEpoch() != -1 {
			t.Fatalf("second fetch at offset %d epoch %d, want 10 and -1 (all of epoch 5 dropped)",
				second.GetFetchOffset(), second.GetLastFetchedEpoch())
		}
	})
}

// A diverging answer whose truncation changes nothing delays the partition
// by PartitionBackoff instead of fetching it again at once.
func TestNoOpDivergenceIsDelayed(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		clk := clock.NewManual(time.Unix(0, 0))
		e.cfg.Clock = clk
		e.cfg.PartitionBackoff = time.Second
		fl := newFakeLeader(t)
		fl.addPartition(p0, 1, 0)
		// Always "epoch 1 ends at 3", which is where the follower's epoch 1
		// ends too: the truncation it asks for is a no-op.
		fl.script = func(n int, fp *replicadv1.FetchPartition) *replicadv1.FetchPartitionResult {
			return &replicadv1.FetchPartitionResult{
				DivergingEpoch: &replicadv1.EpochEndOffset{Epoch: 1, EndOffset: 3}, HighWatermark: 3, LogEndOffset: 3,
			}
		}
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		appendBatches(t, r.log, 1, 3)
		m := e.manager()
		e.add(p0, leader, 1)
		waitFor(t, "partition delayed", func() bool { s, ok := m.FetchState(p0); return ok && s.Delayed }, nil)
		time.Sleep(50 * time.Millisecond)
		if n := len(fl.requestsFor(p0)); n != 1 {
			t.Fatalf("%d fetches while the partition should wait out its backoff, want 1", n)
		}
		if r.LogEndOffset() != 3 {
			t.Fatalf("follower LEO %d, want 3", r.LogEndOffset())
		}
		clk.Advance(time.Second)
		waitFor(t, "fetch after the backoff", func() bool { return len(fl.requestsFor(p0)) >= 2 }, nil)
	})
}

// Partitions that got records go last in the next fetch, so that with the
// leader sharing max_bytes in request order a far-behind partition does not
// starve the others: each of two partitions behind by more than max_bytes
// makes progress within the first two fetches.
func TestFetchOrderRotatesSoNoPartitionStarves(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		batchSize := len(record.Build([]record.Record{{Value: []byte("v")}}, 1))
		e.cfg.MaxBytes = int32(3 * batchSize)
		fl := newFakeLeader(t)
		fl.shareMaxBytes = true
		l0, l1 := fl.addPartition(p0, 1, 0), fl.addPartition(p1, 1, 0)
		appendBatches(t, l0, 1, 12)
		appendBatches(t, l1, 1, 12)
		leader := e.serve(1, fl)
		r0, r1 := e.follow(p0, 1, 0), e.follow(p1, 1, 0)
		m := e.manager()
		m.AddFetcherForPartitions(context.Background(), map[tp.TopicPartition]core.InitialFetchState{
			p0: {Leader: leader, LeaderEpoch: 1, InitOffset: 0},
			p1: {Leader: leader, LeaderEpoch: 1, InitOffset: 0},
		})
		waitCaughtUp(t, r0, l0)
		waitCaughtUp(t, r1, l1)
		// progressAt is the index of the first fetch sent after p had records.
		progressAt := func(p tp.TopicPartition) int {
			for i, fp := range fl.requestsFor(p) {
				if fp.GetFetchOffset() > 0 {
					return i
				}
			}
			return -1
		}
		for _, p := range []tp.TopicPartition{p0, p1} {
			if i := progressAt(p); i < 0 || i > 2 {
				var order [][]int32
				fl.with(func(fl *fakeLeader) {
					for _, req := range fl.requests {
						var o []int32
						for _, fp := range req.GetPartitions() {
							o = append(o, fp.GetPartition())
						}
						order = append(order, o)
					}
				})
				t.Fatalf("%v first progressed before fetch %d, want within the first 2 fetches (request orders %v)", p, i, order)
			}
		}
	})
}

// A truncation that makes no progress (the follower truncates, fetches the
// same offsets back, and is told to truncate again, as a stale log of a
// topic deleted and created again once made it, many times a second) backs
// off, and after stuckLimit rounds sets the partition aside as failed
// instead of looping for ever (issue 10, path 8).
func TestTruncationWithoutProgressBacksOffAndEnds(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		clk := clock.NewManual(time.Unix(0, 0))
		e.cfg.Clock = clk
		e.cfg.PartitionBackoff = 10 * time.Millisecond
		fl := newFakeLeader(t)
		l := fl.addPartition(p0, 1, 0)
		appendBatches(t, l, 1, 3)
		// Records to a follower at 0, and to a follower past 0 "epoch 0
		// ends at 0": it truncates to 0 and fetches them again.
		fl.script = func(n int, fp *replicadv1.FetchPartition) *replicadv1.FetchPartitionResult {
			if fp.GetFetchOffset() == 0 {
				return nil
			}
			return &replicadv1.FetchPartitionResult{DivergingEpoch: &replicadv1.EpochEndOffset{Epoch: 0, EndOffset: 0}, HighWatermark: 3, LogEndOffset: 3}
		}
		leader := e.serve(1, fl)
		e.follow(p0, 1, 0)
		m := e.manager()
		e.add(p0, leader, 1)
		deadline := time.Now().Add(30 * time.Second)
		for !m.IsFailed(p0) {
			if time.Now().After(deadline) {
				t.Fatalf("partition not set aside after %d fetches", len(fl.requestsFor(p0)))
			}
			// Each backoff waits on the clock: move it on, a little at a time.
			clk.Advance(50 * time.Millisecond)
			runtime.Gosched()
		}
		truncations := 0
		for _, fp := range fl.requestsFor(p0) {
			if fp.GetFetchOffset() > 0 {
				truncations++
			}
		}
		if truncations != stuckLimit+1 {
			t.Fatalf("%d diverging answers before the partition was set aside, want %d", truncations, stuckLimit+1)
		}
	})
}

// descriptorLimited fails its first fails appends as a log out of file
// descriptors does: nothing appended, log.ErrFileLimit.
type descriptorLimited struct {
	Replica
	fails atomic.Int32
}

func (r *descriptorLimited) AppendAsFollower(data []byte) (log.AppendInfo, error) {
	if r.fails.Add(-1) >= 0 {
		return log.AppendInfo{}, fmt.Errorf("append: %w", log.ErrFileLimit)
	}
	return r.Replica.AppendAsFollower(data)
}

// truncationLimited fails its first fails truncations as a log out of file
// descriptors does (the checkpoint before the cut could not be opened).
type truncationLimited struct {
	Replica
	fails atomic.Int32
}

func (r *truncationLimited) TruncateTo(offset int64) error {
	if r.fails.Add(-1) >= 0 {
		return fmt.Errorf("truncate: %w", log.ErrFileLimit)
	}
	return r.Replica.TruncateTo(offset)
}

// Running out of file descriptors is no fault of the partition: it is
// fetched again after a backoff, not set aside as failed (issue 10, path 3).
func TestOutOfDescriptorsIsRetried(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 1, 0)
		appendBatches(t, ll, 1, 3)
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		limited := &descriptorLimited{Replica: r.Replica}
		limited.fails.Store(2)
		r.Replica = limited
		m := e.manager()
		e.add(p0, leader, 1)
		waitCaughtUp(t, r, ll)
		sameLog(t, r.log, ll)
		if m.IsFailed(p0) {
			t.Fatal("partition failed for want of file descriptors")
		}
		if n := limited.fails.Load(); n >= 0 {
			t.Fatalf("%d injected failures left: the appends never failed", n+1)
		}
	})
}

// A truncation that fails for want of a descriptor truncated nothing: it is
// retried after a backoff, and however often it fails it never counts as a
// truncation that makes no progress (which would set the partition aside
// after stuckLimit rounds).
func TestTruncationOutOfDescriptorsIsRetried(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 2, 0)
		appendBatches(t, ll, 1, 2)
		appendBatches(t, ll, 2, 2)
		leader := e.serve(1, fl)
		r := e.follow(p0, 2, 0)
		appendBatches(t, r.log, 1, 2)
		appendBatches(t, r.log, 3, 1) // diverges from the leader at 2
		limited := &truncationLimited{Replica: r.Replica}
		limited.fails.Store(stuckLimit + 3)
		r.Replica = limited
		m := e.manager()
		e.add(p0, leader, 2)
		waitCaughtUp(t, r, ll)
		sameLog(t, r.log, ll)
		if m.IsFailed(p0) {
			t.Fatal("partition set aside for want of file descriptors")
		}
		if n := limited.fails.Load(); n >= 0 {
			t.Fatalf("%d injected failures left: the truncations never failed", n+1)
		}
	})
}

// Lags reports each followed partition's lag in records (the leader's log
// end minus the follower's at the last answer) and in time (since an answer
// last found it caught up), and both go to zero once it catches up.
func TestLagsInRecordsAndTime(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 3, 0)
		appendBatches(t, ll, 3, 5)
		fl.with(func(fl *fakeLeader) { fl.readLimit[p0] = 3 }) // serves [0,3) of 5
		leader := e.serve(1, fl)
		r := e.follow(p0, 3, 0)
		m := e.manager()
		e.add(p0, leader, 3)
		waitFor(t, "a lag of 2 records", func() bool {
			lags := m.Lags()
			return len(lags) == 1 && lags[0].Records == 2 && lags[0].Leader == 1 && lags[0].TopicPartition == p0
		}, nil)
		waitFor(t, "the lag to last", func() bool { return m.Lags()[0].Behind > 0 }, nil)
		fl.with(func(fl *fakeLeader) { delete(fl.readLimit, p0) })
		waitCaughtUp(t, r, ll)
		waitFor(t, "no lag", func() bool {
			lags := m.Lags()
			return len(lags) == 1 && lags[0].Records == 0 && lags[0].Behind == 0
		}, nil)
	})
}
