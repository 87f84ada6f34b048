package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/replicad/replicad/controller/store"
)

// RunSuite runs the contract every Store must meet. open returns a new,
// empty store for the (sub)test t; the suite closes it at the end of t.
func RunSuite(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ControllerEpochRises", testControllerEpochRises},
		{"ControllerEpochBumpsPast", testControllerEpochBumpsPast},
		{"ConcurrentControllerEpochBumpsAreDistinct", testConcurrentControllerEpochBumps},
		{"BrokerEpochsOnlyGrow", testBrokerEpochsOnlyGrow},
		{"ConcurrentRegistrationsGetDistinctEpochs", testConcurrentRegistrations},
		{"UpdateBrokerIsCASOnBrokerEpoch", testUpdateBrokerCAS},
		{"CreateTopic", testCreateTopic},
		{"CreateTopicRejectsBadPartitions", testCreateTopicInvalid},
		{"CreatePartitionsIsOneWrite", testCreatePartitions},
		{"DeleteTopic", testDeleteTopic},
		{"DeletionsPendUntilCompleted", testPendingDeletions},
		{"CASSuccess", testCASSuccess},
		{"CASConflictChangesNothing", testCASConflict},
		{"UpdateIsAllOrNothing", testUpdateAllOrNothing},
		{"UpdateRejectsBadEpochsAndDuplicates", testUpdateInvalid},
		{"ConcurrentCASOneWinnerPerEpoch", testConcurrentCAS},
		{"ConcurrentOverlappingBatchesStayAtomic", testConcurrentOverlappingBatches},
		{"ValuesAreCopies", testValuesAreCopies},
		{"CanceledContextWritesNothing", testCanceledContext},
		{"ClosedStoreFails", testClosed},
		{"ACLs", testACLs},
		{"ACLsRejectEmptyFields", testACLsInvalid},
		{"ConcurrentACLChangesLoseNothing", testConcurrentACLs},
		{"TopicConfigs", testTopicConfigs},
		{"AlterTopicConfigIsOneWrite", testAlterTopicConfig},
		{"ReplicationThrottle", testReplicationThrottle},
		{"ProducerIDBlocks", testProducerIDBlocks},
		{"ConcurrentProducerIDBlocksAreDisjoint", testConcurrentProducerIDBlocks},
		{"ProducerEpochBumps", testProducerEpochBumps},
		{"ConcurrentProducerEpochBumpsOneWins", testConcurrentProducerEpochBumps},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tc.fn(t, s)
		})
	}
}

// RunDurabilitySuite runs the checks for a store that survives a restart.
// open returns a new, empty store for t; reopen is given a store the suite
// has closed and opens the same storage again (the suite closes what it
// returns). For bbolt: open uses a fresh t.TempDir(), reopen calls OpenBolt
// on the closed store's Dir().
func RunDurabilitySuite(t *testing.T, open func(t *testing.T) store.Store, reopen func(t *testing.T, closed store.Store) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store, restart func(store.Store) store.Store)
	}{
		{"ControllerEpochPersists", testControllerEpochPersists},
		{"BrokerEpochsGrowAcrossRestart", testBrokerEpochsAcrossRestart},
		{"PartitionsPersist", testPartitionsPersist},
		{"PendingDeletionsPersist", testPendingDeletionsPersist},
		{"ACLsPersist", testACLsPersist},
		{"TopicConfigsPersist", testTopicConfigsPersist},
		{"ReplicationThrottlePersists", testReplicationThrottlePersists},
		{"ProducerIDsPersist", testProducerIDsPersist},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			restart := func(old store.Store) store.Store {
				t.Helper()
				if err := old.Close(); err != nil {
					t.Fatalf("close: %v", err)
				}
				s := reopen(t, old)
				t.Cleanup(func() { s.Close() })
				return s
			}
			tc.fn(t, s, restart)
		})
	}
}

// ---- controller epoch ----

// testControllerEpochRises ensures the controller epoch starts at 0 and every bump returns one more.
func testControllerEpochRises(t *testing.T, s store.Store) {
	ctx := context.Background()
	if got := must(s.ControllerEpoch(ctx))(t); got != 0 {
		t.Fatalf("initial controller epoch = %d, want 0", got)
	}
	for want := int32(1); want <= 3; want++ {
		if got := must(s.BumpControllerEpoch(ctx, 0))(t); got != want {
			t.Fatalf("bump = %d, want %d", got, want)
		}
	}
	if got := must(s.ControllerEpoch(ctx))(t); got != 3 {
		t.Fatalf("controller epoch = %d, want 3", got)
	}
}

// testControllerEpochBumpsPast ensures a bump past an epoch seen elsewhere
// lands one above it in one step, and that a smaller one is still a bump by one.
func testControllerEpochBumpsPast(t *testing.T, s store.Store) {
	ctx := context.Background()
	must(s.BumpControllerEpoch(ctx, 0))(t)
	if got := must(s.BumpControllerEpoch(ctx, 100))(t); got != 101 {
		t.Fatalf("bump past 100 = %d, want 101", got)
	}
	if got := must(s.BumpControllerEpoch(ctx, 50))(t); got != 102 {
		t.Fatalf("bump past 50 at 101 = %d, want 102", got)
	}
	if got := must(s.ControllerEpoch(ctx))(t); got != 102 {
		t.Fatalf("controller epoch = %d, want 102", got)
	}
	if _, err := s.BumpControllerEpoch(ctx, math.MaxInt32); err == nil {
		t.Fatalf("bump past the largest epoch succeeded")
	}
}

