package core

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs"
)

// fakeFetchers records what the replica manager asks of its fetcher manager.
type fakeFetchers struct {
	mu       sync.Mutex
	added    map[tp.TopicPartition]InitialFetchState
	addCalls int
	removed  []tp.TopicPartition
	idle     int
	// addSpans are the span contexts AddFetcherForPartitions was called in.
	addSpans []trace.SpanContext
}

func newFakeFetchers() *fakeFetchers {
	return &fakeFetchers{added: make(map[tp.TopicPartition]InitialFetchState)}
}

func (f *fakeFetchers) AddFetcherForPartitions(ctx context.Context, m map[tp.TopicPartition]InitialFetchState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addCalls++
	f.addSpans = append(f.addSpans, trace.SpanContextFromContext(ctx))
	for t, s := range m {
		f.added[t] = s
	}
}

func (f *fakeFetchers) RemoveFetcherForPartitions(ps []tp.TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, ps...)
	for _, t := range ps {
		delete(f.added, t)
	}
}
func (f *fakeFetchers) ShutdownIdleFetchers() { f.mu.Lock(); f.idle++; f.mu.Unlock() }
func (f *fakeFetchers) Shutdown()             {}

func (f *fakeFetchers) IsFetching(t tp.TopicPartition) bool {
	_, ok := f.fetching(t)
	return ok
}

// fail sets t aside as a real fetcher does after an error only a
// LeaderAndIsr resolves: it is no longer fetched until added again.
func (f *fakeFetchers) fail(t tp.TopicPartition) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.added, t)
}

func (f *fakeFetchers) fetching(t tp.TopicPartition) (InitialFetchState, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.added[t]
	return s, ok
}

type harness struct {
	t        *testing.T
	rm       *ReplicaManager
	clock    *clock.Manual
	fetchers *fakeFetchers
	dirs     []string
	cfg      Config
}

func newHarness(t *testing.T, ndirs int, mutate ...func(*Config)) *harness {
	t.Helper()
	dirs := make([]string, ndirs)
	base := t.TempDir()
	for i := range dirs {
		dirs[i] = filepath.Join(base, "dir"+string(rune('a'+i)))
	}
	h := &harness{t: t, clock: clock.NewManual(time.Unix(1_700_000_000, 0)), dirs: dirs}
	h.cfg = Config{BrokerID: 1, LogDirs: dirs, Clock: h.clock, Logger: zerolog.Nop(), HWCheckpointInterval: 5 * time.Second}
	for _, m := range mutate {
		m(&h.cfg)
	}
	h.open()
	return h
}

// open (re)starts the replica manager on the harness's dirs.
func (h *harness) open() {
	h.t.Helper()
	h.fetchers = newFakeFetchers()
	cfg := h.cfg
	cfg.Fetchers = h.fetchers
	rm, err := NewReplicaManager(cfg)
	if err != nil {
		h.t.Fatalf("NewReplicaManager: %v", err)
	}
	h.rm = rm
	h.t.Cleanup(func() { _ = rm.Shutdown(context.Background()) })
}

func (h *harness) restart() {
	h.t.Helper()
	if err := h.rm.Shutdown(context.Background()); err != nil {
		h.t.Fatalf("shutdown: %v", err)
	}
	h.open()
}

func state(topic string, part int32, leader, epoch int32, replicas, isr []int32) PartitionState {
	return PartitionState{TopicPartition: tp.TopicPartition{Topic: topic, Partition: part}, ControllerEpoch: 1,
		Leader: leader, LeaderEpoch: epoch, Replicas: replicas, ISR: isr, IsNew: true}
}

func (h *harness) leaderAndIsr(ctrlEpoch int32, states ...PartitionState) LeaderAndIsrResponse {
	h.t.Helper()
	return h.rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: ctrlEpoch,
		PartitionStates: states, LiveLeaders: []Broker{{ID: 2, Host: "127.0.0.1", Port: 9092}, {ID: 3, Host: "127.0.0.1", Port: 9093}}})
}

