package controller

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// fakeElector hands out leaderships when the test grants them.
type fakeElector struct {
	grants    chan *fakeLeadership
	campaigns atomic.Int32
}

func newFakeElector() *fakeElector { return &fakeElector{grants: make(chan *fakeLeadership)} }

func (e *fakeElector) Campaign(ctx context.Context) (store.Leadership, error) {
	e.campaigns.Add(1)
	select {
	case l := <-e.grants:
		return l, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// grant makes the campaigning controller win; it blocks until it campaigns.
func (e *fakeElector) grant(t *testing.T) *fakeLeadership {
	t.Helper()
	l := &fakeLeadership{done: make(chan struct{})}
	select {
	case e.grants <- l:
	case <-t.Context().Done():
	}
	return l
}

type fakeLeadership struct {
	once     sync.Once
	done     chan struct{}
	resigned atomic.Bool
}

func (l *fakeLeadership) Done() <-chan struct{} { return l.done }

func (l *fakeLeadership) Resign(context.Context) error {
	l.resigned.Store(true)
	l.revoke()
	return nil
}

func (l *fakeLeadership) revoke() { l.once.Do(func() { close(l.done) }) }

// assertNotController calls every method with a valid request and wants
// NOT_CONTROLLER, and no change in the store.
func assertNotController(t *testing.T, h *harness) {
	t.Helper()
	ctx := context.Background()
	before := h.snapshot()
	one := int32(1)
	calls := []struct {
		name string
		call func() (replicadv1.ErrorCode, error)
	}{
		{"RegisterBroker", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.RegisterBroker(ctx, &replicadv1.RegisterBrokerRequest{BrokerId: 1, Host: brokerHost(1), Port: brokerPort(1)})
			return r.GetErrorCode(), err
		}},
		{"BrokerHeartbeat", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: h.epoch[1]})
			return r.GetErrorCode(), err
		}},
		{"AlterPartition", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.AlterPartition(ctx, h.alterReq(1, h.item(0, 0, 1)))
			return r.GetErrorCode(), err
		}},
		{"CreateTopic", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "new", Partitions: 1, ReplicationFactor: 1})
			return r.GetErrorCode(), err
		}},
		{"DeleteTopic", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: "t"})
			return r.GetErrorCode(), err
		}},
		{"CreatePartitions", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.CreatePartitions(ctx, &replicadv1.CreatePartitionsRequest{Topic: "t", Count: 9})
			if len(r.GetPartitions()) > 0 {
				t.Errorf("standby CreatePartitions answered %v", r)
			}
			return r.GetErrorCode(), err
		}},
		{"ElectLeader", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0, Leader: &one})
			return r.GetErrorCode(), err
		}},
		{"ElectLeaders", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.ElectLeaders(ctx, &replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED})
			if len(r.GetResults()) > 0 {
				t.Errorf("standby ElectLeaders answered %v", r)
			}
			return r.GetErrorCode(), err
		}},
		{"ReassignPartition", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{1}})
			return r.GetErrorCode(), err
		}},
		{"DescribeCluster", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
			if len(r.GetBrokers()) > 0 || len(r.GetPartitions()) > 0 {
				t.Errorf("standby DescribeCluster answered %v", r)
			}
			return r.GetErrorCode(), err
		}},
		{"ControlledShutdown", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.ControlledShutdown(ctx, &replicadv1.ControlledShutdownRequest{BrokerId: 1, BrokerEpoch: h.epoch[1]})
			return r.GetErrorCode(), err
		}},
		{"AllocateProducerIds", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.AllocateProducerIds(ctx, &replicadv1.AllocateProducerIdsRequest{BrokerId: 1, BrokerEpoch: h.epoch[1]})
			return r.GetErrorCode(), err
		}},
		{"BumpProducerEpoch", func() (replicadv1.ErrorCode, error) {
			r, err := h.c.BumpProducerEpoch(ctx, &replicadv1.BumpProducerEpochRequest{BrokerId: 1, BrokerEpoch: h.epoch[1], ProducerId: 1})
			return r.GetErrorCode(), err
		}},
	}
	for _, c := range calls {
		code, err := c.call()
		if err != nil || code != replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER {
			t.Errorf("%s on a standby controller: %v %v, want NOT_CONTROLLER", c.name, code, err)
		}
	}
	h.c.expireSessions(ctx) // a stray session check does nothing either
	// Nor a stray leader rebalance check.
	h.c.rebalanceLeaders(ctx)
	h.assertUnchanged(before)
}

