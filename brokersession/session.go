package brokersession

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/replicad/replicad/controllerchannel"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
	"github.com/replicad/replicad/internal/telemetry"
)

// MisconfiguredAttempts is how many registration attempts in a row
// Config.Misconfigured may refuse before Start gives up.
const MisconfiguredAttempts = 3

// Defaults of Config, and the heartbeat bounds.
const (
	DefaultRetryBackoff              = 100 * time.Millisecond
	DefaultMaxRetryBackoff           = 5 * time.Second
	DefaultRequestTimeout            = 5 * time.Second
	DefaultControlledShutdownBackoff = 200 * time.Millisecond
	// DefaultSessionTimeout is assumed when a registration answer carries
	// no session timeout (the controller's own default).
	DefaultSessionTimeout = 6 * time.Second
	// MinHeartbeatInterval bounds the heartbeat period from below, however
	// short the controller's session timeout.
	MinHeartbeatInterval = 50 * time.Millisecond
)

// maxDuplicateBackoff bounds the wait between registrations refused with
// DUPLICATE_BROKER_REGISTRATION.
const maxDuplicateBackoff = time.Second

// ErrNoController is returned by Start without a controller address.
var ErrNoController = errors.New("brokersession: no controller address")

// errNotController is a controller's NOT_CONTROLLER answer: it is a standby.
var errNotController = errors.New("not the active controller (NOT_CONTROLLER)")

// errClosed is returned for calls made after Close.
var errClosed = errors.New("brokersession: session closed")

// Config configures a Session.
type Config struct {
	// Controllers are the addresses (host:port) of every controller that may
	// be the active one; at least one.
	Controllers []string
	// BrokerID, Host, Port and LogDirs are what the broker registers: Host
	// and Port are the endpoint other brokers and clients dial.
	BrokerID int32
	Host     string
	Port     int32
	LogDirs  []string
	// MinInsyncReplicas is the broker's --min-insync-replicas, told to the
	// controller at registration (it keeps replicas that leave an ISR below
	// it as eligible leaders).
	MinInsyncReplicas int32
	// MaxPartitions is the broker's --max-partitions, told to the
	// controller at registration: it assigns the broker no more replicas
	// than that (0: no budget).
	MaxPartitions int32
	// PreviousBrokerEpoch is the broker epoch of this broker's previous life
	// if that life lost nothing (a clean shutdown, or a process crash with
	// the machine up), -1 otherwise (KIP-966); the first registration sends
	// it. A later registration of the same Session (after a fencing) sends
	// the epoch of the registration before: the process lost nothing.
	PreviousBrokerEpoch int64
	// OfflinePartitions, when set, lists the broker's offline replicas;
	// every registration and heartbeat carries them.
	OfflinePartitions func() []tp.TopicPartition
	// OnRegistered, when set, is called with the broker epoch of each
	// successful registration, before the call that registered returns (the
	// broker records it durably: core.ReplicaManager.RecordBrokerEpoch). It
	// must not call the Session.
	OnRegistered func(brokerEpoch int64)
	// Dial makes a client of the controller at addr; the Session's
	// controllerchannel calls it once per address, at the first call there,
	// and closes the Closer on Close. Nil: an insecure gRPC client with
	// replicad's transport options, OpenTelemetry propagation and
	// controllerchannel.DialOption (the standby's hint). A gRPC client of
	// one's own should include that option too.
	Dial func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error)
	// DialOptions are added to the default Dial's (its transport
	// credentials: TLS). Unused with Dial set.
	DialOptions []grpc.DialOption
	// Misconfigured, when set, tells a registration failure that retrying
	// cannot fix (one side of the connection speaks TLS, the other
	// plaintext: tlsconf.IsMismatch). Such failures are logged at error, and
	// after MisconfiguredAttempts of them in a row Start gives up with the
	// last one (a later registration, after a fencing, does not).
	Misconfigured func(error) bool
	// RequestTimeout bounds one RegisterBroker or ControlledShutdown call
	// (and a heartbeat, which is also bounded by the session timeout, at
	// least a second). Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// RetryBackoff and MaxRetryBackoff bound the wait between registration
	// attempts (and between failed controlled-shutdown calls): it doubles
	// from RetryBackoff with each failure up to MaxRetryBackoff, less a
	// random part of up to half (jitter, so brokers restarted together
	// spread out).
	RetryBackoff, MaxRetryBackoff time.Duration
	// ControlledShutdownBackoff is the wait before asking again while the
	// controller still has partitions to move. Default 200ms.
	ControlledShutdownBackoff time.Duration
	// Clock times the heartbeats and backoffs; nil means the wall clock.
	Clock clock.Clock
	// OnControllerChange, when set, is called with the address of the
	// controller that answered, each time it is another one than the last
	// (so first at registration). Calls are serialized and the last one
	// names the current controller. It must not call the Session.
	OnControllerChange func(addr string)
	Logger             zerolog.Logger
	// TracerProvider makes the controlled shutdown's span; nil means the
	// global one (otel.GetTracerProvider).
	TracerProvider trace.TracerProvider
	// Int64N draws the backoff jitter, in [0, n); nil means math/rand/v2's.
	// It may be called from several goroutines at once. With
	// IncarnationID (default: a random text drawn at Start) it lets a
	// seeded test replay a run exactly (tests/sim).
	Int64N        func(n int64) int64
	IncarnationID string
}

