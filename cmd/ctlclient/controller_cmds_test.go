package main

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func wantRequest(t *testing.T, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("controller got %v\nwant %v", got, want)
	}
}

func wantContains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Fatalf("%s lacks %q:\n%s", what, sub, s)
		}
	}
}

// wantJSON parses out as protojson into m and compares it with want.
func wantJSON(t *testing.T, out string, m, want proto.Message) {
	t.Helper()
	if err := protojson.Unmarshal([]byte(out), m); err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
	if !proto.Equal(m, want) {
		t.Fatalf("json parsed as %v\nwant %v", m, want)
	}
}

func orders(p int32, leader int32, replicas ...int32) *replicadv1.ClusterPartition {
	return &replicadv1.ClusterPartition{Topic: "orders", Partition: p, Leader: leader, LeaderEpoch: 1, PartitionEpoch: 2, Isr: replicas, Replicas: replicas}
}

// TestCreateTopic ensures create-topic sends its flags, prints the error code
// and the partitions (table) or the answer (json), and exits 1 with the
// answer's code and message when it is not NONE.
func TestCreateTopic(t *testing.T) {
	f := newFakeController()
	f.createResp = &replicadv1.CreateTopicResponse{Partitions: []*replicadv1.ClusterPartition{orders(1, 2, 2, 3, 1), orders(0, 1, 1, 2, 3)}}
	addr := startController(t, f)

	r := ctl(t, "", "", "--controller", addr, "create-topic", "--topic", "orders", "--partitions", "2", "--replication-factor", "3")
	wantCode(t, r, 0)
	wantRequest(t, f.lastRequest(), &replicadv1.CreateTopicRequest{Topic: "orders", Partitions: 2, ReplicationFactor: 3})
	got := lines(r.stdout)
	want := []string{
		"TOPIC   ERROR",
		"orders  NONE",
		"",
		"TOPIC   PARTITION  LEADER  EPOCH  P-EPOCH  ISR    REPLICAS",
		"orders  0          1       1      2        1,2,3  1,2,3",
		"orders  1          2       1      2        2,3,1  2,3,1",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("table:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}

	r = ctl(t, "", "", "create-topic", "--topic", "orders", "--partitions", "2", "--replication-factor", "3", "--controller", addr, "-o", "json")
	wantCode(t, r, 0)
	wantJSON(t, r.stdout, &replicadv1.CreateTopicResponse{}, f.createResp)
	wantContains(t, "json", r.stdout, `"partitionEpoch": 2`)

	f.mu.Lock()
	f.createResp = &replicadv1.CreateTopicResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS, ErrorMessage: "topic orders exists"}
	f.mu.Unlock()
	r = ctl(t, "", "", "--controller", addr, "create-topic", "--topic", "orders", "--partitions", "2", "--replication-factor", "3")
	wantCode(t, r, 1)
	wantContains(t, "stdout", r.stdout, "orders  TOPIC_ALREADY_EXISTS")
	wantContains(t, "stderr", r.stderr, "create-topic orders: TOPIC_ALREADY_EXISTS: topic orders exists")
}

// TestDeleteTopic ensures delete-topic sends the topic and exits by the answer's code.
func TestDeleteTopic(t *testing.T) {
	f := newFakeController()
	addr := startController(t, f)
	r := ctl(t, "", "", "--controller", addr, "delete-topic", "--topic", "orders")
	wantCode(t, r, 0)
	wantRequest(t, f.lastRequest(), &replicadv1.DeleteTopicRequest{Topic: "orders"})
	if r.stdout != "TOPIC   ERROR\norders  NONE\n" {
		t.Fatalf("table %q", r.stdout)
	}
	f.mu.Lock()
	f.deleteResp = &replicadv1.DeleteTopicResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}
	f.mu.Unlock()
	r = ctl(t, "", "", "--controller", addr, "delete-topic", "--topic", "orders", "-o", "json")
	wantCode(t, r, 1)
	wantJSON(t, r.stdout, &replicadv1.DeleteTopicResponse{}, f.deleteResp)
	wantContains(t, "stderr", r.stderr, "delete-topic orders: UNKNOWN_TOPIC_OR_PARTITION")
}

