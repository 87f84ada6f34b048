package controller

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/controller/store/storetest"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
)

func (h *harness) createPartitions(topic string, count int32) []*replicadv1.ClusterPartition {
	h.t.Helper()
	resp, err := h.c.CreatePartitions(context.Background(), &replicadv1.CreatePartitionsRequest{Topic: topic, Count: count})
	if err != nil || resp.GetErrorCode() != codeNone {
		h.t.Fatalf("CreatePartitions(%s, %d): %v %v", topic, count, resp, err)
	}
	return resp.GetPartitions()
}

// stored is every partition of topic as stored, by partition.
func (h *harness) stored(topic string) []store.Partition {
	h.t.Helper()
	tp, err := h.st.Topic(context.Background(), topic)
	if err != nil {
		h.t.Fatalf("store.Topic(%s): %v", topic, err)
	}
	return tp.Partitions
}

// The partitions added continue the topic's assignment: the topic then
// reads as if it had been created with them all (Kafka's replica shift
// included), under the topic's ID, and their replicas are told to create
// them (is_new) and every broker learns of them, as for a new topic.
func TestCreatePartitionsContinuesTheAssignment(t *testing.T) {
	h := startCluster(t, 4)
	h.createTopic("first", 1, 1) // the next topic starts at broker index 1
	h.createTopic("a", 2, 3)
	before := h.stored("a")
	added := h.createPartitions("a", 9)

	want := assignReplicas([]int32{1, 2, 3, 4}, 9, 3, 1)
	got := h.stored("a")
	if len(got) != 9 || len(added) != 7 {
		t.Fatalf("a has %d partitions stored, %d answered; want 9 and the 7 added", len(got), len(added))
	}
	for i, p := range got {
		if !slices.Equal(p.Replicas, want[i]) || !slices.Equal(p.ISR, want[i]) || p.Leader != want[i][0] ||
			p.TopicID != before[0].TopicID || p.LeaderEpoch != 0 || p.PartitionEpoch != 0 {
			t.Errorf("a-%d stored as %+v, want replicas %v (as created with 9), all in the ISR, topic ID %s", i, p, want[i], before[0].TopicID)
		}
		if i < 2 {
			if !samePartition(p, before[i]) {
				t.Errorf("a-%d changed: %+v, was %+v", i, p, before[i])
			}
			continue
		}
		if cp := added[i-2]; cp.GetPartition() != int32(i) || !slices.Equal(cp.GetReplicas(), p.Replicas) || cp.GetTopicId() != p.TopicID {
			t.Errorf("answer %v is not the stored %+v", cp, p)
		}
		for _, r := range p.Replicas {
			if s := sentNow(t, h, r, p); s != nil && (!s.GetIsNew() || s.GetTopicId() != p.TopicID) {
				t.Errorf("LeaderAndIsr of new partition a-%d to %d: %v, want is_new with the topic ID", i, r, s)
			}
		}
	}
	// The shift: with 4 brokers the followers move on by one each time
	// the partitions wrap around (a-1 [3 1 2], a-5 [3 2 4]).
	if !slices.Equal(got[1].Replicas, []int32{3, 1, 2}) || !slices.Equal(got[5].Replicas, []int32{3, 2, 4}) {
		t.Errorf("a-1 replicas %v, a-5 %v; want [3 1 2] and [3 2 4]", got[1].Replicas, got[5].Replicas)
	}
	for id := int32(1); id <= 4; id++ {
		waitFor(t, "every broker to learn of the new partitions", func() bool {
			for _, um := range h.fake(id).updateMetadatas() {
				for _, s := range um.GetPartitionStates() {
					if s.GetTopic() == "a" && s.GetPartition() == 8 {
						return true
					}
				}
			}
			return false
		})
	}
	// The controller holds them: they take part in elections at once.
	if p := h.memPart("a", 8); !samePartition(p, got[8]) {
		t.Errorf("a-8 in memory %+v, stored %+v", p, got[8])
	}
}

