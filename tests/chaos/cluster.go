package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/replicad/replicad/controllerchannel"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/tlsconf"
)

// Options shape a cluster.
type Options struct {
	Replicad, Ctlclient, Etcdmember string // binaries
	Dir                             string // run folder: logs, data, history
	Brokers                         int    // 3 or 5
	// Etcd runs 3 controllers on a 3-member etcd cluster; false, one
	// controller on its embedded store.
	Etcd           bool
	SessionTimeout time.Duration
	ReplicaLag     time.Duration
	// SmallDirs puts each broker's first log dir on a small tmpfs of its
	// own, so the nemesis can fill it (needs root; see smallDirsAvailable).
	SmallDirs bool
	// TLS runs every process on mutual TLS with authorization on, each with
	// its certificate from tlsconf.WriteDevCerts; the test's client is the
	// admin, a superuser of the brokers. The proxy passes the encrypted
	// bytes through, so every fault applies as in plaintext.
	TLS bool
}

// node is one process of the cluster, restartable: its proxy address is
// what everyone dials, and stays across restarts.
type node struct {
	name  string
	proxy string
	args  func() []string
	bin   string
	ann   string // the announce prefix of its stderr
	proc  *proc
	// paused is set while SIGSTOPped; the workload's goroutines read it
	// while the nemesis writes it.
	paused atomic.Bool
	// client and peer are an etcd member's real addresses, which its
	// proxies point at from before it starts (see startAt).
	client, peer string
}

// Cluster is the running processes, their network and the problems their
// logs showed.
type Cluster struct {
	opts Options
	net  *Network

	mu       sync.Mutex
	problems []string
	// fencings are the controllers' fencing decisions ("fencing brokers"
	// log lines), with how many brokers each fenced.
	fencings []fencing

	etcd        []*node
	controllers []*node
	brokers     []*node // brokers[i] is broker id i+1
	mounts      []string

	conns map[string]*grpc.ClientConn // by proxy address
	// certs is the folder of the certificates with Options.TLS, and
	// creds the test's client credentials (insecure without).
	certs string
	creds credentials.TransportCredentials
}

func (c *Cluster) problem(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.problems = append(c.problems, s)
}

// fencing is one fencing decision of a controller.
type fencing struct {
	node    string
	brokers int
	line    string
}

// watchLine notes what the checker needs from a process's log line: the
// controllers' fencing decisions.
func (c *Cluster) watchLine(name string) func(string) {
	return func(line string) {
		if !strings.Contains(line, "fencing brokers") {
			return
		}
		k := fencedIn(line)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.fencings = append(c.fencings, fencing{node: name, brokers: k, line: line})
	}
}

// fencedIn counts the brokers of a "fencing brokers" line's brokers=[...].
func fencedIn(line string) int {
	_, rest, ok := strings.Cut(line, "brokers=[")
	if !ok {
		return 0
	}
	list, _, _ := strings.Cut(rest, "]")
	if list == "" {
		return 0
	}
	return strings.Count(list, ",") + 1
}

// Fencings are the fencing decisions seen so far.
func (c *Cluster) Fencings() []fencing {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]fencing(nil), c.fencings...)
}

// Problems are the crash markers and unexpected exits seen so far.
func (c *Cluster) Problems() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.problems...)
}