// testConcurrentControllerEpochBumps ensures concurrent bumps never hand out the same epoch twice.
func testConcurrentControllerEpochBumps(t *testing.T, s store.Store) {
	const n = 16
	got := make([]int32, n)
	errs := make([]error, n)
	together(n, func(i int) { got[i], errs[i] = s.BumpControllerEpoch(context.Background(), 0) })
	noErrors(t, errs)
	slices.Sort(got)
	for i, e := range got {
		if e != int32(i+1) {
			t.Fatalf("epochs from concurrent bumps = %v, want 1..%d each once", got, n)
		}
	}
}

// testControllerEpochPersists ensures the controller epoch survives a restart and keeps rising after it.
func testControllerEpochPersists(t *testing.T, s store.Store, restart func(store.Store) store.Store) {
	ctx := context.Background()
	must(s.BumpControllerEpoch(ctx, 0))(t)
	must(s.BumpControllerEpoch(ctx, 0))(t)
	s = restart(s)
	if got := must(s.ControllerEpoch(ctx))(t); got != 2 {
		t.Fatalf("controller epoch after restart = %d, want 2", got)
	}
	if got := must(s.BumpControllerEpoch(ctx, 0))(t); got != 3 {
		t.Fatalf("bump after restart = %d, want 3", got)
	}
	s = restart(s)
	if got := must(s.ControllerEpoch(ctx))(t); got != 3 {
		t.Fatalf("controller epoch after second restart = %d, want 3", got)
	}
}

// ---- brokers ----

// testBrokerEpochsOnlyGrow ensures every registration, including a re-registration, gets a larger epoch and an unfenced record.
func testBrokerEpochsOnlyGrow(t *testing.T, s store.Store) {
	ctx := context.Background()
	var last int64
	for _, b := range []store.Broker{
		{ID: 2, Host: "h2", Port: 9092},
		{ID: 1, Host: "h1", Port: 9091, Epoch: 1000, Fenced: true}, // Epoch and Fenced are ignored
		{ID: 3, Host: "h3", Port: 9093},
		{ID: 2, Host: "h2b", Port: 9192}, // re-registration
	} {
		got := must(s.RegisterBroker(ctx, b))(t)
		if got.Epoch <= last {
			t.Fatalf("register %d: epoch %d, not above the previous %d", b.ID, got.Epoch, last)
		}
		last = got.Epoch
		want := b
		want.Epoch, want.Fenced = got.Epoch, false
		if got != want {
			t.Fatalf("register returned %+v, want %+v", got, want)
		}
	}
	brokers := must(s.Brokers(ctx))(t)
	ids := make([]int32, len(brokers))
	for i, b := range brokers {
		ids[i] = b.ID
		if b.Fenced {
			t.Errorf("broker %d fenced after registering", b.ID)
		}
	}
	if !slices.Equal(ids, []int32{1, 2, 3}) {
		t.Fatalf("broker ids = %v, want [1 2 3]", ids)
	}
	if b := brokers[1]; b.Host != "h2b" || b.Port != 9192 || b.Epoch != last {
		t.Fatalf("re-registered broker 2 = %+v, want host h2b port 9192 epoch %d", b, last)
	}
	if _, err := s.RegisterBroker(ctx, store.Broker{ID: -1}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("register broker -1: %v, want ErrInvalid", err)
	}
}

// testConcurrentRegistrations ensures concurrent registrations never share a broker epoch.
func testConcurrentRegistrations(t *testing.T, s store.Store) {
	const n = 16
	got := make([]store.Broker, n)
	errs := make([]error, n)
	together(n, func(i int) {
		got[i], errs[i] = s.RegisterBroker(context.Background(), store.Broker{ID: int32(i % 4), Host: "h", Port: 1})
	})
	noErrors(t, errs)
	seen := map[int64]bool{}
	for _, b := range got {
		if seen[b.Epoch] {
			t.Fatalf("broker epoch %d handed out twice: %+v", b.Epoch, got)
		}
		seen[b.Epoch] = true
	}
	// Each broker's stored epoch is the one of its last registration, the
	// largest it was given.
	for _, b := range must(s.Brokers(context.Background()))(t) {
		var maxEpoch int64
		for _, g := range got {
			if g.ID == b.ID {
				maxEpoch = max(maxEpoch, g.Epoch)
			}
		}
		if b.Epoch != maxEpoch {
			t.Fatalf("broker %d stored epoch %d, want its latest %d", b.ID, b.Epoch, maxEpoch)
		}
	}
}

// testUpdateBrokerCAS ensures UpdateBroker fences only the incarnation whose epoch it names.
func testUpdateBrokerCAS(t *testing.T, s store.Store) {
	ctx := context.Background()
	old := must(s.RegisterBroker(ctx, store.Broker{ID: 1, Host: "h", Port: 1}))(t)
	fenced := old
	fenced.Fenced = true
	if err := s.UpdateBroker(ctx, fenced); err != nil {
		t.Fatalf("fence: %v", err)
	}
	if got := brokerByID(t, s, 1); got != fenced {
		t.Fatalf("after fencing: %+v, want %+v", got, fenced)
	}

	cur := must(s.RegisterBroker(ctx, store.Broker{ID: 1, Host: "h", Port: 1}))(t)
	if cur.Fenced || cur.Epoch <= old.Epoch {
		t.Fatalf("re-registered: %+v, want unfenced with epoch above %d", cur, old.Epoch)
	}
	// A late fencing of the old incarnation must not touch the new one.
	if err := s.UpdateBroker(ctx, fenced); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("fence old incarnation: %v, want ErrConflict", err)
	}
	if got := brokerByID(t, s, 1); got != cur {
		t.Fatalf("after rejected fencing: %+v, want %+v", got, cur)
	}
	if err := s.UpdateBroker(ctx, store.Broker{ID: 9, Epoch: cur.Epoch}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update unknown broker: %v, want ErrNotFound", err)
	}
}