func (h *harness) describe(t tp.TopicPartition) (PartitionInfo, bool) {
	for _, p := range h.rm.Describe(t.Topic, &t.Partition).Partitions {
		return p, true
	}
	return PartitionInfo{}, false
}

func (h *harness) produce(t tp.TopicPartition, acks int, values ...string) ProduceResult {
	h.t.Helper()
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	return h.rm.Produce(context.Background(), ProduceRequest{TopicPartition: t, Acks: acks, Timeout: time.Second, Records: recs})
}

func codeOf(resp LeaderAndIsrResponse, t tp.TopicPartition) ErrorCode {
	for _, pe := range resp.PartitionErrors {
		if pe.TopicPartition == t {
			return pe.Error
		}
	}
	return ErrorCode(-99)
}

var tp0 = tp.TopicPartition{Topic: "orders", Partition: 0}

// A LeaderAndIsr from an older controller epoch is rejected whole and changes nothing.
func TestBecomeLeaderOrFollowerFencesStaleController(t *testing.T) {
	h := newHarness(t, 1)
	if r := h.leaderAndIsr(5, state("orders", 0, 1, 1, []int32{1}, []int32{1})); r.Error != ErrNone {
		t.Fatalf("first request: %v", r.Error)
	}
	r := h.leaderAndIsr(4, state("orders", 0, 1, 2, []int32{1}, []int32{1}), state("orders", 1, 1, 1, []int32{1}, []int32{1}))
	if r.Error != ErrStaleControllerEpoch || codeOf(r, tp0) != ErrStaleControllerEpoch {
		t.Fatalf("stale controller: got %v / %v, want STALE_CONTROLLER_EPOCH", r.Error, codeOf(r, tp0))
	}
	if p, _ := h.describe(tp0); p.LeaderEpoch != 1 {
		t.Fatalf("leader epoch changed to %d by a stale controller", p.LeaderEpoch)
	}
	if _, ok := h.describe(tp.TopicPartition{Topic: "orders", Partition: 1}); ok {
		t.Fatal("a stale controller created a partition")
	}
	if got := h.rm.Describe("", nil).ControllerEpoch; got != 5 {
		t.Fatalf("controller epoch = %d, want 5", got)
	}
}

// Per-partition leader epoch checks: newer accepted, equal and older answer
// STALE_CONTROLLER_EPOCH, and a broker outside the replicas answers
// UNKNOWN_TOPIC_OR_PARTITION without hosting the partition.
func TestBecomeLeaderOrFollowerLeaderEpochChecks(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 3, []int32{1}, []int32{1}))
	cases := []struct {
		name  string
		state PartitionState
		want  ErrorCode
		epoch int32
	}{
		{"older", state("orders", 0, 1, 2, []int32{1}, []int32{1}), ErrStaleControllerEpoch, 3},
		{"equal", state("orders", 0, 1, 3, []int32{1}, []int32{1}), ErrStaleControllerEpoch, 3},
		{"newer", state("orders", 0, 1, 4, []int32{1}, []int32{1}), ErrNone, 4},
		{"newer but not a replica", state("orders", 0, 2, 5, []int32{2, 3}, []int32{2, 3}), ErrUnknownTopicOrPartition, 4},
	}
	for _, c := range cases {
		r := h.leaderAndIsr(1, c.state)
		if got := codeOf(r, tp0); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
		if p, _ := h.describe(tp0); p.LeaderEpoch != c.epoch {
			t.Errorf("%s: leader epoch %d, want %d", c.name, p.LeaderEpoch, c.epoch)
		}
	}
	other := tp.TopicPartition{Topic: "other", Partition: 0}
	r := h.leaderAndIsr(1, state("other", 0, 2, 1, []int32{2, 3}, []int32{2, 3}))
	if codeOf(r, other) != ErrUnknownTopicOrPartition {
		t.Fatalf("not a replica: %v", codeOf(r, other))
	}
	if _, ok := h.describe(other); ok {
		t.Fatal("a partition this broker is not a replica of is hosted")
	}
}

