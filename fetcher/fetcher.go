package fetcher

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/codes"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// fetcherKey names a fetcher: Kafka's BrokerIdAndFetcherId. The endpoint is
// not part of it: a leader that moved to a new endpoint keeps its key and
// gets a new fetcher (see Manager.AddFetcherForPartitions).
type fetcherKey struct {
	LeaderID  int32
	FetcherID int
}

// fetcher serves the partitions of one (leader, fetcherId) group over one
// stream to sourceBroker (Kafka's ReplicaFetcherThread). Its goroutine is the
// only one that sends on the stream and writes to its partitions' replicas.
//
// Lock order: Manager.mu, then fetcher.mu, then failedPartitions.mu. The
// fetcher holds mu while it applies an answer (appends, truncations), so that
// once removePartitions returns no write to those replicas is in flight: the
// replica manager may then make the partition leader or delete its log.
// It does not hold mu while waiting for the leader's answer.
type fetcher struct {
	key          fetcherKey
	sourceBroker core.Broker
	cfg          *Config
	failed       *failedPartitions
	logger       zerolog.Logger

	mu         sync.Mutex
	partitions map[tp.TopicPartition]*partitionState
	// order is the order partitions go into a fetch (Kafka's
	// PartitionStates): new ones join at the end, sorted among themselves,
	// and a partition that got records moves to the end after each answer.
	// The leader shares max_bytes across the partitions in request order, so
	// a fixed order would let a far-behind first partition starve the rest.
	// It may hold removed partitions until the next syncOrderLocked.
	order []tp.TopicPartition
	// orderClean says no partition was added or removed since the last
	// syncOrderLocked: a round then skips the rebuild (one map of every
	// partition).
	orderClean bool

	// The fetcher goroutine's own state, not under mu.
	//
	// session is the stream's fetch session (KIP-227): what the leader
	// holds of each partition, so that a request lists only what changed.
	// It starts over with each stream.
	session followerSession
	// requested is reused by every round's buildFetchRequest.
	requested map[tp.TopicPartition]*partitionState
	// answeredAt is when the last answer was applied: a partition a
	// session answer leaves out was as caught up then as it was before.
	answeredAt time.Time

	wake   chan struct{} // capacity 1: partitions were added or a delay ended
	cancel context.CancelFunc
	done   chan struct{}
}

func startFetcher(key fetcherKey, source core.Broker, cfg *Config, failed *failedPartitions) *fetcher {
	ctx, cancel := context.WithCancel(context.Background())
	f := &fetcher{
		key:          key,
		sourceBroker: source,
		cfg:          cfg,
		failed:       failed,
		logger: cfg.Logger.With().Int32("leader", source.ID).Str("leader_addr", source.Addr()).
			Int("fetcher_id", key.FetcherID).Logger(),
		partitions: make(map[tp.TopicPartition]*partitionState),
		requested:  make(map[tp.TopicPartition]*partitionState),
		wake:       make(chan struct{}, 1),
		cancel:     cancel,
		done:       make(chan struct{}),
	}
	go f.run(ctx)
	return f
}

// shutdown stops the goroutine and waits for it; the stream is closed.
func (f *fetcher) shutdown() {
	f.cancel()
	<-f.done
}

func (f *fetcher) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// run is the fetch loop: build a request from the partitions ready to fetch,
// send it, wait for its answer, apply it. The leader holds the request until
// there is data or max_wait passes, so a caught-up follower needs no polling
// interval of its own.
func (f *fetcher) run(ctx context.Context) {
	defer close(f.done)
	var stream FetchStream
	defer func() {
		if stream != nil {
			stream.Close()
		}
	}()
	bo := backoff{initial: f.cfg.ReconnectBackoff, max: f.cfg.MaxReconnectBackoff, jitter: f.cfg.ReconnectJitter, rand: f.cfg.Rand}
	var correlationID int64
	opens, broken := 0, false // attempts to open the stream since the last success; whether it broke
	for ctx.Err() == nil {
		req, requested, wait := f.buildFetchRequest()
		if len(requested) == 0 {
			f.idle(ctx, wait)
			continue
		}
		if stream == nil {
			opens++
			// The span links to the LeaderAndIsrs that gave the fetcher its
			// partitions; the stream carries its context to the leader.
			sctx, span := f.startOpenStream(ctx, requested, opens, broken)
			s, err := f.cfg.Client.Open(sctx, f.sourceBroker)
			if err != nil {
				span.RecordError(err)
				span.SetStatus(codes.Error, "open fetch stream")
			}
			span.End()
			if err != nil {
				d := bo.next()
				f.logger.Warn().Err(err).Dur("backoff_ms", d).Msg("open fetch stream")
				sleep(ctx, f.cfg.Clock, d)
				continue
			}
			stream = s
			opens, broken = 0, false
		}
		correlationID++
		req.CorrelationId = correlationID
		resp, err := exchange(stream, req)
		if err != nil {
			stream.Close()
			stream = nil
			f.session.reset() // the session was the stream
			broken = true
			if ctx.Err() != nil {
				return
			}
			d := bo.next()
			f.logger.Warn().Err(err).Dur("backoff_ms", d).Msg("fetch stream broken, reconnecting")
			sleep(ctx, f.cfg.Clock, d)
			continue
		}
		bo.reset()
		f.session.answered(resp)
		f.processFetchResponse(requested, resp)
	}
}