func (c *Config) validate() error {
	if len(c.Controllers) == 0 {
		return ErrNoController
	}
	for i, a := range c.Controllers {
		if a == "" {
			return fmt.Errorf("brokersession: controller address %d is empty", i)
		}
	}
	if c.BrokerID < 0 {
		return fmt.Errorf("brokersession: negative broker id %d", c.BrokerID)
	}
	if c.Host == "" || c.Port < 1 || c.Port > 65535 {
		return fmt.Errorf("brokersession: broker endpoint %q port %d: want a host and a port in 1..65535", c.Host, c.Port)
	}
	return nil
}

func (c *Config) setDefaults() {
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxRetryBackoff < c.RetryBackoff {
		c.MaxRetryBackoff = max(DefaultMaxRetryBackoff, c.RetryBackoff)
	}
	if c.ControlledShutdownBackoff <= 0 {
		c.ControlledShutdownBackoff = DefaultControlledShutdownBackoff
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	if c.Dial == nil {
		c.Dial = grpcDialer(c.RetryBackoff, c.MaxRetryBackoff, c.RequestTimeout, c.DialOptions)
	}
	if c.Int64N == nil {
		c.Int64N = mrand.Int64N
	}
	if c.IncarnationID == "" {
		c.IncarnationID = rand.Text()
	}
}

// grpcDialer is the default Config.Dial. The channel reconnects with the
// session's own backoff bounds rather than gRPC's (up to two minutes), and
// at most grpcx.ReconnectMaxDelay apart whatever the session's retry bound
// (its heartbeats come every interval anyway), so a broker cut from its
// controller, or waiting for it, notices it within about a second of the
// heal.
func grpcDialer(base, maxDelay, connectTimeout time.Duration, extra []grpc.DialOption) func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
	return func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
		bc := backoff.DefaultConfig
		bc.MaxDelay = min(maxDelay, grpcx.ReconnectMaxDelay)
		bc.BaseDelay = min(base, bc.MaxDelay)
		opts := append(grpcx.DialOptions(),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStatsHandler(otelgrpc.NewClientHandler(grpcx.OtelOptions(false)...)),
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: connectTimeout}),
			// The standby's hint of the active controller, and whether a
			// request that timed out went out.
			controllerchannel.DialOption(),
		)
		opts = append(opts, extra...)
		conn, err := grpc.NewClient(addr, opts...)
		if err != nil {
			return nil, nil, fmt.Errorf("dial controller %s: %w", addr, err)
		}
		return replicadv1.NewControllerServiceClient(conn), conn, nil
	}
}

