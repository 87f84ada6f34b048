package controller

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/controller/store/storetest"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
	"github.com/replicad/replicad/internal/testutil"
)

// allocate asks for a block as broker id at its registered epoch.
func (h *harness) allocate(id int32) (*replicadv1.AllocateProducerIdsResponse, error) {
	return h.c.AllocateProducerIds(context.Background(), &replicadv1.AllocateProducerIdsRequest{BrokerId: id, BrokerEpoch: h.epoch[id]})
}

// mustAllocate asks for a block and requires one; it returns its first ID.
func (h *harness) mustAllocate(id int32) int64 {
	h.t.Helper()
	r, err := h.allocate(id)
	if err != nil || r.GetErrorCode() != codeNone || r.GetFirstProducerId() <= 0 || r.GetCount() != ProducerIDBlockSize {
		h.t.Fatalf("AllocateProducerIds(%d): %v %v", id, r, err)
	}
	return r.GetFirstProducerId()
}

// bump asks broker id's bump of producer pid from epoch.
func (h *harness) bump(id int32, pid int64, epoch int32) (*replicadv1.BumpProducerEpochResponse, error) {
	return h.c.BumpProducerEpoch(context.Background(), &replicadv1.BumpProducerEpochRequest{BrokerId: id, BrokerEpoch: h.epoch[id],
		ProducerId: pid, ProducerEpoch: epoch})
}

// blocks checks that the blocks starting at firsts are pairwise disjoint.
func wantDisjoint(t *testing.T, firsts ...int64) {
	t.Helper()
	for i, a := range firsts {
		for _, b := range firsts[i+1:] {
			if a < b+ProducerIDBlockSize && b < a+ProducerIDBlockSize {
				t.Fatalf("blocks starting at %d and %d overlap (all: %v)", a, b, firsts)
			}
		}
	}
}

// Blocks start at 1 (0 is "no producer"), follow each other, and go only to
// the current incarnation of a registered, unfenced broker.
func TestAllocateProducerIds(t *testing.T) {
	h := startCluster(t, 3)
	if first := h.mustAllocate(1); first != 1 {
		t.Fatalf("first block starts at %d, want 1", first)
	}
	if first := h.mustAllocate(2); first != 1+ProducerIDBlockSize {
		t.Fatalf("second block starts at %d, want %d", first, 1+ProducerIDBlockSize)
	}
	stale := func(what string, req *replicadv1.AllocateProducerIdsRequest) {
		t.Helper()
		before := h.snapshot()
		r, err := h.c.AllocateProducerIds(context.Background(), req)
		if err != nil || r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH || r.GetFirstProducerId() != 0 {
			t.Fatalf("%s: %v %v, want STALE_BROKER_EPOCH", what, r, err)
		}
		h.assertUnchanged(before)
	}
	stale("an older broker epoch", &replicadv1.AllocateProducerIdsRequest{BrokerId: 1, BrokerEpoch: h.epoch[1] - 1})
	stale("an unregistered broker", &replicadv1.AllocateProducerIdsRequest{BrokerId: 9, BrokerEpoch: 1})
	h.expire(1, 2) // broker 3 is fenced
	stale("a fenced broker", &replicadv1.AllocateProducerIdsRequest{BrokerId: 3, BrokerEpoch: h.epoch[3]})
	if _, err := h.c.AllocateProducerIds(context.Background(), &replicadv1.AllocateProducerIdsRequest{BrokerId: -1}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("negative broker_id: %v, want InvalidArgument", err)
	}
}

