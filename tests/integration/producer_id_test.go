package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// initProducerID calls InitProducerId on broker id, retrying while the
// broker has no block yet (its registration or the controller may still be
// on the way), and returns the answer.
func (c *ctlCluster) initProducerID(id int32, producerID int64, epoch int32) *replicadv1.InitProducerIdResponse {
	c.t.Helper()
	var resp *replicadv1.InitProducerIdResponse
	testutil.Eventually(c.t, 30*time.Second, func() (err error) {
		_, cl := c.broker(id)
		resp, err = cl.log.InitProducerId(ctx(c.t), &replicadv1.InitProducerIdRequest{ProducerId: producerID, ProducerEpoch: epoch, TimeoutMs: 5000})
		if err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
			err = fmt.Errorf("broker %d: %v", id, resp)
		}
		return err
	})
	return resp
}

// newProducerIDs takes n new producer IDs from broker id, requiring each
// to be issued at epoch 0 and not in seen, and adds them to seen.
func (c *ctlCluster) newProducerIDs(id int32, n int, seen map[int64]int32) []int64 {
	c.t.Helper()
	var out []int64
	for range n {
		resp := c.initProducerID(id, 0, 0)
		pid := resp.GetProducerId()
		if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || pid <= 0 || resp.GetProducerEpoch() != 0 {
			c.t.Fatalf("InitProducerId on broker %d: %v", id, resp)
		}
		if by, dup := seen[pid]; dup {
			c.t.Fatalf("producer ID %d issued twice: by broker %d and now by broker %d", pid, by, id)
		}
		seen[pid] = id
		out = append(out, pid)
	}
	return out
}

// TestInitProducerIdUniqueAcrossBrokersAndControllerRestart: real processes
// (a controller on bbolt, three brokers). Every broker issues IDs from its
// own block, so no two are equal; after the controller is killed and
// restarted, a broker that starts again gets a block after every block
// handed out before (the end is in the store). An epoch bump fences: two
// bumps from the same epoch, through two brokers, and the second is
// refused INVALID_PRODUCER_EPOCH. An ID never issued is UNKNOWN_PRODUCER_ID.
// An idempotent produce's records come back with their producer fields.
func TestInitProducerIdUniqueAcrossBrokersAndControllerRestart(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second)
	seen := map[int64]int32{}
	for _, id := range clusterIDs {
		c.newProducerIDs(id, 3, seen)
	}
	var highest int64
	for pid := range seen {
		highest = max(highest, pid)
	}

	// The bump: the first from epoch 0 wins, the second (another broker,
	// same epoch) is fenced.
	pid := c.newProducerIDs(1, 1, seen)[0]
	if r := c.initProducerID(2, pid, 0); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || r.GetProducerId() != pid || r.GetProducerEpoch() != 1 {
		t.Fatalf("first bump of %d from epoch 0: %v", pid, r)
	}
	if r := c.initProducerID(3, pid, 0); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
		t.Fatalf("second bump of %d from epoch 0: %v, want INVALID_PRODUCER_EPOCH", pid, r)
	}
	if r := c.initProducerID(3, 1<<40, 0); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID {
		t.Fatalf("bump of an ID never issued: %v, want UNKNOWN_PRODUCER_ID", r)
	}

	// An idempotent produce carries the producer in its batch.
	c.createTopic("idem", 1, 3)
	p, err := c.partitionState("idem", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, leader := c.broker(p.GetLeader())
	testutil.Eventually(t, 30*time.Second, func() error {
		resp, err := leader.log.Produce(ctx(t), &replicadv1.ProduceRequest{Topic: "idem", Partition: 0, Acks: -1, TimeoutMs: 5000,
			ProducerId: pid, ProducerEpoch: 1, BaseSequence: 0,
			Records: []*replicadv1.Record{{Value: []byte("a")}, {Value: []byte("b")}}})
		if err != nil {
			return err
		}
		if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			return fmt.Errorf("produce: %v", resp)
		}
		return nil
	})
	recs := leader.consumeAll("idem", 0)
	if len(recs) != 2 {
		t.Fatalf("consumed %v, want 2 records", recs)
	}
	for i, r := range recs {
		if r.GetProducerId() != pid || r.GetProducerEpoch() != 1 || r.GetSequence() != int32(i) {
			t.Fatalf("record %d: producer %d epoch %d sequence %d, want %d 1 %d", i, r.GetProducerId(), r.GetProducerEpoch(), r.GetSequence(), pid, i)
		}
	}

	// The controller dies and comes back; broker 3 starts again and asks
	// for a new block, which starts after every block handed out.
	c.ctl.Kill()
	c.startController()
	testutil.Eventually(t, 30*time.Second, func() error { _, err := c.cluster(); return err })
	b3, _ := c.broker(3)
	b3.Kill()
	c.startBroker(3)
	c.waitAlive(clusterIDs...)
	fresh := c.newProducerIDs(3, 3, seen)
	for _, f := range fresh {
		if f <= highest {
			t.Fatalf("after the controller's restart broker 3 issued %d, not past %d", f, highest)
		}
	}
	// The older brokers go on from their blocks, still without overlap.
	c.newProducerIDs(1, 2, seen)
	c.newProducerIDs(2, 2, seen)
	// And the fenced epoch stays fenced: the bump is in the store.
	if r := c.initProducerID(1, pid, 0); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
		t.Fatalf("bump from epoch 0 after the restart: %v, want INVALID_PRODUCER_EPOCH", r)
	}
	if r := c.initProducerID(1, pid, 1); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || r.GetProducerEpoch() != 2 {
		t.Fatalf("bump from epoch 1 after the restart: %v", r)
	}
}