// Session is a registered broker's session with the controller. Its methods
// are safe for concurrent use.
type Session struct {
	cfg    Config
	logger zerolog.Logger
	// incarnationID is drawn once per Session (per broker process) and sent
	// with every registration of it.
	incarnationID string

	// brokerEpoch is the epoch of the last successful registration.
	// Invariant: it only changes on a successful registration.
	brokerEpoch    atomic.Int64
	sessionTimeout atomic.Int64 // nanoseconds, from the last registration
	wantShutdown   atomic.Bool  // set by ControlledShutdown, sent in heartbeats
	// active is the controller this broker follows: the highest controller
	// epoch a controller answered a registration or heartbeat with, and its
	// id and address. Never nil after Start; its epoch never goes down.
	active atomic.Pointer[ActiveController]
	// confirm admits one confirmation of a newer controller at a time (a
	// token held while it is in the channel): the requests that need it
	// wait for it and read its outcome. A channel, not a mutex, because the
	// holder waits on the network: a waiter then blocks durably, gives up
	// when its ctx is done, and a testing/synctest bubble (tests/sim)
	// sees the broker as idle rather than busy.
	confirm chan struct{}

	// ch finds the active controller among cfg.Controllers, follows a
	// standby's hint, and tells OnControllerChange where it went.
	ch *controllerchannel.Channel

	tracer trace.Tracer

	// ctx is cancelled by Close: it stops the heartbeat goroutine, a
	// re-registration and a ControlledShutdown in progress.
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// Start registers the broker with the controller, retrying until one accepts
// the registration or ctx is done (then it returns ctx's error), and starts
// heartbeating. ctx bounds the registration only; the Session runs until
// Close.
func Start(ctx context.Context, cfg Config) (*Session, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Controllers = append([]string(nil), cfg.Controllers...)
	cfg.setDefaults()
	sctx, cancel := context.WithCancel(context.Background())
	s := &Session{
		cfg:           cfg,
		logger:        cfg.Logger.With().Str("component", "broker_session").Logger(),
		tracer:        tracerProvider(cfg.TracerProvider).Tracer("github.com/replicad/replicad/brokersession"),
		incarnationID: cfg.IncarnationID,
		confirm:       make(chan struct{}, 1),
		ctx:           sctx,
		cancel:        cancel,
	}
	ch, err := controllerchannel.New(controllerchannel.Config{Addrs: cfg.Controllers, Dial: cfg.Dial, Clock: cfg.Clock, Logger: s.logger})
	if err != nil {
		cancel()
		return nil, err
	}
	s.ch = ch
	if cfg.OnControllerChange != nil {
		ch.Subscribe(cfg.OnControllerChange)
	}
	if err := s.register(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("register broker %d: %w", cfg.BrokerID, err)
	}
	s.wg.Add(1)
	go s.heartbeatLoop()
	return s, nil
}

// BrokerEpoch is the broker epoch of the current registration. It is safe to
// call from any goroutine, and cheap enough for every request.
func (s *Session) BrokerEpoch() int64 { return s.brokerEpoch.Load() }

// IncarnationID is the incarnation id this Session registers with.
func (s *Session) IncarnationID() string { return s.incarnationID }

// Close stops heartbeating (and a re-registration or ControlledShutdown in
// progress) and closes the controller clients. The controller fences the
// broker once its session times out. Close is idempotent.
func (s *Session) Close() {
	s.closeOnce.Do(func() {
		s.cancel()
		s.wg.Wait()
		_ = s.ch.Close()
	})
}

// ControlledShutdown asks the controller to move this broker's leaderships
// to other replicas (Kafka's controlled shutdown), and asks again every
// Config.ControlledShutdownBackoff until the controller answers that the
// broker leads no partition any more. It returns nil then, and ctx's error
// (wrapped) if ctx is done first or the Session is closed. Heartbeats go on
// meanwhile, flagged want_shutdown.
//
// The whole shutdown is one span, Broker.controlledShutdown, and every
// request carries it, so the controller's moves and the LeaderAndIsr they
// cause on other brokers are one trace however many times it asks.
func (s *Session) ControlledShutdown(ctx context.Context) (err error) {
	if s.ctx.Err() != nil {
		return fmt.Errorf("controlled shutdown: %w: %w", errClosed, s.ctx.Err())
	}
	ctx, span := s.tracer.Start(ctx, "Broker.controlledShutdown", trace.WithAttributes(
		attribute.Int("replicad.broker", int(s.cfg.BrokerID)), attribute.Int64("replicad.broker_epoch", s.brokerEpoch.Load())))
	attempts := 0
	defer func() {
		span.SetAttributes(attribute.Int("replicad.attempts", attempts))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "controlled shutdown did not complete")
		}
		span.End()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	s.wantShutdown.Store(true)

	remaining := -1 // unknown until the controller answers
	failures := 0
	for attempt := 1; ; attempt++ {
		attempts = attempt
		epoch := s.brokerEpoch.Load()
		req := &replicadv1.ControlledShutdownRequest{BrokerId: s.cfg.BrokerID, BrokerEpoch: epoch}
		resp, err := call(ctx, s, s.cfg.RequestTimeout, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.ControlledShutdownResponse, error) {
			return c.ControlledShutdown(ctx, req)
		})
		wait := s.cfg.ControlledShutdownBackoff
		switch {
		case err != nil && ctx.Err() != nil:
		case err != nil:
			failures++
			wait = max(wait, s.backoff(failures))
			s.logger.Warn().Err(err).Int("attempt", attempt).Dur("backoff_ms", wait).Msg("controlled shutdown request failed, retrying")
		case resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
			// STALE_BROKER_EPOCH: the broker was fenced; the heartbeat
			// goroutine registers it again, and the next request carries
			// the new epoch.
			failures++
			wait = max(wait, s.backoff(failures))
			s.logger.Warn().Str("error_code", telemetry.ErrorCodeName(resp.GetErrorCode())).Int64("broker_epoch", epoch).Int("attempt", attempt).
				Dur("backoff", wait).Msg("controlled shutdown refused, retrying")
		case len(resp.GetRemainingPartitions()) == 0:
			s.logger.Debug().Int("attempts", attempt).Msg("controlled shutdown complete: this broker leads no partition")
			return nil
		default:
			failures = 0
			n := len(resp.GetRemainingPartitions())
			// Info when the count moves, so a stuck shutdown logs once.
			ev := s.logger.Debug()
			if n != remaining {
				ev = s.logger.Info()
			}
			remaining = n
			span.AddEvent("partitions still led", trace.WithAttributes(attribute.Int("replicad.remaining_partitions", n)))
			first := resp.GetRemainingPartitions()[0]
			ev.Int("remaining_partitions", n).Str("topic", first.GetTopic()).Int32("partition", first.GetPartition()).
				Int("attempt", attempt).Msg("controlled shutdown in progress: partitions still led by this broker")
		}
		if ctx.Err() != nil || !s.sleep(ctx, wait) {
			break
		}
	}
	if remaining < 0 {
		return fmt.Errorf("controlled shutdown: no answer from the controller: %w", ctx.Err())
	}
	return fmt.Errorf("controlled shutdown: %d partitions still led by this broker: %w", remaining, ctx.Err())
}

