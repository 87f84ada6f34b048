package sim

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// conn is a client's unary connection of one kind to one server: calls on it
// travel on the pipes client>server/kind and back, in order. It reconnects
// (a new link) on the first call after a break, as a gRPC channel does.
type conn struct {
	net        *network
	client     string
	clientLife int
	server     string
	kind       string
	// ordered: the server answers the calls in the order they arrived, as
	// a Kafka connection does (a pipelining producer's): an answer waits
	// for the one before it. Otherwise handlers that finish together (woken
	// by one HW move) would queue their answers in goroutine order.
	ordered bool
	cur     *link // guarded by net.mu
}

type reply struct {
	msg any
	err error
}

// call sends req to the server's handler for method and waits for the
// answer, a broken link (Unavailable) or ctx. The handler runs under the
// server life's context, with the caller's deadline, as gRPC propagates it.
// Messages are cloned both ways: nodes share no memory through the network.
func (c *conn) call(ctx context.Context, method string, req proto.Message) (any, error) {
	return c.send(ctx, method, req)()
}

// send queues req on the connection at once and returns the wait for its
// answer (call's). A client that pipelines (an idempotent producer with
// several batches in flight) sends them all in its order, then waits for
// each: sends made from one goroutine keep their order on the pipe.
func (c *conn) send(ctx context.Context, method string, req proto.Message) func() (any, error) {
	failed := func(err error) func() (any, error) { return func() (any, error) { return nil, err } }
	if err := ctx.Err(); err != nil {
		return failed(status.FromContextError(err).Err())
	}
	n := c.net
	n.mu.Lock()
	if c.cur == nil || !n.usableLocked(c.cur) {
		l, _, err := n.openLocked(c.client, c.clientLife, c.server)
		if err != nil {
			n.mu.Unlock()
			return failed(err)
		}
		c.cur = l
	}
	l := c.cur
	se := n.nodes[c.server]
	h := se.unary[method]
	if h == nil {
		n.mu.Unlock()
		return failed(status.Errorf(codes.Unimplemented, "%s does not serve %s", c.server, method))
	}
	done := make(chan reply, 1)
	in := proto.Clone(req)
	deadline, hasDeadline := ctx.Deadline()
	n.sendLocked(c.client, c.server, c.kind, method, l, func() {
		n.mu.Lock()
		hctx, cancel := context.WithCancel(se.ctx)
		if hasDeadline {
			hctx, cancel = context.WithDeadline(se.ctx, deadline)
		}
		id := l.nextCall
		l.nextCall++
		l.cancels[id] = cancel
		var prev, mine chan struct{}
		if c.ordered {
			prev, mine = l.lastAnswer, make(chan struct{})
			l.lastAnswer = mine
		}
		n.mu.Unlock()
		go func() {
			out, err := h(hctx, in)
			cancel()
			if out != nil {
				out = proto.Clone(out.(proto.Message))
			}
			if prev != nil {
				<-prev
			}
			n.mu.Lock()
			defer n.mu.Unlock()
			if mine != nil {
				defer close(mine)
			}
			delete(l.cancels, id)
			if !n.usableLocked(l) {
				return
			}
			n.sendLocked(c.server, c.client, c.kind, method+" reply", l, func() { done <- reply{out, err} })
		}()
	})
	n.mu.Unlock()
	return func() (any, error) {
		select {
		case r := <-done:
			return r.msg, r.err
		case <-l.broken:
		case <-ctx.Done():
		}
		// An answer delivered before the break or the deadline wins: select
		// picks at random among ready cases, and a replay must not.
		select {
		case r := <-done:
			return r.msg, r.err
		default:
		}
		if err := ctx.Err(); err != nil {
			return nil, status.FromContextError(err).Err()
		}
		return nil, unavailable("%s: connection to %s reset", c.client, c.server)
	}
}

