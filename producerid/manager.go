package producerid

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/telemetry"
)

// Defaults of Config.
const (
	DefaultRequestTimeout = 10 * time.Second
	DefaultMinBackoff     = 50 * time.Millisecond
	DefaultMaxBackoff     = time.Second
)

// Span names of the requests to the controller.
const (
	AllocateSpanName = "ProducerIdManager.allocate"
	BumpSpanName     = "ProducerIdManager.bump"
)

// ErrNoController is returned by New without a controller address.
var ErrNoController = errors.New("producerid: no controller address")

// ErrClosed is returned after Close.
var ErrClosed = errors.New("producerid: manager closed")

// CodeError is the controller's refusal of a request, with its error code
// (INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID, INVALID_REQUEST, ...).
type CodeError struct {
	Code    replicadv1.ErrorCode
	Message string
}

func (e *CodeError) Error() string {
	return fmt.Sprintf("%s: %s", telemetry.ErrorCodeName(e.Code), e.Message)
}

// Config configures a Manager.
type Config struct {
	// Controller is the controller's host:port, or a comma-separated list
	// of them (several controllers sharing etcd).
	Controller string
	// BrokerID is this broker's id.
	BrokerID int32
	// BrokerEpoch returns the broker's current epoch, read at every
	// request; nil means 0 (the controller refuses it: STALE_BROKER_EPOCH).
	BrokerEpoch func() int64
	// RequestTimeout bounds one request to the controller.
	RequestTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before a retry (doubling,
	// less a random half).
	MinBackoff, MaxBackoff time.Duration
	// PrefetchRemaining: the next block is asked for once this many IDs or
	// fewer are left in the current one. 0: a tenth of the block.
	PrefetchRemaining int64
	// Clock times the backoff; nil means the wall clock.
	Clock clock.Clock
	// Int64N draws the backoff's jitter (nil: math/rand/v2's); the
	// simulation gives a fixed one, as for the other components' jitter.
	Int64N func(n int64) int64
	Logger zerolog.Logger
	// TracerProvider makes the request spans; nil means the global one.
	TracerProvider trace.TracerProvider
	// Dial makes a client of the controller at addr, for the Manager's
	// controllerchannel (nil: controllerchannel.GRPCDial, insecure unless
	// DialOptions say otherwise).
	Dial func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error)
	// DialOptions are added to the default Dial's (TLS).
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
	if c.Int64N == nil {
		c.Int64N = rand.Int64N
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.Dial == nil {
		extra := c.DialOptions
		c.Dial = func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
			return controllerchannel.GRPCDial(addr, extra...)
		}
	}
}

// Manager hands out producer IDs and forwards epoch bumps. Its methods are
// safe for concurrent use.
type Manager struct {
	cfg    Config
	log    zerolog.Logger
	tracer trace.Tracer
	// ch finds the active controller: requests go to its target.
	ch *controllerchannel.Channel

	// ctx ends with Close: the block fetch and every wait stop.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// [next, end) is what is left of the current block; spare is the next
	// block, fetched ahead (count 0: none).
	next, end  int64
	size       int64 // the current block's count
	spareFirst int64
	spareCount int32
	// fetching: a goroutine is asking for a block; fetched is closed when
	// it is done (with the block, or because the Manager closed), lastErr
	// is why its last attempt failed.
	fetching bool
	fetched  chan struct{}
	lastErr  error
	closed   bool
	// blocks counts the blocks received (tests).
	blocks int
}

// New dials cfg.Controller's addresses (lazily: nothing is sent until the
// first ID is wanted) and returns the Manager.
func New(cfg Config) (*Manager, error) {
	if cfg.Controller == "" {
		return nil, ErrNoController
	}
	cfg.setDefaults()
	m := &Manager{
		cfg:    cfg,
		log:    cfg.Logger.With().Str("component", "producer_ids").Logger(),
		tracer: cfg.TracerProvider.Tracer("github.com/replicad/replicad/producerid"),
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
	return m, nil
}

// Close stops the block fetch; calls waiting for an ID fail with ErrClosed.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
	return m.ch.Close()
}

// UseController makes addr, one of Config.Controller's, the controller the
// next request goes to (the broker's session found it active). Unknown
// addresses are ignored.
func (m *Manager) UseController(addr string) { m.ch.Use(addr) }

// prefetchAt is how few IDs left start the fetch of the next block.
func (m *Manager) prefetchAt(count int64) int64 {
	if m.cfg.PrefetchRemaining > 0 {
		return m.cfg.PrefetchRemaining
	}
	return count / 10
}