// exchange sends req and receives its answer on stream.
func exchange(stream FetchStream, req *replicadv1.FetchRequest) (*replicadv1.FetchResponse, error) {
	if err := stream.Send(req); err != nil {
		return nil, fmt.Errorf("send fetch: %w", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		return nil, fmt.Errorf("receive fetch: %w", err)
	}
	if resp.GetCorrelationId() != req.GetCorrelationId() {
		return nil, fmt.Errorf("fetch answer has correlation id %d, want %d", resp.GetCorrelationId(), req.GetCorrelationId())
	}
	return resp, nil
}

// idle waits until partitions are added, a delayed partition is due (wait >
// 0), or the fetcher stops.
func (f *fetcher) idle(ctx context.Context, wait time.Duration) {
	if wait > 0 {
		t := f.cfg.Clock.AfterFunc(wait, f.signal)
		defer t.Stop()
	}
	select {
	case <-f.wake:
	case <-ctx.Done():
	}
}

// buildFetchRequest snapshots the partitions ready to fetch. Partitions whose
// replica moved to a newer leader epoch are dropped: the replica manager will
// add them back with that epoch if this broker still follows them. requested
// holds the state each partition was requested for; wait is how long until
// the first delayed partition is due (0 when none is). Partitions go in the
// fetcher's order (see order): deterministic, and rotated by the answers.
func (f *fetcher) buildFetchRequest() (req *replicadv1.FetchRequest, requested map[tp.TopicPartition]*partitionState, wait time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.cfg.Clock.Now()
	req = &replicadv1.FetchRequest{
		ReplicaId:   f.cfg.BrokerID,
		BrokerEpoch: f.cfg.BrokerEpoch(),
		MaxWaitMs:   int32(f.cfg.MaxWait / time.Millisecond),
		MinBytes:    1,
		MaxBytes:    f.cfg.MaxBytes,
		Session:     !f.cfg.DisableFetchSessions,
	}
	if f.requested == nil {
		f.requested = make(map[tp.TopicPartition]*partitionState)
	}
	requested = f.requested
	clear(requested)
	sess := &f.session
	incremental := req.Session && sess.accepted
	if !incremental {
		sess.reset()
	}
	kept := 0 // partitions of the session requested again
	f.syncOrderLocked()
	for _, t := range f.order {
		st, ok := f.partitions[t]
		if !ok {
			continue // removed since the order was synced
		}
		if e := st.replica.LeaderEpoch(); e > st.leaderEpoch {
			f.logger.Info().Str("topic", t.Topic).Int32("partition", t.Partition).
				Int32("leader_epoch", st.leaderEpoch).Int32("current_leader_epoch", e).
				Msg("dropping stale partition: its leader epoch moved on")
			delete(f.partitions, t)
			f.orderClean = false
			continue
		}
		if !st.delayedUntil.IsZero() {
			if d := st.delayedUntil.Sub(now); d > 0 {
				if wait == 0 || d < wait {
					wait = d
				}
				continue
			}
			st.delayedUntil = time.Time{}
		}
		requested[t] = st
		cur := sentFetch{st: st, fetchOffset: st.fetchOffset, leaderEpoch: st.leaderEpoch,
			lastFetchedEpoch: st.replica.LatestEpoch(), logStartOffset: st.replica.LogStartOffset()}
		if incremental {
			prev, ok := sess.sent[t]
			if ok {
				kept++
				if prev == cur {
					continue // the leader fetches it with these fields
				}
			}
		}
		if req.Session {
			sess.sent[t] = cur
		}
		req.Partitions = append(req.Partitions, &replicadv1.FetchPartition{
			Topic:              t.Topic,
			Partition:          t.Partition,
			FetchOffset:        cur.fetchOffset,
			CurrentLeaderEpoch: cur.leaderEpoch,
			LastFetchedEpoch:   cur.lastFetchedEpoch,
			LogStartOffset:     cur.logStartOffset,
			TopicId:            st.topicID,
		})
	}
	if incremental && kept < len(sess.sent) {
		// Partitions removed, set aside or delayed since the last request
		// leave the session: the leader stops fetching them.
		for t := range sess.sent {
			if _, ok := requested[t]; !ok {
				req.RemovedPartitions = append(req.RemovedPartitions, &replicadv1.FetchPartitionRef{Topic: t.Topic, Partition: t.Partition})
				delete(sess.sent, t)
			}
		}
		slices.SortFunc(req.RemovedPartitions, func(a, b *replicadv1.FetchPartitionRef) int {
			return compareTP(tp.TopicPartition{Topic: a.Topic, Partition: a.Partition}, tp.TopicPartition{Topic: b.Topic, Partition: b.Partition})
		})
	}
	return req, requested, wait
}

// syncOrderLocked drops removed partitions from order and appends the new
// ones, sorted, so that the order is deterministic. Runs under mu.
func (f *fetcher) syncOrderLocked() {
	if f.orderClean {
		return
	}
	f.orderClean = true
	kept := f.order[:0]
	seen := make(map[tp.TopicPartition]struct{}, len(f.partitions))
	for _, t := range f.order {
		if _, ok := f.partitions[t]; ok {
			if _, dup := seen[t]; !dup {
				kept = append(kept, t)
				seen[t] = struct{}{}
			}
		}
	}
	var added []tp.TopicPartition
	for t := range f.partitions {
		if _, ok := seen[t]; !ok {
			added = append(added, t)
		}
	}
	slices.SortFunc(added, compareTP)
	f.order = append(kept, added...)
}

// moveToEndLocked moves the given partitions to the end of order, keeping
// the relative order of both the moved and the others (Kafka's
// PartitionStates.updateAndMoveToEnd). Runs under mu.
func (f *fetcher) moveToEndLocked(moved map[tp.TopicPartition]bool) {
	if len(moved) == 0 {
		return
	}
	rest := make([]tp.TopicPartition, 0, len(f.order))
	var tail []tp.TopicPartition
	for _, t := range f.order {
		if moved[t] {
			tail = append(tail, t)
		} else {
			rest = append(rest, t)
		}
	}
	f.order = append(rest, tail...)
}

// addPartitions adds or updates partitions. A partition already fetched with
// the same leader epoch keeps its state (Kafka: a fetcher is not reset when
// the epoch was not bumped); otherwise the given state replaces it. The
// partitions leave the failed set under mu, so that a failure of the new
// state, which the fetcher records under mu too, is never lost.
func (f *fetcher) addPartitions(states map[tp.TopicPartition]*partitionState) {
	f.mu.Lock()
	for t, st := range states {
		f.failed.remove(t)
		if cur, ok := f.partitions[t]; ok && cur.leaderEpoch == st.leaderEpoch {
			continue
		}
		f.partitions[t] = st
		f.orderClean = false
	}
	f.mu.Unlock()
	f.signal()
}

// removePartitions removes partitions and returns the states removed. Once
// it returns, the fetcher writes no more to their replicas.
func (f *fetcher) removePartitions(ts []tp.TopicPartition) map[tp.TopicPartition]*partitionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	removed := make(map[tp.TopicPartition]*partitionState)
	for _, t := range ts {
		if st, ok := f.partitions[t]; ok {
			removed[t] = st
			delete(f.partitions, t)
			f.orderClean = false
		}
	}
	return removed
}