// freePort is a loopback address that was free a moment ago (etcd cannot
// listen on port 0 and say which port it got).
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// StartCluster starts etcd (with Etcd), the controllers and the brokers,
// every one behind its proxy.
func StartCluster(opts Options) (*Cluster, error) {
	c := &Cluster{opts: opts, net: NewNetwork(), conns: map[string]*grpc.ClientConn{}, creds: insecure.NewCredentials()}
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	if opts.TLS {
		if err := c.makeCerts(); err != nil {
			return nil, err
		}
	}
	var storeArg string
	nControllers := 1
	if opts.Etcd {
		nControllers = 3
		if err := c.startEtcd(); err != nil {
			return nil, err
		}
		var eps []string
		for _, e := range c.etcd {
			eps = append(eps, e.proxy)
		}
		storeArg = "etcd://" + strings.Join(eps, ",")
	} else {
		storeArg = filepath.Join(opts.Dir, "controller-store")
	}
	for i := range nControllers {
		name := fmt.Sprintf("controller-%d", i+1)
		proxy, err := c.net.Listen(name)
		if err != nil {
			return nil, err
		}
		n := &node{name: name, proxy: proxy, bin: opts.Ctlclient, ann: "replicad controller listening on "}
		id := i + 1
		n.args = func() []string {
			a := []string{"controller", "run", "--listen", "127.0.0.1:0", "--store", storeArg,
				"--session-timeout", opts.SessionTimeout.String(), "--id", strconv.Itoa(id)}
			if opts.Etcd {
				a = append(a, "--election-ttl", "3s")
			}
			return append(a, c.tlsArgs("controller")...)
		}
		c.controllers = append(c.controllers, n)
		if err := c.start(n); err != nil {
			return nil, err
		}
	}
	var ctlAddrs []string
	for _, n := range c.controllers {
		ctlAddrs = append(ctlAddrs, n.proxy)
	}
	for i := range opts.Brokers {
		id := i + 1
		name := fmt.Sprintf("broker-%d", id)
		proxy, err := c.net.Listen(name)
		if err != nil {
			return nil, err
		}
		dirs, err := c.brokerDirs(id)
		if err != nil {
			return nil, err
		}
		n := &node{name: name, proxy: proxy, bin: opts.Replicad, ann: "replicad listening on "}
		n.args = func() []string {
			args := []string{"--id", strconv.Itoa(id), "--listen", "127.0.0.1:0", "--advertised-address", proxy,
				"--log-dirs", strings.Join(dirs, ","), "--controller", strings.Join(ctlAddrs, ","),
				"--min-insync-replicas", "2", "--replica-lag-time-max", opts.ReplicaLag.String(),
				"--segment-bytes", strconv.Itoa(4 << 20), "--controlled-shutdown-timeout", "5s",
				"--max-partitions", strconv.Itoa(BrokerMaxPartitions)}
			if opts.TLS {
				args = append(args, "--super-users", tlsconf.AdminPrincipal)
			}
			return append(args, c.tlsArgs(fmt.Sprintf("broker-%d", id))...)
		}
		c.brokers = append(c.brokers, n)
		if err := c.start(n); err != nil {
			return nil, err
		}
	}
	ok = true
	return c, nil
}

// makeCerts writes the cluster's development certificates and makes the
// test's client the admin.
func (c *Cluster) makeCerts() error {
	c.certs = filepath.Join(c.opts.Dir, "certs")
	if _, err := tlsconf.WriteDevCerts(tlsconf.DevCertsOptions{Dir: c.certs, Brokers: c.opts.Brokers}); err != nil {
		return fmt.Errorf("certificates: %w", err)
	}
	t, err := tlsconf.New(tlsconf.Options{Cert: filepath.Join(c.certs, "admin.crt"), Key: filepath.Join(c.certs, "admin.key"),
		CA: filepath.Join(c.certs, "ca.crt")}, zerolog.Nop())
	if err != nil {
		return err
	}
	c.creds = t.ClientCredentials()
	return nil
}

// tlsArgs are the mutual-TLS flags of the process whose certificate is
// name; none without Options.TLS.
func (c *Cluster) tlsArgs(name string) []string {
	if !c.opts.TLS {
		return nil
	}
	return []string{"--tls-cert", filepath.Join(c.certs, name+".crt"), "--tls-key", filepath.Join(c.certs, name+".key"),
		"--tls-ca", filepath.Join(c.certs, "ca.crt"), "--tls-client-auth", "require"}
}

// brokerDirs makes broker id's two log dirs: with SmallDirs the first on a
// 64 MiB tmpfs of its own.
func (c *Cluster) brokerDirs(id int) ([]string, error) {
	base := filepath.Join(c.opts.Dir, fmt.Sprintf("broker-%d", id))
	dirs := []string{filepath.Join(base, "small"), filepath.Join(base, "big")}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if c.opts.SmallDirs {
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", dirs[0]).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("mount a tmpfs on %s: %v: %s", dirs[0], err, out)
		}
		c.mounts = append(c.mounts, dirs[0])
	}
	return dirs, nil
}

// smallDirsAvailable says whether tmpfs mounts can be made (root).
func smallDirsAvailable() bool {
	if os.Geteuid() != 0 {
		return false
	}
	_, err := exec.LookPath("mount")
	return err == nil
}