// TestElect ensures elect sends --leader only when given, prints the
// partition the answer carries, and exits 1 on an error code.
func TestElect(t *testing.T) {
	f := newFakeController()
	f.electResp = &replicadv1.ElectLeaderResponse{Partition: orders(3, 2, 2, 1)}
	addr := startController(t, f)

	r := ctl(t, "", "", "--controller", addr, "elect", "--topic", "orders", "--partition", "3", "--leader", "2")
	wantCode(t, r, 0)
	leader := int32(2)
	wantRequest(t, f.lastRequest(), &replicadv1.ElectLeaderRequest{Topic: "orders", Partition: 3, Leader: &leader})
	wantContains(t, "table", r.stdout, "TOPIC   PARTITION  ERROR\norders  3          NONE\n",
		"orders  3          2       1      2        2,1  2,1")

	r = ctl(t, "", "", "--controller", addr, "elect", "--topic", "orders", "--partition", "3", "-o", "json")
	wantCode(t, r, 0)
	wantRequest(t, f.lastRequest(), &replicadv1.ElectLeaderRequest{Topic: "orders", Partition: 3}) // preferred: no leader field
	wantJSON(t, r.stdout, &replicadv1.ElectLeaderResponse{}, f.electResp)

	f.mu.Lock()
	f.electResp = &replicadv1.ElectLeaderResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED, Partition: orders(3, 2, 2, 1)}
	f.mu.Unlock()
	r = ctl(t, "", "", "--controller", addr, "elect", "--topic", "orders", "--partition", "3", "--leader", "2")
	wantCode(t, r, 1)
	wantContains(t, "stdout", r.stdout, "ELECTION_NOT_NEEDED")
	wantContains(t, "stderr", r.stderr, "elect orders-3: ELECTION_NOT_NEEDED")
}

func clusterWith(parts ...*replicadv1.ClusterPartition) *replicadv1.DescribeClusterResponse {
	return &replicadv1.DescribeClusterResponse{
		ControllerEpoch: 7, SessionTimeoutMs: 6000,
		Brokers: []*replicadv1.BrokerDescription{
			{Id: 2, Host: "127.0.0.1", Port: 9092, BrokerEpoch: 12, Alive: false},
			{Id: 1, Host: "127.0.0.1", Port: 9091, BrokerEpoch: 11, Alive: true},
		},
		Partitions: parts,
	}
}

// TestDescribeCluster ensures the table lists the controller's settings,
// the brokers and the partitions (ADDING and REMOVING only during a
// reassignment; OFFLINE the replicas on brokers not alive or not known),
// and json is the answer.
func TestDescribeCluster(t *testing.T) {
	f := newFakeController()
	var resp atomic.Pointer[replicadv1.DescribeClusterResponse]
	resp.Store(clusterWith(orders(1, -1), orders(0, 1, 1, 2)))
	f.describe = func(int) *replicadv1.DescribeClusterResponse { return resp.Load() }
	addr := startController(t, f)

	r := ctl(t, "", "", "--controller", addr, "describe-cluster")
	wantCode(t, r, 0)
	want := `controller epoch 7, session timeout 6s, unclean leader election off

BROKER  ADDRESS         BROKER-EPOCH  ALIVE
1       127.0.0.1:9091  11            true
2       127.0.0.1:9092  12            false

TOPIC   PARTITION  LEADER  EPOCH  P-EPOCH  ISR  REPLICAS  OFFLINE
orders  0          1       1      2        1,2  1,2       2
orders  1          none    1      2        -    -         -
`
	if r.stdout != want {
		t.Fatalf("table:\n%s\nwant:\n%s", r.stdout, want)
	}

	moving := orders(0, 1, 1, 2, 3)
	moving.Isr = []int32{1, 2}
	moving.AddingReplicas, moving.RemovingReplicas = []int32{3}, []int32{1}
	resp.Store(clusterWith(moving))
	r = ctl(t, "", "", "--controller", addr, "describe-cluster")
	wantCode(t, r, 0)
	wantContains(t, "table", r.stdout,
		"TOPIC   PARTITION  LEADER  EPOCH  P-EPOCH  ISR  REPLICAS  OFFLINE  ADDING  REMOVING\norders  0          1       1      2        1,2  1,2,3     2,3      3       1\n")

	r = ctl(t, "", "", "--controller", addr, "describe-cluster", "-o", "json")
	wantCode(t, r, 0)
	wantJSON(t, r.stdout, &replicadv1.DescribeClusterResponse{}, resp.Load())
	wantContains(t, "json", r.stdout, `"controllerEpoch": 7`, `"brokerEpoch": "11"`, `"addingReplicas": [`)
}

