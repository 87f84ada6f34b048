package integration

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// ctlCluster is a controller process (ctlclient controller run, embedded
// store) and brokers 1..3 started with --controller: nobody sends
// LeaderAndIsr by hand, the controller decides.
type ctlCluster struct {
	t *testing.T
	// ctlAddr is fixed, so a restarted controller is found at the same place.
	ctlAddr string
	ctlDir  string
	ctlArgs []string
	ctl     *testutil.Broker
	ctlConn *grpc.ClientConn
	ctlAPI  replicadv1.ControllerServiceClient
	args    []string // extra flags of every broker
	env     []string // extra environment (KEY=VALUE) of the controller and every broker
	dirs    map[int32]string
	// extraDirs are further log dirs of some brokers, after dirs[id].
	extraDirs map[int32][]string
	sessionT  time.Duration
	// brokerArgs, when set, adds flags of broker id (its own certificate);
	// dialOpts are the test's credentials towards the processes.
	brokerArgs func(id int32) []string
	dialOpts   []grpc.DialOption
	// serverController runs the controller as `replicad controller`
	// instead of its alias `ctlclient controller run`.
	serverController bool

	mu      sync.Mutex // brokers and clients: a producer goroutine reads them
	brokers map[int32]*testutil.Broker
	clients map[int32]*client
}

// newCtlCluster starts the controller with the session timeout and brokers
// 1..3 with args, and waits until all three registered.
func newCtlCluster(t *testing.T, session time.Duration, args ...string) *ctlCluster {
	t.Helper()
	return newCtlClusterEnv(t, session, nil, args...)
}

// newCtlClusterEnv is newCtlCluster with env (KEY=VALUE, such as
// OTEL_EXPORTER_OTLP_ENDPOINT) added to every process's environment.
func newCtlClusterEnv(t *testing.T, session time.Duration, env []string, args ...string) *ctlCluster {
	t.Helper()
	return newCtlClusterDirs(t, session, env, nil, args...)
}

// newCtlClusterDirs is newCtlClusterEnv with extra[id] more log dirs for
// broker id.
func newCtlClusterDirs(t *testing.T, session time.Duration, env []string, extra map[int32]int, args ...string) *ctlCluster {
	t.Helper()
	return newCtlClusterFrom(t, false, session, env, extra, args...)
}

// newCtlClusterFrom is newCtlClusterDirs, with the controller run by the
// server binary (replicad controller) when server is set.
func newCtlClusterFrom(t *testing.T, server bool, session time.Duration, env []string, extra map[int32]int, args ...string) *ctlCluster {
	t.Helper()
	c := &ctlCluster{t: t, serverController: server, ctlAddr: freeAddr(t), ctlDir: t.TempDir(), args: args, env: env, sessionT: session,
		dirs: map[int32]string{}, extraDirs: map[int32][]string{}, brokers: map[int32]*testutil.Broker{}, clients: map[int32]*client{}}
	for id, n := range extra {
		for range n {
			c.extraDirs[id] = append(c.extraDirs[id], t.TempDir())
		}
	}
	c.ctlArgs = []string{"--listen", c.ctlAddr, "--store", c.ctlDir, "--session-timeout", session.String()}
	c.startController()
	conn, err := grpc.NewClient(c.ctlAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c.ctlConn, c.ctlAPI = conn, replicadv1.NewControllerServiceClient(conn)
	for _, id := range clusterIDs {
		c.dirs[id] = t.TempDir()
		c.startBroker(id)
	}
	c.waitAlive(clusterIDs...)
	return c
}

// freeAddr is a loopback address with a port free right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

func (c *ctlCluster) startController() {
	c.t.Helper()
	if c.serverController {
		c.ctl = testutil.StartServerController(c.t, bins.Replicad, c.env, c.ctlArgs...)
		return
	}
	c.ctl = testutil.StartControllerEnv(c.t, bins.Ctlclient, c.env, c.ctlArgs...)
}

func (c *ctlCluster) startBroker(id int32) {
	c.t.Helper()
	args := append([]string{"--controller", c.ctlAddr}, c.args...)
	if c.brokerArgs != nil {
		args = append(args, c.brokerArgs(id)...)
	}
	dirs := append([]string{c.dirs[id]}, c.extraDirs[id]...)
	b := testutil.StartBroker(c.t, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: dirs, Args: args, Env: c.env})
	cl := newClient(c.t, b.DialWith(c.t, c.dialOpts...))
	c.mu.Lock()
	c.brokers[id], c.clients[id] = b, cl
	c.mu.Unlock()
}

// broker is the process of broker id and a client of it.
func (c *ctlCluster) broker(id int32) (*testutil.Broker, *client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.brokers[id], c.clients[id]
}

// cluster is the controller's DescribeCluster.
func (c *ctlCluster) cluster() (*replicadv1.DescribeClusterResponse, error) {
	resp, err := c.ctlAPI.DescribeCluster(ctx(c.t), &replicadv1.DescribeClusterRequest{})
	if err != nil {
		return nil, err
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return nil, fmt.Errorf("DescribeCluster: %v", resp.GetErrorCode())
	}
	return resp, nil
}