// A bump from the newest epoch succeeds once; the second bump from the same
// epoch (another instance of the producer) is INVALID_PRODUCER_EPOCH, an ID
// never issued UNKNOWN_PRODUCER_ID, the largest epoch INVALID_REQUEST, and
// malformed requests InvalidArgument naming the field.
func TestBumpProducerEpoch(t *testing.T) {
	h := startCluster(t, 2)
	pid := h.mustAllocate(1) + 7
	code := func(r *replicadv1.BumpProducerEpochResponse, err error) replicadv1.ErrorCode {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r.GetErrorCode()
	}
	if r, err := h.bump(1, pid, 0); err != nil || r.GetErrorCode() != codeNone || r.GetProducerEpoch() != 1 {
		t.Fatalf("first bump from 0: %v %v", r, err)
	}
	if c := code(h.bump(2, pid, 0)); c != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
		t.Fatalf("second bump from 0 (through another broker): %v, want INVALID_PRODUCER_EPOCH", c)
	}
	if c := code(h.bump(2, pid, 5)); c != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
		t.Fatalf("bump from an epoch never handed out: %v, want INVALID_PRODUCER_EPOCH", c)
	}
	if r, err := h.bump(2, pid, 1); err != nil || r.GetProducerEpoch() != 2 {
		t.Fatalf("bump from 1: %v %v", r, err)
	}
	if c := code(h.bump(1, ProducerIDBlockSize+1, 0)); c != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID {
		t.Fatalf("bump of an ID past every block: %v, want UNKNOWN_PRODUCER_ID", c)
	}
	if c := code(h.bump(1, pid, math.MaxInt16)); c != replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST {
		t.Fatalf("bump from epoch %d: %v, want INVALID_REQUEST", math.MaxInt16, c)
	}
	if c := code(h.c.BumpProducerEpoch(context.Background(), &replicadv1.BumpProducerEpochRequest{BrokerId: 1, BrokerEpoch: h.epoch[1] + 100,
		ProducerId: pid, ProducerEpoch: 2})); c != replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
		t.Fatalf("bump with another broker epoch: %v, want STALE_BROKER_EPOCH", c)
	}
	if r, err := h.bump(2, pid, 2); err != nil || r.GetProducerEpoch() != 3 {
		t.Fatalf("the refused bumps took nothing: bump from 2: %v %v", r, err)
	}
	for _, tc := range []struct {
		field string
		req   *replicadv1.BumpProducerEpochRequest
	}{
		{"broker_id", &replicadv1.BumpProducerEpochRequest{BrokerId: -1, ProducerId: pid}},
		{"producer_id", &replicadv1.BumpProducerEpochRequest{BrokerId: 1, ProducerId: 0}},
		{"producer_id", &replicadv1.BumpProducerEpochRequest{BrokerId: 1, ProducerId: -3}},
		{"producer_epoch", &replicadv1.BumpProducerEpochRequest{BrokerId: 1, ProducerId: pid, ProducerEpoch: -1}},
		{"producer_epoch", &replicadv1.BumpProducerEpochRequest{BrokerId: 1, ProducerId: pid, ProducerEpoch: math.MaxInt16 + 1}},
	} {
		_, err := h.c.BumpProducerEpoch(context.Background(), tc.req)
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !startsWith(st.Message(), tc.field+":") {
			t.Errorf("%v: %v, want InvalidArgument naming %s", tc.req, err, tc.field)
		}
	}
}

func startsWith(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// The embedded store keeps the end of the last block and the bumped epochs
// across a controller restart: the restarted controller's blocks start
// after every earlier one, and an old epoch stays fenced.
func TestProducerIDsSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	var firsts []int64
	var pid int64
	for i := range 3 {
		st, err := store.OpenBolt(dir)
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, withStore(st))
		h.start()
		h.register(1)
		firsts = append(firsts, h.mustAllocate(1), h.mustAllocate(1))
		if i == 0 {
			pid = firsts[0]
		}
		// Each life bumps once more; the epoch before is refused.
		if r, err := h.bump(1, pid, int32(i)); err != nil || r.GetProducerEpoch() != int32(i+1) {
			t.Fatalf("life %d: bump from %d: %v %v", i, i, r, err)
		}
		if i > 0 {
			if r, err := h.bump(1, pid, int32(i-1)); err != nil || r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
				t.Fatalf("life %d: bump from the older epoch %d: %v %v, want INVALID_PRODUCER_EPOCH", i, i-1, r, err)
			}
		}
		h.stop()
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
	}
	wantDisjoint(t, firsts...)
	if last := firsts[len(firsts)-1]; last != 1+5*ProducerIDBlockSize {
		t.Fatalf("the sixth block starts at %d, want %d: blocks %v", last, 1+5*ProducerIDBlockSize, firsts)
	}
}