// Partitions led by this broker go through makeLeaders (fetchers removed),
// the others through makeFollowers (fetcher added at the LEO with the leader's endpoint).
func TestBecomeLeaderOrFollowerSplitsLeadersAndFollowers(t *testing.T) {
	h := newHarness(t, 1)
	lead := state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2})
	follow := state("orders", 1, 2, 7, []int32{1, 2}, []int32{1, 2})
	r := h.leaderAndIsr(1, lead, follow)
	t1 := follow.TopicPartition
	if r.Error != ErrNone || codeOf(r, tp0) != ErrNone || codeOf(r, t1) != ErrNone {
		t.Fatalf("response %+v", r)
	}
	if p, _ := h.describe(tp0); p.Role != RoleLeader || !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("leader partition: %+v", p)
	}
	if p, _ := h.describe(t1); p.Role != RoleFollower || p.Leader != 2 || len(p.ISR) != 0 {
		t.Fatalf("follower partition: %+v", p)
	}
	if !slices.Contains(h.fetchers.removed, tp0) {
		t.Fatal("makeLeaders did not stop the fetcher of its partition")
	}
	s, ok := h.fetchers.fetching(t1)
	if !ok || s.Leader.Addr() != "127.0.0.1:9092" || s.LeaderEpoch != 7 || s.InitOffset != 0 {
		t.Fatalf("fetcher for follower: %+v %v", s, ok)
	}
	if _, ok := h.fetchers.fetching(tp0); ok {
		t.Fatal("a leader partition got a fetcher")
	}
	if h.fetchers.idle == 0 {
		t.Fatal("idle fetchers were not shut down")
	}
}

// A follower whose leader is not a live broker gets its log (so its HW is
// checkpointed) but no fetcher.
func TestMakeFollowersLeaderUnavailable(t *testing.T) {
	h := newHarness(t, 1)
	st := state("orders", 0, 9, 1, []int32{1, 9}, []int32{9})
	if r := h.leaderAndIsr(1, st); codeOf(r, tp0) != ErrNone {
		t.Fatalf("got %v", codeOf(r, tp0))
	}
	if _, ok := h.fetchers.fetching(tp0); ok {
		t.Fatal("a fetcher was started to a leader that is not alive")
	}
	if _, ok := h.rm.logs.GetLog(tp0); !ok {
		t.Fatal("log not created for a follower whose leader is unavailable")
	}
	h.rm.CheckpointHighWatermarks(context.Background())
	hws, err := checkpoint.ReadOffsets(vfs.OS, filepath.Join(h.dirs[0], logmgr.ReplicationOffsetCheckpoint))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hws[tp0]; !ok {
		t.Fatalf("HW checkpoint lacks the partition: %v", hws)
	}
}

// makeFollower reports a change only for a new leader or a new leader epoch
// (Kafka's testMakeFollowerWithNoLeaderIdChange), and only changed
// partitions get their fetcher restarted.
func TestMakeFollowerWithNoLeaderIDChange(t *testing.T) {
	h := newHarness(t, 1)
	p := newPartition(tp0, h.rm.env)
	st := state("orders", 0, 2, 1, []int32{1, 2}, []int32{1, 2})
	if changed, err := p.makeFollower(st, true); err != nil || !changed {
		t.Fatalf("first makeFollower: changed=%v err=%v", changed, err)
	}
	st.LeaderEpoch = 4
	if changed, _ := p.makeFollower(st, true); !changed {
		t.Fatal("same leader, bumped epoch: want changed")
	}
	if changed, _ := p.makeFollower(st, true); changed {
		t.Fatal("same leader, same epoch: want unchanged")
	}
	st.Leader = 3
	if changed, _ := p.makeFollower(st, true); !changed {
		t.Fatal("new leader, same epoch: want changed")
	}

	// Through the replica manager: a request with the same leader and epoch
	// is stale, and one with a bumped epoch restarts the fetcher.
	h.leaderAndIsr(1, state("orders", 0, 2, 1, []int32{1, 2}, []int32{1, 2}))
	calls := h.fetchers.addCalls
	h.leaderAndIsr(1, state("orders", 0, 2, 2, []int32{1, 2}, []int32{1, 2}))
	if h.fetchers.addCalls != calls+1 {
		t.Fatal("bumped epoch did not restart the fetcher")
	}
	if s, _ := h.fetchers.fetching(tp0); s.LeaderEpoch != 2 {
		t.Fatalf("fetcher epoch %d, want 2", s.LeaderEpoch)
	}
}

