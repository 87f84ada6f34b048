package main

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// cpart is a partition of topic with the given leader, ISR and replicas,
// topic ID "id-"+topic and min.insync.replicas 2.
func cpart(topic string, p, leader int32, isr, replicas []int32) *replicadv1.ClusterPartition {
	return &replicadv1.ClusterPartition{Topic: topic, TopicId: "id-" + topic, Partition: p, Leader: leader, LeaderEpoch: 3, PartitionEpoch: 4,
		Isr: isr, Replicas: replicas, MinInsyncReplicas: 2}
}

func ids(v ...int32) []int32 { return v }

// mixedCluster has brokers 1 and 3 alive, 2 down, and partitions in every
// state the filters tell apart:
//
//	orders-0  healthy (leader 1, ISR 1,3 of 1,3)
//	orders-1  under-replicated (ISR 1 of 1,2,3) and under min ISR (1 < 2)
//	orders-2  led by broker 2, which is down: unavailable
//	logs-0    no leader: unavailable and under min ISR
//	logs-1    moving 1,3 -> 3,4 with ISR 3,4,1: 1 is being removed, so the
//	          replication factor is 2 and it is not under-replicated
func mixedCluster() *replicadv1.DescribeClusterResponse {
	moving := cpart("logs", 1, 3, ids(3, 4, 1), ids(3, 4, 1))
	moving.AddingReplicas, moving.RemovingReplicas = ids(4), ids(1)
	return &replicadv1.DescribeClusterResponse{
		ControllerEpoch: 5, SessionTimeoutMs: 6000,
		Brokers: []*replicadv1.BrokerDescription{
			{Id: 1, Host: "127.0.0.1", Port: 9091, BrokerEpoch: 11, Alive: true},
			{Id: 2, Host: "127.0.0.1", Port: 9092, BrokerEpoch: 12, Alive: false},
			{Id: 3, Host: "127.0.0.1", Port: 9093, BrokerEpoch: 13, Alive: true},
			{Id: 4, Host: "127.0.0.1", Port: 9094, BrokerEpoch: 14, Alive: true},
		},
		Partitions: []*replicadv1.ClusterPartition{
			cpart("orders", 2, 2, ids(2, 3), ids(2, 3)),
			cpart("orders", 0, 1, ids(1, 3), ids(1, 3)),
			cpart("orders", 1, 1, ids(1), ids(1, 2, 3)),
			cpart("logs", 0, -1, ids(2), ids(2)),
			moving,
		},
		PendingDeletions: []*replicadv1.DeletedTopic{{Topic: "old", TopicId: "id-old", Pending: []*replicadv1.PendingReplicas{{Partition: 0, Brokers: ids(2)}}}},
	}
}

func healthyCluster() *replicadv1.DescribeClusterResponse {
	return &replicadv1.DescribeClusterResponse{
		ControllerEpoch: 5,
		Brokers: []*replicadv1.BrokerDescription{
			{Id: 1, Host: "127.0.0.1", Port: 9091, Alive: true},
			{Id: 2, Host: "127.0.0.1", Port: 9092, Alive: true},
		},
		Partitions: []*replicadv1.ClusterPartition{cpart("orders", 0, 1, ids(1, 2), ids(1, 2))},
	}
}

func describing(resp *replicadv1.DescribeClusterResponse) *fakeController {
	f := newFakeController()
	f.describe = func(int) *replicadv1.DescribeClusterResponse { return resp }
	return f
}

func wantLines(t *testing.T, what, got string, want ...string) {
	t.Helper()
	if g := strings.Join(lines(got), "\n"); g != strings.Join(want, "\n") {
		t.Fatalf("%s:\n%s\nwant:\n%s", what, g, strings.Join(want, "\n"))
	}
}

