package brokerqueue

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/telemetry"
)

// Defaults of Config.
const (
	// DefaultRequestTimeout bounds one call: a LeaderAndIsr that creates
	// 10,000 logs can take seconds.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultRequestTimeoutPerPartition is added to a call's timeout for
	// each partition it carries: a full request of 10,000 partitions gets
	// 30 s + 50 s (see Config.RequestTimeoutPerPartition).
	DefaultRequestTimeoutPerPartition = 5 * time.Millisecond
	// DefaultBackoff is the wait before the first retry.
	DefaultBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff caps the wait between retries.
	DefaultMaxBackoff = 2 * time.Second
	// DefaultMaxPartitionsPerRequest caps the partitions of one request.
	DefaultMaxPartitionsPerRequest = 10000
)

// SendSpanName is the client span the Queue starts around each attempt to
// send a request; the gRPC call (and through otelgrpc the broker's
// handling of it) is its child.
const SendSpanName = "ControllerChannel.send"

// MergedSpanName is the span a call merged into another's request gets in
// its own trace: the request went out in the first traced call's trace, so
// without it the other decisions' traces would end at the controller. It
// lasts as long as the send, has its outcome, and links the SendSpanName
// span that carried it (replicad.sent_in_trace names that trace).
const MergedSpanName = "ControllerChannel.merged"

// MaxLinks caps the span links of one request: a request merged from more
// calls than this links only the first MaxLinks of the others (OpenTelemetry
// SDKs keep 128 links per span by default).
const MaxLinks = 64

// maxNamedPartitions caps the topic-partitions a send span names in its
// replicad.topic_partitions attribute; a larger request gives only its
// partition count.
const maxNamedPartitions = 100

// warnInterval is the least time between two warnings about the failures of
// one broker: the first failure is always logged at warn, the next ones
// within warnInterval only at debug.
const warnInterval = 5 * time.Second

var (
	// ErrClosed is returned by Flush when the Queue was closed before
	// everything it waited for was sent.
	ErrClosed = errors.New("brokerqueue: queue closed")
	// ErrStaleControllerEpoch is returned by Flush once the broker answered
	// STALE_CONTROLLER_EPOCH: this controller was deposed and the Queue sends
	// nothing more.
	ErrStaleControllerEpoch = errors.New("brokerqueue: stale controller epoch, sending stopped")
	// ErrDropped is returned (wrapped) by Flush when a call made before it
	// was dropped instead of delivered: the broker refused the request
	// (gRPC InvalidArgument, STALE_BROKER_EPOCH or another top-level error
	// code). A dropped call stays dropped: every later Flush reports it too.
	ErrDropped = errors.New("brokerqueue: request dropped")

	// errNotConfirmed is a broker's NOT_CONTROLLER answer, retried.
	errNotConfirmed = errors.New("broker answered NOT_CONTROLLER: it does not follow this controller (yet)")
)

