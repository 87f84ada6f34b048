package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
	"github.com/replicad/replicad/internal/testutil"
)

// haController is one of several controllers sharing an etcd.
type haController struct {
	addr string
	args []string
	proc *testutil.Broker
	api  replicadv1.ControllerServiceClient
}

func (h *haController) start(t *testing.T) {
	t.Helper()
	h.proc = testutil.StartController(t, bins.Ctlclient, h.args...)
}

// active reports whether h answers as the acting controller, and its epoch.
func (h *haController) active(t *testing.T) (bool, int32) {
	if !h.proc.Running() {
		return false, 0
	}
	// A paused controller accepts connections but never answers: ask briefly.
	c, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := h.api.DescribeCluster(c, &replicadv1.DescribeClusterRequest{})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return false, 0
	}
	return true, resp.GetControllerEpoch()
}

// With etcd, two controllers campaign and one acts. Pause the active one
// (SIGSTOP): the other takes over within the election TTL, with a higher
// controller epoch that the brokers follow. Resume the old one: it finds it
// lost, answers NOT_CONTROLLER, and the brokers stay with the new epoch
// (whatever it sent late was rejected). Then kill -9 the new one: the old one
// takes over again.
func TestEtcdControllersFailover(t *testing.T) {
	const ttl = 2 * time.Second
	endpoint := strings.TrimPrefix(testutil.StartEtcd(t)[0], "http://")
	ctls := []*haController{{addr: freeAddr(t)}, {addr: freeAddr(t)}}
	for _, h := range ctls {
		h.args = []string{"--listen", h.addr, "--store", "etcd://" + endpoint, "--election-ttl", ttl.String(), "--session-timeout", "3s"}
		h.start(t)
		conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		h.api = replicadv1.NewControllerServiceClient(conn)
	}
	controllers := ctls[0].addr + "," + ctls[1].addr
	clients := map[int32]*client{}
	for _, id := range clusterIDs {
		b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: []string{t.TempDir()},
			Args: []string{"--controller", controllers}})
		clients[id] = newClient(t, b.Dial(t))
	}

	// activeOne waits until exactly one controller acts and returns it.
	activeOne := func(timeout time.Duration, not *haController) (*haController, int32) {
		t.Helper()
		var got *haController
		var epoch int32
		testutil.Eventually(t, timeout, func() error {
			got = nil
			n := 0
			for _, h := range ctls {
				if ok, e := h.active(t); ok && h != not {
					got, epoch = h, e
					n++
				}
			}
			if n != 1 {
				return fmt.Errorf("%d controllers acting, want 1", n)
			}
			return nil
		})
		return got, epoch
	}
	brokersAt := func(epoch int32) {
		t.Helper()
		for _, id := range clusterIDs {
			testutil.Eventually(t, 30*time.Second, func() error {
				if got := clients[id].describe().GetControllerEpoch(); got != epoch {
					return fmt.Errorf("broker %d at controller epoch %d, want %d", id, got, epoch)
				}
				return nil
			})
		}
	}

	first, e1 := activeOne(30*time.Second, nil)
	// The standby names the active controller, in its answers and so in
	// ctlclient's message when only the standby is given.
	standby := ctls[0]
	if standby == first {
		standby = ctls[1]
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		resp, err := standby.api.DescribeCluster(ctx(t), &replicadv1.DescribeClusterRequest{})
		if err != nil {
			return err
		}
		if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER || !strings.Contains(resp.GetErrorMessage(), "the active one is "+first.addr) {
			return fmt.Errorf("standby answers %v %q, want NOT_CONTROLLER naming %s", resp.GetErrorCode(), resp.GetErrorMessage(), first.addr)
		}
		return nil
	})
	// ... and in the trailer of its answers to brokers, which carry no
	// message (what a broker's controllerchannel follows).
	var trailer metadata.MD
	hb, err := standby.api.BrokerHeartbeat(ctx(t), &replicadv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: 1}, grpc.Trailer(&trailer))
	if err != nil || hb.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER || !slices.Equal(trailer.Get(grpcx.ActiveControllerKey), []string{first.addr}) {
		t.Fatalf("standby's heartbeat answer: %v %v, trailer %v; want NOT_CONTROLLER naming %s in %s", hb.GetErrorCode(), err, trailer, first.addr, grpcx.ActiveControllerKey)
	}
	if r := runCtlclientEnv(t, nil, "--controller", standby.addr, "--timeout", "1s", "describe-cluster"); r.code != 1 ||
		!strings.Contains(r.stderr, "the active one is "+first.addr) {
		t.Fatalf("ctlclient against the standby only: exit %d, stderr %q; want 1 naming %s", r.code, r.stderr, first.addr)
	}
	// Brokers register and a topic is placed through the active controller.
	testutil.Eventually(t, 30*time.Second, func() error {
		resp, err := first.api.CreateTopic(ctx(t), &replicadv1.CreateTopicRequest{Topic: "ha", Partitions: 3, ReplicationFactor: 3})
		if err != nil {
			return err
		}
		if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			return fmt.Errorf("CreateTopic: %v %s", resp.GetErrorCode(), resp.GetErrorMessage())
		}
		return nil
	})
	brokersAt(e1)

	first.proc.Signal(syscall.SIGSTOP)
	paused := time.Now()
	second, e2 := activeOne(ttl+5*time.Second, first)
	t.Logf("controller %s took over %v after %s was paused (epoch %d -> %d)", second.addr, time.Since(paused).Round(time.Millisecond), first.addr, e1, e2)
	if e2 <= e1 {
		t.Fatalf("controller epoch %d after the takeover, was %d", e2, e1)
	}
	brokersAt(e2)

	first.proc.Signal(syscall.SIGCONT)
	testutil.Eventually(t, 30*time.Second, func() error {
		if ok, _ := first.active(t); ok {
			return fmt.Errorf("the resumed controller %s still acts", first.addr)
		}
		return nil
	})
	// A request stamped with the old epoch, as the paused controller would
	// have sent, is refused.
	resp, err := clients[1].rm.LeaderAndIsr(ctx(t), &replicadv1.LeaderAndIsrRequest{ControllerEpoch: e1,
		PartitionStates: []*replicadv1.PartitionState{{Topic: "ha", Partition: 0, ControllerEpoch: e1, Leader: 1, LeaderEpoch: 1000,
			Isr: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}}}})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH {
		t.Fatalf("LeaderAndIsr at the deposed epoch %d: %v %v, want STALE_CONTROLLER_EPOCH", e1, resp, err)
	}
	brokersAt(e2)

	second.proc.Kill()
	killed := time.Now()
	third, e3 := activeOne(ttl+5*time.Second, second)
	t.Logf("controller %s took over %v after %s was killed (epoch %d)", third.addr, time.Since(killed).Round(time.Millisecond), second.addr, e3)
	if third != first || e3 <= e2 {
		t.Fatalf("after the kill: %s acts at epoch %d; want %s above %d", third.addr, e3, first.addr, e2)
	}
	brokersAt(e3)
}