func tracerProvider(tp trace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return otel.GetTracerProvider()
	}
	return tp
}

// register sends RegisterBroker until a controller accepts it or ctx is done,
// waiting a backoff after each failed attempt (one attempt tries every
// controller address once).
func (s *Session) register(ctx context.Context) error {
	previous := s.cfg.PreviousBrokerEpoch
	if e := s.brokerEpoch.Load(); e > 0 {
		previous = e // registering again in the same life: nothing was lost
	}
	req := &replicadv1.RegisterBrokerRequest{
		BrokerId:            s.cfg.BrokerID,
		Host:                s.cfg.Host,
		Port:                s.cfg.Port,
		IncarnationId:       s.incarnationID,
		LogDirs:             s.cfg.LogDirs,
		PreviousBrokerEpoch: previous,
		MinInsyncReplicas:   s.cfg.MinInsyncReplicas,
		MaxPartitions:       s.cfg.MaxPartitions,
		// A registration again in the same process (after a fencing) says
		// what is offline, as a heartbeat does: otherwise the controller
		// takes the replicas of a failed log dir as healthy, and may elect
		// them, until the first heartbeat of the new epoch.
		OfflinePartitions: s.offlineRefs(),
	}
	misconfigured := 0
	for attempt := 1; ; attempt++ {
		resp, err := call(ctx, s, s.cfg.RequestTimeout, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.RegisterBrokerResponse, error) {
			return c.RegisterBroker(ctx, req)
		})
		if err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
			s.registered(resp)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_DUPLICATE_BROKER_REGISTRATION {
			// Another process is registered as this broker and alive, or
			// this broker's previous process died a moment ago and the
			// controller cannot tell yet (see the controller's
			// duplicateRegistrationLocked). The two look the same from
			// here, so the broker waits, holding nothing the controller
			// gave it, rather than exit: a restarted broker must get back
			// in once its old session lapses, and a supervisor restarting
			// an exited duplicate would only loop. The controller answers
			// at once, so the retries stay frequent (at most a second
			// apart): the id frees up half a session timeout after the
			// old process's last heartbeat.
			misconfigured = 0
			wait := min(s.backoff(attempt), maxDuplicateBackoff)
			s.logger.Error().Int32("broker_id", s.cfg.BrokerID).Str("incarnation_id", s.incarnationID).Int("attempt", attempt).
				Dur("backoff_ms", wait).Str("controller", s.controller()).
				Msg("broker registration refused: DUPLICATE_BROKER_REGISTRATION: another process is registered with this broker id and alive; " +
					"waiting until it stops (two processes must never run as one broker)")
			if !s.sleep(ctx, wait) {
				return ctx.Err()
			}
			continue
		}
		if err == nil {
			err = fmt.Errorf("controller answered %s", resp.GetErrorCode())
		}
		wait := s.backoff(attempt)
		if s.cfg.Misconfigured != nil && s.cfg.Misconfigured(err) {
			misconfigured++
			// Only the first registration gives up: a broker already
			// registered goes on trying (and logging) until Close.
			if misconfigured >= MisconfiguredAttempts && s.brokerEpoch.Load() == 0 {
				return err
			}
			s.logger.Error().Err(err).Int("attempt", attempt).Dur("backoff_ms", wait).Msg("broker registration failed: misconfigured, retrying")
		} else {
			misconfigured = 0
			s.logger.Warn().Err(err).Int("attempt", attempt).Dur("backoff_ms", wait).Msg("broker registration failed, retrying")
		}
		if !s.sleep(ctx, wait) {
			return ctx.Err()
		}
	}
}