func TestStandbyAnswersNotController(t *testing.T) {
	// Never started.
	h := newHarness(t)
	assertNotController(t, h)

	// Campaigning, not elected.
	e := newFakeElector()
	h = newHarness(t, withElector(e))
	h.startRun()
	waitFor(t, "the controller to campaign", func() bool { return e.campaigns.Load() > 0 })
	assertNotController(t, h)
	if a, _ := h.c.Active(); a {
		t.Errorf("active without winning the election")
	}
}

func TestControllerEpochRisesOnRestart(t *testing.T) {
	dir := t.TempDir()
	var epochs []int32
	var brokerEpoch int64
	for i := range 3 {
		st, err := store.OpenBolt(dir)
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, withStore(st))
		h.start()
		_, epoch := h.c.Active()
		epochs = append(epochs, epoch)
		if i > 0 && epoch <= epochs[i-1] {
			t.Errorf("controller epoch after restart %d is %d, not above %d", i, epoch, epochs[i-1])
		}
		if i == 0 {
			h.register(1)
			h.register(2)
			h.createTopic("t", 1, 2)
			brokerEpoch = h.epoch[1]
		} else {
			// The brokers registered with an earlier controller are sent
			// their full state, stamped with the new epoch; their sessions
			// and broker epochs carry over.
			h.epoch[1], h.epoch[2] = brokerEpoch, brokerEpoch+1
			p := h.part("t", 0)
			for _, id := range []int32{1, 2} {
				if req := waitLAI(t, h, id, p); req.GetBrokerEpoch() != h.epoch[id] {
					t.Errorf("LeaderAndIsr after restart stamped broker epoch %d, want %d", req.GetBrokerEpoch(), h.epoch[id])
				}
				waitFor(t, "an UpdateMetadata with the new controller epoch", func() bool {
					for _, um := range h.fake(id).updateMetadatas() {
						if um.GetControllerEpoch() == epoch && len(um.GetLiveBrokers()) == 2 && len(um.GetPartitionStates()) == 1 {
							return true
						}
					}
					return false
				})
			}
			h.heartbeat(1, 2)
		}
		h.stop()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestControllerEpochRisesOnReElection(t *testing.T) {
	e := newFakeElector()
	h := newHarness(t, withElector(e))
	h.startRun()
	l1 := e.grant(t)
	waitFor(t, "the controller to act", func() bool { a, _ := h.c.Active(); return a })
	_, e1 := h.c.Active()
	h.register(1)
	h.register(2)
	h.createTopic("t", 1, 2)

	l1.revoke()
	waitFor(t, "the controller to stop acting", func() bool { a, _ := h.c.Active(); return !a })
	assertNotController(t, h)
	if l1.resigned.Load() {
		t.Errorf("resigned a leadership that was lost")
	}

	h.fake(1).reset()
	h.fake(2).reset()
	l2 := e.grant(t)
	waitFor(t, "the controller to act again", func() bool { a, _ := h.c.Active(); return a })
	_, e2 := h.c.Active()
	if e2 <= e1 {
		t.Fatalf("controller epoch after re-election %d, want > %d", e2, e1)
	}
	p := h.part("t", 0)
	for _, id := range []int32{1, 2} {
		waitLAI(t, h, id, p) // stamped with e2
		waitFor(t, "an UpdateMetadata with the new controller epoch", func() bool {
			for _, um := range h.fake(id).updateMetadatas() {
				if um.GetControllerEpoch() == e2 {
					return true
				}
			}
			return false
		})
		for _, r := range h.fake(id).leaderAndIsrs() {
			if r.GetControllerEpoch() != e2 {
				t.Errorf("after re-election broker %d was sent a LeaderAndIsr at controller epoch %d", id, r.GetControllerEpoch())
			}
		}
	}
	h.heartbeat(1, 2)
	h.stop()
	if !l2.resigned.Load() {
		t.Errorf("the controller did not resign its leadership when stopped")
	}
}

func TestDeposedByBrokerStopsActing(t *testing.T) {
	e := newFakeElector()
	h := newHarness(t, withElector(e))
	// Broker 2 has heard from a newer controller.
	f := h.fake(2)
	f.mu.Lock()
	f.minControllerEpoch = 1 << 20
	f.mu.Unlock()
	h.startRun()
	e.grant(t)
	waitFor(t, "the controller to act", func() bool { a, _ := h.c.Active(); return a })
	h.register(1)
	h.register(2)
	resp, err := h.c.CreateTopic(context.Background(), &replicadv1.CreateTopicRequest{Topic: "t", Partitions: 1, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp // may answer NONE or NOT_CONTROLLER, depending on when the news arrives
	waitFor(t, "the deposed controller to stop acting", func() bool { a, _ := h.c.Active(); return !a })
	assertNotController(t, h)
	waitFor(t, "the deposed controller to campaign again", func() bool { return e.campaigns.Load() >= 2 })
}

// A broker that took a controller epoch no controller holds (100, from a
// hand-made request) answers STALE_CONTROLLER_EPOCH naming it. The
// controller moves its own epoch past it in one step, through the store, and
// sends its state at the new epoch, instead of raising its epoch by one per
// activation for as long as it takes (issue 10, path 7).
func TestControllerMovesPastABrokersHigherEpochInOneStep(t *testing.T) {
	h := newHarness(t)
	f := h.fake(2)
	f.mu.Lock()
	f.minControllerEpoch, f.staleAnswerEpoch = 100, 100
	f.mu.Unlock()
	h.start()
	h.register(1)
	h.register(2)
	h.createTopic("t", 1, 2)
	waitFor(t, "broker 2 to take a LeaderAndIsr past controller epoch 100", func() bool {
		for _, r := range f.leaderAndIsrs() {
			if r.GetControllerEpoch() > 100 {
				return true
			}
		}
		return false
	})
	waitFor(t, "the controller to act at epoch 101", func() bool { a, e := h.c.Active(); return a && e == 101 })
	if e, err := h.st.ControllerEpoch(context.Background()); err != nil || e != 101 {
		t.Fatalf("stored controller epoch %d (%v), want 101: moved past 100 in one step", e, err)
	}
}

func TestValidation(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 1, 3)
	ctx := context.Background()
	neg := int32(-1)
	item := func(mod func(*replicadv1.AlterPartitionItem)) *replicadv1.AlterPartitionItem {
		it := h.item(0, 0, 1, 2)
		if mod != nil {
			mod(it)
		}
		return it
	}
	long := strings.Repeat("x", 300)
	tests := []struct {
		field string
		call  func() error
	}{
		{"broker_id", func() error {
			_, err := h.c.RegisterBroker(ctx, &replicadv1.RegisterBrokerRequest{BrokerId: -1, Host: "h", Port: 1})
			return err
		}},
		{"host", func() error {
			_, err := h.c.RegisterBroker(ctx, &replicadv1.RegisterBrokerRequest{BrokerId: 1, Port: 1})
			return err
		}},
		{"port", func() error {
			_, err := h.c.RegisterBroker(ctx, &replicadv1.RegisterBrokerRequest{BrokerId: 1, Host: "h", Port: 0})
			return err
		}},
		{"port", func() error {
			_, err := h.c.RegisterBroker(ctx, &replicadv1.RegisterBrokerRequest{BrokerId: 1, Host: "h", Port: 65536})
			return err
		}},
		{"broker_id", func() error {
			_, err := h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: -1, BrokerEpoch: 1})
			return err
		}},
		{"broker_id", func() error {
			r := h.alterReq(1, item(nil))
			r.BrokerId = -1
			_, err := h.c.AlterPartition(ctx, r)
			return err
		}},
		{"partitions[0].topic", func() error {
			_, err := h.c.AlterPartition(ctx, h.alterReq(1, item(func(it *replicadv1.AlterPartitionItem) { it.Topic = "" })))
			return err
		}},
		{"partitions[1].topic", func() error {
			_, err := h.c.AlterPartition(ctx, h.alterReq(1, item(nil), item(func(it *replicadv1.AlterPartitionItem) { it.Topic = "a/b" })))
			return err
		}},
		{"partitions[0].partition", func() error {
			_, err := h.c.AlterPartition(ctx, h.alterReq(1, item(func(it *replicadv1.AlterPartitionItem) { it.Partition = -1 })))
			return err
		}},
		{"partitions[1]", func() error {
			_, err := h.c.AlterPartition(ctx, h.alterReq(1, item(nil), item(nil)))
			return err
		}},
		{"partitions[0].new_isr", func() error {
			_, err := h.c.AlterPartition(ctx, h.alterReq(1, item(func(it *replicadv1.AlterPartitionItem) { it.NewIsr = nil })))
			return err
		}},
		{"topic", func() error {
			_, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "", Partitions: 1, ReplicationFactor: 1})
			return err
		}},
		{"topic", func() error {
			_, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: long, Partitions: 1, ReplicationFactor: 1})
			return err
		}},
		{"topic", func() error {
			_, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "..", Partitions: 1, ReplicationFactor: 1})
			return err
		}},
		{"partitions", func() error {
			_, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "n", Partitions: 0, ReplicationFactor: 1})
			return err
		}},
		{"partitions", func() error {
			_, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "n", Partitions: maxPartitionsPerTopic + 1, ReplicationFactor: 1})
			return err
		}},
		{"replication_factor", func() error {
			_, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "n", Partitions: 1, ReplicationFactor: 0})
			return err
		}},
		{"topic", func() error {
			_, err := h.c.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: "t t"})
			return err
		}},
		// A 249-character topic leaves room for 5 partition digits in its
		// 255-byte dir names (issue 12): 100001 partitions do not fit
		// (nor does any topic take more than 100000).
		{"partitions", func() error {
			_, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: strings.Repeat("x", 249), Partitions: 100_001, ReplicationFactor: 1})
			return err
		}},
		{"topic", func() error {
			_, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: ""})
			return err
		}},
		{"partition", func() error {
			_, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: -1})
			return err
		}},
		{"leader", func() error {
			_, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0, Leader: &neg})
			return err
		}},
		{"topic", func() error {
			_, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "", Replicas: []int32{1}})
			return err
		}},
		{"partition", func() error {
			_, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: -1, Replicas: []int32{1}})
			return err
		}},
		{"replicas", func() error {
			_, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0})
			return err
		}},
		{"replicas[1]", func() error {
			_, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{1, -2}})
			return err
		}},
		{"replicas[2]", func() error {
			_, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: 0, Replicas: []int32{1, 2, 1}})
			return err
		}},
		{"broker_id", func() error {
			_, err := h.c.ControlledShutdown(ctx, &replicadv1.ControlledShutdownRequest{BrokerId: -1, BrokerEpoch: h.epoch[1]})
			return err
		}},
	}
	before := h.snapshot()
	for i, tt := range tests {
		err := tt.call()
		st, _ := status.FromError(err)
		if err == nil || st.Code() != codes.InvalidArgument {
			t.Errorf("case %d (%s): error %v, want InvalidArgument", i, tt.field, err)
			continue
		}
		if !strings.HasPrefix(st.Message(), tt.field+":") {
			t.Errorf("case %d: message %q does not name the field %s", i, st.Message(), tt.field)
		}
	}
	h.assertUnchanged(before)
}