// Config configures a Queue. The epochs are fixed for the Queue's life.
type Config struct {
	// BrokerID is the receiving broker.
	BrokerID int32
	// BrokerEpoch is the epoch of the broker's registration, stamped on
	// every request as broker_epoch.
	BrokerEpoch int64
	// ControllerID and ControllerEpoch are stamped on every request. Each
	// PartitionState's own controller_epoch is the caller's to set.
	ControllerID    int32
	ControllerEpoch int32
	// Client reaches the broker. Required.
	Client replicadv1.ReplicaManagerServiceClient
	// ACLs, if set, is the cluster's whole ACL set, stamped (with
	// acls_present) on every UpdateMetadata as it is built for sending, a
	// retry included: what a broker receives is the set current at the
	// send, never an older one an UpdateMetadata queued earlier would
	// carry. It is called with the queue's lock held, so it must not block
	// nor call into the queue (the controller reads an atomic). The result
	// is not modified. version orders the sets (acls_version).
	ACLs func() (acls []*replicadv1.Acl, version int64)
	// Throttle, if set, is the replication throttle (bytes/s, 0: none),
	// stamped with replication_throttle_present on every UpdateMetadata as
	// it is built, like ACLs and under the same rules.
	Throttle func() (bytesPerSec, version int64)
	// RequestTimeout bounds one call (DefaultRequestTimeout when zero); a
	// call that times out is retried.
	RequestTimeout time.Duration
	// RequestTimeoutPerPartition is added to RequestTimeout for each
	// partition of the call (DefaultRequestTimeoutPerPartition when zero,
	// none when negative). A broker keeps working on a call whose deadline
	// passed (it does not abandon a StopReplica half way), so a deadline
	// too short for the call's size only resends it while the first is
	// still being handled: a 10,000-partition StopReplica that took
	// minutes was sent again every 30 s, each copy queueing behind the
	// last on the broker's state-change lock.
	RequestTimeoutPerPartition time.Duration
	// Backoff is the wait before the first retry (DefaultBackoff when zero);
	// it doubles with each consecutive failure up to MaxBackoff
	// (DefaultMaxBackoff when zero), and a random part of up to half is taken
	// off.
	Backoff    time.Duration
	MaxBackoff time.Duration
	// MaxPartitionsPerRequest caps the partitions of one request
	// (DefaultMaxPartitionsPerRequest when zero).
	MaxPartitionsPerRequest int
	// OnLeaderAndIsrResponse, if set, gets every LeaderAndIsr answer of the
	// broker except a top-level STALE_CONTROLLER_EPOCH, partition errors
	// included. It is called from the Queue's goroutine, which sends nothing
	// while it runs; it must not call Close of this Queue (Close waits for
	// that goroutine).
	OnLeaderAndIsrResponse func(brokerID int32, resp *replicadv1.LeaderAndIsrResponse)
	// OnStopReplicaResponse, if set, gets every StopReplica request the
	// broker answered (with a top-level NONE) and its answer, as
	// OnLeaderAndIsrResponse does.
	OnStopReplicaResponse func(brokerID int32, req *replicadv1.StopReplicaRequest, resp *replicadv1.StopReplicaResponse)
	// OnStaleControllerEpoch, if set, is called once when the broker answers
	// STALE_CONTROLLER_EPOCH, with the controller epoch the broker follows
	// (0 when its answer did not say): a newer controller acts, or the
	// broker took an epoch no controller holds. It is called from the
	// Queue's goroutine after the Queue stopped, so it may call Close of
	// this Queue and of others (Close then does not wait for it to return).
	OnStaleControllerEpoch func(brokerControllerEpoch int32)
	Logger                 zerolog.Logger
	// Tracer starts the SendSpanName span of each attempt. Nil: the global
	// tracer provider's.
	Tracer trace.Tracer
	// Int64N draws the backoff jitter, in [0, n); nil means math/rand/v2's.
	// It may be called from several queues' goroutines at once. Set by a
	// seeded test that replays a run exactly (tests/sim).
	Int64N func(n int64) int64
	// Gate, if set, is called by the sending goroutine when calls wait and
	// before it takes them into a request; it returns when the goroutine
	// may take them (or once ctx, the Queue's, is done). Which calls make
	// one request depends on whether a caller that queues two calls in a
	// row, or one woken with the goroutine by an answer, queues the second
	// before the goroutine takes the first: a simulation that replays a
	// run exactly (tests/sim) lets the goroutine take only once every
	// other goroutine is idle. Nil: it takes at once.
	Gate func(ctx context.Context)
}

func (c *Config) setDefaults() {
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.RequestTimeoutPerPartition == 0 {
		c.RequestTimeoutPerPartition = DefaultRequestTimeoutPerPartition
	}
	c.RequestTimeoutPerPartition = max(c.RequestTimeoutPerPartition, 0)
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = DefaultMaxBackoff
	}
	c.MaxBackoff = max(c.MaxBackoff, c.Backoff)
	if c.MaxPartitionsPerRequest <= 0 {
		c.MaxPartitionsPerRequest = DefaultMaxPartitionsPerRequest
	}
	if c.Tracer == nil {
		c.Tracer = otel.Tracer("github.com/replicad/replicad/controller/brokerqueue")
	}
	if c.Int64N == nil {
		c.Int64N = rand.Int64N
	}
}

// Queue sends one broker the controller's requests, in order, from one
// goroutine. Its methods are safe for concurrent use and never wait for the
// network.
//
// The messages passed to LeaderAndIsr, UpdateMetadata and StopReplica are
// kept until sent and read by the sending goroutine; the Queue never
// modifies them, and the caller must not either once passed (handing the
// same message to the queues of several brokers is fine).
type Queue struct {
	cfg    Config
	logger zerolog.Logger

	// ctx is cancelled by Close: it aborts the call in flight and the
	// backoff wait.
	ctx    context.Context
	cancel context.CancelFunc
	// done is closed when the goroutine has stopped sending (before it calls
	// OnStaleControllerEpoch).
	done      chan struct{}
	closeOnce sync.Once
	// wake has room for one signal: enqueueing never blocks on it.
	wake chan struct{}

	mu sync.Mutex
	// entries are the requests to send, in order. entries[0] is the one in
	// flight (sending) or waiting for its retry.
	entries []*entry
	// seq numbers the calls: seq is the last call's number. Every call
	// numbered up to resolved was delivered or dropped.
	seq, resolved uint64
	// firstDropped is the number of the first call dropped (0: none), and
	// dropped the count of requests dropped.
	firstDropped uint64
	dropped      int
	closed       bool
	stale        bool
	// progress is closed (and replaced) whenever resolved, closed or stale
	// changes: Flush waits on it.
	progress chan struct{}
}

