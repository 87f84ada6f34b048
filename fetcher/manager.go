package fetcher

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
)

// Manager is Kafka's ReplicaFetcherManager: it groups followed partitions by
// (leader, fetcherId) onto fetchers, one stream each. It implements
// core.FetcherManager.
//
// All methods are safe for concurrent use. mu guards the fetcher map; under
// it the Manager starts and stops fetcher goroutines and hands partitions to
// fetchers, which may wait for a fetcher to finish applying its current
// answer, but it never waits for the network.
type Manager struct {
	cfg    Config
	failed *failedPartitions

	mu          sync.Mutex
	numFetchers int
	fetchers    map[fetcherKey]*fetcher
	closed      bool
}

var _ core.FetcherManager = (*Manager)(nil)

// NewManager returns a Manager with no fetchers.
func NewManager(cfg Config) (*Manager, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Manager{
		cfg:         cfg,
		failed:      &failedPartitions{},
		numFetchers: cfg.NumFetchers,
		fetchers:    make(map[fetcherKey]*fetcher),
	}, nil
}

// AddFetcherForPartitions starts fetching partitions from their leaders.
// InitOffset must be the replica's LEO (or negative: use the LEO). A
// partition already fetched from the same leader with the same leader epoch
// keeps its fetch state; a partition previously failed is given another
// chance. A fetcher whose leader moved to a new endpoint is replaced, and its
// partitions move to the new one. The span in ctx is the cause each
// partition's fetch state remembers (see trace.go).
func (m *Manager) AddFetcherForPartitions(ctx context.Context, partitions map[tp.TopicPartition]core.InitialFetchState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	type group struct {
		source core.Broker
		states map[tp.TopicPartition]*partitionState
	}
	groups := make(map[fetcherKey]*group)
	cause, added := trace.SpanContextFromContext(ctx), newTraceAdded(ctx)
	defer added.Done()
	// A partition changing leader leaves its old fetcher first: one
	// removal per fetcher for the whole call, not one per partition and
	// fetcher (each took the fetcher's lock and made a map; a failover
	// adds thousands of partitions).
	leaving := make(map[fetcherKey][]tp.TopicPartition, len(m.fetchers))
	for t, init := range partitions {
		key := fetcherKey{LeaderID: init.Leader.ID, FetcherID: FetcherID(t, m.numFetchers)}
		for k := range m.fetchers {
			if k != key {
				leaving[k] = append(leaving[k], t)
			}
		}
	}
	for k, ts := range leaving {
		m.fetchers[k].removePartitions(ts)
	}
	for t, init := range partitions {
		key := fetcherKey{LeaderID: init.Leader.ID, FetcherID: FetcherID(t, m.numFetchers)}
		r, ok := m.cfg.Replicas.Replica(t)
		if !ok {
			m.cfg.Logger.Error().Str("topic", t.Topic).Int32("partition", t.Partition).
				Msg("no local replica to fetch into; partition marked failed")
			m.failed.add(t)
			continue
		}
		g := groups[key]
		if g == nil {
			g = &group{source: init.Leader, states: make(map[tp.TopicPartition]*partitionState)}
			groups[key] = g
		}
		offset := init.InitOffset
		if offset < 0 {
			offset = r.LogEndOffset()
		}
		g.states[t] = &partitionState{replica: r, fetchOffset: offset, leaderEpoch: init.LeaderEpoch, topicID: init.TopicID, cause: cause,
			caughtUpAt: m.cfg.Clock.Now()}
		added.add(t, key, init, offset, len(partitions) == 1)
	}
	for key, g := range groups {
		m.fetcherForLocked(key, g.source).addPartitions(g.states)
	}
}

// fetcherForLocked returns the fetcher of key, starting one, or replacing
// one whose source broker is not source. Runs under mu.
func (m *Manager) fetcherForLocked(key fetcherKey, source core.Broker) *fetcher {
	f := m.fetchers[key]
	if f != nil && f.sourceBroker == source {
		return f
	}
	var moved map[tp.TopicPartition]*partitionState
	if f != nil {
		m.cfg.Logger.Info().Int32("leader", key.LeaderID).Int("fetcher_id", key.FetcherID).
			Str("old_addr", f.sourceBroker.Addr()).Str("new_addr", source.Addr()).
			Msg("leader endpoint changed, replacing fetcher")
		moved = f.removeAllPartitions()
		f.shutdown()
	}
	f = startFetcher(key, source, &m.cfg, m.failed)
	m.fetchers[key] = f
	if len(moved) > 0 {
		f.addPartitions(moved)
	}
	return f
}

// RemoveFetcherForPartitions stops fetching partitions. When it returns no
// fetcher writes to their replicas any more.
func (m *Manager) RemoveFetcherForPartitions(partitions []tp.TopicPartition) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.fetchers {
		f.removePartitions(partitions)
	}
	for _, t := range partitions {
		m.failed.remove(t)
	}
}