// makeLeader resets the leader's view of remote replicas only when the leader
// epoch is bumped; ISR members start caught up "now", others never caught up.
func TestMakeLeaderResetsRemoteStateOnlyOnBumpedEpoch(t *testing.T) {
	h := newHarness(t, 1)
	p := newPartition(tp0, h.rm.env)
	st := state("orders", 0, 1, 1, []int32{1, 2, 3}, []int32{1, 2})
	isNew, err := p.makeLeader(st, true)
	if err != nil || !isNew {
		t.Fatalf("makeLeader: isNew=%v err=%v", isNew, err)
	}
	now := h.clock.Now()
	if r := p.remoteReplicas[2]; !r.lastCaughtUpTime.Equal(now) || r.logEndOffset != unknownOffset {
		t.Fatalf("ISR member state: %+v", r)
	}
	if r := p.remoteReplicas[3]; !r.lastCaughtUpTime.IsZero() {
		t.Fatalf("non-ISR member caught up at %v, want never", r.lastCaughtUpTime)
	}
	p.remoteReplicas[2].logEndOffset = 10
	h.clock.Advance(time.Second)

	if isNew, _ := p.makeLeader(st, true); isNew {
		t.Fatal("already the leader: want isNewLeader false")
	}
	if r := p.remoteReplicas[2]; r.logEndOffset != 10 || !r.lastCaughtUpTime.Equal(now) {
		t.Fatalf("same epoch reset remote state: %+v", r)
	}
	st.LeaderEpoch = 2
	p.makeLeader(st, true)
	if r := p.remoteReplicas[2]; r.logEndOffset != unknownOffset || !r.lastCaughtUpTime.Equal(h.clock.Now()) {
		t.Fatalf("bumped epoch did not reset remote state: %+v", r)
	}
	if e := p.Log().EpochCache().Entries(); len(e) == 0 || e[len(e)-1].Epoch != 2 {
		t.Fatalf("epoch cache %v lacks epoch 2", e)
	}
}

// The HW of a partition comes from the replication-offset-checkpoint read at start-up.
func TestHighWatermarkInitializedFromCheckpoint(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	if r := h.produce(tp0, AcksLeader, "a", "b", "c", "d", "e"); r.Error != ErrNone || r.BaseOffset != 0 {
		t.Fatalf("produce: %+v", r)
	}
	if err := h.rm.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Pretend the last checkpoint saw HW 3, as after a crash between checkpoints.
	if err := checkpoint.WriteOffsets(vfs.OS, filepath.Join(h.dirs[0], logmgr.ReplicationOffsetCheckpoint), map[tp.TopicPartition]int64{tp0: 3}, true); err != nil {
		t.Fatal(err)
	}
	h.open()
	h.leaderAndIsr(1, state("orders", 0, 2, 2, []int32{1, 2}, []int32{2}))
	p, _ := h.describe(tp0)
	if p.HighWatermark != 3 || p.LogEndOffset != 5 {
		t.Fatalf("HW %d LEO %d, want 3 and 5", p.HighWatermark, p.LogEndOffset)
	}
}

// Each log dir gets one replication-offset-checkpoint in Kafka's exact format,
// holding the partitions in that dir.
func TestCheckpointHighWatermarksFormatPerDir(t *testing.T) {
	h := newHarness(t, 2)
	var states []PartitionState
	for i := int32(0); i < 4; i++ {
		states = append(states, state("orders", i, 1, 1, []int32{1}, []int32{1}))
	}
	h.leaderAndIsr(1, states...)
	h.produce(tp0, AcksLeader, "a", "b")
	res := h.rm.CheckpointHighWatermarks(context.Background())
	if len(res) != 2 {
		t.Fatalf("checkpointed %d dirs, want 2", len(res))
	}
	var all []string
	for _, d := range h.dirs {
		b, err := os.ReadFile(filepath.Join(d, logmgr.ReplicationOffsetCheckpoint))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, string(b))
	}
	// New logs go to the dir with the fewest partitions, so they alternate.
	want := []string{"0\n2\norders 0 2\norders 2 0\n", "0\n2\norders 1 0\norders 3 0\n"}
	if !slices.Equal(all, want) {
		t.Fatalf("checkpoint files:\n%q\nwant\n%q", all, want)
	}
}