// TestActivationFinishesFencing: a controller that stopped between fencing
// a broker and moving its partitions left a fenced broker leading; the next
// one moves them when it starts, before anyone is told anything.
func TestActivationFinishesFencing(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory()
	epochs := make(map[int32]int64)
	for id := int32(1); id <= 3; id++ {
		b, err := st.RegisterBroker(ctx, store.Broker{ID: id, Host: brokerHost(id), Port: brokerPort(id)})
		if err != nil {
			t.Fatal(err)
		}
		epochs[id] = b.Epoch
	}
	if err := st.CreateTopic(ctx, "t", []store.Partition{
		{Partition: 0, TopicID: "t-id", Leader: 1, ISR: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}},
		{Partition: 1, TopicID: "t-id", Leader: 2, ISR: []int32{2, 1}, Replicas: []int32{2, 1}},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := st.UpdateBroker(ctx, store.Broker{ID: 1, Host: brokerHost(1), Port: brokerPort(1), Epoch: epochs[1], Fenced: true}); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withStore(st))
	h.epoch = epochs
	h.start()
	p0 := wantPartition(t, h, "t", 0, 2, 1, 1, 2, 3)
	p1 := wantPartition(t, h, "t", 1, 2, 1, 1, 2)
	waitLAI(t, h, 2, p0)
	waitLAI(t, h, 2, p1)
	waitLAI(t, h, 3, p0)
	if n := len(h.fake(1).leaderAndIsrs()) + len(h.fake(1).updateMetadatas()); n != 0 {
		t.Errorf("the fenced broker was sent %d requests", n)
	}
	resp, err := h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: epochs[1]})
	if err != nil || !resp.GetIsFenced() {
		t.Errorf("heartbeat of the fenced broker: %v %v, want is_fenced", resp, err)
	}
	h.heartbeat(2, 3)
}

