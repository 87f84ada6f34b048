package core

import (
	"testing"

	"github.com/rs/zerolog"
)

// A follower whose fetcher set its partition aside (a failure only a
// LeaderAndIsr resolves) gets its fetcher back from the next LeaderAndIsr
// even when that one keeps the leader and leader epoch (an ISR change, a
// new partition epoch): with the new topic's topic ID, at the follower's
// LEO. Before, such a LeaderAndIsr was "the same leader as the old leader"
// and skipped, and after a topic was deleted and created again the
// follower, whose fetcher had met the leader still at the old topic, never
// fetched again (simulation seed 244401447: the ISR never filled).
func TestSameLeaderAndEpochReaddsAFailedFetcher(t *testing.T) {
	out := &logBuffer{}
	h := newHarness(t, 1, func(c *Config) { c.Logger = zerolog.New(out).Level(zerolog.InfoLevel) })
	st := stateOf(topicB, 3, 0, []int32{1, 2, 3}, []int32{1, 2, 3})
	if code := codeOf(h.leaderAndIsr(1, st), tp0); code != ErrNone {
		t.Fatalf("become follower: %v", code)
	}
	first, ok := h.fetchers.fetching(tp0)
	if !ok || first.TopicID != topicB || first.Leader.ID != 3 {
		t.Fatalf("fetcher after become-follower: %+v %v, want leader 3 of %s", first, ok, topicB)
	}
	// The fetcher sets the partition aside (the leader answered it for
	// another topic ID, before it applied the new topic's LeaderAndIsr).
	h.fetchers.fail(tp0)

	// The leader drops this broker from the ISR: same leader, same epoch.
	refresh := stateOf(topicB, 3, 0, []int32{1, 2, 3}, []int32{2, 3})
	refresh.PartitionEpoch = 1
	refresh.IsNew = false
	if code := codeOf(h.leaderAndIsr(1, refresh), tp0); code != ErrNone {
		t.Fatalf("LeaderAndIsr with the same leader and epoch: %v", code)
	}
	lines := out.take(t)
	wantLine(t, lines, "info", "Adding the fetcher back as part of become-follower request: the leader and leader epoch are the same, "+
		"but no fetcher holds the partition (set aside as failed, or never started)", "orders", 0,
		map[string]any{"leader": 3, "leader_epoch": 0, "partition_epoch": 1, "topic_id": topicB})
	wantLine(t, lines, "info", "Added the fetcher back to the same leader as part of become-follower request", "orders", 0,
		map[string]any{"leader": 3, "fetch_offset": 0, "topic_id": topicB, "leader_addr": "127.0.0.1:9093"})
	got, ok := h.fetchers.fetching(tp0)
	if !ok {
		t.Fatal("no fetcher after a LeaderAndIsr with the same leader and epoch: the follower never fetches again")
	}
	if got.Leader.ID != 3 || got.LeaderEpoch != 0 || got.TopicID != topicB || got.InitOffset != 0 {
		t.Fatalf("fetcher added back as %+v, want leader 3, epoch 0, topic ID %s, offset 0", got, topicB)
	}

	// A fetcher that still holds the partition keeps it: not added again.
	calls := h.fetchers.addCalls
	refresh.PartitionEpoch = 2
	refresh.ISR = []int32{1, 2, 3}
	if code := codeOf(h.leaderAndIsr(1, refresh), tp0); code != ErrNone {
		t.Fatalf("second refresh: %v", code)
	}
	if h.fetchers.addCalls != calls {
		t.Fatalf("a fetched partition was added again on a refresh (%d calls, want %d)", h.fetchers.addCalls, calls)
	}
	lines = out.take(t)
	wantLine(t, lines, "info", "Skipped the become-follower state change: the new leader is the same as the old leader", "orders", 0, nil)
}