// Two controllers share a real etcd; the active one hands out blocks and a
// bump, the standby answers NOT_CONTROLLER. When the active one resigns,
// the standby takes over and continues after the last stored block end,
// and the epoch bumped before is still the newest.
func TestProducerIDsAcrossEtcdFailover(t *testing.T) {
	endpoints := testutil.StartEtcd(t)
	open := func() *store.EtcdStore {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s, err := store.OpenEtcd(ctx, store.EtcdConfig{Endpoints: endpoints, Prefix: "/pid-failover/", SessionTTL: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	s1, s2 := open(), open()
	h1 := newHarness(t, withStore(s1), withElector(s1))
	h1.start()
	h1.register(1)
	h2 := newHarness(t, withStore(s2), withElector(s2))
	h2.startRun()
	h2.epoch[1] = h1.epoch[1]

	a, b := h1.mustAllocate(1), h1.mustAllocate(1)
	if r, err := h1.bump(1, a, 0); err != nil || r.GetProducerEpoch() != 1 {
		t.Fatalf("bump on the first controller: %v %v", r, err)
	}
	if r, err := h2.allocate(1); err != nil || r.GetErrorCode() != codeNotController {
		t.Fatalf("standby AllocateProducerIds: %v %v, want NOT_CONTROLLER", r, err)
	}
	h1.stop() // resigns: the standby is elected
	waitFor(t, "the standby to take over", func() bool { act, _ := h2.c.Active(); return act })
	c := h2.mustAllocate(1)
	wantDisjoint(t, a, b, c)
	if c <= b {
		t.Fatalf("block after failover starts at %d, not after %d", c, b)
	}
	if r, err := h2.bump(1, a, 0); err != nil || r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
		t.Fatalf("bump from the fenced epoch after failover: %v %v, want INVALID_PRODUCER_EPOCH", r, err)
	}
	if r, err := h2.bump(1, a, 1); err != nil || r.GetProducerEpoch() != 2 {
		t.Fatalf("bump from epoch 1 after failover: %v %v", r, err)
	}
}

// A store write that fails, or whose outcome is unknown, never leads to an
// ID or an epoch handed out twice: the failed call answers an error and no
// block; a block that landed all the same is skipped by the next call, also
// by a controller that takes over the store; a bump that landed unseen
// leaves its epoch taken, so the retry from the same epoch is refused and no
// two instances of a producer share one epoch.
func TestProducerIDWriteFaultsNeverIssueTwice(t *testing.T) {
	mem := store.NewMemory()
	f := storetest.NewFaulty(mem)
	h := startCluster(t, 1, withStore(f))
	var answered []int64
	answered = append(answered, h.mustAllocate(1))

	for _, kind := range []storetest.Kind{storetest.LandThenFail, storetest.FailBefore} {
		f.Inject(storetest.Fault{Op: storetest.OpAllocateProducerIDs, Kind: kind})
		r, err := h.allocate(1)
		if err == nil || r.GetFirstProducerId() != 0 {
			t.Fatalf("kind %v: AllocateProducerIds answered %v %v, want an error and no block", kind, r, err)
		}
		if status.Code(err) != codes.Unavailable {
			t.Fatalf("kind %v: %v, want Unavailable (the broker retries)", kind, err)
		}
		answered = append(answered, h.mustAllocate(1))
	}
	// A write still in flight when the broker's deadline passes lands and
	// is answered; the broker never hears it, and the next block is past it.
	f.Inject(storetest.Fault{Op: storetest.OpAllocateProducerIDs, Kind: storetest.Slow, Delay: 50 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	r, err := h.c.AllocateProducerIds(ctx, &replicadv1.AllocateProducerIdsRequest{BrokerId: 1, BrokerEpoch: h.epoch[1]})
	cancel()
	if err == nil && r.GetErrorCode() == codeNone {
		answered = append(answered, r.GetFirstProducerId())
	}
	answered = append(answered, h.mustAllocate(1))

	// The block of a write that landed with an error, then a controller
	// that takes over the same store (a failover between the write and
	// its answer): it continues past it.
	f.Inject(storetest.Fault{Op: storetest.OpAllocateProducerIDs, Kind: storetest.LandThenFail})
	if _, err := h.allocate(1); err == nil {
		t.Fatal("AllocateProducerIds whose write landed with an error answered no error")
	}
	landed, err := mem.LastProducerID(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	h.stop()
	h2 := newHarness(t, withStore(mem))
	h2.start()
	h2.register(1)
	next := h2.mustAllocate(1)
	if next <= landed {
		t.Fatalf("the new controller's block starts at %d, inside the block that landed unseen (up to %d)", next, landed)
	}
	answered = append(answered, next)
	wantDisjoint(t, answered...)

	// A bump that landed but answered an error: the retry from the same
	// epoch is refused, so the epoch it took is nobody's twice.
	pid := answered[0]
	f2 := storetest.NewFaulty(mem)
	h2.stop()
	h3 := newHarness(t, withStore(f2))
	h3.start()
	h3.register(1)
	f2.Inject(storetest.Fault{Op: storetest.OpBumpProducerEpoch, Kind: storetest.LandThenFail})
	if r, err := h3.bump(1, pid, 0); err == nil {
		t.Fatalf("bump whose write landed with an error answered %v", r)
	}
	if r, err := h3.bump(1, pid, 0); err != nil || r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
		t.Fatalf("retry of the bump from 0: %v %v, want INVALID_PRODUCER_EPOCH", r, err)
	}
	f2.Inject(storetest.Fault{Op: storetest.OpBumpProducerEpoch, Kind: storetest.FailBefore})
	if _, err := h3.bump(1, pid, 1); err == nil {
		t.Fatal("bump whose write failed answered no error")
	}
	if r, err := h3.bump(1, pid, 1); err != nil || r.GetProducerEpoch() != 2 {
		t.Fatalf("retry of a bump that wrote nothing: %v %v, want epoch 2", r, err)
	}
}

// Both decisions are spans, with the broker, the block or the epochs.
func TestProducerIDSpans(t *testing.T) {
	h, rec, _ := tracedCluster(t, 1)
	first := h.mustAllocate(1)
	if _, err := h.bump(1, first, 0); err != nil {
		t.Fatal(err)
	}
	alloc := spantest.Named(rec, "Controller.allocateProducerIds")
	if len(alloc) != 1 {
		t.Fatalf("%d Controller.allocateProducerIds spans, want 1", len(alloc))
	}
	a := spantest.Attrs(alloc[0].Attributes())
	if a["replicad.broker"].AsInt64() != 1 || a["replicad.first_producer_id"].AsInt64() != first ||
		a["replicad.last_producer_id"].AsInt64() != first+ProducerIDBlockSize-1 {
		t.Errorf("allocate span attributes %v", a)
	}
	bump := spantest.Named(rec, "Controller.bumpProducerEpoch")
	if len(bump) != 1 {
		t.Fatalf("%d Controller.bumpProducerEpoch spans, want 1", len(bump))
	}
	b := spantest.Attrs(bump[0].Attributes())
	if b["replicad.producer_id"].AsInt64() != first || b["replicad.producer_epoch"].AsInt64() != 0 || b["replicad.new_producer_epoch"].AsInt64() != 1 {
		t.Errorf("bump span attributes %v", b)
	}
}

// The store write runs without the controller's lock: concurrent requests
// still get disjoint blocks, and of concurrent bumps from one epoch exactly
// one succeeds.
func TestProducerIDsConcurrentRequests(t *testing.T) {
	h := startCluster(t, 3)
	const n = 12
	firsts := make([]int64, n)
	codesGot := make([]replicadv1.ErrorCode, n)
	errs := make([]error, 2*n)
	pid := h.mustAllocate(1)
	firsts[0] = pid
	done := make(chan struct{})
	for i := range n {
		go func() {
			defer func() { done <- struct{}{} }()
			id := int32(i%3 + 1)
			if i > 0 {
				r, err := h.c.AllocateProducerIds(context.Background(), &replicadv1.AllocateProducerIdsRequest{BrokerId: id, BrokerEpoch: h.epoch[id]})
				firsts[i], errs[i] = r.GetFirstProducerId(), err
			}
			r, err := h.c.BumpProducerEpoch(context.Background(), &replicadv1.BumpProducerEpochRequest{BrokerId: id, BrokerEpoch: h.epoch[id],
				ProducerId: pid, ProducerEpoch: 0})
			codesGot[i], errs[n+i] = r.GetErrorCode(), err
		}()
	}
	for range n {
		<-done
	}
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	wantDisjoint(t, firsts...)
	won := 0
	for _, c := range codesGot {
		switch c {
		case codeNone:
			won++
		case replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH:
		default:
			t.Fatalf("concurrent bump answered %v", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d concurrent bumps from epoch 0 succeeded, want 1", won)
	}
}