// registered installs a registration's broker epoch and session timeout.
func (s *Session) registered(resp *replicadv1.RegisterBrokerResponse) {
	timeout := time.Duration(resp.GetSessionTimeoutMs()) * time.Millisecond
	if timeout <= 0 {
		timeout = DefaultSessionTimeout
	}
	s.sessionTimeout.Store(int64(timeout))
	s.noteController(resp.GetControllerId(), resp.GetControllerEpoch(), s.controller())
	previous := s.brokerEpoch.Swap(resp.GetBrokerEpoch())
	ev := s.logger.Info().Int64("broker_epoch", resp.GetBrokerEpoch()).Int32("controller_epoch", resp.GetControllerEpoch()).
		Str("controller", s.controller()).Dur("session_timeout_ms", timeout).Str("incarnation_id", s.incarnationID)
	if previous != 0 {
		ev = ev.Int64("previous_broker_epoch", previous)
	}
	// One message for first and later registrations, so that
	// "registered broker_epoch=N" is what to look for.
	ev.Msg("registered")
	if s.cfg.OnRegistered != nil {
		s.cfg.OnRegistered(resp.GetBrokerEpoch())
	}
}

// heartbeatRequest is a heartbeat at epoch, with the offline replicas.
func (s *Session) heartbeatRequest(epoch int64) *replicadv1.BrokerHeartbeatRequest {
	return &replicadv1.BrokerHeartbeatRequest{BrokerId: s.cfg.BrokerID, BrokerEpoch: epoch, WantShutdown: s.wantShutdown.Load(),
		OfflinePartitions: s.offlineRefs()}
}

// offlineRefs are the broker's offline replicas now (Config.OfflinePartitions).
func (s *Session) offlineRefs() []*replicadv1.PartitionRef {
	if s.cfg.OfflinePartitions == nil {
		return nil
	}
	var refs []*replicadv1.PartitionRef
	for _, t := range s.cfg.OfflinePartitions() {
		refs = append(refs, &replicadv1.PartitionRef{Topic: t.Topic, Partition: t.Partition})
	}
	return refs
}

// heartbeatInterval is a third of the session timeout, at least
// MinHeartbeatInterval.
func (s *Session) heartbeatInterval() time.Duration {
	return max(time.Duration(s.sessionTimeout.Load())/3, MinHeartbeatInterval)
}

// heartbeatLoop is the heartbeat goroutine: it runs until Close.
func (s *Session) heartbeatLoop() {
	defer s.wg.Done()
	for s.sleep(s.ctx, s.heartbeatInterval()) {
		s.heartbeat()
	}
}

