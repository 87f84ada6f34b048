package controllerchannel

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
)

// Defaults of Config.
const (
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = time.Second
)

var (
	// ErrNoAddress is returned by New without a controller address.
	ErrNoAddress = errors.New("controllerchannel: no controller address")
	// ErrClosed is returned for calls made after Close.
	ErrClosed = errors.New("controllerchannel: closed")
	// ErrNotController is an attempt answered NOT_CONTROLLER: a standby.
	ErrNotController = errors.New("not the active controller (NOT_CONTROLLER)")
	// ErrNoController: no address answered as the active controller. Alone
	// (without ErrMaybeApplied) it means that no controller acted on the
	// request: every attempt was refused as a standby's or never sent.
	ErrNoController = errors.New("no active controller")
	// ErrMaybeApplied: a request reached a controller and no answer came
	// back in time. The controller may have applied it; the caller checks
	// before doing it again.
	ErrMaybeApplied = errors.New("the controller did not answer in time: the request may have been applied")
)

// Answer is what every ControllerService response is.
type Answer interface {
	GetErrorCode() replicadv1.ErrorCode
}

// Config configures a Channel.
type Config struct {
	// Addrs are the addresses (host:port) of every controller that may be
	// the active one; at least one, none empty.
	Addrs []string
	// Dial makes a client of the controller at addr; the Channel calls it
	// once per address, at the first request there, and closes the Closer
	// on Close. Nil: a gRPC client with replicad's transport options,
	// OpenTelemetry propagation, DialOption, insecure credentials unless
	// DialOptions set others. A seam for tests that run the cluster in one
	// process (tests/sim). A Dial without DialOption still works, without
	// the standby's hint and with every timed-out attempt counted as
	// possibly applied.
	Dial func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error)
	// DialOptions are added to the default Dial's (its transport
	// credentials: TLS). Unused with Dial set.
	DialOptions []grpc.DialOption
	// Clock times the backoff between rounds of Call; nil: the wall clock.
	Clock clock.Clock
	// MinBackoff and MaxBackoff bound the wait between rounds of a Call
	// that goes on until its ctx ends: it doubles from MinBackoff per round
	// up to MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
	// Int64N draws a jitter of up to half the backoff, in [0, n); nil: none.
	Int64N func(n int64) int64
	// Logger hears where the active controller moves (Info); zero: nothing.
	Logger zerolog.Logger
}

// Channel reaches the active controller among Config.Addrs (Kafka's
// NodeToControllerChannelManager). See the package doc. It is safe for
// concurrent use.
type Channel struct {
	cfg    Config
	logger zerolog.Logger

	mu      sync.Mutex
	clients map[string]dialed
	closed  bool
	// active is the address that last answered as the active controller
	// ("" before any); target is the index in Addrs of the address the
	// next attempt goes to.
	active string
	target int
	// inflight are the attempts that Use abandons when it names another
	// address (AttemptOptions.AbortOnMove).
	inflight map[*inflight]struct{}
	subs     map[int]func(addr string)
	nextSub  int
	// notifyMu serializes the subscribers' calls.
	notifyMu sync.Mutex
}

type dialed struct {
	client replicadv1.ControllerServiceClient
	closer io.Closer
}

type inflight struct {
	addr   string
	cancel context.CancelFunc
}

// New returns a Channel to the controllers at cfg.Addrs. It dials nothing
// yet: each address is dialed at its first request.
func New(cfg Config) (*Channel, error) {
	if len(cfg.Addrs) == 0 {
		return nil, ErrNoAddress
	}
	for i, a := range cfg.Addrs {
		if a == "" {
			return nil, fmt.Errorf("controllerchannel: controller address %d is empty", i)
		}
	}
	cfg.Addrs = slices.Clone(cfg.Addrs)
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(DefaultMaxBackoff, cfg.MinBackoff)
	}
	if cfg.Dial == nil {
		extra := cfg.DialOptions
		cfg.Dial = func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
			return GRPCDial(addr, extra...)
		}
	}
	return &Channel{
		cfg:      cfg,
		logger:   cfg.Logger,
		clients:  map[string]dialed{},
		inflight: map[*inflight]struct{}{},
		subs:     map[int]func(string){},
	}, nil
}

// GRPCDial is the default Config.Dial: replicad's transport options, the
// reconnect bounds of grpcx.ConnectParams, OpenTelemetry propagation,
// DialOption, and insecure credentials unless extra sets others.
func GRPCDial(addr string, extra ...grpc.DialOption) (replicadv1.ControllerServiceClient, io.Closer, error) {
	opts := append(grpcx.DialOptions(),
		grpcx.ConnectParams(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(grpcx.OtelOptions(false)...)),
		DialOption(),
	)
	opts = append(opts, extra...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("dial controller %s: %w", addr, err)
	}
	return replicadv1.NewControllerServiceClient(conn), conn, nil
}