// TestControllerFailover ensures a call moves on from a standby
// (NOT_CONTROLLER) and from an unreachable address to the active controller,
// remembers it for the command's later calls, and fails naming every
// address when none is active within --timeout.
func TestControllerFailover(t *testing.T) {
	standby := newFakeController()
	standby.standby = true
	active := newFakeController()
	active.describe = func(int) *replicadv1.DescribeClusterResponse { return clusterWith(orders(0, 1, 1)) }
	standbyAddr, activeAddr, dead := startController(t, standby), startController(t, active), deadAddr(t)

	r := ctl(t, "", "", "--controller", standbyAddr+","+activeAddr, "describe-cluster", "-o", "json")
	wantCode(t, r, 0)
	wantJSON(t, r.stdout, &replicadv1.DescribeClusterResponse{}, clusterWith(orders(0, 1, 1)))
	if s, a := standby.callCount(""), active.callCount(""); s != 1 || a != 1 {
		t.Fatalf("standby got %d calls, active %d; want 1 each", s, a)
	}

	// An unreachable address first, then the standby: both are passed over,
	// and reassign's later calls go straight to the controller that answered.
	active.reassignResp = &replicadv1.ReassignPartitionResponse{Partition: orders(0, 1, 1)}
	r = ctl(t, "", "", "--controller", dead+", "+standbyAddr+","+activeAddr, "reassign", "--topic", "orders", "--partition", "0", "--replicas", "1")
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.stdout, "orders-0 already has replicas 1: nothing changed")
	if s := standby.callCount(""); s != 2 {
		t.Fatalf("standby got %d calls in all, want 2 (one per command)", s)
	}
	if a := active.callCount("ReassignPartition"); a != 1 {
		t.Fatalf("active got %d ReassignPartition calls", a)
	}

	// An address that accepts connections but never answers gets only its
	// share of --timeout: the active controller after it still answers.
	hung := hungAddr(t)
	start := time.Now()
	r = ctl(t, "", "", "--controller", hung+","+activeAddr, "--timeout", "2s", "describe-cluster")
	wantCode(t, r, 0)
	if el := time.Since(start); el > 1900*time.Millisecond {
		t.Fatalf("took %s: the hung address held the whole --timeout", el)
	}

	start = time.Now()
	r = ctl(t, "", "", "--controller", standbyAddr+","+dead, "--timeout", "1500ms", "delete-topic", "--topic", "orders")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "no active controller", standbyAddr+": NOT_CONTROLLER", dead+": Unavailable")
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("gave up after %s with --timeout 1500ms", el)
	}
	if n := standby.callCount("DeleteTopic"); n < 2 {
		t.Fatalf("standby asked %d times; rounds should repeat until --timeout", n)
	}
}

// reassigning is orders-0 moving from 1,2,3 to 2,3,4 with the given ISR.
func reassigning(isr ...int32) *replicadv1.ClusterPartition {
	p := orders(0, 1, 1, 2, 3, 4)
	p.Isr = isr
	p.AddingReplicas, p.RemovingReplicas = []int32{4}, []int32{1}
	return p
}

