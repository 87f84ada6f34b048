package chaos

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Client is the source of connections from outside the cluster's processes
// (the test's own producers, consumers and checker): never faulted.
const Client = "client"

// Network is the fault-injecting TCP proxy every connection between the
// cluster's processes goes through. Each node has one proxy listener, the
// address it advertises; a connection accepted there is attributed to the
// process that opened it (its socket is found in /proc), so faults apply
// per directed link: bytes from A to B, whichever side opened the
// connection, flow only while the link A->B is up, after its delay.
//
// A cut link holds bytes rather than dropping them: the sender's writes
// back up as behind a lost route, and what was in flight arrives after the
// heal, as TCP's retransmissions would deliver it. Connections are not
// reset, so a peer learns of the cut only from its own deadlines.
//
// A refused link (Refuse) is the other kind of cut, a host that is up but
// whose peer's port is closed or firewalled with a reject: every open
// connection between the two is reset, and every new one is reset at
// once, so a client sees errors at once and keeps reconnecting, which is
// what grows gRPC's reconnect backoff (issue 19 path 12).
type Network struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change of links
	links   map[[2]string]link
	nodes   map[string]*proxyNode
	pids    map[int]string // process id -> node
	closed  bool
	// accepted counts connections by "from->to", for the summary: a test
	// of the attribution itself (a fault on a link nobody uses is no fault).
	accepted map[string]int
}

type link struct {
	down    bool
	refused bool
	delay   time.Duration
}

type proxyNode struct {
	name   string
	ln     net.Listener
	target string // the node's real address; empty while it is down
	conns  map[*proxyConn]struct{}
}

type proxyConn struct {
	from, to string
	a, b     net.Conn
}

// NewNetwork returns a network with no nodes.
func NewNetwork() *Network {
	return &Network{changed: make(chan struct{}), links: map[[2]string]link{}, nodes: map[string]*proxyNode{}, pids: map[int]string{},
		accepted: map[string]int{}}
}

// Listen opens node's proxy listener on loopback and returns its address,
// which the node advertises (and the others dial).
func (n *Network) Listen(node string) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	p := &proxyNode{name: node, ln: ln, conns: map[*proxyConn]struct{}{}}
	n.mu.Lock()
	n.nodes[node] = p
	n.mu.Unlock()
	go n.accept(p)
	return ln.Addr().String(), nil
}

// SetTarget points node's proxy at its real address, and records the
// process id its outgoing connections come from (0: none). An empty target
// (a node that is down) refuses connections, as a dead host would.
func (n *Network) SetTarget(node, target string, pid int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.nodes[node]
	p.target = target
	for id, name := range n.pids {
		if name == node {
			delete(n.pids, id)
		}
	}
	if pid > 0 {
		n.pids[pid] = node
	}
	if target == "" {
		for c := range p.conns {
			c.close()
		}
	}
}

// Cut takes the link from -> to down (one direction).
func (n *Network) Cut(from, to string) { n.update(from, to, func(l *link) { l.down = true }) }

// Refuse takes the link from -> to down by refusing: open connections
// between the two nodes, either way, are reset, and connections that from
// opens to to are reset as soon as they are accepted. (Bytes of a
// connection that to opened are held, as on a cut.)
func (n *Network) Refuse(from, to string) {
	n.update(from, to, func(l *link) { l.down, l.refused = true, true })
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, p := range n.nodes {
		for c := range p.conns {
			if (c.from == from && c.to == to) || (c.from == to && c.to == from) {
				c.reset()
			}
		}
	}
}

// Slow delays every byte from -> to by d (0: none).
func (n *Network) Slow(from, to string, d time.Duration) {
	n.update(from, to, func(l *link) { l.delay = d })
}

// Heal brings every link up with no delay.
func (n *Network) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links = map[[2]string]link{}
	close(n.changed)
	n.changed = make(chan struct{})
}

func (n *Network) update(from, to string, f func(*link)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	l := n.links[[2]string{from, to}]
	f(&l)
	n.links[[2]string{from, to}] = l
	close(n.changed)
	n.changed = make(chan struct{})
}

