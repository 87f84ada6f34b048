package fetcher

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// cluster is two leaders (ids 1 and 2) leading topics "orders" (6
// partitions) and "payments" (4), and a follower of all of them.
type cluster struct {
	leaders    map[int32]*fakeLeader
	brokers    map[int32]core.Broker
	leaderOf   map[tp.TopicPartition]int32
	leaderLogs map[tp.TopicPartition]*log.Log
	followers  map[tp.TopicPartition]*followerReplica
}

func newCluster(t *testing.T, e *env) *cluster {
	c := &cluster{
		leaders: map[int32]*fakeLeader{1: newFakeLeader(t), 2: newFakeLeader(t)}, brokers: map[int32]core.Broker{},
		leaderOf: map[tp.TopicPartition]int32{}, leaderLogs: map[tp.TopicPartition]*log.Log{}, followers: map[tp.TopicPartition]*followerReplica{},
	}
	for id, n := range map[int32]int{1: 6, 2: 4} {
		topic := map[int32]string{1: "orders", 2: "payments"}[id]
		for i := range n {
			p := tp.TopicPartition{Topic: topic, Partition: int32(i)}
			c.leaderOf[p] = id
			c.leaderLogs[p] = c.leaders[id].addPartition(p, 1, 0)
			c.followers[p] = e.follow(p, 1, 0)
		}
		c.brokers[id] = e.serve(id, c.leaders[id])
	}
	return c
}

func (c *cluster) addAll(m *Manager) {
	all := make(map[tp.TopicPartition]core.InitialFetchState)
	for p, id := range c.leaderOf {
		all[p] = core.InitialFetchState{Leader: c.brokers[id], LeaderEpoch: 1, InitOffset: c.followers[p].LogEndOffset()}
	}
	m.AddFetcherForPartitions(context.Background(), all)
}

// appendAndWait appends to every partition and waits for every follower.
func (c *cluster) appendAndWait(t *testing.T, n int) {
	for p, id := range c.leaderOf {
		c.leaders[id].append(p, n)
	}
	for p := range c.leaderOf {
		waitCaughtUp(t, c.followers[p], c.leaderLogs[p])
	}
}

// expectedGroups renders the (leader, fetcherId) -> partitions grouping.
func (c *cluster) expectedGroups(numFetchers int) string {
	groups := map[[2]int][]tp.TopicPartition{}
	for p, id := range c.leaderOf {
		k := [2]int{int(id), FetcherID(p, numFetchers)}
		groups[k] = append(groups[k], p)
	}
	var out []FetcherInfo
	for k, ps := range groups {
		slices.SortFunc(ps, compareTP)
		out = append(out, FetcherInfo{LeaderID: int32(k[0]), FetcherID: k[1], Partitions: ps})
	}
	slices.SortFunc(out, func(a, b FetcherInfo) int {
		if a.LeaderID != b.LeaderID {
			return int(a.LeaderID) - int(b.LeaderID)
		}
		return a.FetcherID - b.FetcherID
	})
	return renderGroups(out)
}

func renderGroups(fs []FetcherInfo) string {
	s := ""
	for _, f := range fs {
		s += fmt.Sprintf("leader %d fetcher %d: %v\n", f.LeaderID, f.FetcherID, f.Partitions)
	}
	return s
}

// Partitions are grouped by (leader, fetcherId): one fetcher, and one
// stream, per group, each partition on fetcher FetcherID(tp, n).
func TestGroupingByFetcherIDAndLeader(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		e.cfg.NumFetchers = 3
		c := newCluster(t, e)
		m := e.manager()
		c.addAll(m)
		want := c.expectedGroups(3)
		if got := renderGroups(m.Fetchers()); got != want {
			t.Fatalf("fetchers:\n%s\nwant:\n%s", got, want)
		}
		c.appendAndWait(t, 2)
		if n, groups := e.client.opens.Load(), len(m.Fetchers()); int(n) != groups {
			t.Fatalf("%d streams for %d fetchers", n, groups)
		}
	})
}

// Resizing the pool re-hashes every partition onto the new number of
// fetchers, stops the idle ones, and replication goes on from where it was
// (Kafka's testExpandThreadPool and testShrinkThreadPool).
func TestResizeExpandsAndShrinksThreadPool(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		c := newCluster(t, e)
		m := e.manager()
		c.addAll(m)
		c.appendAndWait(t, 2)
		for _, n := range []int{4, 1, 3} {
			m.Resize(n)
			if got, want := renderGroups(m.Fetchers()), c.expectedGroups(n); got != want {
				t.Fatalf("after resize to %d, fetchers:\n%s\nwant:\n%s", n, got, want)
			}
			c.appendAndWait(t, 1)
			for p, r := range c.followers {
				st, ok := m.FetchState(p)
				if !ok || m.IsFailed(p) {
					t.Fatalf("after resize to %d, %v not fetched", n, p)
				}
				waitFor(t, "fetch state at LEO", func() bool {
					st, _ = m.FetchState(p)
					return st.FetchOffset == r.LogEndOffset()
				}, nil)
			}
		}
	})
}