// TestListTopics ensures list-topics prints one row per topic, sorted, with
// its ID, partition count and replication factor (a reassignment's removed
// replicas not counted), and the same as json.
func TestListTopics(t *testing.T) {
	addr := startController(t, describing(mixedCluster()))
	r := ctl(t, "", "", "--controller", addr, "list-topics")
	wantCode(t, r, 0)
	wantLines(t, "table", r.stdout,
		"TOPIC   TOPIC-ID   PARTITIONS  REPLICATION-FACTOR",
		"logs    id-logs    2           1",
		"orders  id-orders  3           2")

	r = ctl(t, "", "", "--controller", addr, "list-topics", "-o", "json")
	wantCode(t, r, 0)
	var got struct{ Topics []topicSummary }
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v in %s", err, r.stdout)
	}
	want := []topicSummary{{"logs", "id-logs", 2, 1}, {"orders", "id-orders", 3, 2}}
	if len(got.Topics) != 2 || got.Topics[0] != want[0] || got.Topics[1] != want[1] {
		t.Fatalf("json %+v, want %+v", got.Topics, want)
	}
	wantContains(t, "json", r.stdout, `"replicationFactor": 2`)

	// No topic: the header alone, and an empty list (not null) in json.
	empty := startController(t, describing(&replicadv1.DescribeClusterResponse{}))
	r = ctl(t, "", "", "--controller", empty, "list-topics")
	wantCode(t, r, 0)
	wantLines(t, "empty table", r.stdout, "TOPIC  TOPIC-ID  PARTITIONS  REPLICATION-FACTOR")
	r = ctl(t, "", "", "--controller", empty, "list-topics", "-o", "json")
	wantCode(t, r, 0)
	if strings.Join(strings.Fields(r.stdout), "") != `{"topics":[]}` {
		t.Fatalf("empty json %q", r.stdout)
	}
}

// TestDescribeTopic ensures describe-topic prints the topic's partitions
// with every column, as json too, and exits 1 with a clear message for a
// topic the controller lacks (saying when its deletion is pending).
func TestDescribeTopic(t *testing.T) {
	c := mixedCluster()
	c.Partitions[1].Elr, c.Partitions[1].OfflineReplicas = ids(3), ids(3) // orders-0
	addr := startController(t, describing(c))
	r := ctl(t, "", "", "--controller", addr, "describe-topic", "orders")
	wantCode(t, r, 0)
	wantLines(t, "table", r.stdout,
		"topic orders, topic ID id-orders, 3 partitions, replication factor 2",
		"",
		"PARTITION  LEADER  EPOCH  P-EPOCH  ISR  REPLICAS  ADDING  REMOVING  ELR  OFFLINE  MIN-ISR",
		"0          1       3      4        1,3  1,3       -       -         3    3        2",
		"1          1       3      4        1    1,2,3     -       -         -    2        2",
		"2          2       3      4        2,3  2,3       -       -         -    2        2")

	r = ctl(t, "", "", "--controller", addr, "describe-topic", "--topic", "logs")
	wantCode(t, r, 0)
	wantContains(t, "logs table", r.stdout, "replication factor 1",
		"0          none    3      4        2      2         -       -         -    2        2",
		"1          3       3      4        3,4,1  3,4,1     4       1         -    -        2")

	r = ctl(t, "", "", "describe-topic", "orders", "--controller", addr, "-o", "json")
	wantCode(t, r, 0)
	var got struct {
		Topic, TopicID                string
		Partitions, ReplicationFactor int
		PartitionStates               []map[string]any
	}
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v in %s", err, r.stdout)
	}
	if got.Topic != "orders" || got.TopicID != "id-orders" || got.Partitions != 3 || got.ReplicationFactor != 2 || len(got.PartitionStates) != 3 {
		t.Fatalf("json %+v", got)
	}
	if p0 := got.PartitionStates[0]; p0["partition"] != nil || p0["minInsyncReplicas"] != 2.0 || p0["elr"] == nil {
		t.Fatalf("partition 0 as json: %v (protojson leaves partition 0 out)", p0)
	}

	r = ctl(t, "", "", "--controller", addr, "describe-topic", "nope")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, `describe-topic: topic "nope" does not exist`)
	if r.stdout != "" {
		t.Fatalf("stdout %q for an unknown topic", r.stdout)
	}
	r = ctl(t, "", "", "--controller", addr, "describe-topic", "old")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, `topic "old" does not exist: it was deleted, and 1 replica is still deleting its log`)
}