// Addrs are the controller addresses, in the order given.
func (c *Channel) Addrs() []string { return slices.Clone(c.cfg.Addrs) }

// Active is the address that last answered as the active controller, ""
// before any did.
func (c *Channel) Active() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.active
}

// Target is the address the next attempt goes to: the active controller,
// or the next candidate after a failure.
func (c *Channel) Target() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cfg.Addrs[c.target]
}

// Use points the next attempt at addr, one of Addrs: someone who knows
// (the broker's session, for its AlterPartition and producer ID channels)
// says the active controller is there. Attempts in flight to another
// address made with AbortOnMove are cancelled, for their caller to resend.
// It reports false, and changes nothing, for an unknown address.
func (c *Channel) Use(addr string) bool {
	i := slices.Index(c.cfg.Addrs, addr)
	if i < 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.target = i
	for f := range c.inflight {
		if f.addr != addr {
			f.cancel()
		}
	}
	return true
}

// Subscribe calls fn with the address of the active controller each time
// another one than before answers as active (so first at the first
// answer). Calls are serialized, and the last one names the current
// controller. fn must not call Subscribe or its cancel. The returned
// function stops the calls.
func (c *Channel) Subscribe(fn func(addr string)) (cancel func()) {
	c.mu.Lock()
	id := c.nextSub
	c.nextSub++
	c.subs[id] = fn
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.subs, id)
		c.mu.Unlock()
	}
}

// Client is the client of the controller at addr (one of Addrs, or
// another), dialed at first use: for a caller that asks every controller
// at once (the broker session's confirmation of a new controller).
func (c *Channel) Client(addr string) (replicadv1.ControllerServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if d, ok := c.clients[addr]; ok {
		return d.client, nil
	}
	client, closer, err := c.cfg.Dial(addr)
	if err != nil {
		return nil, err
	}
	c.clients[addr] = dialed{client: client, closer: closer}
	return client, nil
}

// MarkActive records that addr, one of Addrs, answered as the active
// controller: the next attempt goes there, and the subscribers hear of it
// if it is another than before. Attempts record their answers themselves;
// this is for a caller that asked outside them (Client).
func (c *Channel) MarkActive(addr string) {
	i := slices.Index(c.cfg.Addrs, addr)
	if i < 0 {
		return
	}
	c.mu.Lock()
	changed := c.active != addr
	c.active, c.target = addr, i
	c.mu.Unlock()
	if changed {
		c.notify()
	}
}

// notify tells the subscribers the active controller.
func (c *Channel) notify() {
	c.notifyMu.Lock()
	defer c.notifyMu.Unlock()
	// Read again under notifyMu: a later change may have overtaken this
	// one, and the last call must name the current controller.
	c.mu.Lock()
	addr := c.active
	subs := make([]func(string), 0, len(c.subs))
	for id := range c.nextSub {
		if fn, ok := c.subs[id]; ok {
			subs = append(subs, fn)
		}
	}
	c.mu.Unlock()
	c.logger.Info().Str("controller", addr).Msg("talking to the active controller")
	for _, fn := range subs {
		fn(addr)
	}
}

// Close closes the controller clients; later calls fail with ErrClosed.
// It is idempotent.
func (c *Channel) Close() error {
	c.mu.Lock()
	clients := c.clients
	c.clients, c.closed = map[string]dialed{}, true
	for f := range c.inflight {
		f.cancel()
	}
	c.mu.Unlock()
	var err error
	for _, d := range clients {
		if d.closer != nil {
			err = errors.Join(err, d.closer.Close())
		}
	}
	return err
}

// moveOn leaves addr after a failed attempt, for the hinted address when
// it is one of Addrs and not excluded, else the next address. Only when
// addr is still the target: a concurrent attempt, or Use, may have moved
// it already.
func (c *Channel) moveOn(addr, hint string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.Addrs[c.target] != addr {
		return
	}
	if i := slices.Index(c.cfg.Addrs, hint); i >= 0 && hint != addr {
		c.target = i
		return
	}
	c.target = (c.target + 1) % len(c.cfg.Addrs)
}

// answered records addr's answer as the active controller's.
func (c *Channel) answered(addr string) { c.MarkActive(addr) }

// AttemptOptions qualify one Attempt.
type AttemptOptions struct {
	// AbortOnMove cancels the attempt when Use points the channel at
	// another address while it is in flight (an ISR change should not wait
	// out a request timeout on a controller that stopped answering).
	AbortOnMove bool
}

