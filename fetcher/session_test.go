package fetcher

import (
	"io"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func requestedNames(req *replicadv1.FetchRequest) (fetched, removed []int32) {
	for _, p := range req.GetPartitions() {
		fetched = append(fetched, p.GetPartition())
	}
	for _, r := range req.GetRemovedPartitions() {
		removed = append(removed, r.GetPartition())
	}
	return fetched, removed
}

// TestSessionRequestsCarryOnlyChanges is the follower's side of a fetch
// session: full requests until the leader answers with session set, then
// only the partitions whose fields changed or whose state is new, the
// removed and delayed ones named as removed; a leader answering without
// session (an older broker) gets full requests; a new stream starts over.
func TestSessionRequestsCarryOnlyChanges(t *testing.T) {
	cfg := &Config{Clock: clock.Real{}, PartitionBackoff: time.Minute, BrokerEpoch: func() int64 { return 1 }, Logger: zerolog.New(io.Discard)}
	f := &fetcher{cfg: cfg, failed: &failedPartitions{}, partitions: make(map[tp.TopicPartition]*partitionState)}
	states := map[tp.TopicPartition]*partitionState{}
	for p := range int32(3) {
		t0 := tp.TopicPartition{Topic: "t", Partition: p}
		states[t0] = &partitionState{replica: NewLogReplica(openLog(t, t0, 0), func() int32 { return 1 }), leaderEpoch: 1}
	}
	f.addPartitions(states)
	check := func(what string, wantFetched, wantRemoved []int32) *replicadv1.FetchRequest {
		t.Helper()
		req, _, _ := f.buildFetchRequest()
		if !req.GetSession() {
			t.Fatalf("%s: request without session", what)
		}
		fetched, removed := requestedNames(req)
		if !slices.Equal(fetched, wantFetched) || !slices.Equal(removed, wantRemoved) {
			t.Fatalf("%s: fetched %v removed %v, want %v and %v", what, fetched, removed, wantFetched, wantRemoved)
		}
		return req
	}
	check("first", []int32{0, 1, 2}, nil)
	f.session.answered(&replicadv1.FetchResponse{}) // a leader without sessions
	check("old leader", []int32{0, 1, 2}, nil)
	f.session.answered(&replicadv1.FetchResponse{Session: true})
	check("idle", nil, nil)
	f.session.answered(&replicadv1.FetchResponse{Session: true})

	t1 := tp.TopicPartition{Topic: "t", Partition: 1}
	f.partitions[t1].fetchOffset = 0 // unchanged
	f.partitions[t1].leaderEpoch = 2 // a new epoch: sent again
	check("epoch of t-1", []int32{1}, nil)
	f.session.answered(&replicadv1.FetchResponse{Session: true})

	f.removePartitions([]tp.TopicPartition{{Topic: "t", Partition: 0}})
	f.delay(f.partitions[tp.TopicPartition{Topic: "t", Partition: 2}])
	check("t-0 removed, t-2 delayed", nil, []int32{0, 2})
	f.session.answered(&replicadv1.FetchResponse{Session: true})
	check("idle again", nil, nil)

	f.session.reset() // a new stream
	check("new stream", []int32{1}, nil)

	cfg.DisableFetchSessions = true
	f.session.answered(&replicadv1.FetchResponse{Session: true})
	if req, _, _ := f.buildFetchRequest(); req.GetSession() || len(req.GetPartitions()) != 1 {
		t.Fatalf("sessions disabled: %v", req)
	}
}
