package controller

import (
	"context"
	"strings"
	"testing"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// startBudgetCluster starts a controller with brokers 1..len(budgets), each
// registered with its --max-partitions.
func startBudgetCluster(t *testing.T, budgets ...int32) *harness {
	t.Helper()
	h := newHarness(t)
	h.start()
	for i, b := range budgets {
		id := int32(i + 1)
		resp, err := h.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{
			BrokerId: id, Host: brokerHost(id), Port: brokerPort(id), MaxPartitions: b})
		if err != nil || resp.GetErrorCode() != codeNone {
			t.Fatalf("RegisterBroker(%d): %v %v", id, resp, err)
		}
		h.epoch[id] = resp.GetBrokerEpoch()
	}
	return h
}

// A create that would put more replicas on a broker than its
// --max-partitions is refused whole with WILL_EXCEED_PARTITION_LIMITS
// naming the broker, its count and its budget, and changes nothing; one
// that fits is created.
func TestCreateTopicOverPartitionBudget(t *testing.T) {
	h := startBudgetCluster(t, 10, 10, 4)
	ctx := context.Background()
	h.createTopic("a", 3, 3) // every broker hosts 3

	before := h.snapshot()
	resp, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "b", Partitions: 3, ReplicationFactor: 2})
	if err != nil {
		t.Fatalf("CreateTopic: %v", err)
	}
	// 3 partitions RF 2 on 3 brokers: 2 more replicas each; broker 3
	// would host 5 > 4.
	msg := resp.GetErrorMessage()
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_WILL_EXCEED_PARTITION_LIMITS ||
		!strings.Contains(msg, "broker 3 would host 5 partitions (3 now + 2 new), its --max-partitions is 4") ||
		strings.Contains(msg, "broker 1") || strings.Contains(msg, "broker 2") {
		t.Errorf("over-budget create answered %v %q, want WILL_EXCEED_PARTITION_LIMITS naming broker 3 alone", resp.GetErrorCode(), msg)
	}
	h.assertUnchanged(before)
	for id := int32(1); id <= 3; id++ {
		if s, _ := h.fake(id).laiState("b", 0); s != nil {
			t.Errorf("broker %d was told of the refused topic: %v", id, s)
		}
	}
	h.c.lock()
	_, known := h.c.configs["b"]
	h.c.unlock()
	if known {
		t.Errorf("the refused topic's configs are known to the controller")
	}

	// Exactly up to the budget fits: 1 partition RF 3 puts broker 3 at 4.
	h.createTopic("c", 1, 3)

	// 100,000 partitions RF 3 on 3 brokers with the default-sized budget
	// of this test's brokers: refused, naming every broker.
	before = h.snapshot()
	resp, err = h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "huge", Partitions: 100000, ReplicationFactor: 3})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_WILL_EXCEED_PARTITION_LIMITS ||
		!strings.Contains(resp.GetErrorMessage(), "3 broker(s)") {
		t.Errorf("100,000 partitions: %v %v, want WILL_EXCEED_PARTITION_LIMITS for 3 brokers", resp, err)
	}
	h.assertUnchanged(before)
}

// A broker that registered no budget (0: an older broker) has no limit.
func TestCreateTopicWithoutBudget(t *testing.T) {
	h := startBudgetCluster(t, 0, 0)
	h.createTopic("a", 50, 2)
}

// A reassignment adding a replica to a broker at its budget is refused and
// changes nothing.
func TestReassignOverPartitionBudget(t *testing.T) {
	h := startBudgetCluster(t, 10, 10, 10, 1)
	ctx := context.Background()
	h.createTopic("t", 4, 1) // one replica on each broker
	var onBroker1 int32 = -1
	for i := int32(0); i < 4; i++ {
		if r := h.part("t", i).Replicas; r[0] == 1 {
			onBroker1 = i
		}
	}
	if onBroker1 < 0 {
		t.Fatalf("no partition of t on broker 1")
	}
	before := h.snapshot()
	resp, err := h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: onBroker1, Replicas: []int32{4}})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_WILL_EXCEED_PARTITION_LIMITS ||
		!strings.Contains(resp.GetErrorMessage(), "broker 4 would host 2 partitions (1 now + 1 new), its --max-partitions is 1") {
		t.Errorf("over-budget reassignment: %v %v, want WILL_EXCEED_PARTITION_LIMITS naming broker 4", resp, err)
	}
	h.assertUnchanged(before)
	// Within budget: moving it to broker 2 is accepted.
	resp, err = h.c.ReassignPartition(ctx, &replicadv1.ReassignPartitionRequest{Topic: "t", Partition: onBroker1, Replicas: []int32{2}})
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Errorf("reassignment within budget: %v %v", resp, err)
	}
}

// A negative max_partitions is malformed.
func TestRegisterNegativeMaxPartitions(t *testing.T) {
	h := newHarness(t)
	h.start()
	_, err := h.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{
		BrokerId: 1, Host: brokerHost(1), Port: brokerPort(1), MaxPartitions: -1})
	if err == nil || !strings.Contains(err.Error(), "max_partitions") {
		t.Errorf("RegisterBroker with max_partitions -1: %v, want InvalidArgument naming max_partitions", err)
	}
}

// A create of a topic that exists answers TOPIC_ALREADY_EXISTS even when
// its partitions fill the budgets: an operator retrying a create whose
// answer was lost must not be told it does not fit.
func TestCreateExistingTopicAtBudget(t *testing.T) {
	h := startBudgetCluster(t, 2, 2)
	h.createTopic("a", 2, 2) // both brokers full
	resp, err := h.c.CreateTopic(context.Background(), &replicadv1.CreateTopicRequest{Topic: "a", Partitions: 2, ReplicationFactor: 2})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS {
		t.Errorf("create again: %v %v, want TOPIC_ALREADY_EXISTS", resp, err)
	}
}

// BenchmarkOverBudgetCheck is the budget check of a create of 1,000
// partitions RF 3 in a cluster already holding 100,000 partitions RF 3 on
// 5 brokers: it runs under the controller's lock, once per create or
// reassignment.
func BenchmarkOverBudgetCheck(b *testing.B) {
	c := &Controller{parts: map[partitionKey]store.Partition{}, brokers: map[int32]*brokerState{}}
	for id := int32(1); id <= 5; id++ {
		c.brokers[id] = &brokerState{info: store.Broker{ID: id, MaxPartitions: 80_000}}
	}
	live := []int32{1, 2, 3, 4, 5}
	for i, rs := range assignReplicas(live, 100_000, 3, 0) {
		c.parts[partitionKey{"big", int32(i)}] = store.Partition{Topic: "big", Partition: int32(i), Replicas: rs}
	}
	added := assignReplicas(live, 1_000, 3, 1)
	for b.Loop() {
		if over := c.overBudgetLocked(added); len(over) != 0 {
			b.Fatal(over)
		}
	}
}