// Attempt sends one request to Target and records the outcome: an answer
// other than NOT_CONTROLLER makes that address the active controller; a
// NOT_CONTROLLER answer moves the target to the controller the standby
// named (if it is one of Addrs) or else to the next address, as does an
// error, except InvalidArgument, PermissionDenied and Unauthenticated
// (every controller would answer the same) and the cancellation of ctx (a
// timeout moves on). It returns
// rpc's answer and error as they are, and the address it went to: for a
// caller with its own retry policy (AlterPartition, producer IDs). ctx
// bounds the attempt.
func Attempt[R Answer](ctx context.Context, c *Channel, opts AttemptOptions,
	rpc func(context.Context, replicadv1.ControllerServiceClient) (R, error)) (R, string, error) {
	addr := c.Target()
	resp, r := attemptTo(ctx, c, addr, opts, rpc)
	switch {
	case r.err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER:
		c.moveOn(addr, r.hint(resp))
	case r.err == nil:
		c.answered(addr)
	case errors.Is(ctx.Err(), context.Canceled) || final(r.err):
		// The caller gave up (closing), or every controller would say
		// the same: the target stays.
	default:
		c.moveOn(addr, "")
	}
	return resp, addr, r.err
}

// final tells an error that another controller would answer the same way.
func final(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated:
		return true
	}
	return errors.Is(err, ErrClosed)
}

// result is what an attempt learned besides rpc's answer.
type result struct {
	err error
	// probe was filled by DialOption's interceptor, if the client has it.
	probe *probe
}

// hint is the active controller a NOT_CONTROLLER answer named: the
// trailer ActiveControllerKey, or the admin methods' error message.
func (r result) hint(resp any) string {
	if r.probe != nil && r.probe.hint != "" {
		return r.probe.hint
	}
	if m, ok := resp.(interface{ GetErrorMessage() string }); ok {
		const marker = "the active one is "
		if _, after, found := strings.Cut(m.GetErrorMessage(), marker); found {
			return strings.TrimSpace(after)
		}
	}
	return ""
}

// sent reports whether the request may have reached the controller: unknown
// without DialOption's interceptor, then assumed.
func (r result) sent() bool {
	return r.probe == nil || !r.probe.ran || r.probe.sent
}

// reached reports whether the request is known to have had a transport to
// the controller (DialOption's interceptor saw a peer): an Unavailable then
// came from the controller, or from a connection that broke under the
// request, not from a dial that failed. Unknown without the interceptor,
// then not assumed, so that an in-memory network's "down" still moves on.
func (r result) reached() bool {
	return r.probe != nil && r.probe.ran && r.probe.sent
}

// attemptTo sends one request to addr.
func attemptTo[R Answer](ctx context.Context, c *Channel, addr string, opts AttemptOptions,
	rpc func(context.Context, replicadv1.ControllerServiceClient) (R, error)) (R, result) {
	var zero R
	client, err := c.Client(addr)
	if err != nil {
		return zero, result{err: err, probe: &probe{ran: true}}
	}
	if opts.AbortOnMove {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		f := &inflight{addr: addr, cancel: cancel}
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return zero, result{err: ErrClosed, probe: &probe{ran: true}}
		}
		c.inflight[f] = struct{}{}
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			delete(c.inflight, f)
			c.mu.Unlock()
		}()
	}
	p := &probe{}
	resp, err := rpc(context.WithValue(ctx, probeKey{}, p), client)
	return resp, result{err: err, probe: p}
}

// probe is what DialOption's interceptor learns of one call.
type probe struct {
	ran  bool   // the interceptor saw the call
	sent bool   // a transport was picked: the request may have gone out
	hint string // the ActiveControllerKey trailer
}

type probeKey struct{}

// DialOption makes a gRPC client carry the standby's hint of the active
// controller (the ActiveControllerKey trailer) to the Channel, and tell a
// call that timed out before any connection was made (never sent) from one
// that went out (it may have been applied). Every Config.Dial that makes
// gRPC clients should include it; GRPCDial does.
func DialOption() grpc.DialOption {
	return grpc.WithChainUnaryInterceptor(probeInterceptor)
}

func probeInterceptor(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	p, ok := ctx.Value(probeKey{}).(*probe)
	if !ok {
		return invoker(ctx, method, req, reply, cc, opts...)
	}
	var trailer metadata.MD
	var pr peer.Peer
	err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Trailer(&trailer), grpc.Peer(&pr))...)
	p.ran = true
	// gRPC fills the peer once the call has a transport stream: without
	// one (still connecting, or no connection at all) nothing was sent.
	p.sent = pr.Addr != nil
	if v := trailer.Get(grpcx.ActiveControllerKey); len(v) > 0 {
		p.hint = v[0]
	}
	return err
}