// TestDescribeClusterFilters ensures each kafka-topics filter keeps exactly
// the partitions it names, --topic narrows, json is the narrowed answer, and
// a filter matching nothing says so.
func TestDescribeClusterFilters(t *testing.T) {
	addr := startController(t, describing(mixedCluster()))
	cases := []struct {
		flag string
		want []string // topic-partition, sorted
	}{
		{"--under-replicated", []string{"orders-1"}},
		{"--unavailable", []string{"logs-0", "orders-2"}},
		{"--under-min-isr", []string{"logs-0", "orders-1"}},
	}
	for _, c := range cases {
		r := ctl(t, "", "", "--controller", addr, "describe-cluster", c.flag)
		wantCode(t, r, 0)
		got := lines(r.stdout)
		if !strings.HasPrefix(got[0], "TOPIC") || !strings.HasSuffix(got[0], "MIN-ISR") {
			t.Fatalf("%s header %q", c.flag, got[0])
		}
		var names []string
		for _, l := range got[1:] {
			f := strings.Fields(l)
			names = append(names, f[0]+"-"+f[1])
		}
		if strings.Join(names, " ") != strings.Join(c.want, " ") {
			t.Fatalf("%s: %v, want %v\n%s", c.flag, names, c.want, r.stdout)
		}
		if strings.Contains(r.stdout, "BROKER") || strings.Contains(r.stdout, "pending") {
			t.Fatalf("%s printed more than the partitions:\n%s", c.flag, r.stdout)
		}

		r = ctl(t, "", "", "--controller", addr, "describe-cluster", c.flag, "-o", "json")
		wantCode(t, r, 0)
		var resp replicadv1.DescribeClusterResponse
		wantJSONParses(t, r.stdout, &resp)
		names = nil
		for _, p := range sortedPartitions(resp.GetPartitions()) {
			names = append(names, p.GetTopic()+"-"+itoa32(p.GetPartition()))
		}
		if strings.Join(names, " ") != strings.Join(c.want, " ") || len(resp.GetBrokers()) != 4 || len(resp.GetPendingDeletions()) != 0 {
			t.Fatalf("%s json: partitions %v, %d brokers, %d pending deletions", c.flag, names, len(resp.GetBrokers()), len(resp.GetPendingDeletions()))
		}
	}

	r := ctl(t, "", "", "--controller", addr, "describe-cluster", "--unavailable", "--topic", "logs")
	wantCode(t, r, 0)
	if got := lines(r.stdout); len(got) != 2 || !strings.HasPrefix(got[1], "logs   0") {
		t.Fatalf("--unavailable --topic logs:\n%s", r.stdout)
	}
	r = ctl(t, "", "", "--controller", addr, "describe-cluster", "--under-replicated", "--topic", "logs")
	wantCode(t, r, 0)
	wantLines(t, "no match", r.stdout, "no under-replicated partitions in topic logs")

	// --topic alone: the whole description, narrowed to the topic.
	r = ctl(t, "", "", "--controller", addr, "describe-cluster", "--topic", "logs")
	wantCode(t, r, 0)
	wantContains(t, "--topic logs", r.stdout, "controller epoch 5", "BROKER", "logs   0", "logs   1")
	if strings.Contains(r.stdout, "orders") || strings.Contains(r.stdout, "pending") {
		t.Fatalf("--topic logs shows other topics:\n%s", r.stdout)
	}

	healthy := startController(t, describing(healthyCluster()))
	for _, f := range []string{"--under-replicated", "--unavailable", "--under-min-isr"} {
		r = ctl(t, "", "", "--controller", healthy, "describe-cluster", f)
		wantCode(t, r, 0)
		if !strings.HasPrefix(r.stdout, "no ") || strings.Count(r.stdout, "\n") != 1 {
			t.Fatalf("%s on a healthy cluster: %q", f, r.stdout)
		}
	}
}