// Two controllers on a real etcd, three brokers: IDs issued before the
// active controller is killed (kill -9) and after the standby took over
// never repeat; a broker started after the failover gets a block past every
// earlier one (the standby continues after the stored block end); the epoch
// bumped before the failover stays the newest.
func TestInitProducerIdAcrossEtcdControllerFailover(t *testing.T) {
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
	dirs := map[int32]string{}
	procs := map[int32]*testutil.Broker{}
	clients := map[int32]*client{}
	start := func(id int32) {
		b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: []string{dirs[id]},
			Args: []string{"--controller", controllers}})
		procs[id], clients[id] = b, newClient(t, b.Dial(t))
	}
	for _, id := range clusterIDs {
		dirs[id] = t.TempDir()
		start(id)
	}
	seen := map[int64]int32{}
	take := func(id int32, producerID int64, epoch int32) *replicadv1.InitProducerIdResponse {
		t.Helper()
		var resp *replicadv1.InitProducerIdResponse
		testutil.Eventually(t, 60*time.Second, func() (err error) {
			resp, err = clients[id].log.InitProducerId(ctx(t), &replicadv1.InitProducerIdRequest{ProducerId: producerID, ProducerEpoch: epoch, TimeoutMs: 3000})
			if err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT {
				err = fmt.Errorf("broker %d: %v", id, resp)
			}
			return err
		})
		return resp
	}
	issue := func(id int32, n int) (highest int64) {
		t.Helper()
		for range n {
			r := take(id, 0, 0)
			pid := r.GetProducerId()
			if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || pid <= 0 {
				t.Fatalf("InitProducerId on broker %d: %v", id, r)
			}
			if by, dup := seen[pid]; dup {
				t.Fatalf("producer ID %d issued twice: by broker %d and by broker %d", pid, by, id)
			}
			seen[pid] = id
			highest = max(highest, pid)
		}
		return highest
	}
	var before int64
	for _, id := range clusterIDs {
		before = max(before, issue(id, 2))
	}
	pid := issue(1, 1)
	before = max(before, pid)
	if r := take(2, pid, 0); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || r.GetProducerEpoch() != 1 {
		t.Fatalf("bump before the failover: %v", r)
	}

	var active *haController
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, h := range ctls {
			if ok, _ := h.active(t); ok {
				active = h
				return nil
			}
		}
		return fmt.Errorf("no controller acts")
	})
	active.proc.Kill()
	procs[3].Kill()
	start(3)
	after := issue(3, 2)
	if after <= before {
		t.Fatalf("broker 3 after the failover issued up to %d, not past %d", after, before)
	}
	issue(1, 2)
	issue(2, 2)
	if r := take(3, pid, 0); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
		t.Fatalf("bump from the fenced epoch after the failover: %v, want INVALID_PRODUCER_EPOCH", r)
	}
	if r := take(1, pid, 1); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || r.GetProducerEpoch() != 2 {
		t.Fatalf("bump from epoch 1 after the failover: %v", r)
	}
}