// heartbeat sends one BrokerHeartbeat and, when the controller no longer
// knows this broker epoch, registers again.
func (s *Session) heartbeat() {
	epoch := s.brokerEpoch.Load()
	req := s.heartbeatRequest(epoch)
	// One heartbeat interval per address at most: a hung controller (paused,
	// black-holed) must not eat the session while a standby takes over.
	timeout := min(s.cfg.RequestTimeout, max(s.heartbeatInterval(), MinHeartbeatInterval))
	resp, err := call(s.ctx, s, timeout, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.BrokerHeartbeatResponse, error) {
		return c.BrokerHeartbeat(ctx, req)
	})
	switch {
	case err != nil:
		if s.ctx.Err() == nil {
			s.logger.Warn().Err(err).Int64("broker_epoch", epoch).Msg("heartbeat failed")
		}
	case resp.GetIsFenced() || resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH:
		s.logger.Warn().Int64("broker_epoch", epoch).Bool("is_fenced", resp.GetIsFenced()).Str("error_code", telemetry.ErrorCodeName(resp.GetErrorCode())).
			Str("controller", s.controller()).Msg("the controller fenced this broker epoch; registering again")
		if err := s.register(s.ctx); err != nil {
			return // closed
		}
	case resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
		s.logger.Warn().Str("error_code", telemetry.ErrorCodeName(resp.GetErrorCode())).Int64("broker_epoch", epoch).Msg("heartbeat rejected")
	default:
		s.noteController(resp.GetControllerId(), resp.GetControllerEpoch(), s.controller())
		s.logger.Trace().Int64("broker_epoch", epoch).Bool("should_shutdown", resp.GetShouldShutdown()).Msg("heartbeat")
	}
}

// call sends one request through the controller channel: first to the
// controller that last answered, then on a transport error or
// NOT_CONTROLLER to the one the standby named, or the next address, once
// around the list. It returns the first other answer, or why every address
// failed. Each address gets timeout. Every request of the session may be
// sent again (the controller answers a repeated registration, heartbeat or
// shutdown request as it did the first).
func call[R controllerchannel.Answer](ctx context.Context, s *Session, timeout time.Duration,
	rpc func(context.Context, replicadv1.ControllerServiceClient) (R, error)) (R, error) {
	return controllerchannel.Call(ctx, s.ch, controllerchannel.Policy{AttemptTimeout: timeout, Rounds: 1, Idempotent: true}, rpc)
}

// controller is the address of the controller that last answered ("" before any).
func (s *Session) controller() string { return s.ch.Active() }

// backoff is the wait after failures consecutive failed attempts:
// RetryBackoff doubled per failure, capped at MaxRetryBackoff, less a random
// part of up to half.
func (s *Session) backoff(failures int) time.Duration {
	d := s.cfg.RetryBackoff
	for i := 1; i < failures && d < s.cfg.MaxRetryBackoff; i++ {
		d *= 2
	}
	d = min(d, s.cfg.MaxRetryBackoff)
	return d - time.Duration(s.cfg.Int64N(int64(d/2)+1))
}