// TestReassignWaitsUntilDone ensures reassign sends the new replicas, then
// prints a progress line at each change until the partition has exactly the
// new replicas and nothing left to add or remove.
func TestReassignWaitsUntilDone(t *testing.T) {
	f := newFakeController()
	f.reassignResp = &replicadv1.ReassignPartitionResponse{Partition: reassigning(1, 2, 3)}
	f.describe = func(n int) *replicadv1.DescribeClusterResponse {
		n-- // the first call is reassign's look before it asks (the partition is moving: no no-op)
		switch {
		case n <= 2:
			return clusterWith(reassigning(1, 2, 3)) // 4 catching up
		case n == 3:
			return clusterWith(reassigning(1, 2, 3, 4)) // caught up; the controller finishes
		case n == 4:
			return clusterWith(orders(0, 2, 3, 4)) // replicas 3,4 only: not the target yet
		default:
			done := orders(0, 2, 2, 3, 4)
			done.Isr = []int32{2, 3, 4}
			return clusterWith(done)
		}
	}
	addr := startController(t, f)
	r := ctl(t, "", "", "--controller", addr, "reassign", "--topic", "orders", "--partition", "0", "--replicas", "2,3,4")
	wantCode(t, r, 0)
	if got := f.callCount("ReassignPartition"); got != 1 {
		t.Fatalf("%d ReassignPartition calls", got)
	}
	f.mu.Lock()
	wantRequest(t, f.requests[1], &replicadv1.ReassignPartitionRequest{Topic: "orders", Partition: 0, Replicas: []int32{2, 3, 4}})
	f.mu.Unlock()
	wantContains(t, "stdout", r.stdout, "TOPIC   PARTITION  ERROR\norders  0          NONE\n", "ADDING  REMOVING")
	progress := lines(r.stdout[strings.Index(r.stdout, "adding"):])
	want := []string{
		"adding 4, removing 1: ISR 1,2,3, waiting for 4",
		"adding 4, removing 1: ISR 1,2,3,4, waiting for the controller to finish",
		"replicas 3,4, ISR 3,4, waiting for replicas 2,3,4",
		"done: replicas 2,3,4, ISR 2,3,4",
	}
	if strings.Join(progress, "\n") != strings.Join(want, "\n") {
		t.Fatalf("progress:\n%s\nwant:\n%s", strings.Join(progress, "\n"), strings.Join(want, "\n"))
	}
	if n := f.callCount("DescribeCluster"); n != 6 {
		t.Fatalf("%d DescribeCluster calls, want 6 (a look before, then 5 polls)", n)
	}

	// --no-wait returns after the answer; -o json prints only the answer.
	r = ctl(t, "", "", "--controller", addr, "reassign", "--topic", "orders", "--partition", "0", "--replicas", "2,3,4", "--no-wait", "-o", "json")
	wantCode(t, r, 0)
	wantJSON(t, r.stdout, &replicadv1.ReassignPartitionResponse{}, f.reassignResp)
	if n := f.callCount("DescribeCluster"); n != 7 {
		t.Fatalf("--no-wait polled: %d DescribeCluster calls, want 7 (one more look before)", n)
	}

	f.mu.Lock()
	f.reassignResp = &replicadv1.ReassignPartitionResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_REASSIGNMENT_IN_PROGRESS, ErrorMessage: "already moving"}
	f.mu.Unlock()
	r = ctl(t, "", "", "--controller", addr, "reassign", "--topic", "orders", "--partition", "0", "--replicas", "2,3,4")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "reassign orders-0: REASSIGNMENT_IN_PROGRESS: already moving")
	if n := f.callCount("DescribeCluster"); n != 8 {
		t.Fatalf("a refused reassignment was waited for: %d DescribeCluster calls, want 8 (one more look before)", n)
	}
}

// TestReassignTimeout ensures reassign exits 1 once --wait-timeout passes
// with the added replica still catching up.
func TestReassignTimeout(t *testing.T) {
	f := newFakeController()
	f.reassignResp = &replicadv1.ReassignPartitionResponse{Partition: reassigning(1, 2, 3)}
	f.describe = func(int) *replicadv1.DescribeClusterResponse { return clusterWith(reassigning(1, 2, 3)) }
	addr := startController(t, f)
	start := time.Now()
	r := ctl(t, "", "", "--controller", addr, "reassign", "--topic", "orders", "--partition", "0", "--replicas", "2,3,4", "--wait-timeout", "1200ms")
	el := time.Since(start)
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "reassign orders-0: not done after 1.2s; last seen: adding 4, removing 1: ISR 1,2,3, waiting for 4")
	if strings.Count(r.stdout, "waiting for 4") != 1 {
		t.Fatalf("an unchanged state should print once:\n%s", r.stdout)
	}
	if n := f.callCount("DescribeCluster") - 1; n < 2 || n > 4 { // the look before, then the polls
		t.Fatalf("%d polls in 1.2s at 500ms", n)
	}
	if el < time.Second || el > 10*time.Second {
		t.Fatalf("gave up after %s", el)
	}
}

// twoBrokers serves broker A (id 1) and B (id 2) and a controller whose
// DescribeCluster names *leader (1 or 2) as the leader of orders-0 (and
// orders-1 led by B when withP1).
type twoBrokers struct {
	a, b         *switchBroker
	aAddr, bAddr string
	ctl          *fakeController
	ctlAddr      string
	leader       atomic.Int32
}