func itoa32(i int32) string { return strconv.Itoa(int(i)) }

func wantJSONParses(t *testing.T, out string, m *replicadv1.DescribeClusterResponse) {
	t.Helper()
	if err := protojson.Unmarshal([]byte(out), m); err != nil {
		t.Fatalf("%v in\n%s", err, out)
	}
}

// TestClusterHealth ensures one check prints rpk's overview and exits 0
// when healthy, 1 with the reasons when not, and json is one object.
func TestClusterHealth(t *testing.T) {
	addr := startController(t, describing(healthyCluster()))
	r := ctl(t, "", "", "--controller", addr, "cluster", "health")
	wantCode(t, r, 0)
	wantLines(t, "healthy", r.stdout,
		"CLUSTER HEALTH OVERVIEW",
		"=======================",
		"Healthy:                         true",
		"Unhealthy reasons:               -",
		"Active controller:               "+addr+" (controller epoch 5)",
		"All brokers:                     1,2",
		"Brokers down:                    -",
		"Leaderless partitions (0):       -",
		"Under-replicated partitions (0): -")

	sick := startController(t, describing(mixedCluster()))
	r = ctl(t, "", "", "--controller", sick, "cluster", "health")
	wantCode(t, r, 1)
	wantContains(t, "unhealthy", r.stdout, "Healthy:                         false",
		"Unhealthy reasons:               brokers_down,leaderless_partitions,under_replicated_partitions",
		"Brokers down:                    2",
		"Leaderless partitions (2):       logs-0,orders-2",
		"Under-replicated partitions (1): orders-1")
	wantContains(t, "stderr", r.stderr, "cluster health: not healthy: brokers_down, leaderless_partitions, under_replicated_partitions")

	r = ctl(t, "", "", "--controller", sick, "cluster", "health", "-o", "json")
	wantCode(t, r, 1)
	var rep healthReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("%v in %s", err, r.stdout)
	}
	if rep.Healthy || rep.Controller != sick || rep.LeaderlessCount != 2 || rep.UnderReplicatedCount != 1 ||
		len(rep.BrokersDown) != 1 || rep.BrokersDown[0] != 2 || len(rep.Brokers) != 4 ||
		rep.LeaderlessPartitions[0] != (partitionJSON{"logs", 0}) {
		t.Fatalf("json %+v", rep)
	}

	// No broker registered is not healthy either.
	none := startController(t, describing(&replicadv1.DescribeClusterResponse{}))
	r = ctl(t, "", "", "--controller", none, "cluster", "health", "-o", "json")
	wantCode(t, r, 1)
	wantContains(t, "json", r.stdout, `"no_brokers"`, `"brokers": []`)

	// Without --watch, no controller is an RPC failure: exit 1.
	r = ctl(t, "", "", "--controller", deadAddr(t), "--timeout", "300ms", "cluster", "health")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "no active controller")
}