// partitionState is the controller's state of topic-partition.
func (c *ctlCluster) partitionState(topic string, partition int32) (*replicadv1.ClusterPartition, error) {
	resp, err := c.cluster()
	if err != nil {
		return nil, err
	}
	for _, p := range resp.GetPartitions() {
		if p.GetTopic() == topic && p.GetPartition() == partition {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s-%d unknown to the controller", topic, partition)
}

// waitAlive waits until the controller counts ids as registered and alive.
func (c *ctlCluster) waitAlive(ids ...int32) {
	c.t.Helper()
	testutil.Eventually(c.t, 30*time.Second, func() error {
		resp, err := c.cluster()
		if err != nil {
			return err
		}
		for _, id := range ids {
			i := slices.IndexFunc(resp.GetBrokers(), func(b *replicadv1.BrokerDescription) bool { return b.GetId() == id })
			if i < 0 || !resp.GetBrokers()[i].GetAlive() {
				return fmt.Errorf("broker %d not alive: %v", id, resp.GetBrokers())
			}
		}
		return nil
	})
}

// createTopic creates topic through the controller and waits until every
// partition's leader serves it.
func (c *ctlCluster) createTopic(topic string, partitions, rf int32) {
	c.t.Helper()
	resp, err := c.ctlAPI.CreateTopic(ctx(c.t), &replicadv1.CreateTopicRequest{Topic: topic, Partitions: partitions, ReplicationFactor: rf})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		c.t.Fatalf("CreateTopic: %v %v", resp, err)
	}
	for _, p := range resp.GetPartitions() {
		testutil.Eventually(c.t, 30*time.Second, func() error {
			_, cl := c.broker(p.GetLeader())
			d, err := cl.partition(topic, p.GetPartition())
			if err != nil {
				return err
			}
			if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER {
				return fmt.Errorf("broker %d is %v of %s-%d", p.GetLeader(), d.GetRole(), topic, p.GetPartition())
			}
			return nil
		})
	}
}

// waitNewLeader waits until the controller names a live leader of
// topic-partition other than old, and returns it.
func (c *ctlCluster) waitNewLeader(topic string, partition, old int32, timeout time.Duration) *replicadv1.ClusterPartition {
	c.t.Helper()
	var got *replicadv1.ClusterPartition
	testutil.Eventually(c.t, timeout, func() error {
		p, err := c.partitionState(topic, partition)
		if err != nil {
			return err
		}
		if p.GetLeader() < 0 || p.GetLeader() == old {
			return fmt.Errorf("leader still %d (ISR %v)", p.GetLeader(), p.GetIsr())
		}
		got = p
		return nil
	})
	return got
}

// waitInIsr waits until the controller's ISR of topic-partition holds id.
func (c *ctlCluster) waitInIsr(topic string, partition, id int32, timeout time.Duration) {
	c.t.Helper()
	testutil.Eventually(c.t, timeout, func() error {
		p, err := c.partitionState(topic, partition)
		if err != nil {
			return err
		}
		if !slices.Contains(p.GetIsr(), id) {
			return fmt.Errorf("ISR %v without %d", p.GetIsr(), id)
		}
		return nil
	})
}

// errNotAcked is a produce that did not succeed (retry it).
var errNotAcked = errors.New("not acknowledged")

// produceTo sends one acks=all record to broker id and reports whether it
// was acknowledged.
func (c *ctlCluster) produceTo(id int32, topic string, partition int32, value string) error {
	b, cl := c.broker(id)
	if b == nil || !b.Running() {
		return errNotAcked
	}
	resp, err := cl.log.Produce(ctx(c.t), &replicadv1.ProduceRequest{Topic: topic, Partition: partition, Acks: -1, TimeoutMs: 5000,
		Records: []*replicadv1.Record{{Value: []byte(value)}}})
	if err != nil {
		return fmt.Errorf("%w: %v", errNotAcked, err)
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return fmt.Errorf("%w: %v", errNotAcked, resp.GetErrorCode())
	}
	return nil
}

// produceToLeader sends one acks=all record to the partition's leader as
// the controller names it.
func (c *ctlCluster) produceToLeader(topic string, partition int32, value string) error {
	p, err := c.partitionState(topic, partition)
	if err != nil {
		return err
	}
	if p.GetLeader() < 0 {
		return fmt.Errorf("%w: %s-%d is leaderless", errNotAcked, topic, partition)
	}
	return c.produceTo(p.GetLeader(), topic, partition, value)
}

// waitFenced waits until the controller counts broker id as not alive.
func (c *ctlCluster) waitFenced(id int32) {
	c.t.Helper()
	testutil.Eventually(c.t, 30*time.Second, func() error {
		resp, err := c.cluster()
		if err != nil {
			return err
		}
		for _, b := range resp.GetBrokers() {
			if b.GetId() == id && b.GetAlive() {
				return fmt.Errorf("broker %d not fenced yet", id)
			}
		}
		return nil
	})
}

func itoa(i int) string { return strconv.Itoa(i) }