// testBrokerEpochsAcrossRestart ensures broker epochs are never reused after a restart, whoever registers.
func testBrokerEpochsAcrossRestart(t *testing.T, s store.Store, restart func(store.Store) store.Store) {
	ctx := context.Background()
	b1 := must(s.RegisterBroker(ctx, store.Broker{ID: 1, Host: "h1", Port: 1}))(t)
	b2 := must(s.RegisterBroker(ctx, store.Broker{ID: 2, Host: "h2", Port: 2}))(t)
	b2.Fenced = true
	if err := s.UpdateBroker(ctx, b2); err != nil {
		t.Fatalf("fence 2: %v", err)
	}
	s = restart(s)
	if got := must(s.Brokers(ctx))(t); !slices.Equal(got, []store.Broker{b1, b2}) {
		t.Fatalf("brokers after restart = %+v, want %+v", got, []store.Broker{b1, b2})
	}
	// Broker 1 registers again: its epoch must pass broker 2's too, the
	// largest ever handed out.
	again := must(s.RegisterBroker(ctx, store.Broker{ID: 1, Host: "h1", Port: 1}))(t)
	if again.Epoch <= b2.Epoch {
		t.Fatalf("broker 1 re-registered after restart with epoch %d, not above %d", again.Epoch, b2.Epoch)
	}
	// Another restart: a new broker still gets an epoch above every one
	// handed out before.
	s = restart(s)
	b3 := must(s.RegisterBroker(ctx, store.Broker{ID: 3, Host: "h3", Port: 3}))(t)
	if b3.Epoch <= again.Epoch {
		t.Fatalf("broker 3 registered after second restart with epoch %d, not above %d", b3.Epoch, again.Epoch)
	}
}

// ---- topics ----

// testCreateTopic ensures a created topic reads back whole, sorted, and cannot be created twice.
func testCreateTopic(t *testing.T, s store.Store) {
	ctx := context.Background()
	beta := []store.Partition{
		{Partition: 1, Leader: 2, ISR: []int32{2, 3}, Replicas: []int32{2, 3}},
		{Topic: "beta", Partition: 0, Leader: 1, ISR: []int32{1, 2}, Replicas: []int32{1, 2}},
	}
	if err := s.CreateTopic(ctx, "beta", beta, nil); err != nil {
		t.Fatalf("create beta: %v", err)
	}
	if err := s.CreateTopic(ctx, "alpha", []store.Partition{{Partition: 0, Leader: 3, ISR: []int32{3}, Replicas: []int32{3}}}, nil); err != nil {
		t.Fatalf("create alpha: %v", err)
	}
	wantBeta := []store.Partition{
		{Topic: "beta", Partition: 0, Leader: 1, ISR: []int32{1, 2}, Replicas: []int32{1, 2}},
		{Topic: "beta", Partition: 1, Leader: 2, ISR: []int32{2, 3}, Replicas: []int32{2, 3}},
	}
	wantAlpha := store.Partition{Topic: "alpha", Partition: 0, Leader: 3, ISR: []int32{3}, Replicas: []int32{3}}

	got := must(s.Topic(ctx, "beta"))(t)
	if got.Name != "beta" || !equalPartitions(got.Partitions, wantBeta) {
		t.Fatalf("topic beta = %+v, want partitions %+v", got, wantBeta)
	}
	all := must(s.Partitions(ctx))(t)
	if want := append([]store.Partition{wantAlpha}, wantBeta...); !equalPartitions(all, want) {
		t.Fatalf("partitions = %+v, want %+v", all, want)
	}
	if p := must(s.Partition(ctx, "beta", 1))(t); !equalPartition(p, wantBeta[1]) {
		t.Fatalf("partition beta-1 = %+v, want %+v", p, wantBeta[1])
	}

	err := s.CreateTopic(ctx, "beta", []store.Partition{{Partition: 0, Leader: 9, Replicas: []int32{9}}}, nil)
	if !errors.Is(err, store.ErrExists) {
		t.Fatalf("create beta again: %v, want ErrExists", err)
	}
	if got := must(s.Topic(ctx, "beta"))(t); !equalPartitions(got.Partitions, wantBeta) {
		t.Fatalf("beta after duplicate create = %+v, want %+v", got.Partitions, wantBeta)
	}
	for _, q := range []struct {
		topic string
		p     int32
	}{{"beta", 2}, {"beta", -1}, {"gamma", 0}, {"", 0}} {
		if _, err := s.Partition(ctx, q.topic, q.p); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("partition %q-%d: %v, want ErrNotFound", q.topic, q.p, err)
		}
	}
	if _, err := s.Topic(ctx, "gamma"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("topic gamma: %v, want ErrNotFound", err)
	}
}

// testCreateTopicInvalid ensures CreateTopic refuses an empty name, no partitions, gaps, duplicates and a foreign topic name, storing nothing.
func testCreateTopicInvalid(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		topic string
		parts []store.Partition
	}{
		{"empty name", "", []store.Partition{{Partition: 0}}},
		{"no partitions", "t", nil},
		{"gap", "t", []store.Partition{{Partition: 0}, {Partition: 2}}},
		{"duplicate", "t", []store.Partition{{Partition: 0}, {Partition: 0}}},
		{"negative", "t", []store.Partition{{Partition: -1}}},
		{"foreign topic", "t", []store.Partition{{Topic: "u", Partition: 0}}},
	} {
		if err := s.CreateTopic(ctx, tc.topic, tc.parts, nil); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if all := must(s.Partitions(ctx))(t); len(all) != 0 {
		t.Fatalf("partitions after rejected creates = %+v, want none", all)
	}
}