// NewProducerID returns a producer ID never handed out before in the
// cluster. It waits for a block from the controller when none is left, as
// long as ctx allows; the error then says why the last request failed.
func (m *Manager) NewProducerID(ctx context.Context) (int64, error) {
	for {
		m.mu.Lock()
		if m.closed {
			m.mu.Unlock()
			return 0, ErrClosed
		}
		if m.next >= m.end && m.spareCount > 0 {
			m.next, m.end, m.size = m.spareFirst, m.spareFirst+int64(m.spareCount), int64(m.spareCount)
			m.spareCount = 0
		}
		if m.next < m.end {
			id := m.next
			m.next++
			if m.spareCount == 0 && !m.fetching && m.end-m.next <= m.prefetchAt(m.size) {
				m.startFetchLocked()
			}
			m.mu.Unlock()
			return id, nil
		}
		if !m.fetching {
			m.startFetchLocked()
		}
		wait, lastErr := m.fetched, m.lastErr
		m.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			if lastErr == nil {
				m.mu.Lock()
				lastErr = m.lastErr
				m.mu.Unlock()
			}
			if lastErr != nil {
				return 0, fmt.Errorf("no producer ID block from the controller: %w (last attempt: %v)", ctx.Err(), lastErr)
			}
			return 0, fmt.Errorf("no producer ID block from the controller: %w", ctx.Err())
		}
	}
}

// startFetchLocked starts the goroutine that asks for the next block.
func (m *Manager) startFetchLocked() {
	m.fetching = true
	m.fetched = make(chan struct{})
	m.wg.Add(1)
	go m.fetch(m.fetched)
}

// fetch asks the controllers for a block until one answers it or the
// Manager closes, then keeps it as the spare and wakes the waiters.
func (m *Manager) fetch(done chan struct{}) {
	defer m.wg.Done()
	defer close(done)
	for failures := 0; ; failures++ {
		if failures > 0 && !m.sleep(m.backoff(failures)) {
			break
		}
		first, count, err := m.allocate()
		if err != nil {
			m.mu.Lock()
			m.lastErr = err
			m.mu.Unlock()
			if m.ctx.Err() != nil {
				break
			}
			m.log.Warn().Err(err).Int("attempt", failures+1).Msg("no producer ID block yet, retrying")
			continue
		}
		m.mu.Lock()
		m.spareFirst, m.spareCount = first, count
		m.lastErr = nil
		m.blocks++
		m.fetching = false
		m.mu.Unlock()
		m.log.Info().Int64("first_producer_id", first).Int64("last_producer_id", first+int64(count)-1).Msg("producer ID block received")
		return
	}
	m.mu.Lock()
	m.fetching = false
	m.mu.Unlock()
}

// allocate makes one AllocateProducerIds request.
func (m *Manager) allocate() (int64, int32, error) {
	addr := m.ch.Target()
	epoch := m.cfg.BrokerEpoch()
	ctx, span := m.tracer.Start(m.ctx, AllocateSpanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.Int("replicad.broker", int(m.cfg.BrokerID)), attribute.Int64("replicad.broker_epoch", epoch),
		attribute.String("replicad.controller_address", addr)))
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	// The channel moves on to the next controller (or the one a standby
	// named) after a failure; this goroutine retries on its own schedule.
	resp, addr, err := controllerchannel.Attempt(ctx, m.ch, controllerchannel.AttemptOptions{},
		func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.AllocateProducerIdsResponse, error) {
			return c.AllocateProducerIds(ctx, &replicadv1.AllocateProducerIdsRequest{BrokerId: m.cfg.BrokerID, BrokerEpoch: epoch})
		})
	if err == nil {
		span.SetAttributes(telemetry.ErrorCode(resp.GetErrorCode()))
	}
	switch {
	case err != nil:
		err = fmt.Errorf("AllocateProducerIds to %s: %w", addr, err)
	case resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER:
		err = fmt.Errorf("AllocateProducerIds to %s: not the active controller", addr)
	case resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
		// STALE_BROKER_EPOCH: not registered yet, or registering again;
		// the retry carries the epoch of the moment.
		err = &CodeError{Code: resp.GetErrorCode(), Message: fmt.Sprintf("AllocateProducerIds refused by %s for broker epoch %d", addr, epoch)}
	case resp.GetFirstProducerId() <= 0 || resp.GetCount() <= 0:
		err = fmt.Errorf("AllocateProducerIds to %s: answered the block [%d, +%d)", addr, resp.GetFirstProducerId(), resp.GetCount())
	default:
		span.SetAttributes(attribute.Int64("replicad.first_producer_id", resp.GetFirstProducerId()), attribute.Int("replicad.count", int(resp.GetCount())))
		return resp.GetFirstProducerId(), resp.GetCount(), nil
	}
	span.RecordError(err)
	span.SetStatus(otelcodes.Error, "no producer ID block")
	return 0, 0, err
}