func startTwoBrokers(t *testing.T, withP1 bool) *twoBrokers {
	t.Helper()
	tb := &twoBrokers{a: newSwitchBroker(), b: newSwitchBroker(), ctl: newFakeController()}
	tb.leader.Store(1)
	tb.aAddr, tb.bAddr = startBroker(t, tb.a), startBroker(t, tb.b)
	tb.ctl.describe = func(int) *replicadv1.DescribeClusterResponse {
		resp := &replicadv1.DescribeClusterResponse{
			ControllerEpoch: 1,
			Brokers:         []*replicadv1.BrokerDescription{brokerDesc(t, 1, tb.aAddr), brokerDesc(t, 2, tb.bAddr)},
			Partitions:      []*replicadv1.ClusterPartition{orders(0, tb.leader.Load(), 1, 2)},
		}
		if withP1 {
			resp.Partitions = append(resp.Partitions, orders(1, 2, 2, 1))
		}
		return resp
	}
	tb.ctlAddr = startController(t, tb.ctl)
	return tb
}

// TestProduceWithControllerFollowsLeaderChange ensures produce with
// --controller sends to the leader the controller names (not --broker) and,
// answered NOT_LEADER_OR_FOLLOWER, asks the controller again and sends to
// the new leader, printing only the final answer.
func TestProduceWithControllerFollowsLeaderChange(t *testing.T) {
	tb := startTwoBrokers(t, false)
	tb.a.deposed.Store(true) // A answers NOT_LEADER_OR_FOLLOWER ...
	var first atomic.Bool
	tb.ctl.describe = func(inner func(int) *replicadv1.DescribeClusterResponse) func(int) *replicadv1.DescribeClusterResponse {
		return func(n int) *replicadv1.DescribeClusterResponse {
			if n == 1 {
				first.Store(true)
				return inner(n) // ... while the first lookup still names it
			}
			tb.leader.Store(2)
			return inner(n)
		}
	}(tb.ctl.describe)

	r := ctl(t, deadAddr(t), "", "--controller", tb.ctlAddr, "produce", "--topic", "orders", "--partition", "0", "--value", "x", "--value", "y")
	wantCode(t, r, 0)
	if r.stdout != "0\n" {
		t.Fatalf("stdout %q, want the base offset B gave", r.stdout)
	}
	if !first.Load() || tb.a.refused.Load() != 1 {
		t.Fatalf("A was asked %d times, want once (first lookup named it)", tb.a.refused.Load())
	}
	if n := tb.b.records("orders", 0); n != 2 {
		t.Fatalf("B holds %d records, want 2", n)
	}
	if n := tb.ctl.callCount("DescribeCluster"); n != 2 {
		t.Fatalf("%d lookups, want 2 (the first and one refresh)", n)
	}
}

// TestProduceStdinWithControllerFollowsLeaderChange ensures each stdin
// batch is retried on its own: the batches A took stay there, the rest
// follow the leader to B, and every base offset is printed.
func TestProduceStdinWithControllerFollowsLeaderChange(t *testing.T) {
	tb := startTwoBrokers(t, false)
	tb.a.afterProduce = func(n int) {
		if n == 2 { // after its second batch A loses the leadership to B
			tb.a.deposed.Store(true)
			tb.leader.Store(2)
		}
	}
	var in strings.Builder
	for i := range 10 {
		fmt.Fprintf(&in, "line-%d\n", i)
	}
	r := ctl(t, "", in.String(), "--controller", tb.ctlAddr, "produce", "--topic", "orders", "--partition", "0",
		"--batch-records", "3", "--linger-ms", "600000")
	wantCode(t, r, 0)
	if r.stdout != "0\n3\n0\n3\n" {
		t.Fatalf("base offsets %q, want A's 0,3 then B's 0,3", r.stdout)
	}
	if a, b := tb.a.records("orders", 0), tb.b.records("orders", 0); a != 6 || b != 4 {
		t.Fatalf("A holds %d, B %d; want 6 and 4", a, b)
	}
	if tb.a.refused.Load() != 1 {
		t.Fatalf("A refused %d batches, want 1", tb.a.refused.Load())
	}
}