// A malformed HW checkpoint takes only its own dir offline; a partition that
// may live there cannot be recreated empty elsewhere.
func TestMalformedCheckpointTakesDirOffline(t *testing.T) {
	h := newHarness(t, 2)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}), state("orders", 1, 1, 1, []int32{1}, []int32{1}))
	h.produce(tp0, AcksLeader, "a")
	if err := h.rm.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dirs[1], logmgr.ReplicationOffsetCheckpoint), []byte("0\n1\norders one 5\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.open()
	dirs := h.rm.Describe("", nil).LogDirs
	if len(dirs) != 2 || !dirs[0].Online || dirs[1].Online {
		t.Fatalf("log dirs %+v: want the first online and the second offline", dirs)
	}
	st := state("orders", 1, 1, 2, []int32{1}, []int32{1})
	st.IsNew = false
	if r := h.leaderAndIsr(1, st); codeOf(r, st.TopicPartition) != ErrStorageError {
		t.Fatalf("partition of the offline dir: %v, want STORAGE_ERROR", codeOf(r, st.TopicPartition))
	}
	if p, _ := h.describe(st.TopicPartition); p.Role != RoleOffline {
		t.Fatalf("role %v, want offline", p.Role)
	}
	// The partition in the healthy dir keeps its data and HW.
	r := h.leaderAndIsr(1, state("orders", 0, 1, 2, []int32{1}, []int32{1}))
	if codeOf(r, tp0) != ErrNone {
		t.Fatalf("healthy partition: %v", codeOf(r, tp0))
	}
	if p, _ := h.describe(tp0); p.HighWatermark != 1 {
		t.Fatalf("healthy partition HW %d, want 1", p.HighWatermark)
	}
}

// A partition whose log cannot be created is offline with STORAGE_ERROR, and
// a hosted-offline partition answers STORAGE_ERROR to the next LeaderAndIsr.
func TestLogCreationFailureMarksPartitionOffline(t *testing.T) {
	h := newHarness(t, 2)
	// A file where the partition dir must go makes the mkdir fail.
	if err := os.WriteFile(filepath.Join(h.dirs[0], "orders-0"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	if codeOf(r, tp0) != ErrStorageError {
		t.Fatalf("got %v, want STORAGE_ERROR", codeOf(r, tp0))
	}
	if p, ok := h.describe(tp0); !ok || p.Role != RoleOffline {
		t.Fatalf("partition %+v, want hosted offline", p)
	}
	r = h.leaderAndIsr(1, state("orders", 0, 1, 2, []int32{1}, []int32{1}))
	if codeOf(r, tp0) != ErrStorageError {
		t.Fatalf("offline partition: got %v, want STORAGE_ERROR", codeOf(r, tp0))
	}
}

// StopReplica: a stale controller is fenced; an older leader epoch answers
// FENCED_LEADER_EPOCH; equal and newer epochs stop the replica (fetcher
// first); delete removes the log from disk.
func TestStopReplicaMatrix(t *testing.T) {
	h := newHarness(t, 1)
	stop := func(ctrlEpoch, leaderEpoch int32, del bool) ErrorCode {
		r := h.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: ctrlEpoch,
			Partitions: []StopReplicaPartition{{TopicPartition: tp0, LeaderEpoch: leaderEpoch, Delete: del}}})
		if r.Error != ErrNone {
			return r.Error
		}
		return r.PartitionErrors[0].Error
	}
	host := func(epoch int32) {
		if r := h.leaderAndIsr(3, state("orders", 0, 2, epoch, []int32{1, 2}, []int32{1, 2})); codeOf(r, tp0) != ErrNone {
			t.Fatalf("host at epoch %d: %v", epoch, codeOf(r, tp0))
		}
	}
	host(5)
	if got := stop(2, 5, false); got != ErrStaleControllerEpoch {
		t.Fatalf("stale controller: %v", got)
	}
	if got := stop(3, 4, false); got != ErrFencedLeaderEpoch {
		t.Fatalf("older leader epoch: %v", got)
	}
	if _, ok := h.describe(tp0); !ok {
		t.Fatal("a fenced StopReplica stopped the replica")
	}
	if got := stop(3, 5, false); got != ErrNone {
		t.Fatalf("equal leader epoch: %v", got)
	}
	if _, ok := h.describe(tp0); ok {
		t.Fatal("replica still hosted after StopReplica")
	}
	if _, ok := h.fetchers.fetching(tp0); ok {
		t.Fatal("fetcher not removed")
	}
	if _, err := os.Stat(filepath.Join(h.dirs[0], "orders-0")); err != nil {
		t.Fatalf("StopReplica without delete removed the log: %v", err)
	}
	host(6)
	if got := stop(3, 7, true); got != ErrNone {
		t.Fatalf("newer leader epoch with delete: %v", got)
	}
	if _, err := os.Stat(filepath.Join(h.dirs[0], "orders-0")); !os.IsNotExist(err) {
		t.Fatalf("log dir still there after delete: %v", err)
	}
	if got := stop(3, -1, true); got != ErrNone {
		t.Fatalf("not hosted: %v", got)
	}
}