// TestRunChecksSessions: Run's own session check fences a silent broker
// once the clock passed the session timeout, without the test calling
// expireSessions.
func TestRunChecksSessions(t *testing.T) {
	h := startCluster(t, 2)
	h.createTopic("t", 1, 2) // [1 2], leader 1
	h.clk.Advance(testSessionTimeout / 2)
	h.heartbeat(2)
	h.clk.Advance(testSessionTimeout/2 + time.Millisecond)
	waitFor(t, "Run to fence the silent broker", func() bool {
		p, err := h.st.Partition(context.Background(), "t", 0)
		return err == nil && p.Leader == 2
	})
	wantPartition(t, h, "t", 0, 2, 1, 1, 2)
}

// TestConcurrentCalls runs every kind of call at once (under -race) and then
// checks the invariants: the controller's view is the store's, every leader
// is in its ISR, every ISR is within the replicas, and (checked by the
// fakes) nothing was sent before it was stored.
func TestConcurrentCalls(t *testing.T) {
	h := startCluster(t, 4)
	ctx := context.Background()
	h.createTopic("a", 8, 3)
	h.createTopic("b", 4, 2)
	epochs := make(map[int32]*atomic.Int64)
	for id, e := range h.epoch {
		epochs[id] = new(atomic.Int64)
		epochs[id].Store(e)
	}
	const rounds = 200 // calls per goroutine
	var wg sync.WaitGroup
	loop := func(f func(i int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				f(i)
			}
		}()
	}
	for id := int32(1); id <= 4; id++ {
		loop(func(int) {
			_, _ = h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: epochs[id].Load()})
		})
	}
	loop(func(i int) {
		id := int32(i%4) + 1
		resp, err := h.c.RegisterBroker(ctx, &replicadv1.RegisterBrokerRequest{BrokerId: id, Host: brokerHost(id), Port: brokerPort(id)})
		if err == nil && resp.GetErrorCode() == codeNone {
			epochs[id].Store(resp.GetBrokerEpoch())
		}
	})
	loop(func(i int) {
		leader := int32(i%4) + 1
		_, _ = h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "a", Partition: int32(i % 8), Leader: &leader})
	})
	loop(func(i int) {
		dc, err := h.c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
		if err != nil {
			return
		}
		// Each leader proposes to shrink its ISR to itself, or to grow it back.
		for _, p := range dc.GetPartitions() {
			if p.GetLeader() < 0 {
				continue
			}
			isr := []*replicadv1.BrokerEpoch{{BrokerId: p.GetLeader(), BrokerEpoch: epochs[p.GetLeader()].Load()}}
			if i%2 == 0 {
				isr = isr[:0]
				for _, r := range p.GetReplicas() {
					isr = append(isr, &replicadv1.BrokerEpoch{BrokerId: r, BrokerEpoch: epochs[r].Load()})
				}
			}
			_, _ = h.c.AlterPartition(ctx, &replicadv1.AlterPartitionRequest{BrokerId: p.GetLeader(), BrokerEpoch: epochs[p.GetLeader()].Load(),
				Partitions: []*replicadv1.AlterPartitionItem{{Topic: p.GetTopic(), Partition: p.GetPartition(),
					LeaderEpoch: p.GetLeaderEpoch(), PartitionEpoch: p.GetPartitionEpoch(), NewIsr: isr}}})
		}
	})
	loop(func(i int) {
		h.clk.Advance(testSessionTimeout / 4)
		h.c.expireSessions(ctx)
	})
	loop(func(i int) {
		if i%2 == 0 {
			_, _ = h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "b", Partition: int32(i % 4), Replicas: []int32{int32(i%4) + 1, int32((i+1)%4) + 1}})
		} else {
			_, _ = h.c.ControlledShutdown(ctx, &replicadv1.ControlledShutdownRequest{BrokerId: int32(i%4) + 1, BrokerEpoch: epochs[int32(i%4)+1].Load()})
		}
	})
	wg.Wait()

	dc, err := h.c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := h.st.Partitions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(dc.GetPartitions()) {
		t.Fatalf("controller knows %d partitions, the store %d", len(dc.GetPartitions()), len(stored))
	}
	for i, p := range stored {
		cp := dc.GetPartitions()[i]
		if cp.GetLeader() != p.Leader || cp.GetLeaderEpoch() != p.LeaderEpoch || cp.GetPartitionEpoch() != p.PartitionEpoch ||
			!slices.Equal(cp.GetIsr(), p.ISR) || !slices.Equal(cp.GetReplicas(), p.Replicas) {
			t.Errorf("controller's view %v differs from the store's %+v", cp, p)
		}
		if p.Leader != store.NoLeader && !slices.Contains(p.ISR, p.Leader) {
			t.Errorf("%s-%d: leader %d not in ISR %v", p.Topic, p.Partition, p.Leader, p.ISR)
		}
		if len(p.ISR) == 0 {
			t.Errorf("%s-%d: empty ISR", p.Topic, p.Partition)
		}
		for _, r := range p.ISR {
			if !slices.Contains(p.Replicas, r) {
				t.Errorf("%s-%d: ISR %v not within replicas %v", p.Topic, p.Partition, p.ISR, p.Replicas)
			}
		}
	}
}