// New returns a Queue for cfg.BrokerID and starts its sending goroutine.
func New(cfg Config) *Queue {
	if cfg.Client == nil {
		panic("brokerqueue: Config.Client is nil")
	}
	cfg.setDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	q := &Queue{
		cfg: cfg,
		logger: cfg.Logger.With().Str("component", "broker_queue").Int32("broker", cfg.BrokerID).
			Int32("controller_epoch", cfg.ControllerEpoch).Int64("broker_epoch", cfg.BrokerEpoch).Logger(),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		wake:     make(chan struct{}, 1),
		progress: make(chan struct{}),
	}
	go q.run()
	return q
}

// LeaderAndIsr is LeaderAndIsrContext outside any trace: the request starts
// a trace of its own unless it merges into one queued under a trace.
func (q *Queue) LeaderAndIsr(states []*replicadv1.PartitionState, liveLeaders []*replicadv1.Broker) {
	q.LeaderAndIsrContext(context.Background(), states, liveLeaders)
}

// LeaderAndIsrContext queues a LeaderAndIsr request for states; liveLeaders
// are the endpoints of the leaders they name. A call without states is
// ignored. Only ctx's span context is kept (see "Tracing" in the package
// documentation): its cancellation does not withdraw the call.
func (q *Queue) LeaderAndIsrContext(ctx context.Context, states []*replicadv1.PartitionState, liveLeaders []*replicadv1.Broker) {
	if len(states) == 0 {
		return
	}
	q.enqueue(ctx, q.chunkStates(kindLeaderAndIsr, states, liveLeaders))
}

// UpdateMetadata is UpdateMetadataContext outside any trace.
func (q *Queue) UpdateMetadata(liveBrokers []*replicadv1.Broker, states []*replicadv1.PartitionState) {
	q.UpdateMetadataContext(context.Background(), liveBrokers, states)
}

// UpdateMetadataContext queues an UpdateMetadata request: liveBrokers
// replaces the broker's list of live brokers, states update its partition
// metadata (there may be none). Only ctx's span context is kept.
func (q *Queue) UpdateMetadataContext(ctx context.Context, liveBrokers []*replicadv1.Broker, states []*replicadv1.PartitionState) {
	q.enqueue(ctx, q.chunkStates(kindUpdateMetadata, states, liveBrokers))
}

// StopReplica is StopReplicaContext outside any trace.
func (q *Queue) StopReplica(partitions []*replicadv1.StopReplicaPartition) {
	q.StopReplicaContext(context.Background(), partitions)
}

// StopReplicaContext queues a StopReplica request for partitions (each with
// its own leader_epoch and delete_partition). A call without partitions is
// ignored. Only ctx's span context is kept.
func (q *Queue) StopReplicaContext(ctx context.Context, partitions []*replicadv1.StopReplicaPartition) {
	if len(partitions) == 0 {
		return
	}
	var chunks []*entry
	e := newEntry(kindStopReplica)
	for _, p := range partitions {
		if _, ok := e.index[keyOf(p)]; !ok && e.size() >= q.cfg.MaxPartitionsPerRequest {
			chunks = append(chunks, e)
			e = newEntry(kindStopReplica)
		}
		e.addStop(p)
	}
	q.enqueue(ctx, append(chunks, e))
}

// Pending is the number of partitions waiting to be delivered, those of the
// request in flight or waiting for a retry included. An UpdateMetadata that
// carries no partition state counts as one, so Pending is 0 exactly when
// nothing waits.
func (q *Queue) Pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := 0
	for _, e := range q.entries {
		n += max(e.size(), 1)
	}
	return n
}

// Flush waits until every call made before it was delivered: the broker
// answered it with top-level error code NONE (its partition errors do not
// matter here). It returns an error wrapping ErrDropped if one of those calls
// was dropped, ErrStaleControllerEpoch or ErrClosed if the Queue stopped
// first, or ctx's error.
func (q *Queue) Flush(ctx context.Context) error {
	q.mu.Lock()
	target := q.seq
	q.mu.Unlock()
	return q.waitFor(ctx, target)
}