// testCreatePartitions ensures CreatePartitions adds every new partition
// of a topic with the expected count or none: a stale count (a retry whose
// first attempt landed) is ErrConflict, misnumbered partitions or another
// topic ID ErrInvalid, an unknown topic ErrNotFound, and nothing changes.
func testCreatePartitions(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopicWithID(t, s, "t", "id-t", 2)
	createTopic(t, s, "other", 1)
	before := must(s.Topic(ctx, "t"))(t)
	newPart := func(i int32, id string) store.Partition {
		return store.Partition{Partition: i, TopicID: id, Leader: 2, ISR: []int32{2, 3}, Replicas: []int32{2, 3}}
	}
	for _, tc := range []struct {
		name     string
		topic    string
		existing int32
		parts    []store.Partition
		want     error
	}{
		{"unknown topic", "nope", 2, []store.Partition{newPart(2, "id-t")}, store.ErrNotFound},
		{"stale count", "t", 1, []store.Partition{newPart(1, "id-t")}, store.ErrConflict},
		{"count ahead", "t", 3, []store.Partition{newPart(3, "id-t")}, store.ErrConflict},
		{"gap", "t", 2, []store.Partition{newPart(2, "id-t"), newPart(4, "id-t")}, store.ErrInvalid},
		{"overlap", "t", 2, []store.Partition{newPart(1, "id-t")}, store.ErrInvalid},
		{"duplicate", "t", 2, []store.Partition{newPart(2, "id-t"), newPart(2, "id-t")}, store.ErrInvalid},
		{"other topic ID", "t", 2, []store.Partition{newPart(2, "id-u")}, store.ErrInvalid},
		{"mixed topic IDs", "t", 2, []store.Partition{newPart(2, "id-t"), newPart(3, "id-u")}, store.ErrInvalid},
		{"foreign topic name", "t", 2, []store.Partition{{Topic: "other", Partition: 2, TopicID: "id-t"}}, store.ErrInvalid},
		{"none", "t", 2, nil, store.ErrInvalid},
		{"empty name", "", 2, []store.Partition{newPart(2, "id-t")}, store.ErrInvalid},
	} {
		if err := s.CreatePartitions(ctx, tc.topic, tc.existing, tc.parts); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if got := must(s.Topic(ctx, "t"))(t); !equalPartitions(got.Partitions, before.Partitions) {
		t.Fatalf("topic after refused adds = %+v, want %+v", got.Partitions, before.Partitions)
	}

	add := []store.Partition{newPart(3, "id-t"), {Topic: "t", Partition: 2, TopicID: "id-t", Leader: 3, ISR: []int32{3, 1}, Replicas: []int32{3, 1}}}
	if err := s.CreatePartitions(ctx, "t", 2, add); err != nil {
		t.Fatalf("add 2 partitions: %v", err)
	}
	add[0].ISR[0] = 99 // the store keeps its own copy
	want := append(slices.Clone(before.Partitions),
		store.Partition{Topic: "t", Partition: 2, TopicID: "id-t", Leader: 3, ISR: []int32{3, 1}, Replicas: []int32{3, 1}},
		store.Partition{Topic: "t", Partition: 3, TopicID: "id-t", Leader: 2, ISR: []int32{2, 3}, Replicas: []int32{2, 3}})
	if got := must(s.Topic(ctx, "t"))(t); !equalPartitions(got.Partitions, want) {
		t.Fatalf("topic after adding = %+v, want %+v", got.Partitions, want)
	}
	if p := must(s.Partition(ctx, "t", 3))(t); !equalPartition(p, want[3]) {
		t.Fatalf("partition t-3 = %+v, want %+v", p, want[3])
	}
	// The same request again (a retry after an unknown outcome) finds the
	// count moved on and writes nothing.
	if err := s.CreatePartitions(ctx, "t", 2, add); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("repeated add: %v, want ErrConflict", err)
	}
	if got := must(s.Topic(ctx, "other"))(t); len(got.Partitions) != 1 {
		t.Fatalf("other topic has %d partitions, want 1", len(got.Partitions))
	}
	// The new partitions are ordinary partitions: compare-and-set works on them.
	bump(t, s, "t", 3, 0)
}

// testDeleteTopic ensures a deleted topic is gone, deleting it again is ErrNotFound, and its name can be reused from scratch.
func testDeleteTopic(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopic(t, s, "doomed", 2)
	createTopic(t, s, "kept", 1)
	bump(t, s, "doomed", 0, 0)
	if err := s.DeleteTopic(ctx, "doomed"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := s.Partition(ctx, "doomed", 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("partition of deleted topic: %v, want ErrNotFound", err)
	}
	if _, err := s.Topic(ctx, "doomed"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted topic: %v, want ErrNotFound", err)
	}
	if all := must(s.Partitions(ctx))(t); len(all) != 1 || all[0].Topic != "kept" {
		t.Fatalf("partitions after delete = %+v, want only kept-0", all)
	}
	if err := s.DeleteTopic(ctx, "doomed"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete again: %v, want ErrNotFound", err)
	}
	if err := s.DeleteTopic(ctx, "never"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete unknown: %v, want ErrNotFound", err)
	}
	createTopic(t, s, "doomed", 1)
	if p := must(s.Partition(ctx, "doomed", 0))(t); p.PartitionEpoch != 0 {
		t.Fatalf("recreated topic's partition epoch = %d, want 0", p.PartitionEpoch)
	}
	if _, err := s.Partition(ctx, "doomed", 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("recreated topic kept an old partition: %v", err)
	}
	// An update aimed at the deleted topic's partition finds nothing.
	err := s.UpdatePartitions(ctx, []store.PartitionUpdate{{Expected: 1, New: store.Partition{Topic: "doomed", Partition: 1, PartitionEpoch: 2}}})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of deleted partition: %v, want ErrNotFound", err)
	}
}