// acks=1 and acks=-1 on a leader with ISR {self}; consumers only see records below the HW.
func TestProduceAndConsumeOnLeader(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	if r := h.produce(tp0, AcksLeader, "a", "b", "c"); r.Error != ErrNone || r.BaseOffset != 0 || r.HighWatermark != 3 {
		t.Fatalf("acks=1: %+v", r)
	}
	if r := h.produce(tp0, AcksAll, "d"); r.Error != ErrNone || r.BaseOffset != 3 || r.HighWatermark != 4 {
		t.Fatalf("acks=-1: %+v", r)
	}
	res := h.rm.Consume(context.Background(), ConsumeRequest{TopicPartition: tp0, Offset: 1})
	var got []string
	for _, r := range res.Records {
		got = append(got, string(r.Value))
	}
	if res.Error != ErrNone || !slices.Equal(got, []string{"b", "c", "d"}) || res.NextOffset != 4 || res.HighWatermark != 4 {
		t.Fatalf("consume: %+v values %v", res, got)
	}
	if res := h.rm.Consume(context.Background(), ConsumeRequest{TopicPartition: tp0, Offset: 9}); res.Error != ErrOffsetOutOfRange {
		t.Fatalf("beyond LEO: %v", res.Error)
	}
	if r := h.produce(tp.TopicPartition{Topic: "nope"}, AcksLeader, "x"); r.Error != ErrUnknownTopicOrPartition {
		t.Fatalf("unknown partition: %v", r.Error)
	}
}

// With a follower in the ISR that never fetches, the HW does not move: acks=1
// consumers see nothing and acks=-1 times out after its timeout.
func TestAcksAllWaitsForISRAndTimesOut(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	done := make(chan ProduceResult)
	go func() { done <- h.produce(tp0, AcksAll, "a") }()
	waitFor(t, func() bool { p, _ := h.describe(tp0); return p.LogEndOffset == 1 })
	select {
	case r := <-done:
		t.Fatalf("acks=-1 completed before the HW moved: %+v", r)
	default:
	}
	if res := h.rm.Consume(context.Background(), ConsumeRequest{TopicPartition: tp0, Offset: 0}); len(res.Records) != 0 {
		t.Fatal("a consumer saw a record above the HW")
	}
	// The produce arms its time-out timer after its append is visible, so
	// keep advancing the clock until it has expired.
	var r ProduceResult
	waitFor(t, func() bool {
		h.clock.Advance(time.Second)
		select {
		case r = <-done:
			return true
		default:
			return false
		}
	})
	if r.Error != ErrRequestTimedOut {
		t.Fatalf("got %v, want REQUEST_TIMED_OUT", r.Error)
	}
}