// waitFor waits until every call numbered up to target is resolved.
func (q *Queue) waitFor(ctx context.Context, target uint64) error {
	for {
		q.mu.Lock()
		resolved, stale, closed, progress := q.resolved, q.stale, q.closed, q.progress
		firstDropped, dropped := q.firstDropped, q.dropped
		q.mu.Unlock()
		switch {
		case resolved >= target:
			if firstDropped != 0 && firstDropped <= target {
				return fmt.Errorf("%w: %d request(s) to broker %d", ErrDropped, dropped, q.cfg.BrokerID)
			}
			return nil
		case stale:
			return ErrStaleControllerEpoch
		case closed:
			return ErrClosed
		}
		select {
		case <-progress:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the goroutine, aborting the call in flight, drops what was not
// sent and waits for the goroutine to stop. Calls after Close are ignored.
// Close is idempotent.
func (q *Queue) Close() {
	q.closeOnce.Do(func() {
		q.mu.Lock()
		q.closed = true
		q.entries = nil
		q.notifyLocked()
		q.mu.Unlock()
		q.cancel()
	})
	<-q.done
}

// notifyLocked wakes the Flush calls waiting.
func (q *Queue) notifyLocked() {
	close(q.progress)
	q.progress = make(chan struct{})
}

// chunkStates makes the entries of one LeaderAndIsr or UpdateMetadata call:
// as many as MaxPartitionsPerRequest asks, each with the call's brokers.
func (q *Queue) chunkStates(k kind, states []*replicadv1.PartitionState, brokers []*replicadv1.Broker) []*entry {
	var chunks []*entry
	e := newEntry(k)
	for _, s := range states {
		if _, ok := e.index[keyOf(s)]; !ok && e.size() >= q.cfg.MaxPartitionsPerRequest {
			chunks = append(chunks, e)
			e = newEntry(k)
		}
		e.addState(s)
	}
	chunks = append(chunks, e)
	for _, c := range chunks {
		c.setBrokers(brokers)
	}
	return chunks
}

// enqueue appends the entries of one call, made under ctx's span, merging
// the first into the last waiting entry when it can.
func (q *Queue) enqueue(ctx context.Context, chunks []*entry) {
	sc := trace.SpanContextFromContext(ctx)
	for _, c := range chunks {
		c.parent = sc
		c.calls = 1
	}
	q.mu.Lock()
	if q.closed || q.stale {
		q.mu.Unlock()
		q.logger.Debug().Str("kind", chunks[0].kind.String()).Msg("queue stopped, request ignored")
		return
	}
	q.seq++
	for _, c := range chunks {
		c.firstSeq = q.seq
		if n := len(q.entries); n > 0 && q.mergeable(q.entries[n-1], c) {
			q.entries[n-1].merge(c)
			continue
		}
		q.entries = append(q.entries, c)
	}
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// mergeable tells whether src can join dst, the entry just before it: dst is
// not in flight, of the same kind, and the union fits in one request.
func (q *Queue) mergeable(dst, src *entry) bool {
	return !dst.sending && dst.kind == src.kind && dst.unionSize(src) <= q.cfg.MaxPartitionsPerRequest
}

// run is the sending goroutine.
func (q *Queue) run() {
	stale, epoch := q.loop()
	close(q.done)
	if stale && q.cfg.OnStaleControllerEpoch != nil {
		q.cfg.OnStaleControllerEpoch(epoch)
	}
}

// loop sends until the Queue is closed, or until the broker answers
// STALE_CONTROLLER_EPOCH, which it reports with the broker's controller
// epoch.
func (q *Queue) loop() (stale bool, brokerControllerEpoch int32) {
	failures := 0 // consecutive failed attempts of the head request
	var lastWarn time.Time
	for {
		e, r := q.next()
		if e == nil {
			return false, 0
		}
		start := time.Now()
		code, brokerEpoch, err := q.send(r, failures+1)
		took := time.Since(start)
		if q.ctx.Err() != nil {
			return false, 0 // closing: what is unsent is dropped
		}
		lg := q.logger.With().Str("kind", r.kind.String()).Int("partitions", r.size).Logger()
		lg.Debug().Dur("duration_ms", took).Err(err).Str("error_code", telemetry.ErrorCodeName(code)).Int("attempt", failures+1).Msg("request sent")
		if err == nil && code == replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER {
			// The broker could not confirm this controller as the one it
			// follows: its heartbeats have not reached it yet, or another
			// controller answers them. Retried like a transport failure;
			// a controller that was deposed stops at its next store write.
			err = errNotConfirmed
		}
		if err != nil {
			if status.Code(err) == codes.InvalidArgument {
				lg.Error().Str("grpc_message", status.Convert(err).Message()).Msg("broker refused the request as invalid, dropping it (a controller bug)")
				failures = 0
				q.finish(e, true)
				continue
			}
			failures++
			delay := q.backoff(failures)
			if failures == 1 || time.Since(lastWarn) >= warnInterval {
				lastWarn = time.Now()
				lg.Warn().Err(err).Int("attempt", failures).Dur("backoff_ms", delay).Dur("took_ms", took).
					Dur("timeout_ms", q.requestTimeout(r)).Msg("request failed, retrying")
			} else {
				lg.Debug().Err(err).Int("attempt", failures).Dur("backoff_ms", delay).Msg("request failed, retrying")
			}
			q.release(e)
			if !q.sleep(delay) {
				return false, 0
			}
			continue
		}
		if failures > 0 {
			lg.Info().Int("attempts", failures+1).Msg("request delivered after retries")
		}
		failures = 0
		switch code {
		case replicadv1.ErrorCode_ERROR_CODE_NONE:
			q.finish(e, false)
		case replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH:
			lg.Warn().Int32("broker_controller_epoch", brokerEpoch).
				Msg("broker answered STALE_CONTROLLER_EPOCH: it follows a newer controller epoch, stopping")
			q.mu.Lock()
			q.stale = true
			q.entries = nil
			q.notifyLocked()
			q.mu.Unlock()
			return true, brokerEpoch
		case replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH:
			lg.Warn().Msg("broker answered STALE_BROKER_EPOCH: it restarted since this queue was made, dropping the request")
			q.finish(e, true)
		default:
			lg.Warn().Str("error_code", telemetry.ErrorCodeName(code)).Msg("broker refused the request, dropping it")
			q.finish(e, true)
		}
	}
}

// request is one request to send, built from an entry.
type request struct {
	kind kind
	size int // partitions
	// parent is the span context of the request's first traced call, links
	// those of the others (see entry).
	parent trace.SpanContext
	links  []trace.Link
	calls  int // calls merged into the request
	lai    *replicadv1.LeaderAndIsrRequest
	um     *replicadv1.UpdateMetadataRequest
	sr     *replicadv1.StopReplicaRequest
}

// next waits for work and returns the head entry, marked in flight, and its
// request; nil once the Queue is closed.
func (q *Queue) next() (*entry, *request) {
	gated := false
	for {
		q.mu.Lock()
		if q.closed || q.stale {
			q.mu.Unlock()
			return nil, nil
		}
		if len(q.entries) > 0 {
			if q.cfg.Gate != nil && !gated {
				q.mu.Unlock()
				q.cfg.Gate(q.ctx)
				gated = true
				continue // Close may have come meanwhile
			}
			// Entries of the head's kind queued behind it while it was in
			// flight join it for the retry: nothing else waits between them.
			for len(q.entries) > 1 && q.mergeable(q.entries[0], q.entries[1]) {
				q.entries[0].merge(q.entries[1])
				q.entries = append(q.entries[:1], q.entries[2:]...)
			}
			q.mergePairsLocked()
			e := q.entries[0]
			e.sending = true
			r := q.build(e)
			q.mu.Unlock()
			return e, r
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-q.ctx.Done():
			return nil, nil
		}
	}
}

// mergePairsLocked folds a run of LeaderAndIsr/UpdateMetadata pairs waiting
// at the head, [L1 U1 L2 U2 ...], into one pair [L1+L2+... U1+U2+...]. A
// decision split into bounded store writes (a controlled shutdown or a
// fencing of 10,000 leaderships: 1,000 partitions a write) queues one such
// pair per write, and since entries of different kinds never merge, a
// broker got them one round trip at a time (40 round trips for 10,000
// partitions, most of a controlled shutdown's time). Moving U1 after L2 is
// safe as long as no partition's LeaderAndIsr overtakes an UpdateMetadata of
// the same partition that no later UpdateMetadata of the run replaces: then
// every partition still gets its newest LeaderAndIsr before its newest
// metadata. The run stops at the first pair that would break that, at any
// other kind, and where a merged request would exceed
// MaxPartitionsPerRequest.
func (q *Queue) mergePairsLocked() {
	es := q.entries
	if len(es) < 4 || es[0].sending || es[0].kind != kindLeaderAndIsr || es[1].kind != kindUpdateMetadata {
		return
	}
	l, u := es[0], es[1]
	i := 2
	for ; i+1 < len(es); i += 2 {
		nl, nu := es[i], es[i+1]
		if nl.kind != kindLeaderAndIsr || nu.kind != kindUpdateMetadata ||
			l.unionSize(nl) > q.cfg.MaxPartitionsPerRequest || u.unionSize(nu) > q.cfg.MaxPartitionsPerRequest {
			break
		}
		overtakes := false
		for k := range nl.index {
			if _, inU := u.index[k]; inU {
				if _, replaced := nu.index[k]; !replaced {
					overtakes = true
					break
				}
			}
		}
		if overtakes {
			break
		}
		l.merge(nl)
		u.merge(nu)
	}
	if i > 2 {
		for j := 2; j < i; j++ {
			es[j] = nil
		}
		q.entries = append(es[:2], es[i:]...)
	}
}

// build makes e's request. The slices are copied: e may change once it is no
// longer in flight.
func (q *Queue) build(e *entry) *request {
	r := &request{kind: e.kind, size: e.size(), parent: e.parent, links: slices.Clone(e.links), calls: e.calls}
	switch e.kind {
	case kindLeaderAndIsr:
		r.lai = &replicadv1.LeaderAndIsrRequest{
			ControllerId:    q.cfg.ControllerID,
			ControllerEpoch: q.cfg.ControllerEpoch,
			BrokerEpoch:     q.cfg.BrokerEpoch,
			PartitionStates: append([]*replicadv1.PartitionState(nil), e.states...),
			LiveLeaders:     append([]*replicadv1.Broker(nil), e.brokers...),
		}
	case kindUpdateMetadata:
		r.um = &replicadv1.UpdateMetadataRequest{
			ControllerId:    q.cfg.ControllerID,
			ControllerEpoch: q.cfg.ControllerEpoch,
			BrokerEpoch:     q.cfg.BrokerEpoch,
			LiveBrokers:     append([]*replicadv1.Broker(nil), e.brokers...),
			PartitionStates: append([]*replicadv1.PartitionState(nil), e.states...),
		}
		if q.cfg.ACLs != nil {
			r.um.Acls, r.um.AclsVersion = q.cfg.ACLs()
			r.um.AclsPresent = true
		}
		if q.cfg.Throttle != nil {
			r.um.ReplicationThrottleBytesPerSec, r.um.ReplicationThrottleVersion = q.cfg.Throttle()
			r.um.ReplicationThrottlePresent = true
		}
	case kindStopReplica:
		r.sr = &replicadv1.StopReplicaRequest{
			ControllerId:    q.cfg.ControllerID,
			ControllerEpoch: q.cfg.ControllerEpoch,
			BrokerEpoch:     q.cfg.BrokerEpoch,
			Partitions:      append([]*replicadv1.StopReplicaPartition(nil), e.stops...),
		}
	}
	return r
}

// send makes one call under RequestTimeout and returns the answer's
// top-level error code. It hands a LeaderAndIsr answer to
// OnLeaderAndIsrResponse and logs partition errors. The call runs in a
// SendSpanName client span, the child of r's parent span and linked to the
// other calls merged into r.
func (q *Queue) send(r *request, attempt int) (code replicadv1.ErrorCode, brokerControllerEpoch int32, err error) {
	ctx, span := q.startSendSpan(r, attempt)
	merged := q.startMergedSpans(r, span, attempt)
	defer func() {
		for _, s := range append(merged, span) {
			if err != nil {
				s.RecordError(err)
				s.SetStatus(otelcodes.Error, status.Code(err).String())
			} else {
				s.SetAttributes(telemetry.ErrorCode(code))
				if code != replicadv1.ErrorCode_ERROR_CODE_NONE {
					s.SetStatus(otelcodes.Error, telemetry.ErrorCodeName(code))
				}
			}
			s.End()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, q.requestTimeout(r))
	defer cancel()
	return q.call(ctx, r, span)
}

// requestTimeout is the deadline of one attempt to send r: RequestTimeout,
// and RequestTimeoutPerPartition for each of its partitions.
func (q *Queue) requestTimeout(r *request) time.Duration {
	return q.cfg.RequestTimeout + time.Duration(r.size)*q.cfg.RequestTimeoutPerPartition
}

// startSendSpan starts the span of one attempt to send r, under r's parent
// span context (the Queue's own context otherwise: cancellation comes from
// Close, never from the caller that queued the call).
func (q *Queue) startSendSpan(r *request, attempt int) (context.Context, trace.Span) {
	ctx := q.ctx
	if r.parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, r.parent)
	}
	attrs := []attribute.KeyValue{
		attribute.Int("replicad.broker", int(q.cfg.BrokerID)),
		attribute.Int64("replicad.broker_epoch", q.cfg.BrokerEpoch),
		attribute.Int("replicad.controller_id", int(q.cfg.ControllerID)),
		attribute.Int("replicad.controller_epoch", int(q.cfg.ControllerEpoch)),
		attribute.String("replicad.request_kind", r.kind.String()),
		attribute.Int("replicad.partitions", r.size),
		attribute.Int("replicad.merged_calls", r.calls),
		attribute.Int("replicad.attempt", attempt),
	}
	ctx, span := q.cfg.Tracer.Start(ctx, SendSpanName, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(r.links...), trace.WithAttributes(attrs...))
	if span.IsRecording() {
		if names := r.partitionNames(); names != nil {
			span.SetAttributes(attribute.StringSlice("replicad.topic_partitions", names))
		}
	}
	return ctx, span
}

// startMergedSpans starts a MergedSpanName span under each of r's links (the
// other traced calls merged into r), linked to send; none when send does not
// record.
func (q *Queue) startMergedSpans(r *request, send trace.Span, attempt int) []trace.Span {
	if len(r.links) == 0 || !send.IsRecording() {
		return nil
	}
	sc := send.SpanContext()
	spans := make([]trace.Span, 0, len(r.links))
	for _, l := range r.links {
		_, s := q.cfg.Tracer.Start(trace.ContextWithSpanContext(q.ctx, l.SpanContext), MergedSpanName,
			trace.WithLinks(trace.Link{SpanContext: sc}), trace.WithAttributes(
				attribute.Int("replicad.broker", int(q.cfg.BrokerID)),
				attribute.String("replicad.request_kind", r.kind.String()),
				attribute.Int("replicad.attempt", attempt),
				attribute.String("replicad.sent_in_trace", sc.TraceID().String())))
		spans = append(spans, s)
	}
	return spans
}

// partitionNames are r's partitions as topic-partition names, nil when r has
// more than maxNamedPartitions.
func (r *request) partitionNames() []string {
	if r.size == 0 || r.size > maxNamedPartitions {
		return nil
	}
	names := make([]string, 0, r.size)
	var states []*replicadv1.PartitionState
	switch {
	case r.lai != nil:
		states = r.lai.GetPartitionStates()
	case r.um != nil:
		states = r.um.GetPartitionStates()
	case r.sr != nil:
		for _, p := range r.sr.GetPartitions() {
			names = append(names, fmt.Sprintf("%s-%d", p.GetTopic(), p.GetPartition()))
		}
	}
	for _, s := range states {
		names = append(names, fmt.Sprintf("%s-%d", s.GetTopic(), s.GetPartition()))
	}
	return names
}

// call makes r's gRPC call under ctx. It returns the answer's top-level
// error code and the controller epoch the broker said it follows.
func (q *Queue) call(ctx context.Context, r *request, span trace.Span) (replicadv1.ErrorCode, int32, error) {
	switch r.kind {
	case kindLeaderAndIsr:
		resp, err := q.cfg.Client.LeaderAndIsr(ctx, r.lai)
		if err != nil {
			return 0, 0, err
		}
		code := resp.GetErrorCode()
		if code == replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH || q.ctx.Err() != nil {
			return code, resp.GetControllerEpoch(), nil
		}
		setPartitionErrors(span, resp.GetPartitionErrors())
		q.logPartitionErrors(r.kind, resp.GetPartitionErrors())
		if q.cfg.OnLeaderAndIsrResponse != nil {
			q.cfg.OnLeaderAndIsrResponse(q.cfg.BrokerID, resp)
		}
		return code, resp.GetControllerEpoch(), nil
	case kindUpdateMetadata:
		resp, err := q.cfg.Client.UpdateMetadata(ctx, r.um)
		if err != nil {
			return 0, 0, err
		}
		return resp.GetErrorCode(), resp.GetControllerEpoch(), nil
	default:
		resp, err := q.cfg.Client.StopReplica(ctx, r.sr)
		if err != nil {
			return 0, 0, err
		}
		setPartitionErrors(span, resp.GetPartitionErrors())
		q.logPartitionErrors(r.kind, resp.GetPartitionErrors())
		if q.cfg.OnStopReplicaResponse != nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE && q.ctx.Err() == nil {
			q.cfg.OnStopReplicaResponse(q.cfg.BrokerID, r.sr, resp)
		}
		return resp.GetErrorCode(), resp.GetControllerEpoch(), nil
	}
}

// setPartitionErrors counts the partitions of an answer with an error on
// the send span.
func setPartitionErrors(span trace.Span, errs []*replicadv1.PartitionError) {
	if !span.IsRecording() {
		return
	}
	n := 0
	for _, pe := range errs {
		if pe.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			n++
		}
	}
	span.SetAttributes(attribute.Int("replicad.partition_errors", n))
}

// logPartitionErrors logs the partitions the broker did not apply at debug:
// after a controller failover, FENCED_LEADER_EPOCH or STALE_CONTROLLER_EPOCH
// on an epoch already applied is normal.
func (q *Queue) logPartitionErrors(k kind, errs []*replicadv1.PartitionError) {
	if q.logger.GetLevel() > zerolog.DebugLevel {
		return
	}
	for _, pe := range errs {
		if pe.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
			continue
		}
		q.logger.Debug().Str("kind", k.String()).Str("topic", pe.GetTopic()).Int32("partition", pe.GetPartition()).
			Str("error_code", telemetry.ErrorCodeName(pe.GetErrorCode())).Msg("partition error")
	}
}

// finish removes e, answered or dropped, from the head of the queue.
func (q *Queue) finish(e *entry, dropped bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.entries) == 0 || q.entries[0] != e {
		return // Close dropped everything meanwhile
	}
	q.entries[0] = nil
	q.entries = q.entries[1:]
	if dropped {
		q.dropped++
		if q.firstDropped == 0 {
			q.firstDropped = e.firstSeq
		}
	}
	// A call split over several entries is resolved with its last one.
	if len(q.entries) > 0 {
		q.resolved = q.entries[0].firstSeq - 1
	} else {
		q.resolved = q.seq
	}
	q.notifyLocked()
}