// removeAllPartitions empties the fetcher and returns copies of the states.
func (f *fetcher) removeAllPartitions() map[tp.TopicPartition]*partitionState {
	f.mu.Lock()
	defer f.mu.Unlock()
	removed := make(map[tp.TopicPartition]*partitionState, len(f.partitions))
	for t, st := range f.partitions {
		c := *st
		removed[t] = &c
	}
	clear(f.partitions)
	f.orderClean = false
	return removed
}

func (f *fetcher) partitionCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.partitions)
}

func (f *fetcher) partitionList() []tp.TopicPartition {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]tp.TopicPartition, 0, len(f.partitions))
	for t := range f.partitions {
		out = append(out, t)
	}
	slices.SortFunc(out, compareTP)
	return out
}

func (f *fetcher) fetchState(t tp.TopicPartition) (PartitionFetchState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.partitions[t]
	if !ok {
		return PartitionFetchState{}, false
	}
	return st.snapshot(), true
}

func (f *fetcher) maxLag() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	var lag int64
	for _, st := range f.partitions {
		lag = max(lag, st.lag)
	}
	return lag
}

// followerSession is the follower's side of a fetch session (see
// service.FetchSession): what the leader holds of each partition.
type followerSession struct {
	// accepted: the leader answered the stream's session requests with
	// session set, so requests may leave out what did not change. Until
	// then (and with a leader that does not know sessions) every request
	// is full.
	accepted bool
	// sent is what the requests so far told the leader of each partition.
	sent map[tp.TopicPartition]sentFetch
}

// sentFetch is a partition's fields as last sent. st is the state they were
// sent for: a partition re-added with a new state is sent again, so the
// leader answers it even when nothing else changed.
type sentFetch struct {
	st               *partitionState
	fetchOffset      int64
	leaderEpoch      int32
	lastFetchedEpoch int32
	logStartOffset   int64
}

// reset starts a new session (a new stream, or a full request).
func (s *followerSession) reset() {
	s.accepted = false
	if s.sent == nil {
		s.sent = make(map[tp.TopicPartition]sentFetch)
	}
	clear(s.sent)
}

// answered notes whether the leader kept the session.
func (s *followerSession) answered(resp *replicadv1.FetchResponse) {
	s.accepted = resp.GetSession()
}
