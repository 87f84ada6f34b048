package alterpartition

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controllerchannel"
	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/telemetry"
)

// Defaults of Config.
const (
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMinBackoff is Kafka's retry delay after a failed AlterPartition.
	DefaultMinBackoff = 50 * time.Millisecond
	// DefaultMaxBackoff is Kafka's retry.backoff.max.ms: a leader cut from
	// its controller commits its ISR changes within about a second of the
	// heal (its channel reconnects as soon, grpcx.ConnectParams).
	DefaultMaxBackoff = time.Second
)

// ErrNoController is returned by New without a controller address.
var ErrNoController = errors.New("alterpartition: no controller address")

// Config configures a Manager.
type Config struct {
	// Controller is the controller's host:port, or a comma-separated list
	// of them (several controllers sharing etcd): requests go to one until
	// it fails or answers NOT_CONTROLLER, then to the next.
	Controller string
	// BrokerID is this broker's id, the request's broker_id.
	BrokerID int32
	// BrokerEpoch returns this broker's current epoch, read at every send
	// (the request's broker_epoch and the leader's own entry in new_isr).
	// Nil means 0: a broker that has not registered with a controller.
	BrokerEpoch func() int64
	// RequestTimeout bounds one AlterPartition call; a call that times out
	// is retried.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a retry: it doubles
	// from MinBackoff with each consecutive failure up to MaxBackoff, and a
	// random half of it is taken off (jitter).
	MinBackoff, MaxBackoff time.Duration
	// Clock times the backoff; nil means the wall clock.
	Clock clock.Clock
	// Rand draws the jitter; nil means a randomly seeded source. Only the
	// sending goroutine uses it.
	Rand   *rand.Rand
	Logger zerolog.Logger
	// TracerProvider makes the request spans; nil means the global one.
	TracerProvider trace.TracerProvider
	// Dial makes a client of the controller at addr; the Manager's
	// controllerchannel calls it once per address, at the first request
	// there, and Close closes the Closer. Nil: controllerchannel.GRPCDial
	// (insecure unless DialOptions say otherwise). A seam for tests that run the
	// cluster in one process over an in-memory network (tests/sim).
	Dial func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error)
	// DialOptions are added to the default Dial's (its transport
	// credentials: TLS). Unused with Dial set.
	DialOptions []grpc.DialOption
}

func (c *Config) setDefaults() {
	if c.BrokerEpoch == nil {
		c.BrokerEpoch = func() int64 { return 0 }
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.MinBackoff <= 0 {
		c.MinBackoff = DefaultMinBackoff
	}
	if c.MaxBackoff < c.MinBackoff {
		c.MaxBackoff = max(DefaultMaxBackoff, c.MinBackoff)
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Rand == nil {
		c.Rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	if c.Dial == nil {
		extra := c.DialOptions
		c.Dial = func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
			return controllerchannel.GRPCDial(addr, extra...)
		}
	}
}

// item is a submitted change and its completion.
type item struct {
	change core.IsrChange
	done   func(core.IsrChangeResult)
}

// Manager is a core.IsrChanger that commits ISR changes through the
// controller's AlterPartition. Its methods are safe for concurrent use.
type Manager struct {
	cfg    Config
	tracer trace.Tracer
	// ch finds the active controller: the request goes to its target.
	ch     *controllerchannel.Channel
	logger zerolog.Logger

	// ctx is cancelled by Close: it aborts the call in flight and the
	// backoff wait.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	queued []item // submitted, not yet taken into a request
	closed bool
	// wake has room for one signal: Submit never blocks on it.
	wake chan struct{}

	closeOnce sync.Once
	closeErr  error
}

var _ core.IsrChanger = (*Manager)(nil)

// New returns a Manager sending to cfg.Controller and starts its sending
// goroutine. It does not wait for the controller: the connection is made at
// the first request and remade as needed.
func New(cfg Config) (*Manager, error) {
	if cfg.Controller == "" {
		return nil, ErrNoController
	}
	cfg.setDefaults()
	m := &Manager{
		cfg:    cfg,
		logger: cfg.Logger.With().Str("component", "alter_partition").Str("controller", cfg.Controller).Logger(),
		tracer: tracerProvider(cfg.TracerProvider).Tracer("github.com/replicad/replicad/alterpartition"),
		wake:   make(chan struct{}, 1),
	}
	var addrs []string
	for _, addr := range strings.Split(cfg.Controller, ",") {
		if addr = strings.TrimSpace(addr); addr != "" {
			addrs = append(addrs, addr)
		}
	}
	if len(addrs) == 0 {
		return nil, ErrNoController
	}
	ch, err := controllerchannel.New(controllerchannel.Config{Addrs: addrs, Dial: cfg.Dial, Clock: cfg.Clock})
	if err != nil {
		return nil, err
	}
	m.ch = ch
	m.ctx, m.cancel = context.WithCancel(context.Background())
	m.wg.Add(1)
	go m.run()
	return m, nil
}

// Submit queues change for the next AlterPartition request. After Close it
// fails the change at once with BROKER_NOT_AVAILABLE.
func (m *Manager) Submit(change core.IsrChange, done func(core.IsrChangeResult)) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		done(core.IsrChangeResult{Error: core.ErrBrokerNotAvailable})
		return
	}
	m.queued = append(m.queued, item{change: change, done: done})
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Close stops sending: the request in flight is cancelled, and every change
// not answered yet fails with BROKER_NOT_AVAILABLE before Close returns.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.mu.Lock()
		m.closed = true
		m.mu.Unlock()
		m.cancel()
		m.wg.Wait()
		m.closeErr = m.ch.Close()
	})
	return m.closeErr
}