// release marks e, whose call failed, as waiting for its retry: calls of its
// kind may join it meanwhile.
func (q *Queue) release(e *entry) {
	q.mu.Lock()
	e.sending = false
	q.mu.Unlock()
}

// backoff is the wait before the next attempt after failures consecutive
// failures: Backoff doubled per failure, capped at MaxBackoff, less a random
// part of up to half (so that retries to many brokers spread out).
func (q *Queue) backoff(failures int) time.Duration {
	d := q.cfg.Backoff
	for i := 1; i < failures && d < q.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, q.cfg.MaxBackoff)
	draw := q.cfg.Int64N
	if draw == nil { // a Queue made without New (tests)
		draw = rand.Int64N
	}
	return d - time.Duration(draw(int64(d/2)+1))
}

// sleep waits d and reports false if the Queue closes first.
func (q *Queue) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-q.ctx.Done():
		return false
	}
}

// kind is a request type.
type kind int

const (
	kindLeaderAndIsr kind = iota + 1
	kindUpdateMetadata
	kindStopReplica
)

func (k kind) String() string {
	switch k {
	case kindLeaderAndIsr:
		return "LeaderAndIsr"
	case kindUpdateMetadata:
		return "UpdateMetadata"
	case kindStopReplica:
		return "StopReplica"
	}
	return fmt.Sprintf("kind(%d)", int(k))
}

