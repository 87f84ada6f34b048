package service

import (
	"net"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
)

// Limits bound what clients can make a broker hold (issue 12: bad clients
// must not wear the server down). A zero field takes its default.
type Limits struct {
	// MaxConnections caps the connections served at once (Kafka's
	// max.connections): past it, new connections wait in the listen
	// backlog until one closes. Negative: no cap.
	MaxConnections int
	// ConnectionsMaxIdle closes a connection without an RPC for this long
	// (Kafka's connections.max.idle.ms; gRPC's MaxConnectionIdle, a GOAWAY
	// the client reconnects after). Negative: never.
	ConnectionsMaxIdle time.Duration
	// MaxConcurrentStreams caps the RPCs in flight on one connection;
	// further ones wait on the client.
	MaxConcurrentStreams uint32
	// FetchSendTimeout ends a Fetch stream whose answer could not be sent
	// for this long (a follower that stopped reading): its answer is not
	// held any longer.
	FetchSendTimeout time.Duration
	// ResponseBytes budgets the record bytes held at once by Consume and
	// Fetch answers being read and sent. A request is served with what
	// is left of it, at least MinResponseGrant (so every partition makes
	// progress), and never more than it asked.
	ResponseBytes int64
	// MaxWaiting caps the requests parked at once: long-poll Consume and
	// Fetch requests (max_wait_ms with min_bytes) and acks=-1 produces
	// waiting for the ISR. Past it they are refused ResourceExhausted.
	MaxWaiting int
	// DelayedProduceBytes caps the batch bytes held by acks=-1 produces
	// waiting for the ISR; past it they are refused ResourceExhausted.
	DelayedProduceBytes int64
}

// Defaults of Limits.
const (
	DefaultMaxConnections       = 1000
	DefaultConnectionsMaxIdle   = 10 * time.Minute
	DefaultMaxConcurrentStreams = 256
	DefaultFetchSendTimeout     = 30 * time.Second
	DefaultResponseBytes        = 64 << 20
	DefaultMaxWaiting           = 1000
	DefaultDelayedProduceBytes  = 128 << 20
	// MinResponseGrant is the least a Consume or Fetch request is served
	// with when ResponseBytes is spent (a read returns at least one whole
	// batch anyway).
	MinResponseGrant = 64 << 10
)

// connectionHandshakeTimeout bounds a new connection's HTTP/2 (and TLS)
// handshake; gRPC's default is 120s.
const connectionHandshakeTimeout = 10 * time.Second

func (l Limits) withDefaults() Limits {
	if l.MaxConnections == 0 {
		l.MaxConnections = DefaultMaxConnections
	}
	if l.ConnectionsMaxIdle == 0 {
		l.ConnectionsMaxIdle = DefaultConnectionsMaxIdle
	}
	if l.MaxConcurrentStreams == 0 {
		l.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if l.FetchSendTimeout <= 0 {
		l.FetchSendTimeout = DefaultFetchSendTimeout
	}
	if l.ResponseBytes <= 0 {
		l.ResponseBytes = DefaultResponseBytes
	}
	if l.MaxWaiting <= 0 {
		l.MaxWaiting = DefaultMaxWaiting
	}
	if l.DelayedProduceBytes <= 0 {
		l.DelayedProduceBytes = DefaultDelayedProduceBytes
	}
	return l
}

// serverOptions are the gRPC options enforcing l.
func (l Limits) serverOptions() []grpc.ServerOption {
	opts := []grpc.ServerOption{grpc.MaxConcurrentStreams(l.MaxConcurrentStreams),
		// A connection that never completes its handshake (a bare TCP
		// connect) gives its MaxConnections slot back soon.
		grpc.ConnectionTimeout(connectionHandshakeTimeout)}
	if l.ConnectionsMaxIdle > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: l.ConnectionsMaxIdle}))
	}
	return opts
}

// listener wraps lis to serve at most MaxConnections at once.
func (l Limits) listener(lis net.Listener) net.Listener {
	if l.MaxConnections < 0 {
		return lis
	}
	return netutil.LimitListener(lis, l.MaxConnections)
}