// ---- compare-and-set ----

// testCASSuccess ensures an update with the right expected epoch is stored exactly as given.
func testCASSuccess(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopic(t, s, "t", 1)
	next := store.Partition{Topic: "t", Partition: 0, Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, ISR: []int32{2, 3}, Replicas: []int32{1, 2, 3}}
	if err := s.UpdatePartitions(ctx, []store.PartitionUpdate{{Expected: 0, New: next}}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if got := must(s.Partition(ctx, "t", 0))(t); !equalPartition(got, next) {
		t.Fatalf("after update: %+v, want %+v", got, next)
	}
	next2 := next.Clone()
	next2.PartitionEpoch, next2.ISR = 2, []int32{1, 2, 3} // an ISR expansion: leader epoch unchanged
	if err := s.UpdatePartitions(ctx, []store.PartitionUpdate{{Expected: 1, New: next2}}); err != nil {
		t.Fatalf("second update: %v", err)
	}
	if got := must(s.Partition(ctx, "t", 0))(t); !equalPartition(got, next2) {
		t.Fatalf("after second update: %+v, want %+v", got, next2)
	}
	if err := s.UpdatePartitions(ctx, nil); err != nil {
		t.Fatalf("empty update: %v", err)
	}
}

// testCASConflict ensures a wrong expected epoch, stale or ahead, is ErrConflict and changes nothing.
func testCASConflict(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopic(t, s, "t", 1)
	bump(t, s, "t", 0, 0)
	before := snapshot(t, s)
	for _, expected := range []int32{0, 2} {
		u := store.PartitionUpdate{Expected: expected, New: store.Partition{Topic: "t", Partition: 0, Leader: 9, PartitionEpoch: expected + 1}}
		if err := s.UpdatePartitions(ctx, []store.PartitionUpdate{u}); !errors.Is(err, store.ErrConflict) {
			t.Fatalf("update expecting %d (stored 1): %v, want ErrConflict", expected, err)
		}
	}
	if after := snapshot(t, s); !equalPartitions(after, before) {
		t.Fatalf("conflict changed the store: %+v, was %+v", after, before)
	}
}

// testUpdateAllOrNothing ensures one failing update in a batch (conflict or missing partition, first, middle or last) leaves every partition unchanged.
func testUpdateAllOrNothing(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopic(t, s, "a", 2)
	createTopic(t, s, "b", 1)
	bump(t, s, "b", 0, 0) // b-0 now at epoch 1
	before := snapshot(t, s)

	good := func(topic string, p, expected int32) store.PartitionUpdate {
		return store.PartitionUpdate{Expected: expected, New: store.Partition{
			Topic: topic, Partition: p, Leader: 3, LeaderEpoch: 7, PartitionEpoch: expected + 1, ISR: []int32{3}, Replicas: []int32{1, 2, 3}}}
	}
	stale := good("b", 0, 0)      // stored epoch is 1
	missing := good("a", 5, 0)    // no such partition
	missingT := good("zzz", 0, 0) // no such topic
	for _, tc := range []struct {
		name    string
		updates []store.PartitionUpdate
		want    error
	}{
		{"conflict last", []store.PartitionUpdate{good("a", 0, 0), good("a", 1, 0), stale}, store.ErrConflict},
		{"conflict first", []store.PartitionUpdate{stale, good("a", 0, 0), good("a", 1, 0)}, store.ErrConflict},
		{"conflict middle", []store.PartitionUpdate{good("a", 1, 0), stale, good("a", 0, 0)}, store.ErrConflict},
		{"missing partition", []store.PartitionUpdate{good("a", 0, 0), good("b", 0, 1), missing}, store.ErrNotFound},
		{"missing topic", []store.PartitionUpdate{good("a", 0, 0), missingT}, store.ErrNotFound},
	} {
		if err := s.UpdatePartitions(ctx, tc.updates); !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.name, err, tc.want)
		}
		if after := snapshot(t, s); !equalPartitions(after, before) {
			t.Fatalf("%s: a failed batch changed the store:\n got %+v\nwant %+v", tc.name, after, before)
		}
	}
	// The same batch with the right epochs is applied whole.
	batch := []store.PartitionUpdate{good("a", 0, 0), good("a", 1, 0), good("b", 0, 1)}
	if err := s.UpdatePartitions(ctx, batch); err != nil {
		t.Fatalf("good batch: %v", err)
	}
	for _, u := range batch {
		if got := must(s.Partition(ctx, u.New.Topic, u.New.Partition))(t); !equalPartition(got, u.New) {
			t.Fatalf("after good batch: %+v, want %+v", got, u.New)
		}
	}
}