// TestProduceWithControllerRetries ensures UNKNOWN_TOPIC_OR_PARTITION from a
// broker (a partition just created) is retried, a partition the controller
// does not know fails at once, and retrying stops after --timeout with the
// last answer.
func TestProduceWithControllerRetries(t *testing.T) {
	tb := startTwoBrokers(t, false)
	tb.a.unknownFirst.Store(2)
	r := ctl(t, "", "", "--controller", tb.ctlAddr, "produce", "--topic", "orders", "--partition", "0", "--value", "x")
	wantCode(t, r, 0)
	if r.stdout != "0\n" || tb.a.records("orders", 0) != 1 || tb.a.refused.Load() != 2 {
		t.Fatalf("stdout %q, A holds %d after %d refusals", r.stdout, tb.a.records("orders", 0), tb.a.refused.Load())
	}

	r = ctl(t, "", "", "--controller", tb.ctlAddr, "produce", "--topic", "orders", "--partition", "9", "--value", "x")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "orders-9: UNKNOWN_TOPIC_OR_PARTITION")

	tb.a.deposed.Store(true) // and the controller keeps naming A
	before := tb.a.refused.Load()
	start := time.Now()
	r = ctl(t, "", "", "--controller", tb.ctlAddr, "--timeout", "500ms", "produce", "--topic", "orders", "--partition", "0", "--value", "x")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "produce orders-0: NOT_LEADER_OR_FOLLOWER")
	if r.stdout != "" {
		t.Fatalf("stdout %q, want no offset for a failed batch (the error is on stderr)", r.stdout)
	}
	// Attempts at 0, 100ms and 300ms (later on a slow machine); the next
	// (700ms) is past --timeout.
	if n := tb.a.refused.Load() - before; n < 2 || n > 3 {
		t.Fatalf("%d attempts within 500ms, want 3 (backoff 100ms, 200ms)", n)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("gave up after %s", el)
	}
}

// TestConsumeFollowWithControllerFollowsLeaderChange ensures consume
// --follow reconnects to the new leader after a leader change and goes on
// from the next offset, each record printed once.
func TestConsumeFollowWithControllerFollowsLeaderChange(t *testing.T) {
	tb := startTwoBrokers(t, false)
	for i := range 9 {
		v := fmt.Sprintf("v%d", i)
		if i < 6 {
			wantCode(t, ctl(t, tb.aAddr, "", "produce", "--topic", "orders", "--partition", "0", "--value", v), 0)
		}
		wantCode(t, ctl(t, tb.bAddr, "", "produce", "--topic", "orders", "--partition", "0", "--value", v), 0)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- ctlCtx(ctx, strings.NewReader(""), &stdout, &stderr, "--controller", tb.ctlAddr,
			"consume", "--topic", "orders", "--partition", "0", "--follow", "--max-wait-ms", "10")
	}()
	waitFor(t, "records 0-5 from A", 10*time.Second, func() bool { return strings.Contains(stdout.String(), "5\tv5\n") })
	tb.leader.Store(2)
	tb.a.deposed.Store(true)
	waitFor(t, "records 6-8 from B", 10*time.Second, func() bool { return strings.Contains(stdout.String(), "8\tv8\n") })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after Ctrl-C, stderr %q", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("consume --follow did not end on cancel")
	}
	var want []string
	for i := range 9 {
		want = append(want, fmt.Sprintf("%d\tv%d", i, i))
	}
	if got := lines(stdout.String()); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("consumed:\n%s", stdout.String())
	}
	if tb.a.refused.Load() == 0 {
		t.Fatal("A never answered NOT_LEADER_OR_FOLLOWER: the switch was not exercised")
	}
}

// TestPerfProduceWithController ensures perf produce sends each partition's
// batches to the leader the controller names.
func TestPerfProduceWithController(t *testing.T) {
	tb := startTwoBrokers(t, true) // orders-0 led by A, orders-1 by B
	r := ctl(t, deadAddr(t), "", "--controller", tb.ctlAddr, "perf", "produce", "--topic", "orders", "--partitions", "2",
		"--records", "400", "--batch", "100", "--record-size", "10", "--concurrency", "2", "-o", "json")
	wantCode(t, r, 0)
	if a, b := tb.a.records("orders", 0), tb.b.records("orders", 1); a != 200 || b != 200 {
		t.Fatalf("A holds %d of orders-0, B %d of orders-1; want 200 each", a, b)
	}
	if tb.a.records("orders", 1)+tb.b.records("orders", 0) != 0 {
		t.Fatal("a batch went to a broker that does not lead its partition")
	}
}