// run is the sending goroutine. inflight is the batch being sent (or
// retried); it holds one change per partition.
func (m *Manager) run() {
	defer m.wg.Done()
	var inflight []item
	failures := 0 // consecutive failed or rejected requests
	for m.waitForWork(len(inflight) > 0) {
		if failures > 0 && !m.sleep(m.backoff(failures)) {
			break
		}
		inflight = m.takeQueued(inflight)
		if inflight = m.dropWithdrawn(inflight); len(inflight) == 0 {
			continue
		}
		resp, to, err := m.send(inflight)
		switch {
		case err != nil && m.ctx.Err() != nil:
			// Closing: the deferred failAll below answers the batch.
		case err != nil && retriable(err):
			failures++
			m.logger.Warn().Err(err).Str("to", to).Int("partitions", len(inflight)).Int("attempt", failures).Msg("AlterPartition failed, retrying")
			continue
		case err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER:
			// A standby controller: the same batch goes to the one it
			// named, or the next (the channel moved on).
			failures++
			m.logger.Debug().Str("to", to).Msg("AlterPartition reached a standby controller, trying the next")
			continue
		case err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH:
			// The controller refused the whole request for this broker's
			// own epoch, before looking at any change: nothing was applied.
			// Answered to core, an expansion stays pending until a
			// LeaderAndIsr that need not come (the broker registers again
			// and keeps leading at the same leader epoch), and its
			// follower never rejoins (tests/sim, seed 112384444: sent
			// under the old epoch just before the new registration
			// landed). Retried, it goes with the epoch of the moment, and
			// the partition withdraws it if a LeaderAndIsr replaces it.
			failures++
			m.logger.Warn().Str("to", to).Int("partitions", len(inflight)).Int("attempt", failures).
				Msg("AlterPartition refused for a stale broker epoch, retrying with the current one")
			continue
		case err != nil:
			failures++
			m.logger.Error().Err(err).Int("partitions", len(inflight)).Msg("AlterPartition refused, rejecting its ISR changes")
			complete(inflight, func(item) core.IsrChangeResult { return core.IsrChangeResult{Error: core.ErrUnknownServerError} })
			inflight = nil
			continue
		default:
			if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
				failures++
			} else {
				failures = 0
			}
			complete(inflight, m.resultsOf(resp))
			inflight = nil
			continue
		}
		break
	}
	m.failAll(inflight)
}