// budget is a shared allowance (bytes, or requests): take hands out part
// of it and give returns it.
type budget struct {
	mu    sync.Mutex
	avail int64
}

func newBudget(n int64) *budget { return &budget{avail: n} }

// grant takes what is left up to want, and at least floor (which may
// overdraw the budget: floor is what keeps every request moving), never
// more than want.
func (b *budget) grant(want, floor int64) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	g := min(want, max(b.avail, floor))
	b.avail -= g
	return g
}

// tryTake takes n if that much is left.
func (b *budget) tryTake(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.avail < n {
		return false
	}
	b.avail -= n
	return true
}

// settle trades a grant for what the answer it bounded holds: a read
// returns at least one whole batch, which may exceed the grant, and the
// excess overdraws the budget (so later requests get only the floor until
// it is given back); what the answer did not use comes back at once. It
// returns the bytes now held, which give returns.
func (b *budget) settle(grant, used int64) int64 {
	if used != grant {
		b.mu.Lock()
		b.avail += grant - used
		b.mu.Unlock()
	}
	return used
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	b.avail += n
	b.mu.Unlock()
}

// limiter holds a server's Limits and the budgets they give.
type limiter struct {
	limits   Limits
	response *budget // record bytes of Consume and Fetch answers
	waiting  *budget // parked requests
	produce  *budget // batch bytes of delayed produces
}

func newLimiter(l Limits) *limiter {
	l = l.withDefaults()
	return &limiter{limits: l, response: newBudget(l.ResponseBytes), waiting: newBudget(int64(l.MaxWaiting)),
		produce: newBudget(l.DelayedProduceBytes)}
}

// park takes a waiting slot, or answers ResourceExhausted naming field.
func (l *limiter) park(field string) (release func(), err error) {
	if !l.waiting.tryTake(1) {
		return nil, status.Errorf(codes.ResourceExhausted, "%s: %d requests are already waiting, the broker's limit: retry later, or without waiting", field, l.limits.MaxWaiting)
	}
	return func() { l.waiting.give(1) }, nil
}

// delayProduce takes n batch bytes for an acks=-1 produce, or answers
// ResourceExhausted.
func (l *limiter) delayProduce(n int) (release func(), err error) {
	if !l.produce.tryTake(int64(n)) {
		return nil, status.Errorf(codes.ResourceExhausted, "acks: acks=-1 produces waiting for the ISR hold %d bytes, the broker's limit: retry later", l.limits.DelayedProduceBytes)
	}
	return func() { l.produce.give(int64(n)) }, nil
}

// consumeBytes is a consume's max bytes: what it asked (its default when
// zero), capped at core.MaxConsumeBytes, and granted from the response
// budget. give returns the grant.
func (l *limiter) consumeBytes(asked int32) int64 {
	want := int64(asked)
	if want <= 0 {
		want = DefaultConsumeMaxBytes
	}
	return l.response.grant(min(want, core.MaxConsumeBytes), MinResponseGrant)
}

// responseDrainRate is the send rate a Consume's grant is held for after
// its handler returns (see giveAfterDrain).
const responseDrainRate = 200 << 20 // bytes per second

// giveAfterDrain gives a Consume's grant back once sending that many bytes
// at responseDrainRate would be done: gRPC sends a unary answer after the
// handler returns and does not say when it is out, so this is what keeps
// the budget covering the send (a reader slower than the rate holds more,
// for as long as its connection's flow control lets gRPC buffer it).
func (l *limiter) giveAfterDrain(grant int64) {
	if grant <= MinResponseGrant {
		l.response.give(grant)
		return
	}
	time.AfterFunc(time.Duration(grant*int64(time.Second)/responseDrainRate), func() { l.response.give(grant) })
}

// fetchBytes is consumeBytes for a follower fetch (capped at
// core.DefaultFetchMaxBytes, and at the stream's allowance).
func (l *limiter) fetchBytes(asked int32, allowance int64) int64 {
	want := int64(asked)
	if want <= 0 || want > core.DefaultFetchMaxBytes {
		want = core.DefaultFetchMaxBytes
	}
	return l.response.grant(min(want, allowance), MinResponseGrant)
}