// unary adapts a typed handler to the network's.
func unary[Req, Resp proto.Message](f func(context.Context, Req) (Resp, error)) unaryHandler {
	return func(ctx context.Context, req any) (any, error) {
		resp, err := f(ctx, req.(Req))
		if err != nil {
			return nil, err
		}
		return resp, nil
	}
}

// invoke is a typed call.
func invoke[Resp proto.Message](ctx context.Context, c *conn, method string, in proto.Message) (Resp, error) {
	var zero Resp
	out, err := c.call(ctx, method, in)
	if err != nil {
		return zero, err
	}
	return out.(Resp), nil
}

// stream is one bidi stream (a follower's fetch stream): requests on
// client>server/kindN, answers back on server>client/kindN, each pipe its
// own, so the stream's order holds and a new stream starts afresh.
type stream struct {
	net    *network
	l      *link
	client string
	server string
	kind   string
	// reqs feed the server's loop; resps the client's Recv. Buffered:
	// delivery runs on the scheduler's goroutine and must not block, and
	// a fetcher has one request in flight.
	reqs  chan any
	resps chan any
	stop  func() bool // stops the AfterFunc on the opener's ctx
}

const streamBuffer = 16

// openStream opens a stream of kind from client's life to server, whose
// handler answers each request in order.
func (n *network) openStream(ctx context.Context, client string, clientLife int, server, kind string) (*stream, error) {
	n.mu.Lock()
	l, se, err := n.openLocked(client, clientLife, server)
	if err != nil {
		n.mu.Unlock()
		return nil, err
	}
	if se.fetch == nil {
		n.breakLocked(l)
		n.mu.Unlock()
		return nil, status.Errorf(codes.Unimplemented, "%s serves no %s stream", server, kind)
	}
	l.stream = true
	base := client + ">" + server + "/" + kind
	n.streams[base]++
	// The name holds the client: b1's stream to b2 and b2's to b1 must not
	// share a pipe (requests one way, answers the other).
	st := &stream{net: n, l: l, client: client, server: server, kind: fmt.Sprintf("%s.%s-%d", kind, client, n.streams[base]),
		reqs: make(chan any, streamBuffer), resps: make(chan any, streamBuffer)}
	hctx, cancel := context.WithCancel(se.ctx)
	l.cancels[-1] = cancel
	n.mu.Unlock()
	st.stop = context.AfterFunc(ctx, func() { n.breakLink(l) })
	go st.serve(hctx, se.fetch())
	return st, nil
}

// serve is the server's side: one request at a time, as the real Fetch
// handler. An error ends the stream.
func (st *stream) serve(ctx context.Context, h fetchServe) {
	n := st.net
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-st.reqs:
			resp, err := h(ctx, req)
			if err != nil {
				n.breakLink(st.l)
				return
			}
			out := proto.Clone(resp.(proto.Message))
			n.mu.Lock()
			if n.usableLocked(st.l) {
				n.sendLocked(st.server, st.client, st.kind, "reply", st.l, func() { st.push(st.resps, out) })
			}
			n.mu.Unlock()
		}
	}
}

// push hands v over without blocking; a full buffer breaks the stream
// (a peer that floods the stream is a bug the fetcher would not make).
func (st *stream) push(ch chan any, v any) {
	select {
	case ch <- v:
	default:
		go st.net.breakLink(st.l)
	}
}

func (st *stream) send(req proto.Message) error {
	n := st.net
	in := proto.Clone(req)
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.usableLocked(st.l) {
		return unavailable("%s: stream to %s broken", st.client, st.server)
	}
	n.sendLocked(st.client, st.server, st.kind, "request", st.l, func() { st.push(st.reqs, in) })
	return nil
}

func (st *stream) recv() (any, error) {
	select {
	case r := <-st.resps:
		return r, nil
	case <-st.l.broken:
	}
	select {
	case r := <-st.resps:
		return r, nil
	default:
	}
	return nil, unavailable("%s: stream to %s broken", st.client, st.server)
}

func (st *stream) close() {
	st.stop()
	st.net.breakLink(st.l)
}