// partitionKey is a topic-partition.
type partitionKey struct {
	topic     string
	partition int32
	// topicID tells apart the stops of two topics of one name (one deleted,
	// the other created since): they never merge. Empty for states.
	topicID string
}

type topicPartition interface {
	GetTopic() string
	GetPartition() int32
}

func keyOf(m topicPartition) partitionKey {
	return partitionKey{topic: m.GetTopic(), partition: m.GetPartition()}
}

// entry is one request waiting in the queue, made of one or more calls of
// the same kind, at most one item per partition.
type entry struct {
	kind kind
	// states are the partition states of a LeaderAndIsr or UpdateMetadata,
	// stops the partitions of a StopReplica, in the order first queued;
	// index locates each partition in them.
	states []*replicadv1.PartitionState
	stops  []*replicadv1.StopReplicaPartition
	index  map[partitionKey]int
	// brokers are a LeaderAndIsr's live leaders (one per id) or an
	// UpdateMetadata's live brokers.
	brokers []*replicadv1.Broker
	// firstSeq numbers the first call in the entry.
	firstSeq uint64
	// parent is the span context of the first call in the entry made under
	// a span; the request is sent in that trace. links are the distinct
	// span contexts of the entry's other traced calls, at most MaxLinks.
	parent trace.SpanContext
	links  []trace.Link
	// calls is the number of calls merged into the entry.
	calls int
	// sending is set while the entry's request is in flight: it must not
	// change then.
	sending bool
}