// TestClusterHealthWatchExitWhenHealthy ensures --watch prints the overview
// each time it changes (not when it stays the same), and
// --exit-when-healthy returns 0 at the first healthy check; with -o json
// only the final overview is printed. A round in which no controller
// answers is no_active_controller and the watch goes on.
func TestClusterHealthWatchExitWhenHealthy(t *testing.T) {
	f := newFakeController()
	f.describe = func(n int) *replicadv1.DescribeClusterResponse {
		if n <= 3 {
			return mixedCluster()
		}
		return healthyCluster()
	}
	addr := startController(t, f)
	r := ctl(t, "", "", "--controller", addr, "cluster", "health", "--watch", "--interval", "100ms", "--exit-when-healthy")
	wantCode(t, r, 0)
	if n := strings.Count(r.stdout, "CLUSTER HEALTH OVERVIEW ("); n != 2 {
		t.Fatalf("%d overviews printed, want 2 (unhealthy once, then healthy):\n%s", n, r.stdout)
	}
	if i, j := strings.Index(r.stdout, "Healthy:                         false"), strings.Index(r.stdout, "Healthy:                         true"); i < 0 || j < i {
		t.Fatalf("want unhealthy, then healthy:\n%s", r.stdout)
	}
	if n := f.callCount("DescribeCluster"); n != 4 {
		t.Fatalf("%d checks, want 4 (it stops at the first healthy one)", n)
	}

	f2 := newFakeController()
	var calls atomic.Int32
	f2.describe = func(n int) *replicadv1.DescribeClusterResponse {
		calls.Store(int32(n))
		if n <= 2 {
			return mixedCluster()
		}
		return healthyCluster()
	}
	addr2 := startController(t, f2)
	r = ctl(t, "", "", "--controller", addr2, "cluster", "health", "--watch", "--interval", "100ms", "--exit-when-healthy", "-o", "json")
	wantCode(t, r, 0)
	var rep healthReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("want exactly one json object: %v in %s", err, r.stdout)
	}
	if !rep.Healthy || len(rep.UnhealthyReasons) != 0 {
		t.Fatalf("final json %+v", rep)
	}

	// A standby only (no active controller) for a while, then active.
	f3 := describing(healthyCluster())
	f3.standby = true
	addr3 := startController(t, f3)
	go func() {
		// Two calls answered NOT_CONTROLLER (a round of --timeout 200ms
		// makes several), then the controller becomes active.
		for deadline := time.Now().Add(10 * time.Second); f3.callCount("DescribeCluster") < 2 && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		f3.mu.Lock()
		f3.standby = false
		f3.mu.Unlock()
	}()
	r = ctl(t, "", "", "--controller", addr3, "--timeout", "200ms", "cluster", "health", "--watch", "--interval", "100ms", "--exit-when-healthy")
	wantCode(t, r, 0)
	wantContains(t, "stdout", r.stdout, "Unhealthy reasons: no_active_controller", "Error:             no active controller", "Healthy:                         true")
}

// TestClusterHealthWatchEnds ensures --exit-when-healthy exits 1 once its
// --wait-timeout passes with the cluster still unhealthy (printing an
// unchanged overview once), and a plain --watch ends on an interrupt with
// the last overview's status.
func TestClusterHealthWatchEnds(t *testing.T) {
	f := describing(mixedCluster())
	addr := startController(t, f)
	start := time.Now()
	r := ctl(t, "", "", "--controller", addr, "cluster", "health", "--watch", "--interval", "100ms", "--exit-when-healthy", "--wait-timeout", "700ms")
	el := time.Since(start)
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "cluster health: not healthy after 700ms: brokers_down")
	if n := strings.Count(r.stdout, "CLUSTER HEALTH OVERVIEW"); n != 1 {
		t.Fatalf("an unchanged overview printed %d times:\n%s", n, r.stdout)
	}
	if n := f.callCount("DescribeCluster"); n < 3 {
		t.Fatalf("%d checks in 700ms at 100ms", n)
	}
	if el < 700*time.Millisecond || el > 10*time.Second {
		t.Fatalf("gave up after %s", el)
	}

	// -o json on a timeout: still one final object.
	r = ctl(t, "", "", "--controller", addr, "cluster", "health", "--watch", "--interval", "100ms", "--exit-when-healthy", "--wait-timeout", "300ms", "-o", "json")
	wantCode(t, r, 1)
	var rep healthReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Healthy {
		t.Fatalf("json %q: %v", r.stdout, err)
	}

	// A plain watch on a healthy cluster runs until interrupted, then exits 0.
	h := describing(healthyCluster())
	haddr := startController(t, h)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- ctlCtx(ctx, strings.NewReader(""), &out, &errOut, "--controller", haddr, "cluster", "health", "--watch", "--interval", "100ms")
	}()
	waitFor(t, "three checks", 10*time.Second, func() bool { return h.callCount("DescribeCluster") >= 3 })
	select {
	case code := <-done:
		t.Fatalf("a plain --watch ended by itself (exit %d): %s", code, out.String())
	default:
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit %d after an interrupt on a healthy cluster; stderr %s", code, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("--watch did not end on an interrupt")
	}
	if n := strings.Count(out.String(), "CLUSTER HEALTH OVERVIEW"); n != 1 {
		t.Fatalf("%d overviews for an unchanged cluster:\n%s", n, out.String())
	}
}