// Kafka's rules: the topic must exist, the count must grow, the live
// brokers must hold the replication factor, and bad input is
// InvalidArgument naming the field. Nothing is stored or sent on a refusal.
func TestCreatePartitionsRefusals(t *testing.T) {
	h := startCluster(t, 3)
	ctx := context.Background()
	h.createTopic("a", 2, 3)
	before := h.snapshot()
	for _, tc := range []struct {
		name  string
		req   *replicadv1.CreatePartitionsRequest
		field string // InvalidArgument naming it
		code  replicadv1.ErrorCode
		msg   string
	}{
		{"no topic", &replicadv1.CreatePartitionsRequest{Count: 3}, "topic", 0, ""},
		{"bad topic", &replicadv1.CreatePartitionsRequest{Topic: "a/b", Count: 3}, "topic", 0, ""},
		{"zero count", &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 0}, "count", 0, ""},
		{"negative count", &replicadv1.CreatePartitionsRequest{Topic: "a", Count: -4}, "count", 0, ""},
		{"too many", &replicadv1.CreatePartitionsRequest{Topic: "a", Count: maxPartitionsPerTopic + 1}, "count", 0, ""},
		{"unknown topic", &replicadv1.CreatePartitionsRequest{Topic: "nope", Count: 3}, "", replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, `"nope" does not exist`},
		{"same count", &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 2}, "", replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, "already has 2 partitions"},
		{"fewer", &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 1}, "", replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, "has 2 partitions"},
		{"same count, validate only", &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 2, ValidateOnly: true}, "", replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS, "already has 2"},
	} {
		resp, err := h.c.CreatePartitions(ctx, tc.req)
		if tc.field != "" {
			if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.field+":") {
				t.Errorf("%s: %v %v, want InvalidArgument naming %s", tc.name, resp, err, tc.field)
			}
			continue
		}
		if err != nil || resp.GetErrorCode() != tc.code || !strings.Contains(resp.GetErrorMessage(), tc.msg) || len(resp.GetPartitions()) > 0 {
			t.Errorf("%s: %v %v, want %v saying %q", tc.name, resp, err, tc.code, tc.msg)
		}
	}
	h.assertUnchanged(before)
	// Replication factor 3 with a broker fenced.
	h.expire(1, 2)
	before = h.snapshot()
	resp, err := h.c.CreatePartitions(ctx, &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 4})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_REPLICATION_FACTOR || !strings.Contains(resp.GetErrorMessage(), "replication factor 3") {
		t.Errorf("RF 3 over 2 live brokers: %v %v, want INVALID_REPLICATION_FACTOR", resp, err)
	}
	h.assertUnchanged(before)
	for id := int32(1); id <= 3; id++ {
		if s, _ := h.fake(id).laiState("a", 2); s != nil {
			t.Errorf("a refused change sent broker %d a LeaderAndIsr of a-2: %v", id, s)
		}
	}
}

// validate_only answers the partitions that would be added, as they would
// be assigned, and changes nothing.
func TestCreatePartitionsValidateOnly(t *testing.T) {
	h := startCluster(t, 3)
	ctx := context.Background()
	h.createTopic("a", 1, 2)
	before := h.snapshot()
	resp, err := h.c.CreatePartitions(ctx, &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 4, ValidateOnly: true})
	if err != nil || resp.GetErrorCode() != codeNone || len(resp.GetPartitions()) != 3 {
		t.Fatalf("validate only: %v %v, want the 3 partitions that would be added", resp, err)
	}
	h.assertUnchanged(before)
	if s, _ := h.fake(1).laiState("a", 1); s != nil {
		t.Errorf("validate only sent a LeaderAndIsr: %v", s)
	}
	real := h.createPartitions("a", 4)
	for i, cp := range resp.GetPartitions() {
		if !slices.Equal(cp.GetReplicas(), real[i].GetReplicas()) || cp.GetPartition() != real[i].GetPartition() {
			t.Errorf("validate only answered %v, the real change %v", cp, real[i])
		}
	}
}