// waitForWork blocks until there is something to send (have, or a queued
// change) and reports false once the Manager is closing.
func (m *Manager) waitForWork(have bool) bool {
	for {
		if m.ctx.Err() != nil {
			return false
		}
		m.mu.Lock()
		n := len(m.queued)
		m.mu.Unlock()
		if have || n > 0 {
			return true
		}
		select {
		case <-m.wake:
		case <-m.ctx.Done():
		}
	}
}

// takeQueued moves the queued changes into batch. A change for a partition
// already in batch replaces the older one, which is answered
// INVALID_UPDATE_VERSION: a LeaderAndIsr has replaced the state it was based
// on, and its Partition ignores the answer anyway.
func (m *Manager) takeQueued(batch []item) []item {
	m.mu.Lock()
	queued := m.queued
	m.queued = nil
	m.mu.Unlock()
	var superseded []item
	for _, it := range queued {
		i := indexOf(batch, it.change.TopicPartition)
		if i < 0 {
			batch = append(batch, it)
			continue
		}
		superseded = append(superseded, batch[i])
		batch[i] = it
	}
	complete(superseded, func(item) core.IsrChangeResult { return core.IsrChangeResult{Error: core.ErrInvalidUpdateVersion} })
	return batch
}

// dropWithdrawn answers the changes of batch that their Partition withdrew
// (see core.IsrChange.Withdrawn) INVALID_UPDATE_VERSION, as takeQueued does
// a superseded one, and returns the rest: checked before every attempt, so
// a change of a deleted topic retried while the controller was away is not
// committed on the topic re-created under its name.
func (m *Manager) dropWithdrawn(batch []item) []item {
	var withdrawn []item
	keep := batch[:0]
	for _, it := range batch {
		if it.change.Withdrawn != nil && it.change.Withdrawn() {
			withdrawn = append(withdrawn, it)
			continue
		}
		keep = append(keep, it)
	}
	for _, it := range withdrawn {
		m.logger.Debug().Str("topic", it.change.TopicPartition.Topic).Int32("partition", it.change.TopicPartition.Partition).
			Int32("leader_epoch", it.change.LeaderEpoch).Int32("partition_epoch", it.change.PartitionEpoch).
			Msg("ISR change withdrawn by its partition, not sent")
	}
	complete(withdrawn, func(item) core.IsrChangeResult { return core.IsrChangeResult{Error: core.ErrInvalidUpdateVersion} })
	return keep
}

func indexOf(batch []item, t tp.TopicPartition) int {
	for i, it := range batch {
		if it.change.TopicPartition == t {
			return i
		}
	}
	return -1
}

// send makes one AlterPartition call for batch under RequestTimeout, to
// the channel's target, and says where it went. UseController naming
// another controller abandons it (AbortOnMove), to be resent there.
func (m *Manager) send(batch []item) (*replicadv1.AlterPartitionResponse, string, error) {
	brokerEpoch := m.cfg.BrokerEpoch()
	req := &replicadv1.AlterPartitionRequest{BrokerId: m.cfg.BrokerID, BrokerEpoch: brokerEpoch}
	for _, it := range batch {
		req.Partitions = append(req.Partitions, alterPartitionItem(it.change, m.cfg.BrokerID, brokerEpoch))
	}
	ctx, spans := m.startSpans(batch, brokerEpoch)
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	m.logger.Debug().Int("partitions", len(batch)).Int64("broker_epoch", brokerEpoch).Msg("sending AlterPartition")
	resp, to, err := controllerchannel.Attempt(ctx, m.ch, controllerchannel.AttemptOptions{AbortOnMove: true},
		func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.AlterPartitionResponse, error) {
			return c.AlterPartition(ctx, req)
		})
	for _, s := range spans {
		if err != nil {
			s.RecordError(err)
			s.SetStatus(otelcodes.Error, "AlterPartition failed")
		} else {
			s.SetAttributes(telemetry.ErrorCode(resp.GetErrorCode()))
			if code := resp.GetErrorCode(); code != replicadv1.ErrorCode_ERROR_CODE_NONE {
				s.SetStatus(otelcodes.Error, telemetry.ErrorCodeName(code))
			}
		}
		s.End()
	}
	return resp, to, err
}

func tracerProvider(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return otel.GetTracerProvider()
	}
	return tp
}