// TestIdempotentTopicCommands ensures --if-not-exists and --if-exists turn
// "already so" into exit 0 with a message (on stderr with -o json, the
// answer on stdout), while without them the same answer still exits 1.
func TestIdempotentTopicCommands(t *testing.T) {
	f := newFakeController()
	f.createResp = &replicadv1.CreateTopicResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS, ErrorMessage: "topic orders exists"}
	f.deleteResp = &replicadv1.DeleteTopicResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION}
	addr := startController(t, f)
	create := []string{"--controller", addr, "create-topic", "--topic", "orders", "--partitions", "1", "--replication-factor", "1"}

	r := ctl(t, "", "", append(create, "--if-not-exists")...)
	wantCode(t, r, 0)
	wantLines(t, "create --if-not-exists", r.stdout, "topic orders already exists: nothing to do (--if-not-exists)")
	r = ctl(t, "", "", append(create, "--if-not-exists", "-o", "json")...)
	wantCode(t, r, 0)
	wantJSON(t, r.stdout, &replicadv1.CreateTopicResponse{}, f.createResp)
	wantContains(t, "stderr", r.stderr, "already exists: nothing to do")
	wantCode(t, ctl(t, "", "", create...), 1)

	// Another refusal is not the no-op.
	f.mu.Lock()
	f.createResp = &replicadv1.CreateTopicResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR}
	f.mu.Unlock()
	wantCode(t, ctl(t, "", "", append(create, "--if-not-exists")...), 1)

	del := []string{"--controller", addr, "delete-topic", "--topic", "orders"}
	r = ctl(t, "", "", append(del, "--if-exists")...)
	wantCode(t, r, 0)
	wantLines(t, "delete --if-exists", r.stdout, "topic orders does not exist: nothing to do (--if-exists)")
	r = ctl(t, "", "", append(del, "--if-exists", "-o", "json")...)
	wantCode(t, r, 0)
	wantJSON(t, r.stdout, &replicadv1.DeleteTopicResponse{}, f.deleteResp)
	wantCode(t, ctl(t, "", "", del...), 1)

	// With --wait and -o json the no-op is the wait's final object.
	r = ctl(t, "", "", append(del, "--if-exists", "--wait", "-o", "json")...)
	wantCode(t, r, 0)
	var res deleteWaitResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Deleted || !res.Done {
		t.Fatalf("json %q: %v", r.stdout, err)
	}
}

// TestReassignToCurrentReplicas ensures reassigning a partition to the
// replicas it has, in order, says nothing changed, exits 0 and does not
// wait; a new order is a reassignment.
func TestReassignToCurrentReplicas(t *testing.T) {
	f := describing(clusterWith(orders(0, 1, 1, 2, 3)))
	f.reassignResp = &replicadv1.ReassignPartitionResponse{Partition: orders(0, 1, 1, 2, 3)}
	addr := startController(t, f)
	r := ctl(t, "", "", "--controller", addr, "reassign", "--topic", "orders", "--partition", "0", "--replicas", "1,2,3")
	wantCode(t, r, 0)
	wantLines(t, "no-op", r.stdout, "orders-0 already has replicas 1,2,3: nothing changed")
	if n := f.callCount("DescribeCluster"); n != 1 {
		t.Fatalf("%d DescribeCluster calls: a no-op must not wait", n)
	}
	if f.callCount("ReassignPartition") != 1 {
		t.Fatal("the controller was not asked")
	}

	// 3,2,1 is another preferred leader: the controller bumps the epoch.
	moved := orders(0, 1, 3, 2, 1)
	moved.LeaderEpoch = 2
	f.mu.Lock()
	f.reassignResp = &replicadv1.ReassignPartitionResponse{Partition: moved}
	f.describe = func(n int) *replicadv1.DescribeClusterResponse {
		if n == 2 {
			return clusterWith(orders(0, 1, 1, 2, 3))
		}
		return clusterWith(moved)
	}
	f.mu.Unlock()
	r = ctl(t, "", "", "--controller", addr, "reassign", "--topic", "orders", "--partition", "0", "--replicas", "3,2,1")
	wantCode(t, r, 0)
	if strings.Contains(r.stdout, "nothing changed") || !strings.Contains(r.stdout, "done: replicas 3,2,1") {
		t.Fatalf("reorder:\n%s", r.stdout)
	}
}