// testUpdateInvalid ensures a new epoch other than expected+1, or a partition named twice, is ErrInvalid and changes nothing.
func testUpdateInvalid(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopic(t, s, "t", 2)
	before := snapshot(t, s)
	p := func(part, epoch int32) store.Partition {
		return store.Partition{Topic: "t", Partition: part, Leader: 1, PartitionEpoch: epoch, Replicas: []int32{1}}
	}
	for _, tc := range []struct {
		name    string
		updates []store.PartitionUpdate
	}{
		{"same epoch", []store.PartitionUpdate{{Expected: 0, New: p(0, 0)}}},
		{"skips an epoch", []store.PartitionUpdate{{Expected: 0, New: p(0, 2)}}},
		{"goes back", []store.PartitionUpdate{{Expected: 0, New: p(0, -1)}}},
		{"negative expected", []store.PartitionUpdate{{Expected: -1, New: p(0, 0)}}},
		{"bad one after a good one", []store.PartitionUpdate{{Expected: 0, New: p(1, 1)}, {Expected: 0, New: p(0, 5)}}},
		{"duplicate", []store.PartitionUpdate{{Expected: 0, New: p(0, 1)}, {Expected: 0, New: p(0, 1)}}},
	} {
		if err := s.UpdatePartitions(ctx, tc.updates); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	if after := snapshot(t, s); !equalPartitions(after, before) {
		t.Fatalf("rejected updates changed the store: %+v, was %+v", after, before)
	}
}

// testConcurrentCAS ensures that of many goroutines racing the same compare-and-set, exactly one wins each epoch and its write is the one stored.
func testConcurrentCAS(t *testing.T, s store.Store) {
	const racers, rounds = 8, 20
	ctx := context.Background()
	createTopic(t, s, "t", 1)
	for epoch := int32(0); epoch < rounds; epoch++ {
		errs := make([]error, racers)
		together(racers, func(i int) {
			u := store.PartitionUpdate{Expected: epoch, New: store.Partition{
				Topic: "t", Partition: 0, Leader: int32(i), LeaderEpoch: epoch + 1, PartitionEpoch: epoch + 1,
				ISR: []int32{int32(i)}, Replicas: []int32{int32(i)}}}
			errs[i] = s.UpdatePartitions(ctx, []store.PartitionUpdate{u})
		})
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("epoch %d: racers %d and %d both won", epoch, winner, i)
				}
				winner = i
			case !errors.Is(err, store.ErrConflict):
				t.Fatalf("epoch %d: racer %d: %v, want nil or ErrConflict", epoch, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("epoch %d: nobody won", epoch)
		}
		got := must(s.Partition(ctx, "t", 0))(t)
		if got.PartitionEpoch != epoch+1 || got.Leader != int32(winner) || !slices.Equal(got.ISR, []int32{int32(winner)}) {
			t.Fatalf("epoch %d: stored %+v, want the winner %d's write at epoch %d", epoch, got, winner, epoch+1)
		}
	}
}