// TestControllerCommandsBadFlags ensures bad flags are usage errors (exit 2)
// caught before the controller is asked.
func TestControllerCommandsBadFlags(t *testing.T) {
	f := newFakeController()
	addr := startController(t, f)
	long := strings.Repeat("a", 250)
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"create-topic", "--topic", "bad/name", "--partitions", "1", "--replication-factor", "1"}, "not a legal topic name"},
		{[]string{"create-topic", "--topic", long, "--partitions", "1", "--replication-factor", "1"}, "not a legal topic name"},
		{[]string{"create-topic", "--topic", "t", "--partitions", "0", "--replication-factor", "1"}, "must be >= 1"},
		{[]string{"create-topic", "--topic", "t", "--partitions", "1", "--replication-factor", "-1"}, "must be >= 1"},
		{[]string{"create-topic", "--topic", "t", "--partitions", "x", "--replication-factor", "1"}, "32-bit integer"},
		{[]string{"create-topic", "--topic", "t"}, "missing --partitions, --replication-factor"},
		{[]string{"delete-topic"}, "missing --topic"},
		{[]string{"delete-topic", "--topic", ""}, "not a legal topic name"},
		{[]string{"elect", "--topic", "t", "--partition", "-1"}, "--partition must not be negative"},
		{[]string{"elect", "--topic", "t", "--partition", "0", "--leader", "-2"}, "--leader must be a broker id"},
		{[]string{"reassign", "--topic", "t", "--partition", "0"}, "missing --replicas"},
		{[]string{"reassign", "--topic", "t", "--partition", "0", "--replicas", ""}, "at least one broker"},
		{[]string{"reassign", "--topic", "t", "--partition", "0", "--replicas", "1,1"}, "listed twice"},
		{[]string{"reassign", "--topic", "t", "--partition", "0", "--replicas", "1,x"}, "comma-separated broker ids"},
		{[]string{"reassign", "--topic", "t", "--partition", "0", "--replicas", "1,-2"}, "must be >= 0"},
		{[]string{"reassign", "--topic", "t", "--partition", "0", "--replicas", "1", "--wait-timeout", "0s"}, "--wait-timeout must be positive"},
		{[]string{"list-topics", "extra"}, "unexpected argument"},
		{[]string{"describe-cluster", "a", "b"}, "want one TOPIC argument, got 2: a b"},
		{[]string{"delete-topic", "a", "--topic", "b"}, `the TOPIC argument "a" and --topic "b" disagree`},
	}
	for _, c := range cases {
		r := ctl(t, "", "", append([]string{"--controller", addr}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.msg) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, r.code, r.stderr, c.msg)
		}
	}
	if n := f.callCount(""); n != 0 {
		t.Fatalf("the controller was asked %d times", n)
	}

	// Without --controller (or with only commas) the commands say which flag is missing.
	for _, args := range [][]string{
		{"create-topic", "--topic", "t", "--partitions", "1", "--replication-factor", "1"},
		{"delete-topic", "--topic", "t"},
		{"elect", "--topic", "t", "--partition", "0"},
		{"reassign", "--topic", "t", "--partition", "0", "--replicas", "1"},
		{"describe-cluster"},
	} {
		r := ctl(t, "", "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--controller is required") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
	r := ctl(t, "", "", "--controller", ",", "describe-cluster")
	wantCode(t, r, 2)
	wantContains(t, "stderr", r.stderr, `--controller: no address in ","`)
}

// TestControllerFromEnv ensures CTLCLIENT_CONTROLLER is --controller's default.
func TestControllerFromEnv(t *testing.T) {
	f := newFakeController()
	addr := startController(t, f)
	var out, errOut strings.Builder
	code := run(context.Background(), []string{"delete-topic", "--topic", "t"}, strings.NewReader(""), &out, &errOut,
		func(k string) string {
			if k == "CTLCLIENT_CONTROLLER" {
				return deadAddr(t) + "," + addr
			}
			return ""
		})
	if code != 0 || f.callCount("DeleteTopic") != 1 {
		t.Fatalf("exit %d, %d calls, stderr %q", code, f.callCount("DeleteTopic"), errOut.String())
	}
}