// BumpEpoch asks the controller for the epoch after epoch for producer ID
// id. A refusal is a *CodeError: INVALID_PRODUCER_EPOCH when a newer epoch
// was handed out already (or epoch was never), UNKNOWN_PRODUCER_ID for an ID
// never issued, INVALID_REQUEST when the ID's epochs are exhausted. The
// request is retried, to the next controller, until ctx ends.
func (m *Manager) BumpEpoch(ctx context.Context, id int64, epoch int16) (int16, error) {
	var lastErr error
	sentBefore := false
	for failures := 0; ; failures++ {
		if failures > 0 {
			if err := m.sleepCtx(ctx, m.backoff(failures)); err != nil {
				return 0, fmt.Errorf("producer epoch bump: %w (last attempt: %v)", err, lastErr)
			}
		}
		if m.ctx.Err() != nil {
			return 0, ErrClosed
		}
		next, sent, err := m.bump(ctx, id, epoch)
		if err == nil {
			return next, nil
		}
		var ce *CodeError
		if errors.As(err, &ce) && ce.Code != replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
			if sentBefore && ce.Code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
				// The client tells its own lost bump from a fence by these
				// words (client.lostBumpNote): keep them as they are.
				ce.Message += " (an earlier attempt whose answer was lost may have bumped it: ask for a new producer ID)"
			}
			return 0, err
		}
		if status.Code(err) == codes.InvalidArgument {
			return 0, err
		}
		sentBefore = sentBefore || sent
		lastErr = err
		if ctx.Err() != nil {
			return 0, fmt.Errorf("producer epoch bump: %w (last attempt: %v)", ctx.Err(), lastErr)
		}
	}
}

// bump makes one BumpProducerEpoch request; sent reports whether it may
// have reached the active controller without an answer coming back.
func (m *Manager) bump(ctx context.Context, id int64, epoch int16) (int16, bool, error) {
	addr := m.ch.Target()
	brokerEpoch := m.cfg.BrokerEpoch()
	ctx, span := m.tracer.Start(ctx, BumpSpanName, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.Int("replicad.broker", int(m.cfg.BrokerID)), attribute.Int64("replicad.broker_epoch", brokerEpoch),
		attribute.Int64("replicad.producer_id", id), attribute.Int("replicad.producer_epoch", int(epoch)),
		attribute.String("replicad.controller_address", addr)))
	defer span.End()
	rctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	resp, addr, err := controllerchannel.Attempt(rctx, m.ch, controllerchannel.AttemptOptions{},
		func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.BumpProducerEpochResponse, error) {
			return c.BumpProducerEpoch(ctx, &replicadv1.BumpProducerEpochRequest{BrokerId: m.cfg.BrokerID, BrokerEpoch: brokerEpoch,
				ProducerId: id, ProducerEpoch: int32(epoch)})
		})
	sent := false
	switch {
	case err != nil:
		sent = true
		err = fmt.Errorf("BumpProducerEpoch to %s: %w", addr, err)
	case resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER:
		err = fmt.Errorf("BumpProducerEpoch to %s: not the active controller", addr)
	case resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
		span.SetAttributes(telemetry.ErrorCode(resp.GetErrorCode()))
		err = &CodeError{Code: resp.GetErrorCode(), Message: bumpRefusal(resp.GetErrorCode(), id, epoch)}
	default:
		span.SetAttributes(attribute.Int("replicad.new_producer_epoch", int(resp.GetProducerEpoch())))
		return int16(resp.GetProducerEpoch()), false, nil
	}
	span.RecordError(err)
	span.SetStatus(otelcodes.Error, "producer epoch not bumped")
	return 0, sent, err
}

// backoff is MinBackoff doubled per failure up to MaxBackoff, less a random
// part of up to half.
func (m *Manager) backoff(failures int) time.Duration {
	d := m.cfg.MinBackoff
	for i := 1; i < failures && d < m.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, m.cfg.MaxBackoff)
	return d - time.Duration(m.cfg.Int64N(int64(d/2)+1))
}

// sleep waits d and reports false if the Manager closes first.
func (m *Manager) sleep(d time.Duration) bool {
	return m.sleepCtx(m.ctx, d) == nil
}

// sleepCtx waits d; it fails when ctx or the Manager ends first.
func (m *Manager) sleepCtx(ctx context.Context, d time.Duration) error {
	fired := make(chan struct{})
	t := m.cfg.Clock.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-m.ctx.Done():
		return ErrClosed
	}
}

// bumpRefusal explains the controller's refusal of a bump (its answer
// carries only the code).
func bumpRefusal(code replicadv1.ErrorCode, id int64, epoch int16) string {
	switch code {
	case replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH:
		return fmt.Sprintf("producer ID %d: epoch %d is not the newest handed out (a newer instance of the producer bumped it, "+
			"or it never was): this instance is fenced", id, epoch)
	case replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID:
		return fmt.Sprintf("producer ID %d was never issued by this cluster: ask for a new one (producer_id 0)", id)
	case replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST:
		return fmt.Sprintf("producer ID %d: epoch %d cannot be bumped (the largest is 32767): ask for a new producer ID (producer_id 0)", id, epoch)
	}
	return fmt.Sprintf("producer ID %d at epoch %d refused by the controller", id, epoch)
}