func newEntry(k kind) *entry {
	return &entry{kind: k, index: make(map[partitionKey]int)}
}

// size is the number of partitions in the entry.
func (e *entry) size() int { return len(e.states) + len(e.stops) }

// addState adds s, replacing an earlier state of its partition in place.
func (e *entry) addState(s *replicadv1.PartitionState) {
	k := keyOf(s)
	if i, ok := e.index[k]; ok {
		e.states[i] = s
		return
	}
	e.index[k] = len(e.states)
	e.states = append(e.states, s)
}

// addStop adds p, replacing an earlier stop of its partition in place; a
// deletion asked earlier is kept.
func (e *entry) addStop(p *replicadv1.StopReplicaPartition) {
	k := keyOf(p)
	k.topicID = p.GetTopicId()
	i, ok := e.index[k]
	if !ok {
		e.index[k] = len(e.stops)
		e.stops = append(e.stops, p)
		return
	}
	if e.stops[i].GetDeletePartition() && !p.GetDeletePartition() {
		p = &replicadv1.StopReplicaPartition{
			Topic:           p.GetTopic(),
			Partition:       p.GetPartition(),
			LeaderEpoch:     p.GetLeaderEpoch(),
			DeletePartition: true,
			TopicId:         p.GetTopicId(),
		}
	}
	e.stops[i] = p
}