func (c *Cluster) startEtcd() error {
	var peers []string
	for i := range 3 {
		name := fmt.Sprintf("etcd-%d", i+1)
		proxy, err := c.net.Listen(name)
		if err != nil {
			return err
		}
		peerProxy, err := c.net.Listen(name + "-peer")
		if err != nil {
			return err
		}
		cl, err := freePort()
		if err != nil {
			return err
		}
		pe, err := freePort()
		if err != nil {
			return err
		}
		peers = append(peers, fmt.Sprintf("%s=http://%s", name, peerProxy))
		n := &node{name: name, proxy: proxy, bin: c.opts.Etcdmember, ann: "etcd member ready on ", client: cl, peer: pe}
		dir := filepath.Join(c.opts.Dir, name)
		n.args = func() []string { // peers is whole by the time a member starts
			return []string{"--name", name, "--dir", dir, "--listen-client", "http://" + n.client,
				"--advertise-client", "http://" + proxy, "--listen-peer", "http://" + n.peer,
				"--advertise-peer", "http://" + peerProxy, "--initial-cluster", strings.Join(peers, ",")}
		}
		c.etcd = append(c.etcd, n)
	}
	// The members start together: none is ready before a quorum is.
	errs := make(chan error, 3)
	for _, n := range c.etcd {
		go func() { errs <- c.startAt(n) }()
	}
	var err error
	for range 3 {
		err = errors.Join(err, <-errs)
	}
	return err
}

// start starts n and points its proxy at the address it announced.
func (c *Cluster) start(n *node) error {
	p, err := startProc(n.name, n.bin, n.args(), filepath.Join(c.opts.Dir, n.name+".log"), n.ann, c.problem, c.watchLine(n.name),
		func(pid int) { c.net.SetTarget(n.name, "", pid) })
	if err != nil {
		return err
	}
	n.proc = p
	n.paused.Store(false)
	c.net.SetTarget(n.name, p.addr, p.pid())
	return nil
}

// startAt starts an etcd member, whose proxies point at fixed addresses
// (its client and peer ones) from the start: no member is ready before a
// quorum of them can talk.
//
// Its listen addresses come from freePort, free a moment before: another
// process (a parallel test package) can take one first, and the member
// exits at once with "address already in use" (seen in CI). Its peers know
// it by its proxies' addresses, so it starts again on fresh ports, at most
// three times.
func (c *Cluster) startAt(n *node) error {
	logPath := filepath.Join(c.opts.Dir, n.name+".log")
	for attempt := 1; ; attempt++ {
		p, err := startProc(n.name, n.bin, n.args(), logPath, n.ann, c.problem, c.watchLine(n.name),
			func(pid int) {
				c.net.SetTarget(n.name, n.client, pid)
				c.net.SetTarget(n.name+"-peer", n.peer, pid)
			})
		if err == nil {
			n.proc = p
			n.paused.Store(false)
			return nil
		}
		if attempt == 3 || !portTaken(logPath) {
			return err
		}
		cl, cerr := freePort()
		pe, perr := freePort()
		if cerr != nil || perr != nil {
			return errors.Join(err, cerr, perr)
		}
		n.client, n.peer = cl, pe
	}
}

// portTaken says whether the log's last run ended on a listen address
// already in use.
func portTaken(logPath string) bool {
	data, err := os.ReadFile(logPath)
	if err != nil {
		return false
	}
	lines := bytes.Split(data, []byte("\n"))
	for i := len(lines) - 1; i >= 0; i-- {
		l := lines[i]
		if bytes.Contains(l, []byte("address already in use")) {
			return true
		}
		if bytes.HasPrefix(l, []byte("=== ")) && bytes.Contains(l, []byte(" start ")) {
			return false // the last run's start: it did not say so
		}
	}
	return false
}

// Kill is kill -9 of n.
func (c *Cluster) Kill(n *node) {
	n.proc.kill()
	c.net.SetTarget(n.name, "", 0)
	if strings.HasPrefix(n.name, "etcd-") {
		c.net.SetTarget(n.name+"-peer", "", 0)
	}
}

// Terminate is SIGTERM (a broker's controlled shutdown), waited for up
// to d, then kill -9.
func (c *Cluster) Terminate(n *node, d time.Duration) {
	n.proc.terminate(d)
	c.net.SetTarget(n.name, "", 0)
}

// Restart starts a killed n again (same flags, same data).
func (c *Cluster) Restart(n *node) error {
	if n.client != "" {
		return c.startAt(n)
	}
	return c.start(n)
}

// Pause is SIGSTOP; Resume SIGCONT.
func (c *Cluster) Pause(n *node)  { n.proc.signal(syscall.SIGSTOP); n.paused.Store(true) }
func (c *Cluster) Resume(n *node) { n.proc.signal(syscall.SIGCONT); n.paused.Store(false) }