// TestDeleteTopicWait ensures delete-topic --wait prints the pending
// replicas of this topic's ID (not an older same-named topic's) each time
// they change, until none is left, and with -o json one final object.
func TestDeleteTopicWait(t *testing.T) {
	old := pinned(100*time.Millisecond, &deletePollInterval)
	defer old()
	pending := func(parts ...*replicadv1.PendingReplicas) *replicadv1.DescribeClusterResponse {
		c := clusterWith()
		// An earlier "orders" whose replica on broker 9 never came back.
		c.PendingDeletions = []*replicadv1.DeletedTopic{{Topic: "orders", TopicId: "id-gone", Pending: []*replicadv1.PendingReplicas{{Partition: 0, Brokers: ids(9)}}}}
		if len(parts) > 0 {
			c.PendingDeletions = append(c.PendingDeletions, &replicadv1.DeletedTopic{Topic: "orders", TopicId: "id-orders", Pending: parts})
		}
		return c
	}
	script := func(n int) *replicadv1.DescribeClusterResponse {
		switch n {
		case 1: // before the delete
			return clusterWith(cpart("orders", 0, 1, ids(1, 2, 3), ids(1, 2, 3)), cpart("orders", 1, 2, ids(2, 3), ids(2, 3)))
		case 2, 3:
			return pending(&replicadv1.PendingReplicas{Partition: 1, Brokers: ids(3)}, &replicadv1.PendingReplicas{Partition: 0, Brokers: ids(2, 3)})
		case 4:
			return pending(&replicadv1.PendingReplicas{Partition: 1, Brokers: ids(3)})
		default:
			return pending()
		}
	}
	f := newFakeController()
	f.describe = script
	addr := startController(t, f)
	r := ctl(t, "", "", "--controller", addr, "delete-topic", "--topic", "orders", "--wait")
	wantCode(t, r, 0)
	wantLines(t, "progress", r.stdout,
		"TOPIC   ERROR",
		"orders  NONE",
		"waiting for 3 replicas to delete their logs: orders-0 on 2,3; orders-1 on 3",
		"waiting for 1 replica to delete its log: orders-1 on 3",
		"done: every replica of orders deleted its log")
	if n := f.callCount("DescribeCluster"); n != 5 {
		t.Fatalf("%d DescribeCluster calls, want 5", n)
	}

	f2 := newFakeController()
	f2.describe = script
	addr2 := startController(t, f2)
	r = ctl(t, "", "", "--controller", addr2, "delete-topic", "--topic", "orders", "--wait", "-o", "json")
	wantCode(t, r, 0)
	var res deleteWaitResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("want exactly one json object: %v in %s", err, r.stdout)
	}
	if res.Topic != "orders" || res.TopicID != "id-orders" || !res.Deleted || !res.Done || len(res.Pending) != 0 {
		t.Fatalf("json %+v", res)
	}

	// Still pending at --wait-timeout: exit 1 naming what is left, and
	// the json says not done.
	f3 := newFakeController()
	f3.describe = func(n int) *replicadv1.DescribeClusterResponse { return script(min(n, 4)) }
	addr3 := startController(t, f3)
	r = ctl(t, "", "", "--controller", addr3, "delete-topic", "--topic", "orders", "--wait", "--wait-timeout", "500ms", "-o", "json")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "delete-topic orders: replicas still deleting their logs after 500ms", "orders-1 on 3")
	res = deleteWaitResult{}
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil || res.Done || len(res.Pending) != 1 || res.Pending[0].Partition != 1 {
		t.Fatalf("json %q: %+v %v", r.stdout, res, err)
	}
}