// setBrokers takes a later call's brokers: live leaders merge by id (the
// later endpoint wins), live brokers are replaced.
func (e *entry) setBrokers(brokers []*replicadv1.Broker) {
	if e.kind == kindUpdateMetadata {
		e.brokers = append([]*replicadv1.Broker(nil), brokers...)
		return
	}
	for _, b := range brokers {
		replaced := false
		for i, have := range e.brokers {
			if have.GetId() == b.GetId() {
				e.brokers[i], replaced = b, true
				break
			}
		}
		if !replaced {
			e.brokers = append(e.brokers, b)
		}
	}
}

// unionSize is the number of partitions in e merged with src.
func (e *entry) unionSize(src *entry) int {
	n := e.size()
	for k := range src.index {
		if _, ok := e.index[k]; !ok {
			n++
		}
	}
	return n
}

// merge adds src, an entry of e's kind queued after it, to e: src's items
// win.
func (e *entry) merge(src *entry) {
	e.calls += src.calls
	e.addTrace(src.parent)
	for _, l := range src.links {
		e.addTrace(l.SpanContext)
	}
	for _, s := range src.states {
		e.addState(s)
	}
	for _, p := range src.stops {
		e.addStop(p)
	}
	if e.kind != kindStopReplica {
		e.setBrokers(src.brokers)
	}
}

// addTrace records the span context of a call merged into e: the parent if
// e has none yet, else a link (once per span, at most MaxLinks).
func (e *entry) addTrace(sc trace.SpanContext) {
	switch {
	case !sc.IsValid() || sc.Equal(e.parent):
	case !e.parent.IsValid():
		e.parent = sc
	case len(e.links) < MaxLinks && !slices.ContainsFunc(e.links, func(l trace.Link) bool { return l.SpanContext.Equal(sc) }):
		e.links = append(e.links, trace.Link{SpanContext: sc})
	}
}