// Span names of an AlterPartition request (see startSpans).
const (
	SendSpanName    = "AlterPartitionManager.send"
	BatchedSpanName = "AlterPartitionManager.batched"
	// maxBatchedSpans caps the per-change spans of one request (and its
	// links): a request carrying a mass ISR shrink stays cheap to trace.
	maxBatchedSpans = 64
)

// startSpans starts the request's SendSpanName client span in the trace of
// its first traced change (a Partition.shrinkIsr or expandIsr span), so the
// controller's Controller.alterPartition joins it, and links the other
// traced changes. Each of those gets a BatchedSpanName span in its own
// trace, linking the send, so every ISR change's trace leads to the
// controller's answer. It returns the send's context and every span to end.
func (m *Manager) startSpans(batch []item, brokerEpoch int64) (context.Context, []trace.Span) {
	var first trace.SpanContext
	var others []trace.Link
	for _, it := range batch {
		sc := it.change.SpanContext
		switch {
		case !sc.IsValid():
		case !first.IsValid():
			first = sc
		case len(others) < maxBatchedSpans:
			others = append(others, trace.Link{SpanContext: sc})
		}
	}
	ctx := m.ctx
	if first.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, first)
	}
	ctx, send := m.tracer.Start(ctx, SendSpanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithLinks(others...),
		trace.WithAttributes(attribute.Int("replicad.broker", int(m.cfg.BrokerID)), attribute.Int64("replicad.broker_epoch", brokerEpoch),
			attribute.Int("replicad.partitions", len(batch)), attribute.String("replicad.controller_address", m.ch.Target())))
	spans := []trace.Span{send}
	if !send.IsRecording() {
		return ctx, spans
	}
	for _, l := range others {
		_, s := m.tracer.Start(trace.ContextWithSpanContext(m.ctx, l.SpanContext), BatchedSpanName,
			trace.WithLinks(trace.Link{SpanContext: send.SpanContext()}),
			trace.WithAttributes(attribute.String("replicad.sent_in_trace", send.SpanContext().TraceID().String())))
		spans = append(spans, s)
	}
	return ctx, spans
}

// UseController makes addr, one of Config.Controller's addresses, the one
// the next request goes to; a request in flight to another controller is
// abandoned and resent there. The broker's session calls it when another
// controller answers its heartbeats (brokersession.Config.OnControllerChange):
// the session has found the active controller, and an ISR change should
// not wait out a request timeout on the one that stopped answering. An
// unknown address is ignored.
func (m *Manager) UseController(addr string) { m.ch.Use(addr) }

// alterPartitionItem is change on the wire. new_isr carries each member's
// broker epoch: this broker's own, a follower's as its fetches told the
// leader, -1 when unknown.
func alterPartitionItem(change core.IsrChange, brokerID int32, brokerEpoch int64) *replicadv1.AlterPartitionItem {
	out := &replicadv1.AlterPartitionItem{
		Topic:          change.TopicPartition.Topic,
		Partition:      change.TopicPartition.Partition,
		LeaderEpoch:    change.LeaderEpoch,
		PartitionEpoch: change.PartitionEpoch,
	}
	for _, id := range change.NewIsr {
		epoch := int64(-1)
		if id == brokerID {
			epoch = brokerEpoch
		} else if e, ok := change.BrokerEpochs[id]; ok {
			epoch = e
		}
		out.NewIsr = append(out.NewIsr, &replicadv1.BrokerEpoch{BrokerId: id, BrokerEpoch: epoch})
	}
	return out
}