// A store write that fails before landing leaves the topic as it was (and
// memory with it): the retry adds them. One that lands with an error (an
// unknown outcome) is read back: the controller holds and announces every
// new partition, and the operator's retry with the same count is answered
// INVALID_PARTITIONS "already has N partitions", as Kafka answers.
func TestCreatePartitionsStoreFaults(t *testing.T) {
	h, f := faultyCluster(t, 3)
	ctx := context.Background()
	h.createTopic("a", 2, 3)
	req := &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 5}

	f.Inject(storetest.Fault{Op: storetest.OpCreatePartitions, Kind: storetest.FailBefore})
	if resp, err := h.c.CreatePartitions(ctx, req); status.Code(err) != codes.Unavailable {
		t.Fatalf("a write that failed: %v %v, want Unavailable (retry)", resp, err)
	}
	if n := len(h.stored("a")); n != 2 {
		t.Fatalf("%d partitions stored after a failed write, want 2", n)
	}
	h.c.lock()
	n := h.c.partitionCountLocked("a")
	h.c.unlock()
	if n != 2 {
		t.Fatalf("%d partitions in memory after a failed write, want 2", n)
	}

	f.Inject(storetest.Fault{Op: storetest.OpCreatePartitions, Kind: storetest.LandThenFail})
	if resp, err := h.c.CreatePartitions(ctx, req); err == nil {
		t.Fatalf("a write that landed with an error answered %v, want an error", resp)
	}
	got := h.stored("a")
	if len(got) != 5 {
		t.Fatalf("%d partitions stored, want 5", len(got))
	}
	for _, p := range got[2:] {
		h.wantMemoryAgrees("a", p.Partition)
		for _, r := range p.Replicas {
			waitFor(t, "the new partitions' replicas to be told to create them", func() bool {
				s, _ := h.fake(r).laiState("a", p.Partition)
				return s != nil && s.GetIsNew() && s.GetLeader() == p.Leader
			})
		}
	}
	resp, err := h.c.CreatePartitions(ctx, req)
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS ||
		!strings.Contains(resp.GetErrorMessage(), "already has 5 partitions") {
		t.Fatalf("the operator's retry: %v %v, want INVALID_PARTITIONS already has 5", resp, err)
	}
	if n := len(h.stored("a")); n != 5 {
		t.Fatalf("%d partitions stored after the retry, want 5", n)
	}
}

// A controller that dies after its write landed but before it told anyone:
// the next controller finds every new partition in the store (the write is
// one transaction: none half there) and sends them to their replicas.
// One that died before its write landed leaves none.
func TestCreatePartitionsSurviveFailover(t *testing.T) {
	mem := store.NewMemory()
	reads := &failingReads{Store: mem}
	f := storetest.NewFaulty(reads)
	h := startCluster(t, 3, withStore(f))
	ctx := context.Background()
	h.createTopic("a", 2, 2)
	h.createTopic("b", 1, 2)

	// The write of a lands with an error and the re-read fails with it:
	// nobody is told (resync pending), as for a controller that died.
	f.Inject(storetest.Fault{Op: storetest.OpCreatePartitions, Kind: storetest.LandThenFail})
	reads.fail.Store(true)
	if _, err := h.c.CreatePartitions(ctx, &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 4}); err == nil {
		t.Fatal("a write that landed with an error answered no error")
	}
	// The write of b fails: nothing is stored.
	f.Inject(storetest.Fault{Op: storetest.OpCreatePartitions, Kind: storetest.FailBefore})
	if _, err := h.c.CreatePartitions(ctx, &replicadv1.CreatePartitionsRequest{Topic: "b", Count: 3}); err == nil {
		t.Fatal("a write that failed answered no error")
	}
	for _, p := range []int32{2, 3} {
		if s, _ := h.fake(h.part("a", p).Leader).laiState("a", p); s != nil {
			t.Fatalf("a-%d told before the failover: %v", p, s)
		}
	}
	h.stop()
	reads.fail.Store(false)

	h2 := newHarness(t, withStore(mem))
	h2.start()
	for id := int32(1); id <= 3; id++ {
		h2.register(id)
	}
	if n := len(h2.stored("b")); n != 1 {
		t.Fatalf("b has %d partitions stored, want 1", n)
	}
	got := h2.stored("a")
	if len(got) != 4 {
		t.Fatalf("a has %d partitions stored, want 4", len(got))
	}
	for _, p := range got[2:] {
		if m := h2.memPart("a", p.Partition); !samePartition(m, p) {
			t.Fatalf("new controller holds a-%d as %+v, stored %+v", p.Partition, m, p)
		}
		for _, r := range p.Replicas {
			waitFor(t, "the new controller to send the new partitions", func() bool {
				s, _ := h2.fake(r).laiState("a", p.Partition)
				return s != nil && s.GetLeader() == p.Leader && s.GetTopicId() == p.TopicID
			})
		}
	}
	// The new controller continues from what is stored.
	added := h2.createPartitions("a", 6)
	if len(added) != 2 || added[0].GetPartition() != 4 {
		t.Fatalf("after failover, adding to 6 answered %v", added)
	}
}