// ShutdownIdleFetchers stops the fetchers left without partitions.
func (m *Manager) ShutdownIdleFetchers() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shutdownIdleLocked()
}

func (m *Manager) shutdownIdleLocked() {
	for k, f := range m.fetchers {
		if f.partitionCount() == 0 {
			f.shutdown()
			delete(m.fetchers, k)
		}
	}
}

// Resize sets the number of fetchers per leader and re-hashes every
// partition onto them, keeping fetch states (Kafka's resizeThreadPool).
// Fetchers whose key still exists keep running; idle ones stop.
func (m *Manager) Resize(numFetchers int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	numFetchers = max(numFetchers, 1)
	if m.closed || numFetchers == m.numFetchers {
		return
	}
	type moved struct {
		source core.Broker
		states map[tp.TopicPartition]*partitionState
	}
	var all []moved
	for _, f := range m.fetchers {
		all = append(all, moved{source: f.sourceBroker, states: f.removeAllPartitions()})
	}
	m.numFetchers = numFetchers
	for _, mv := range all {
		byKey := make(map[fetcherKey]map[tp.TopicPartition]*partitionState)
		for t, st := range mv.states {
			key := fetcherKey{LeaderID: mv.source.ID, FetcherID: FetcherID(t, numFetchers)}
			if byKey[key] == nil {
				byKey[key] = make(map[tp.TopicPartition]*partitionState)
			}
			byKey[key][t] = st
		}
		for key, states := range byKey {
			m.fetcherForLocked(key, mv.source).addPartitions(states)
		}
	}
	m.shutdownIdleLocked()
}

// Shutdown stops every fetcher; later calls to AddFetcherForPartitions do nothing.
func (m *Manager) Shutdown() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	for k, f := range m.fetchers {
		f.shutdown()
		delete(m.fetchers, k)
	}
}

// FetcherInfo describes one fetcher, for metrics, describe and tests.
type FetcherInfo struct {
	LeaderID     int32
	FetcherID    int
	SourceBroker core.Broker
	Partitions   []tp.TopicPartition
	MaxLag       int64
}

// Fetchers lists the fetchers, ordered by leader then fetcher id.
func (m *Manager) Fetchers() []FetcherInfo {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]FetcherInfo, 0, len(m.fetchers))
	for k, f := range m.fetchers {
		out = append(out, FetcherInfo{
			LeaderID: k.LeaderID, FetcherID: k.FetcherID, SourceBroker: f.sourceBroker,
			Partitions: f.partitionList(), MaxLag: f.maxLag(),
		})
	}
	slices.SortFunc(out, func(a, b FetcherInfo) int {
		if a.LeaderID != b.LeaderID {
			return int(a.LeaderID) - int(b.LeaderID)
		}
		return a.FetcherID - b.FetcherID
	})
	return out
}

// FetchState returns a partition's fetch state, if a fetcher holds it.
func (m *Manager) FetchState(t tp.TopicPartition) (PartitionFetchState, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.fetchers {
		if st, ok := f.fetchState(t); ok {
			return st, true
		}
	}
	return PartitionFetchState{}, false
}

// IsFetching reports whether a fetcher holds t's fetch state (not failed,
// not removed).
func (m *Manager) IsFetching(t tp.TopicPartition) bool {
	_, ok := m.FetchState(t)
	return ok
}

// FailedPartitions lists the partitions set aside until their next
// AddFetcherForPartitions.
func (m *Manager) FailedPartitions() []tp.TopicPartition { return m.failed.list() }

// IsFailed reports whether t is set aside as failed.
func (m *Manager) IsFailed(t tp.TopicPartition) bool { return m.failed.contains(t) }

// PartitionLag is how far a followed partition is behind its leader.
type PartitionLag struct {
	TopicPartition tp.TopicPartition
	Leader         int32
	// Records is the leader's log end minus the follower's at the last
	// answer; Behind the time since an answer last found it caught up.
	Records int64
	Behind  time.Duration
}

// Lags is the lag of every partition the fetchers hold, by leader (per-
// partition follower lag metrics).
func (m *Manager) Lags() []PartitionLag {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.cfg.Clock.Now()
	var out []PartitionLag
	for k, f := range m.fetchers {
		f.mu.Lock()
		for t, st := range f.partitions {
			l := PartitionLag{TopicPartition: t, Leader: k.LeaderID, Records: st.lag}
			if st.lag > 0 {
				l.Behind = now.Sub(st.caughtUpAt)
			}
			out = append(out, l)
		}
		f.mu.Unlock()
	}
	return out
}

// MaxLag is the largest lag over every fetched partition (Kafka's
// ReplicaFetcherManager MaxLag metric).
func (m *Manager) MaxLag() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	var lag int64
	for _, f := range m.fetchers {
		lag = max(lag, f.maxLag())
	}
	return lag
}

// NumFetchers is the current number of fetchers per leader.
func (m *Manager) NumFetchers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.numFetchers
}