// resultsOf maps resp onto the changes sent: a top-level error applies to
// every change; otherwise each change takes its partition's item.
func (m *Manager) resultsOf(resp *replicadv1.AlterPartitionResponse) func(item) core.IsrChangeResult {
	if top := resp.GetErrorCode(); top != replicadv1.ErrorCode_ERROR_CODE_NONE {
		m.logger.Warn().Str("error_code", telemetry.ErrorCodeName(top)).Int("partitions", len(resp.GetPartitions())).Msg("AlterPartition rejected as a whole")
		return func(item) core.IsrChangeResult { return core.IsrChangeResult{Error: core.ErrorCode(top)} }
	}
	byPartition := make(map[tp.TopicPartition]*replicadv1.AlterPartitionResult, len(resp.GetPartitions()))
	for _, r := range resp.GetPartitions() {
		byPartition[tp.TopicPartition{Topic: r.GetTopic(), Partition: r.GetPartition()}] = r
	}
	return func(it item) core.IsrChangeResult {
		c := it.change
		r, ok := byPartition[c.TopicPartition]
		res := core.IsrChangeResult{Error: core.ErrorCode(r.GetErrorCode())}
		switch {
		case !ok:
			// Kafka re-sends such a change; answering it keeps every
			// change tied to one request, and the Partition proposes again.
			res.Error = core.ErrUnknownServerError
		case res.Error == core.ErrStaleBrokerEpoch:
			// A partition's STALE_BROKER_EPOCH refuses a joining replica
			// whose broker epoch the leader saw is not its current one
			// (it registered again since). The controller answers it only
			// after checking the leader, leader epoch and partition epoch
			// against the committed state: nothing was applied, and no
			// controller can apply this change, which is what
			// INELIGIBLE_REPLICA tells core (KIP-903 answers a stale
			// joining broker epoch that way). Left as it is, core keeps the
			// expansion pending until a LeaderAndIsr that never comes, as
			// the ISR does not change, and the replica never rejoins the
			// ISR (tests/sim, seed 117115516). A top-level
			// STALE_BROKER_EPOCH (the leader's own epoch) stays unclear.
			res.Error = core.ErrIneligibleReplica
		case res.Error != core.ErrNone:
		case r.GetLeaderEpoch() != c.LeaderEpoch || r.GetLeader() != c.LeaderID:
			// Committed state of another leadership: not an answer to this
			// change. The LeaderAndIsr that carries it is on its way.
			res.Error = core.ErrFencedLeaderEpoch
		default:
			res.Isr = r.GetIsr()
			res.PartitionEpoch = r.GetPartitionEpoch()
		}
		if res.Error != core.ErrNone {
			m.logger.Debug().Str("topic", c.TopicPartition.Topic).Int32("partition", c.TopicPartition.Partition).
				Int32("leader_epoch", c.LeaderEpoch).Int32("partition_epoch", c.PartitionEpoch).
				Bool("answered", ok).Str("error_code", res.Error.String()).Msg("ISR change rejected")
		}
		return res
	}
}

// complete answers every change in batch with result's verdict. It runs
// without m.mu: done takes the partition's lock.
func complete(batch []item, result func(item) core.IsrChangeResult) {
	for _, it := range batch {
		it.done(result(it))
	}
}

// failAll answers inflight and every queued change with BROKER_NOT_AVAILABLE.
// Submit no longer queues once closed is set, so nothing is left behind.
func (m *Manager) failAll(inflight []item) {
	m.mu.Lock()
	queued := m.queued
	m.queued = nil
	m.mu.Unlock()
	fail := func(item) core.IsrChangeResult { return core.IsrChangeResult{Error: core.ErrBrokerNotAvailable} }
	complete(inflight, fail)
	complete(queued, fail)
}

// retriable tells a failure the controller may get over (it is unreachable,
// overloaded or slow) from one a retry cannot fix.
func retriable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted,
		codes.Canceled, codes.Internal, codes.Unknown:
		return true
	}
	return false
}

// backoff is the wait before the next request after failures consecutive
// failures: MinBackoff doubled per failure, capped at MaxBackoff, less a
// random part of up to half (so brokers retrying together spread out).
func (m *Manager) backoff(failures int) time.Duration {
	d := m.cfg.MinBackoff
	for i := 1; i < failures && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, m.cfg.MaxBackoff)
	return d - time.Duration(m.cfg.Rand.Int64N(int64(d/2)+1))
}

// sleep waits d on the clock and reports false if the Manager closes first.
func (m *Manager) sleep(d time.Duration) bool {
	fired := make(chan struct{})
	t := m.cfg.Clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-m.ctx.Done():
		t.Stop()
		return false
	}
}
