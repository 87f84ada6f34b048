package fetcher

import (
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/tp"
)

// partitionState is a fetcher's state for one partition (Kafka's
// PartitionFetchState). A new leader epoch always makes a new partitionState,
// so a response is applied only if the state it was requested for is still
// the fetcher's (pointer identity): a removed or re-added partition ignores
// answers to older requests.
type partitionState struct {
	replica Replica
	// fetchOffset is the next offset to fetch. Invariant after each
	// processed answer: fetchOffset == replica.LogEndOffset().
	fetchOffset int64
	// leaderEpoch is the epoch this state fetches for (current_leader_epoch).
	leaderEpoch int32
	// topicID is the partition's topic ID, sent with every fetch ("": none).
	topicID string
	// progress tracks truncations that make no progress (see
	// fetcher.noteTruncation).
	progress truncationProgress
	// lag is the leader's LEO (or HW) minus fetchOffset at the last answer.
	lag int64
	// caughtUpAt is the last answer with no lag (at first, when the
	// partition was added): the follower's lag in time is since then.
	caughtUpAt time.Time
	// delayedUntil, when set, keeps the partition out of fetches until then
	// (after a retriable error).
	delayedUntil time.Time
	// cause is the span context of the FetcherManager.addFetcherForPartitions
	// span (in the trace of the LeaderAndIsr) that added the partition: the
	// fetcher's spans about it link there.
	cause trace.SpanContext
}

// PartitionFetchState is a snapshot of one partition's fetch state, for
// metrics and tests.
type PartitionFetchState struct {
	FetchOffset int64
	LeaderEpoch int32
	// Lag is how far the follower was behind the leader's log end at the
	// last answer (0 when caught up).
	Lag int64
	// CaughtUpAt is when an answer last found the follower caught up (or
	// the partition was added, if never).
	CaughtUpAt time.Time
	// Delayed is true while the partition waits out a retriable error.
	Delayed bool
}

func (s *partitionState) snapshot() PartitionFetchState {
	return PartitionFetchState{
		FetchOffset: s.fetchOffset,
		LeaderEpoch: s.leaderEpoch,
		Lag:         s.lag,
		CaughtUpAt:  s.caughtUpAt,
		Delayed:     !s.delayedUntil.IsZero(),
	}
}

// failedPartitions are the partitions set aside after an error only a new
// LeaderAndIsr can resolve (Kafka's FailedPartitions). It has its own lock,
// taken last: fetchers add to it while holding their own lock, and they never
// take the manager's.
type failedPartitions struct {
	mu  sync.Mutex
	set map[tp.TopicPartition]struct{}
}

func (f *failedPartitions) add(t tp.TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.set == nil {
		f.set = make(map[tp.TopicPartition]struct{})
	}
	f.set[t] = struct{}{}
}

func (f *failedPartitions) remove(t tp.TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.set, t)
}

func (f *failedPartitions) contains(t tp.TopicPartition) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.set[t]
	return ok
}

func (f *failedPartitions) list() []tp.TopicPartition {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]tp.TopicPartition, 0, len(f.set))
	for t := range f.set {
		out = append(out, t)
	}
	slices.SortFunc(out, compareTP)
	return out
}

func compareTP(a, b tp.TopicPartition) int {
	if a.Topic != b.Topic {
		if a.Topic < b.Topic {
			return -1
		}
		return 1
	}
	return int(a.Partition) - int(b.Partition)
}

// truncationProgress is what noteTruncation knows of a partition's
// truncations: stuck counts those in a row that made no progress, highest
// is the largest log end offset the replica had before one of them, and
// truncatedTo is where the last one left it.
type truncationProgress struct {
	stuck                int
	highest, truncatedTo int64
}