// sleep waits d on the clock and reports false if ctx is done first.
func (s *Session) sleep(ctx context.Context, d time.Duration) bool {
	fired := make(chan struct{})
	t := s.cfg.Clock.AfterFunc(d, func() { close(fired) })
	select {
	case <-fired:
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}

// ActiveController is the controller a broker follows, as its session last
// heard from it.
type ActiveController struct {
	ID, Epoch int32
	Addr      string
}

// ControllerVerdict is what a Session says of the sender of a control request.
type ControllerVerdict int

const (
	// ControllerActive: the sender is the controller this broker follows.
	ControllerActive ControllerVerdict = iota
	// ControllerStale: the sender's epoch is older than the active
	// controller's (a deposed controller, or a request it queued before).
	ControllerStale
	// ControllerNotActive: no controller answers as active at the
	// sender's epoch, or another controller holds it (a hand-made request,
	// a controller of another cluster).
	ControllerNotActive
)

// ActiveController is the controller this broker follows.
func (s *Session) ActiveController() ActiveController {
	if a := s.active.Load(); a != nil {
		return *a
	}
	return ActiveController{ID: -1}
}

// noteController records a controller's answer (a registration or a
// heartbeat): the highest epoch wins, since epochs rise through the store
// with each election and a deposed controller may still answer with its
// old one for a while.
func (s *Session) noteController(id, epoch int32, addr string) {
	if epoch <= 0 {
		return // an answer that names no epoch (an older controller)
	}
	for {
		cur := s.active.Load()
		if cur != nil && cur.Epoch >= epoch {
			return
		}
		if s.active.CompareAndSwap(cur, &ActiveController{ID: id, Epoch: epoch, Addr: addr}) {
			s.logger.Info().Int32("controller_id", id).Int32("controller_epoch", epoch).Str("controller", addr).
				Msg("following controller")
			return
		}
	}
}

// CheckController says whether a control request (LeaderAndIsr,
// UpdateMetadata, StopReplica) from controller id at epoch comes from the
// controller this broker follows. A request at a higher epoch than the
// session knows is judged only after every controller address was asked
// (a heartbeat to each): a new controller's first request may arrive before
// the heartbeat that would announce it, and a hand-made request naming an
// epoch no controller holds must not be taken. The answer names the
// controller followed. An error means no controller answered the check.
func (s *Session) CheckController(ctx context.Context, id, epoch int32) (ControllerVerdict, ActiveController, error) {
	if v, ok := s.judge(id, epoch); ok {
		return v, s.ActiveController(), nil
	}
	select {
	case s.confirm <- struct{}{}:
	case <-ctx.Done():
		return ControllerNotActive, s.ActiveController(), ctx.Err()
	}
	defer func() { <-s.confirm }()
	if v, ok := s.judge(id, epoch); ok {
		return v, s.ActiveController(), nil
	}
	if err := s.askEveryController(ctx); err != nil {
		return ControllerNotActive, s.ActiveController(), err
	}
	v, _ := s.judge(id, epoch)
	if v == ControllerNotActive {
		s.logger.Warn().Int32("request_controller_id", id).Int32("request_controller_epoch", epoch).
			Int32("controller_id", s.ActiveController().ID).Int32("controller_epoch", s.ActiveController().Epoch).
			Msg("no controller answers as active at the request's controller epoch")
	}
	return v, s.ActiveController(), nil
}

// judge decides from what the session knows; false when the epoch is newer
// than that and must be confirmed first.
func (s *Session) judge(id, epoch int32) (ControllerVerdict, bool) {
	a := s.ActiveController()
	switch {
	case epoch < a.Epoch:
		return ControllerStale, true
	case epoch == a.Epoch && id == a.ID:
		return ControllerActive, true
	case epoch == a.Epoch:
		return ControllerNotActive, true
	}
	return ControllerNotActive, false
}

// askEveryController heartbeats every controller address at once and
// records the answers; it fails only when none answered. The session then
// follows the controller with the highest epoch.
func (s *Session) askEveryController(ctx context.Context) error {
	req := s.heartbeatRequest(s.brokerEpoch.Load())
	timeout := min(s.cfg.RequestTimeout, max(s.heartbeatInterval(), MinHeartbeatInterval))
	type answer struct {
		idx  int
		resp *replicadv1.BrokerHeartbeatResponse
		err  error
	}
	answers := make(chan answer, len(s.cfg.Controllers))
	for idx, addr := range s.cfg.Controllers {
		go func() {
			c, err := s.ch.Client(addr)
			if err != nil {
				answers <- answer{idx: idx, err: err}
				return
			}
			cctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			resp, err := c.BrokerHeartbeat(cctx, req)
			answers <- answer{idx: idx, resp: resp, err: err}
		}()
	}
	var errs []error
	best := -1
	var bestEpoch int32
	for range s.cfg.Controllers {
		a := <-answers
		switch {
		case a.err != nil:
			errs = append(errs, fmt.Errorf("controller %s: %w", s.cfg.Controllers[a.idx], a.err))
		case a.resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER:
		default:
			s.noteController(a.resp.GetControllerId(), a.resp.GetControllerEpoch(), s.cfg.Controllers[a.idx])
			if e := a.resp.GetControllerEpoch(); best < 0 || e > bestEpoch {
				best, bestEpoch = a.idx, e
			}
		}
	}
	if best < 0 {
		if len(errs) == 0 {
			return errNotController
		}
		return errors.Join(errs...)
	}
	// Heartbeats and AlterPartition go to the active controller from now on
	// (not to a deposed one that still answers with an older epoch).
	if bestEpoch >= s.ActiveController().Epoch {
		s.ch.MarkActive(s.cfg.Controllers[best])
	}
	return nil
}