// Stop kills everything and unmounts what it mounted.
func (c *Cluster) Stop() {
	for _, group := range [][]*node{c.brokers, c.controllers, c.etcd} {
		for _, n := range group {
			if n.proc != nil && n.proc.running() {
				n.proc.kill()
			}
		}
	}
	c.net.Close()
	c.mu.Lock()
	for _, conn := range c.conns {
		conn.Close()
	}
	c.conns = map[string]*grpc.ClientConn{}
	c.mu.Unlock()
	for _, m := range c.mounts {
		_ = exec.Command("umount", "-l", m).Run()
	}
	c.mounts = nil
}

// conn is the test's client connection to a node (through its proxy, as
// Client: never faulted).
func (c *Cluster) conn(n *node) *grpc.ClientConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc := c.conns[n.proxy]; cc != nil {
		return cc
	}
	cc, err := grpc.NewClient(n.proxy, grpc.WithTransportCredentials(c.creds))
	if err != nil {
		panic(err) // only a malformed target fails here
	}
	c.conns[n.proxy] = cc
	return cc
}

// Broker is the broker with id.
func (c *Cluster) Broker(id int32) *node { return c.brokers[id-1] }

func (c *Cluster) log(id int32) replicadv1.LogServiceClient {
	return replicadv1.NewLogServiceClient(c.conn(c.Broker(id)))
}

func (c *Cluster) replicaManager(id int32) replicadv1.ReplicaManagerServiceClient {
	return replicadv1.NewReplicaManagerServiceClient(c.conn(c.Broker(id)))
}

// ActiveController is the controller that answers DescribeCluster (not
// NOT_CONTROLLER), with its answer: asked through a controllerchannel, as
// the brokers and ctlclient ask, among the controllers that run and are not
// paused (one that is would only cost its attempt's second).
func (c *Cluster) ActiveController(ctx context.Context) (*node, *replicadv1.DescribeClusterResponse, error) {
	byAddr := map[string]*node{}
	var addrs []string
	for _, n := range c.controllers {
		if n.paused.Load() || n.proc == nil || !n.proc.running() {
			continue
		}
		byAddr[n.proxy] = n
		addrs = append(addrs, n.proxy)
	}
	if len(addrs) == 0 {
		return nil, nil, errors.New("no controller running")
	}
	ch, err := controllerchannel.New(controllerchannel.Config{Addrs: addrs,
		Dial: func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
			return replicadv1.NewControllerServiceClient(c.conn(byAddr[addr])), nopCloser{}, nil
		}})
	if err != nil {
		return nil, nil, err
	}
	defer ch.Close()
	resp, err := controllerchannel.Call(ctx, ch, controllerchannel.Policy{AttemptTimeout: time.Second, Rounds: 1, Idempotent: true},
		func(ctx context.Context, cl replicadv1.ControllerServiceClient) (*replicadv1.DescribeClusterResponse, error) {
			return cl.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
		})
	if err != nil {
		return nil, nil, err
	}
	return byAddr[ch.Active()], resp, nil
}

// nopCloser closes nothing: the Cluster owns its connections.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// Controller is the controller service of the active controller.
func (c *Cluster) Controller(ctx context.Context) (replicadv1.ControllerServiceClient, *replicadv1.DescribeClusterResponse, error) {
	n, resp, err := c.ActiveController(ctx)
	if err != nil {
		return nil, nil, err
	}
	return replicadv1.NewControllerServiceClient(c.conn(n)), resp, nil
}

// brokerSmallDir is broker id's first log dir (a small tmpfs with SmallDirs).
func (c *Cluster) brokerSmallDir(id int32) string {
	return filepath.Join(c.opts.Dir, fmt.Sprintf("broker-%d", id), "small")
}

// etcdLeader is the etcd member that is the raft leader (nil: none found).
func (c *Cluster) etcdLeader(ctx context.Context) *node {
	for _, n := range c.etcd {
		if n.paused.Load() || n.proc == nil || !n.proc.running() {
			continue
		}
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{n.proxy}, DialTimeout: time.Second, Logger: zap.NewNop()})
		if err != nil {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := cli.Status(cctx, n.proxy)
		cancel()
		cli.Close()
		if err == nil && st.Header.GetMemberId() == st.Leader {
			return n
		}
	}
	return nil
}