// pinned sets *v to d and returns the function restoring it.
func pinned(d time.Duration, v *time.Duration) func() {
	old := *v
	*v = d
	return func() { *v = old }
}

// TestEverydayCommandsBadInput ensures bad input is a usage error (exit 2)
// caught before the controller is asked, and every new command needs
// --controller.
func TestEverydayCommandsBadInput(t *testing.T) {
	f := newFakeController()
	addr := startController(t, f)
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"describe-topic"}, "want exactly one TOPIC"},
		{[]string{"describe-topic", "a", "b"}, "want one TOPIC argument, got 2: a b"},
		{[]string{"describe-topic", "a", "--topic", "b"}, `the TOPIC argument "a" and --topic "b" disagree`},
		{[]string{"describe-topic", "bad/name"}, "not a legal topic name"},
		{[]string{"describe-topic", "t", "-o", "yaml"}, "-o: want table or json"},
		{[]string{"describe-topic", "t", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"list-topics", "extra"}, "unexpected argument"},
		{[]string{"describe-cluster", "--under-replicated", "--unavailable"}, "give one filter at a time"},
		{[]string{"describe-cluster", "--topic", "bad/name"}, "not a legal topic name"},
		{[]string{"describe-cluster", "--under-min-isr=maybe"}, "invalid boolean"},
		{[]string{"cluster", "health", "--exit-when-healthy"}, "--exit-when-healthy needs --watch"},
		{[]string{"cluster", "health", "--wait-timeout", "1s"}, "--wait-timeout needs --watch"},
		{[]string{"cluster", "health", "--watch", "--interval", "1ms"}, "--interval must be at least 100ms"},
		{[]string{"cluster", "health", "--watch", "--wait-timeout", "-1s"}, "--wait-timeout must be positive"},
		{[]string{"cluster", "health", "extra"}, "unexpected argument"},
		{[]string{"delete-topic", "--topic", "t", "--wait-timeout", "1s"}, "--wait-timeout needs --wait"},
		{[]string{"delete-topic", "--topic", "t", "--wait", "--wait-timeout", "0s"}, "--wait-timeout must be positive"},
		{[]string{"cluster"}, `"cluster" takes a subcommand`},
		{[]string{"cluster", "nope"}, `unknown command "cluster nope"`},
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
	for _, args := range [][]string{{"list-topics"}, {"describe-topic", "t"}, {"cluster", "health"}, {"describe-cluster", "--unavailable"}} {
		r := ctl(t, "", "", args...)
		if r.code != 2 || !strings.Contains(r.stderr, "--controller is required") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}

	// The group word alone with --help, or through help, lists its commands.
	for _, args := range [][]string{{"cluster", "--help"}, {"help", "cluster"}} {
		r := ctl(t, "", "", args...)
		wantCode(t, r, 0)
		wantContains(t, "group help", r.stdout, "cluster health")
	}
	r := ctl(t, "", "", "--help")
	wantContains(t, "--help", r.stdout, "list-topics", "describe-topic", "cluster health")
}

// A controller address that accepts connections but never answers (a hung
// process) fails within --timeout with the address and what it did, not a
// bare "context deadline exceeded".
func TestHungControllerNamesTheAddress(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close() // never accepted: the TCP handshake completes, gRPC's never does
	r := ctl(t, "", "", "--controller", lis.Addr().String(), "--timeout", "300ms", "describe-cluster")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "no active controller", lis.Addr().String())
}