// A fetcher is reused while its leader's endpoint is unchanged, and replaced
// (its partitions moving to the new one) when the leader moved.
func TestFetcherReusedOrReplacedOnLeaderEndpointChange(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		l0, l1 := fl.addPartition(p0, 1, 0), fl.addPartition(p1, 1, 0)
		oldAddr := e.serve(1, fl)
		r0, r1 := e.follow(p0, 1, 0), e.follow(p1, 1, 0)
		m := e.manager()
		e.add(p0, oldAddr, 1)
		fl.append(p0, 1)
		waitCaughtUp(t, r0, l0)
		e.add(p1, oldAddr, 1)
		fl.append(p1, 1)
		waitCaughtUp(t, r1, l1)
		if n := e.client.opens.Load(); n != 1 {
			t.Fatalf("%d streams for an unchanged leader, want 1", n)
		}

		newAddr := e.serve(1, fl) // the leader restarted elsewhere, at epoch 2 for p0
		fl.setEpoch(p0, 2)
		r0.epoch.Store(2)
		e.add(p0, newAddr, 2)
		fs := m.Fetchers()
		if len(fs) != 1 || fs[0].SourceBroker != newAddr || len(fs[0].Partitions) != 2 {
			t.Fatalf("fetchers after the leader moved: %+v, want one to %v with both partitions", fs, newAddr)
		}
		fl.append(p0, 2)
		fl.append(p1, 2)
		waitCaughtUp(t, r0, l0)
		waitCaughtUp(t, r1, l1)
		if n := e.client.opens.Load(); n != 2 {
			t.Fatalf("%d streams, want 2 (one per endpoint)", n)
		}
	})
}

// AddFetcherForPartitions with the same leader and leader epoch neither
// restarts the fetcher nor resets the partition's fetch state, even given a
// stale init offset (Kafka's testFetcherAreNotRestartedIfLeaderEpochIsNotBumped).
func TestFetcherNotRestartedIfLeaderEpochNotBumped(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		ll := fl.addPartition(p0, 1, 0)
		appendBatches(t, ll, 1, 5)
		leader := e.serve(1, fl)
		r := e.follow(p0, 1, 0)
		m := e.manager()
		e.add(p0, leader, 1)
		waitCaughtUp(t, r, ll)
		waitFor(t, "fetch state at 5", func() bool { st, _ := m.FetchState(p0); return st.FetchOffset == 5 }, nil)

		m.AddFetcherForPartitions(context.Background(), map[tp.TopicPartition]core.InitialFetchState{
			p0: {Leader: leader, LeaderEpoch: 1, InitOffset: 0},
		})
		if st, ok := m.FetchState(p0); !ok || st.FetchOffset != 5 {
			t.Fatalf("fetch state after re-add = %+v, %v; want offset 5 kept", st, ok)
		}
		fl.append(p0, 3)
		waitCaughtUp(t, r, ll)
		if m.IsFailed(p0) {
			t.Fatal("partition failed after re-add")
		}
		if n := e.client.opens.Load(); n != 1 {
			t.Fatalf("%d streams opened, want 1: the fetcher was restarted", n)
		}
	})
}

// RemoveFetcherForPartitions stops writes to those replicas at once; idle
// fetchers then stop with ShutdownIdleFetchers, the others keep going.
func TestRemoveAndShutdownIdleFetchers(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl1, fl2 := newFakeLeader(t), newFakeLeader(t)
		l0, l1 := fl1.addPartition(p0, 1, 0), fl2.addPartition(p1, 1, 0)
		b1, b2 := e.serve(1, fl1), e.serve(2, fl2)
		r0, r1 := e.follow(p0, 1, 0), e.follow(p1, 1, 0)
		m := e.manager()
		e.add(p0, b1, 1)
		e.add(p1, b2, 1)
		fl1.append(p0, 1)
		waitCaughtUp(t, r0, l0)

		m.RemoveFetcherForPartitions([]tp.TopicPartition{p0})
		if _, ok := m.FetchState(p0); ok {
			t.Fatal("removed partition still fetched")
		}
		fl1.append(p0, 2)
		fl2.append(p1, 2)
		waitCaughtUp(t, r1, l1)
		if got := r0.LogEndOffset(); got != 1 {
			t.Fatalf("removed partition's log grew to %d", got)
		}
		if n := len(m.Fetchers()); n != 2 {
			t.Fatalf("%d fetchers before ShutdownIdleFetchers, want 2", n)
		}
		m.ShutdownIdleFetchers()
		fs := m.Fetchers()
		if len(fs) != 1 || fs[0].LeaderID != 2 {
			t.Fatalf("fetchers after ShutdownIdleFetchers: %+v, want only leader 2's", fs)
		}
		fl2.append(p1, 1)
		waitCaughtUp(t, r1, l1)
	})
}

// A partition with no local replica is set aside as failed rather than
// fetched; Shutdown stops everything and later adds are ignored.
func TestMissingReplicaFailsAndShutdownStopsAdds(t *testing.T) {
	forEachTransport(t, func(t *testing.T, e *env) {
		fl := newFakeLeader(t)
		leader := e.serve(1, fl)
		m := e.manager()
		m.AddFetcherForPartitions(context.Background(), map[tp.TopicPartition]core.InitialFetchState{
			p0: {Leader: leader, LeaderEpoch: 1},
		})
		if !m.IsFailed(p0) || len(m.FailedPartitions()) != 1 {
			t.Fatalf("failed = %v, want [%v]", m.FailedPartitions(), p0)
		}
		m.Shutdown()
		e.follow(p1, 1, 0)
		e.add(p1, leader, 1)
		if n := len(m.Fetchers()); n != 0 {
			t.Fatalf("%d fetchers after Shutdown", n)
		}
	})
}
