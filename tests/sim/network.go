package sim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// network carries every message between the simulated nodes. Nothing is
// delivered on its own: a send only queues a message on its pipe, and the
// scheduler delivers (or drops) the head of one pipe per step. A pipe is one
// direction of one connection kind between two nodes ("b1>b2/fetch"), FIFO,
// which is the ordering a gRPC stream or a connection gives; pipes are
// independent of each other, which is where reordering happens.
//
// All waiting is on channels, never on a lock held across a wait, so that a
// goroutine waiting for the network is durably blocked in the synctest
// bubble and synctest.Wait returns.
type network struct {
	mu    sync.Mutex
	nodes map[string]*endpoint // current life of each node; absent while down
	cut   map[[2]string]bool   // partitioned pairs, as sorted names
	pipes map[string]*pipe
	links map[*link]struct{} // open links, to break them by node
	// streams counts the streams opened per (client, server, kind), to name them.
	streams map[string]int
}

func newNetwork() *network {
	return &network{nodes: map[string]*endpoint{}, cut: map[[2]string]bool{}, pipes: map[string]*pipe{},
		links: map[*link]struct{}{}, streams: map[string]int{}}
}

// endpoint is one life of a node: what it serves, and the context its
// handlers run under (cancelled when the life ends).
type endpoint struct {
	name  string
	life  int
	ctx   context.Context
	stop  context.CancelFunc
	unary map[string]unaryHandler
	// fetch makes the handler of one fetch stream: a stream is a fetch
	// session, whose state its handler keeps.
	fetch func() fetchServe
}

// unaryHandler serves one unary method; req and the answer are protos.
type unaryHandler func(ctx context.Context, req any) (any, error)

// fetchServe answers one request of a fetch stream.
type fetchServe func(ctx context.Context, req any) (any, error)

// pipe is one ordered direction: its messages are delivered in seq order.
type pipe struct {
	key  string
	seq  int64
	msgs []*message
	// stream is the link the pipe belongs to alone (nil: a connection
	// kind's pipe, kept across reconnections so that its seq goes on).
	stream *link
}

// message is one queued send. deliver runs on the scheduler's goroutine and
// must not block; fail tells the sender its link broke.
type message struct {
	pipe    *pipe
	seq     int64
	what    string // method or "fetch"/"reply", for the trace
	link    *link
	deliver func()
}

// Key is the message's stable name in the schedule.
func (m *message) Key() string { return fmt.Sprintf("%s#%d %s", m.pipe.key, m.seq, m.what) }

// link is one connection (or one stream) between a client life and a server
// life. Breaking it drops its queued messages, fails its waiting callers
// and cancels the handlers it started: what a reset TCP connection does to
// gRPC calls.
type link struct {
	client, server string
	clientLife     int
	serverLife     int
	broken         chan struct{}
	isBroken       bool
	// cancels stop the handlers running for this link, by call.
	cancels  map[int]context.CancelFunc
	nextCall int
	// stream: the link's pipes are its own (a fetch stream), dropped with it.
	stream bool
	// lastAnswer is closed once the last call's answer was queued (or
	// dropped): an ordered conn's next answer waits for it.
	lastAnswer chan struct{}
}

func unavailable(format string, args ...any) error {
	return status.Errorf(codes.Unavailable, format, args...)
}

func pairOf(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// serve installs e as the current life of its node.
func (n *network) serve(e *endpoint) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes[e.name] = e
}

// down ends the current life of node: every link touching it breaks and
// nothing reaches it until serve is called again.
func (n *network) down(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := n.nodes[node]; e != nil {
		e.stop()
	}
	delete(n.nodes, node)
	for l := range n.links {
		if l.client == node || l.server == node {
			n.breakLocked(l)
		}
	}
}

// partition cuts a from b (both ways) and breaks their links.
func (n *network) partition(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[pairOf(a, b)] = true
	for l := range n.links {
		if pairOf(l.client, l.server) == pairOf(a, b) {
			n.breakLocked(l)
		}
	}
}

func (n *network) heal(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, pairOf(a, b))
}

// cuts lists the partitioned pairs, sorted.
func (n *network) cuts() [][2]string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out [][2]string
	for p := range n.cut {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b [2]string) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	return out
}

// openLocked opens a link from client's life to server's current life, or
// says why it cannot.
func (n *network) openLocked(client string, clientLife int, server string) (*link, *endpoint, error) {
	ce := n.nodes[client]
	if ce == nil || ce.life != clientLife {
		return nil, nil, unavailable("%s: this life of the node has ended", client)
	}
	se := n.nodes[server]
	if se == nil {
		return nil, nil, unavailable("%s is down", server)
	}
	if n.cut[pairOf(client, server)] {
		return nil, nil, unavailable("%s cannot reach %s (partitioned)", client, server)
	}
	l := &link{client: client, server: server, clientLife: clientLife, serverLife: se.life, broken: make(chan struct{}),
		cancels: map[int]context.CancelFunc{}}
	n.links[l] = struct{}{}
	return l, se, nil
}

// usableLocked says whether l still connects two live lives.
func (n *network) usableLocked(l *link) bool {
	if l.isBroken {
		return false
	}
	ce, se := n.nodes[l.client], n.nodes[l.server]
	return ce != nil && ce.life == l.clientLife && se != nil && se.life == l.serverLife
}

func (n *network) breakLocked(l *link) {
	if l.isBroken {
		return
	}
	l.isBroken = true
	close(l.broken)
	for _, c := range l.cancels {
		c()
	}
	l.cancels = nil
	delete(n.links, l)
	for key, p := range n.pipes {
		p.msgs = slices.DeleteFunc(p.msgs, func(m *message) bool { return m.link == l })
		if len(p.msgs) == 0 && p.stream == l {
			delete(n.pipes, key)
		}
	}
}

// breakLink breaks l (a client closing its stream or connection).
func (n *network) breakLink(l *link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.breakLocked(l)
}

// sendLocked queues a message on the pipe src>dst/kind.
func (n *network) sendLocked(src, dst, kind, what string, l *link, deliver func()) {
	key := src + ">" + dst + "/" + kind
	p := n.pipes[key]
	if p == nil {
		p = &pipe{key: key}
		if l.stream {
			p.stream = l
		}
		n.pipes[key] = p
	}
	p.seq++
	p.msgs = append(p.msgs, &message{pipe: p, seq: p.seq, what: what, link: l, deliver: deliver})
}

// pending is the head of every non-empty pipe, sorted by pipe key: the
// messages the scheduler may deliver next.
func (n *network) pending() []*message {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []*message
	for _, p := range n.pipes {
		if len(p.msgs) > 0 {
			out = append(out, p.msgs[0])
		}
	}
	slices.SortFunc(out, func(a, b *message) int { return cmp.Compare(a.pipe.key, b.pipe.key) })
	return out
}

// deliver takes m off its pipe and hands it to its receiver.
func (n *network) deliver(m *message) {
	n.mu.Lock()
	if len(m.pipe.msgs) == 0 || m.pipe.msgs[0] != m {
		n.mu.Unlock()
		return
	}
	m.pipe.msgs = m.pipe.msgs[1:]
	ok := n.usableLocked(m.link)
	n.mu.Unlock()
	if ok {
		m.deliver()
	}
}

// drop loses m, which breaks its link: on a connection, a lost message is a
// reset connection, not a silent gap.
func (n *network) drop(m *message) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.breakLocked(m.link)
}