// testConcurrentOverlappingBatches ensures racing multi-partition batches that overlap are each applied whole or not at all.
func testConcurrentOverlappingBatches(t *testing.T, s store.Store) {
	const n = 8 // partitions, and racers: racer i writes partitions i and i+1 (mod n)
	ctx := context.Background()
	createTopic(t, s, "t", n)
	errs := make([]error, n)
	together(n, func(i int) {
		var batch []store.PartitionUpdate
		for _, p := range []int32{int32(i), int32((i + 1) % n)} {
			batch = append(batch, store.PartitionUpdate{Expected: 0, New: store.Partition{
				Topic: "t", Partition: p, Leader: int32(i), PartitionEpoch: 1, Replicas: []int32{int32(i)}}})
		}
		errs[i] = s.UpdatePartitions(ctx, batch)
	})
	parts := must(s.Partitions(ctx))(t)
	owner := make([]int32, n) // who wrote each partition, -1 for nobody
	for i, p := range parts {
		owner[i] = -1
		if p.PartitionEpoch == 1 {
			owner[i] = p.Leader
		}
	}
	won := 0
	for i, err := range errs {
		mine := []int{i, (i + 1) % n}
		switch {
		case err == nil:
			won++
			for _, p := range mine {
				if owner[p] != int32(i) {
					t.Fatalf("racer %d won but partition %d holds %d's write (owners %v)", i, p, owner[p], owner)
				}
			}
		case errors.Is(err, store.ErrConflict):
			if owner[mine[0]] == int32(i) || owner[mine[1]] == int32(i) {
				t.Fatalf("racer %d lost but some of its write is stored (owners %v)", i, owner)
			}
		default:
			t.Fatalf("racer %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won == 0 {
		t.Fatalf("no batch won")
	}
	for p, o := range owner {
		if o == -1 && parts[p].PartitionEpoch != 0 {
			t.Fatalf("partition %d changed without an owner: %+v", p, parts[p])
		}
	}
}

// ---- misc ----

// testValuesAreCopies ensures neither the caller's slices nor the returned ones alias the stored state.
func testValuesAreCopies(t *testing.T, s store.Store) {
	ctx := context.Background()
	isr, replicas := []int32{1, 2}, []int32{1, 2}
	if err := s.CreateTopic(ctx, "t", []store.Partition{{Partition: 0, Leader: 1, ISR: isr, Replicas: replicas}}, nil); err != nil {
		t.Fatalf("create: %v", err)
	}
	isr[0], replicas[0] = 99, 99
	got := must(s.Partition(ctx, "t", 0))(t)
	got.ISR[0], got.Replicas[1] = 77, 77
	all := must(s.Partitions(ctx))(t)
	all[0].ISR[1] = 55
	topic := must(s.Topic(ctx, "t"))(t)
	topic.Partitions[0].Replicas[0] = 44
	created := store.Partition{Topic: "t", Partition: 0, Leader: 1, ISR: []int32{1, 2}, Replicas: []int32{1, 2}}
	if got := must(s.Partition(ctx, "t", 0))(t); !equalPartition(got, created) {
		t.Fatalf("stored %+v, want %+v: a slice given to or returned by a read is shared with the store", got, created)
	}

	next := store.Partition{Topic: "t", Partition: 0, Leader: 2, PartitionEpoch: 1, ISR: []int32{2}, Replicas: []int32{1, 2}}
	if err := s.UpdatePartitions(ctx, []store.PartitionUpdate{{Expected: 0, New: next}}); err != nil {
		t.Fatalf("update: %v", err)
	}
	next.ISR[0] = 33
	want := store.Partition{Topic: "t", Partition: 0, Leader: 2, PartitionEpoch: 1, ISR: []int32{2}, Replicas: []int32{1, 2}}
	if got := must(s.Partition(ctx, "t", 0))(t); !equalPartition(got, want) {
		t.Fatalf("stored %+v, want %+v: the slice given to UpdatePartitions is shared with the store", got, want)
	}
}

// testCanceledContext ensures a call with a done context fails with the context's error and writes nothing.
func testCanceledContext(t *testing.T, s store.Store) {
	createTopic(t, s, "t", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.BumpControllerEpoch(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("bump: %v, want context.Canceled", err)
	}
	if _, err := s.RegisterBroker(ctx, store.Broker{ID: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("register: %v, want context.Canceled", err)
	}
	u := store.PartitionUpdate{Expected: 0, New: store.Partition{Topic: "t", Partition: 0, PartitionEpoch: 1}}
	if err := s.UpdatePartitions(ctx, []store.PartitionUpdate{u}); !errors.Is(err, context.Canceled) {
		t.Fatalf("update: %v, want context.Canceled", err)
	}
	bg := context.Background()
	if e := must(s.ControllerEpoch(bg))(t); e != 0 {
		t.Fatalf("controller epoch = %d, want 0", e)
	}
	if b := must(s.Brokers(bg))(t); len(b) != 0 {
		t.Fatalf("brokers = %+v, want none", b)
	}
	if p := must(s.Partition(bg, "t", 0))(t); p.PartitionEpoch != 0 {
		t.Fatalf("partition epoch = %d, want 0", p.PartitionEpoch)
	}
}

// testClosed ensures every call on a closed store fails with ErrClosed and Close is idempotent.
func testClosed(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopic(t, s, "t", 1)
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	calls := map[string]error{}
	_, calls["BumpControllerEpoch"] = s.BumpControllerEpoch(ctx, 0)
	_, calls["ControllerEpoch"] = s.ControllerEpoch(ctx)
	_, calls["RegisterBroker"] = s.RegisterBroker(ctx, store.Broker{ID: 1})
	_, calls["Brokers"] = s.Brokers(ctx)
	calls["UpdateBroker"] = s.UpdateBroker(ctx, store.Broker{ID: 1})
	calls["CreateTopic"] = s.CreateTopic(ctx, "u", []store.Partition{{Partition: 0}}, nil)
	calls["CreatePartitions"] = s.CreatePartitions(ctx, "t", 1, []store.Partition{{Partition: 1}})
	calls["DeleteTopic"] = s.DeleteTopic(ctx, "t")
	_, calls["Topic"] = s.Topic(ctx, "t")
	_, calls["Partitions"] = s.Partitions(ctx)
	_, calls["Partition"] = s.Partition(ctx, "t", 0)
	calls["UpdatePartitions"] = s.UpdatePartitions(ctx, []store.PartitionUpdate{{Expected: 0, New: store.Partition{Topic: "t", PartitionEpoch: 1}}})
	_, calls["TopicConfigs"] = s.TopicConfigs(ctx)
	_, calls["SetTopicConfig"] = s.SetTopicConfig(ctx, "t", 1, nil)
	calls["AlterTopicConfig"] = s.AlterTopicConfig(ctx, "t", 1, store.TopicConfig{Version: 2}, nil)
	for name, err := range calls {
		if !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after close: %v, want ErrClosed", name, err)
		}
	}
}

// testPartitionsPersist ensures committed topic and partition changes survive a restart and failed or deleted ones do not come back.
func testPartitionsPersist(t *testing.T, s store.Store, restart func(store.Store) store.Store) {
	ctx := context.Background()
	createTopic(t, s, "a", 3)
	createTopic(t, s, "gone", 1)
	bump(t, s, "a", 1, 0)
	bump(t, s, "a", 1, 1)
	bad := []store.PartitionUpdate{
		{Expected: 0, New: store.Partition{Topic: "a", Partition: 0, Leader: 9, PartitionEpoch: 1}},
		{Expected: 0, New: store.Partition{Topic: "a", Partition: 1, Leader: 9, PartitionEpoch: 1}}, // stale
	}
	if err := s.UpdatePartitions(ctx, bad); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale batch: %v, want ErrConflict", err)
	}
	if err := s.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	before := snapshot(t, s)
	s = restart(s)
	if after := snapshot(t, s); !equalPartitions(after, before) {
		t.Fatalf("after restart:\n got %+v\nwant %+v", after, before)
	}
	if _, err := s.Topic(ctx, "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted topic after restart: %v, want ErrNotFound", err)
	}
	// Compare-and-set keeps working from the persisted epochs.
	bump(t, s, "a", 1, 2)
	if err := s.UpdatePartitions(ctx, bad[1:]); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update after restart: %v, want ErrConflict", err)
	}
}