// failingReads is a store whose reads of every partition fail while fail
// is set, as the store of a controller that went away after a write.
type failingReads struct {
	store.Store
	fail atomic.Bool
}

func (r *failingReads) Partitions(ctx context.Context) ([]store.Partition, error) {
	if r.fail.Load() {
		return nil, storetest.ErrTimedOut
	}
	return r.Store.Partitions(ctx)
}

// The decision is one Controller.createPartitions span under the caller's,
// naming the topic and the counts and recording each partition created.
func TestCreatePartitionsIsTraced(t *testing.T) {
	h, rec, client := tracedCluster(t, 3)
	h.createTopic("a", 1, 2)
	cctx, span := client.Start(context.Background(), "ctlclient alter-topic")
	resp, err := h.c.CreatePartitions(cctx, &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 3})
	span.End()
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("CreatePartitions: %v %v", resp, err)
	}
	spans := spantest.Named(rec, "Controller.createPartitions")
	if len(spans) != 1 || spans[0].Parent().SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("Controller.createPartitions spans %v, want one under the client's", spans)
	}
	a := spantest.Attrs(spans[0].Attributes())
	if a["replicad.topic"].AsString() != "a" || a["replicad.partitions"].AsInt64() != 3 || a["replicad.existing_partitions"].AsInt64() != 1 ||
		a["replicad.replication_factor"].AsInt64() != 2 || a["replicad.topic_id"].AsString() == "" {
		t.Errorf("Controller.createPartitions attributes %v", a)
	}
	created := 0
	for _, e := range spans[0].Events() {
		if e.Name == "partition created" {
			created++
		}
	}
	if created != 2 {
		t.Errorf("%d partition created events, want 2", created)
	}
}

// Adding partitions that would put more replicas on a broker than its
// --max-partitions is refused whole with WILL_EXCEED_PARTITION_LIMITS
// naming the broker, and nothing is stored; as many as fit are added.
func TestCreatePartitionsOverPartitionBudget(t *testing.T) {
	h := startBudgetCluster(t, 10, 10, 4)
	ctx := context.Background()
	h.createTopic("a", 3, 3) // every broker hosts 3
	before := h.snapshot()
	resp, err := h.c.CreatePartitions(ctx, &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 5})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_WILL_EXCEED_PARTITION_LIMITS ||
		!strings.Contains(resp.GetErrorMessage(), "broker 3 would host 5 partitions (3 now + 2 new), its --max-partitions is 4") {
		t.Fatalf("over-budget add: %v %v, want WILL_EXCEED_PARTITION_LIMITS naming broker 3", resp, err)
	}
	h.assertUnchanged(before)
	if added := h.createPartitions("a", 4); len(added) != 1 {
		t.Fatalf("adding one that fits answered %v", added)
	}
}