// A waiting acks=-1 produce completes with NOT_LEADER_OR_FOLLOWER when its
// leader becomes a follower (Kafka's testClearPurgatoryOnBecomingFollower).
func TestWaitingProduceCompletesWhenLeaderBecomesFollower(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1, 2}))
	done := make(chan ProduceResult)
	go func() { done <- h.produce(tp0, AcksAll, "a") }()
	waitFor(t, func() bool { p, _ := h.describe(tp0); return p.LogEndOffset == 1 })
	h.leaderAndIsr(1, state("orders", 0, 2, 2, []int32{1, 2}, []int32{2}))
	if r := <-done; r.Error != ErrNotLeaderOrFollower {
		t.Fatalf("got %v, want NOT_LEADER_OR_FOLLOWER", r.Error)
	}
}

// acks=-1 with the ISR below min.insync.replicas fails before appending.
func TestNotEnoughReplicas(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) { c.MinInsyncReplicas = 2 })
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1, 2}, []int32{1}))
	if r := h.produce(tp0, AcksAll, "a"); r.Error != ErrNotEnoughReplicas {
		t.Fatalf("got %v, want NOT_ENOUGH_REPLICAS", r.Error)
	}
	if p, _ := h.describe(tp0); p.LogEndOffset != 0 {
		t.Fatalf("LEO %d: the rejected batch was appended", p.LogEndOffset)
	}
	// acks=1 appends, but the HW stays while the ISR is under the minimum.
	if r := h.produce(tp0, AcksLeader, "a"); r.Error != ErrNone || r.HighWatermark != 0 {
		t.Fatalf("acks=1 under min ISR: %+v", r)
	}
}

// A long-polling consume is woken by the append that moves the HW.
func TestConsumeLongPollWokenByAppend(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	done := make(chan ConsumeResult)
	go func() {
		done <- h.rm.Consume(context.Background(), ConsumeRequest{TopicPartition: tp0, MinBytes: 1, MaxWait: time.Hour})
	}()
	// Produce only once the consumer waits on the partition's notifier, so
	// the record must reach it by the wake-up, not by its first read.
	p, _ := h.rm.onlinePartition(tp0)
	waitFor(t, p.changed.waiting)
	select {
	case r := <-done:
		t.Fatalf("consume returned before any record: %+v", r)
	default:
	}
	h.produce(tp0, AcksLeader, "late")
	var r ConsumeResult
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the append did not wake the long poll")
	}
	if len(r.Records) != 1 || string(r.Records[0].Value) != "late" {
		t.Fatalf("long poll: %+v", r)
	}
}

// The HW checkpoint loop starts after the first LeaderAndIsr and writes every interval.
func TestCheckpointLoopRunsOnInterval(t *testing.T) {
	h := newHarness(t, 1)
	path := filepath.Join(h.dirs[0], logmgr.ReplicationOffsetCheckpoint)
	h.clock.Advance(time.Minute)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("checkpoint written before the first LeaderAndIsr: %v", err)
	}
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	h.produce(tp0, AcksLeader, "a")
	h.clock.Advance(5 * time.Second)
	hws, err := checkpoint.ReadOffsets(vfs.OS, path)
	if err != nil || hws[tp0] != 1 {
		t.Fatalf("checkpoint %v %v, want orders-0 at 1", hws, err)
	}
}