// Accepted is the count of connections accepted, by "from->to".
func (n *Network) Accepted() map[string]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string]int, len(n.accepted))
	for k, v := range n.accepted {
		out[k] = v
	}
	return out
}

// Close stops every listener and connection.
func (n *Network) Close() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.closed = true
	for _, p := range n.nodes {
		p.ln.Close()
		for c := range p.conns {
			c.close()
		}
	}
	close(n.changed)
	n.changed = make(chan struct{})
}

// wait returns the link's state and a channel closed at its next change.
func (n *Network) wait(from, to string) (link, <-chan struct{}, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.links[[2]string{from, to}], n.changed, n.closed
}

func (n *Network) accept(p *proxyNode) {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go n.serve(p, c)
	}
}

func (n *Network) serve(p *proxyNode, c net.Conn) {
	from := n.source(c)
	n.mu.Lock()
	target := p.target
	n.mu.Unlock()
	l, _, _ := n.wait(from, p.name)
	if target == "" || l.refused {
		resetConn(c)
		return
	}
	d, err := net.DialTimeout("tcp", target, 2*time.Second)
	if err != nil {
		c.Close()
		return
	}
	pc := &proxyConn{from: from, to: p.name, a: c, b: d}
	n.mu.Lock()
	if n.closed || p.target != target {
		n.mu.Unlock()
		pc.close()
		return
	}
	p.conns[pc] = struct{}{}
	n.accepted[from+"->"+p.name]++
	n.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); n.pump(pc.from, pc.to, c, d); pc.close() }()
	go func() { defer wg.Done(); n.pump(pc.to, pc.from, d, c); pc.close() }()
	wg.Wait()
	n.mu.Lock()
	delete(p.conns, pc)
	n.mu.Unlock()
}

func (c *proxyConn) close() {
	c.a.Close()
	c.b.Close()
}

// reset closes both sides with a TCP reset (no lingering FIN), as a
// rejecting firewall or a closed port answers.
func (c *proxyConn) reset() {
	resetConn(c.a)
	resetConn(c.b)
}

func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// pump copies src to dst chunk by chunk, each only while the link from ->
// to is up and after its delay. One chunk is held at a time, so a cut link
// backs up the sender.
func (n *Network) pump(from, to string, src, dst net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			read := time.Now()
			for {
				l, changed, closed := n.wait(from, to)
				if closed {
					return
				}
				if l.down {
					<-changed
					continue
				}
				if wait := time.Until(read.Add(l.delay)); wait > 0 {
					select {
					case <-time.After(wait):
					case <-changed:
						continue // the delay or the cut changed: look again
					}
				}
				break
			}
			if _, err := dst.Write(buf[:k]); err != nil {
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			return
		}
	}
}

// source names the node that opened c: the owner of its peer's socket,
// found through /proc (the peer is on loopback, so its socket is in this
// network namespace's table). Connections from any other process (this
// one: the test's clients) come from Client.
func (n *Network) source(c net.Conn) string {
	remote := c.RemoteAddr().(*net.TCPAddr)
	inode, err := socketInode(remote, c.LocalAddr().(*net.TCPAddr))
	if err != nil {
		return Client
	}
	n.mu.Lock()
	pids := make(map[int]string, len(n.pids))
	for k, v := range n.pids {
		pids[k] = v
	}
	n.mu.Unlock()
	want := "socket:[" + inode + "]"
	for pid, node := range pids {
		fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		if err != nil {
			continue
		}
		for _, fd := range fds {
			if l, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name())); err == nil && l == want {
				return node
			}
		}
	}
	return Client
}

// socketInode finds, in /proc/net/tcp, the inode of the socket whose local
// address is local and remote address remote.
func socketInode(local, remote *net.TCPAddr) (string, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return "", err
	}
	defer f.Close()
	want := hexAddr(local) + " " + hexAddr(remote)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		if fields[1]+" "+fields[2] == want {
			return fields[9], nil
		}
	}
	return "", fmt.Errorf("no socket %s", want)
}

// hexAddr is a in /proc/net/tcp's notation: the IPv4 address as a
// little-endian hex word, and the port in hex.
func hexAddr(a *net.TCPAddr) string {
	ip := a.IP.To4()
	if ip == nil {
		return ""
	}
	return fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], a.Port)
}