// ---- helpers ----

// must returns a checker of a (value, error) pair that fails t on an error.
func must[V any](v V, err error) func(t *testing.T) V {
	return func(t *testing.T) V {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// together runs fn(0..n-1) in n goroutines released at the same moment and
// waits for all of them.
func together(n int, fn func(i int)) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			fn(i)
		})
	}
	close(start)
	wg.Wait()
}

func noErrors(t *testing.T, errs []error) {
	t.Helper()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// createTopic creates topic with n partitions, each at epoch 0 with replicas
// and ISR [1 2 3] and leader 1.
func createTopic(t *testing.T, s store.Store, topic string, n int) {
	t.Helper()
	createTopicWithID(t, s, topic, "", n)
}

func createTopicWithID(t *testing.T, s store.Store, topic, id string, n int) {
	t.Helper()
	parts := make([]store.Partition, n)
	for i := range parts {
		parts[i] = store.Partition{Partition: int32(i), TopicID: id, Leader: 1, ISR: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}}
	}
	if err := s.CreateTopic(context.Background(), topic, parts, nil); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// bump moves topic-partition from epoch expected to expected+1 with the next
// leader epoch, checking the read epoch first.
func bump(t *testing.T, s store.Store, topic string, partition, expected int32) {
	t.Helper()
	ctx := context.Background()
	p, err := s.Partition(ctx, topic, partition)
	if err != nil {
		t.Fatalf("bump: %v", err)
	}
	if p.PartitionEpoch != expected {
		t.Fatalf("bump %s-%d: partition epoch %d, want %d", topic, partition, p.PartitionEpoch, expected)
	}
	p.LeaderEpoch++
	p.PartitionEpoch++
	if err := s.UpdatePartitions(ctx, []store.PartitionUpdate{{Expected: expected, New: p}}); err != nil {
		t.Fatalf("bump %s-%d: %v", topic, partition, err)
	}
}

func snapshot(t *testing.T, s store.Store) []store.Partition {
	t.Helper()
	return must(s.Partitions(context.Background()))(t)
}

func brokerByID(t *testing.T, s store.Store, id int32) store.Broker {
	t.Helper()
	for _, b := range must(s.Brokers(context.Background()))(t) {
		if b.ID == id {
			return b
		}
	}
	t.Fatalf("broker %d not registered", id)
	return store.Broker{}
}

// equalPartition compares field by field; a nil and an empty slice are equal.
func equalPartition(a, b store.Partition) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && a.Leader == b.Leader &&
		a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch &&
		slices.Equal(a.ISR, b.ISR) && slices.Equal(a.Replicas, b.Replicas)
}

func equalPartitions(a, b []store.Partition) bool {
	return slices.EqualFunc(a, b, equalPartition)
}

// testPendingDeletions ensures a deleted topic's replicas stay pending
// deletion, under the topic ID, until each is completed; a topic deleted,
// created again and deleted again pends twice, under each ID; completing
// what is not pending is ignored.
func testPendingDeletions(t *testing.T, s store.Store) {
	ctx := context.Background()
	createTopicWithID(t, s, "gone", "id-one", 2)
	if err := s.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	all := []store.PendingReplicas{{Partition: 0, Brokers: []int32{1, 2, 3}}, {Partition: 1, Brokers: []int32{1, 2, 3}}}
	wantDeleted(t, s, store.DeletedTopic{Name: "gone", ID: "id-one", Pending: all})
	createTopicWithID(t, s, "gone", "id-two", 1)
	if err := s.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	two := store.DeletedTopic{Name: "gone", ID: "id-two", Pending: []store.PendingReplicas{{Partition: 0, Brokers: []int32{1, 2, 3}}}}
	wantDeleted(t, s, store.DeletedTopic{Name: "gone", ID: "id-one", Pending: all}, two)

	done := []store.Replica{{Partition: 0, Broker: 1}, {Partition: 0, Broker: 2}, {Partition: 1, Broker: 3}, {Partition: 7, Broker: 1}}
	if err := s.CompleteDeletions(ctx, "id-one", done); err != nil {
		t.Fatal(err)
	}
	left := []store.PendingReplicas{{Partition: 0, Brokers: []int32{3}}, {Partition: 1, Brokers: []int32{1, 2}}}
	wantDeleted(t, s, store.DeletedTopic{Name: "gone", ID: "id-one", Pending: left}, two)
	if err := s.CompleteDeletions(ctx, "unknown", done); err != nil {
		t.Fatalf("completing an unknown topic: %v", err)
	}
	if err := s.CompleteDeletions(ctx, "id-one", []store.Replica{{Partition: 0, Broker: 3}, {Partition: 1, Broker: 1}, {Partition: 1, Broker: 2}}); err != nil {
		t.Fatal(err)
	}
	wantDeleted(t, s, two)
}

// testPendingDeletionsPersist ensures pending deletions survive a restart.
func testPendingDeletionsPersist(t *testing.T, s store.Store, restart func(store.Store) store.Store) {
	ctx := context.Background()
	createTopicWithID(t, s, "gone", "id-one", 1)
	if err := s.DeleteTopic(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	s = restart(s)
	wantDeleted(t, s, store.DeletedTopic{Name: "gone", ID: "id-one", Pending: []store.PendingReplicas{{Partition: 0, Brokers: []int32{1, 2, 3}}}})
}

func wantDeleted(t *testing.T, s store.Store, want ...store.DeletedTopic) {
	t.Helper()
	got := must(s.DeletedTopics(context.Background()))(t)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("deleted topics %+v, want %+v", got, want)
	}
}