// A failed HW checkpoint write takes its dir offline: its partitions go
// offline while the other dir keeps serving; no dir left is fatal.
func TestCheckpointFailureTakesDirOffline(t *testing.T) {
	h := newHarness(t, 2)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}), state("orders", 1, 1, 1, []int32{1}, []int32{1}))
	// A directory where the temp file must go makes the write fail.
	if err := os.Mkdir(filepath.Join(h.dirs[1], logmgr.ReplicationOffsetCheckpoint+".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	res := h.rm.CheckpointHighWatermarks(context.Background())
	if res[0].Error != ErrNone || res[1].Error != ErrStorageError {
		t.Fatalf("checkpoint results %+v", res)
	}
	t1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	if p, _ := h.describe(t1); p.Role != RoleOffline {
		t.Fatalf("partition of the failed dir: %v, want offline", p.Role)
	}
	if r := h.produce(tp0, AcksLeader, "a"); r.Error != ErrNone {
		t.Fatalf("healthy dir stopped serving: %v", r.Error)
	}
	select {
	case err := <-h.rm.Fatal():
		t.Fatalf("fatal with a dir left: %v", err)
	default:
	}
	if err := os.Mkdir(filepath.Join(h.dirs[0], logmgr.ReplicationOffsetCheckpoint+".tmp"), 0o755); err != nil {
		t.Fatal(err)
	}
	h.rm.CheckpointHighWatermarks(context.Background())
	select {
	case <-h.rm.Fatal():
	case <-time.After(10 * time.Second):
		t.Fatal("no dir left but no fatal error")
	}
}

// waitFor polls cond until it holds, failing the test after a deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// The partitions of a failed log dir are listed offline, for the heartbeat
// that tells the controller (issue 10, path 4).
func TestOfflinePartitionsListsTheFailedDirsPartitions(t *testing.T) {
	h := newHarness(t, 2)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}), state("orders", 1, 1, 1, []int32{1}, []int32{1}))
	if got := h.rm.OfflinePartitions(); len(got) != 0 {
		t.Fatalf("offline partitions %v before any failure", got)
	}
	dir, _ := h.rm.logs.DirOf(tp0)
	h.rm.handleLogDirFailure(dir, errors.New("disk gone"))
	got := h.rm.OfflinePartitions()
	if len(got) != 1 || got[0] != tp0 {
		t.Fatalf("offline partitions %v, want [%v] (the other is in the other dir)", got, tp0)
	}
}

// TestShutdownKeepsHighWatermarksWithOSFlush ensures a clean restart keeps the HWs under the os flush policy: Shutdown flushes the logs before it writes the HW checkpoint, which is capped at each log's recovery point.
func TestShutdownKeepsHighWatermarksWithOSFlush(t *testing.T) {
	h := newHarness(t, 1, func(c *Config) {
		c.LogConfig = log.DefaultConfig()
		c.LogConfig.FlushPolicy = log.FlushOS
	})
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	h.produce(tp0, AcksLeader, "a", "b", "c")
	if info, _ := h.describe(tp0); info.HighWatermark != 3 {
		t.Fatalf("HW %d before the restart, want 3", info.HighWatermark)
	}
	h.restart()
	if l, ok := h.rm.logs.GetLog(tp0); !ok || l.HighWatermark() != 3 {
		t.Fatalf("HW after a clean restart %v (log %v), want 3", l.HighWatermark(), ok)
	}
}

// TestStartupRewritesHighWatermarksPastTheLog ensures a HW checkpoint that claims more than a log holds at start-up (a truncation or power loss took the records after it was written), or names a partition with no log, is rewritten at once (crashtest every-batch seed 391: a follower's truncation to 0 cut before the next HW checkpoint, and the stale HW of 4 outlived a restart).
func TestStartupRewritesHighWatermarksPastTheLog(t *testing.T) {
	h := newHarness(t, 1)
	h.leaderAndIsr(1, state("orders", 0, 1, 1, []int32{1}, []int32{1}))
	h.produce(tp0, AcksLeader, "a", "b", "c")
	if err := h.rm.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(h.dirs[0], logmgr.ReplicationOffsetCheckpoint)
	gone := tp.TopicPartition{Topic: "gone", Partition: 0}
	if err := checkpoint.WriteOffsets(vfs.OS, path, map[tp.TopicPartition]int64{tp0: 10, gone: 5}, true); err != nil {
		t.Fatal(err)
	}
	h.open()
	hws, err := checkpoint.ReadOffsets(vfs.OS, path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hws[gone]; ok || hws[tp0] != 3 {
		t.Fatalf("HW checkpoint after start-up %v, want orders-0 at 3 alone", hws)
	}
}
