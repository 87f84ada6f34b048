package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// testSessionTimeout is the session timeout of every harness controller.
const testSessionTimeout = 6 * time.Second

// waitTimeout bounds every wait on a condition.
const waitTimeout = 10 * time.Second

// waitFor polls cond until it holds, failing the test after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", waitTimeout, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// fakeBroker is a broker's ReplicaManagerService as the controller sees it:
// it records every request and answers NONE.
type fakeBroker struct {
	addr string
	// st is the store the controller writes; every partition state the
	// broker receives must already be there ("persisted before any broker
	// is told").
	st store.Store

	mu  sync.Mutex
	lai []*replicadv1.LeaderAndIsrRequest
	um  []*replicadv1.UpdateMetadataRequest
	sr  []*replicadv1.StopReplicaRequest
	// laiSpans and srSpans are the span contexts each LeaderAndIsr and
	// StopReplica of lai and sr arrived with, in the same order.
	laiSpans []trace.SpanContext
	srSpans  []trace.SpanContext
	leo      map[partitionKey]int64
	// minControllerEpoch: a LeaderAndIsr of an older controller epoch is
	// answered STALE_CONTROLLER_EPOCH (the broker heard of a newer one).
	minControllerEpoch int32
	// staleAnswerEpoch is the controller epoch a STALE_CONTROLLER_EPOCH
	// answer names (0: none, as an older broker answers).
	staleAnswerEpoch int32
	// failUpdateMetadata makes every UpdateMetadata fail (Unavailable), as
	// a broker the controller cannot reach.
	failUpdateMetadata bool
	// storageErrorFor are the partitions it answers STORAGE_ERROR for.
	storageErrorFor map[partitionKey]bool
	dials           int
	closes          int
	// violations are the states received before the store held them.
	violations []string
}

var _ replicadv1.ReplicaManagerServiceClient = (*fakeBroker)(nil)

func (f *fakeBroker) checkPersisted(kind string, states []*replicadv1.PartitionState) {
	for _, s := range states {
		p, err := f.st.Partition(context.Background(), s.GetTopic(), s.GetPartition())
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrClosed) {
			continue // deleted since, or the test is tearing the store down
		}
		var problem string
		switch {
		case err != nil:
			problem = err.Error()
		case p.PartitionEpoch < s.GetPartitionEpoch():
			problem = fmt.Sprintf("store has partition epoch %d", p.PartitionEpoch)
		case p.PartitionEpoch == s.GetPartitionEpoch() &&
			(p.Leader != s.GetLeader() || p.LeaderEpoch != s.GetLeaderEpoch() || !slices.Equal(p.ISR, s.GetIsr()) ||
				!slices.Equal(p.Replicas, s.GetReplicas())):
			problem = fmt.Sprintf("store has %+v at the same partition epoch", p)
		}
		if problem != "" {
			f.mu.Lock()
			f.violations = append(f.violations, fmt.Sprintf("%s to %s: %s-%d %v: %s", kind, f.addr, s.GetTopic(), s.GetPartition(), s, problem))
			f.mu.Unlock()
		}
	}
}

func (f *fakeBroker) LeaderAndIsr(ctx context.Context, in *replicadv1.LeaderAndIsrRequest, _ ...grpc.CallOption) (*replicadv1.LeaderAndIsrResponse, error) {
	f.checkPersisted("LeaderAndIsr", in.GetPartitionStates())
	f.mu.Lock()
	defer f.mu.Unlock()
	if in.GetControllerEpoch() < f.minControllerEpoch {
		return &replicadv1.LeaderAndIsrResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH,
			ControllerEpoch: f.staleAnswerEpoch}, nil
	}
	f.lai = append(f.lai, in)
	f.laiSpans = append(f.laiSpans, trace.SpanContextFromContext(ctx))
	resp := &replicadv1.LeaderAndIsrResponse{}
	for _, s := range in.GetPartitionStates() {
		pe := &replicadv1.PartitionError{Topic: s.GetTopic(), Partition: s.GetPartition()}
		if f.storageErrorFor[partitionKey{s.GetTopic(), s.GetPartition()}] {
			pe.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR
		}
		resp.PartitionErrors = append(resp.PartitionErrors, pe)
	}
	return resp, nil
}

func (f *fakeBroker) UpdateMetadata(_ context.Context, in *replicadv1.UpdateMetadataRequest, _ ...grpc.CallOption) (*replicadv1.UpdateMetadataResponse, error) {
	f.checkPersisted("UpdateMetadata", in.GetPartitionStates())
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failUpdateMetadata {
		return nil, status.Error(codes.Unavailable, "fake broker unreachable")
	}
	f.um = append(f.um, in)
	return &replicadv1.UpdateMetadataResponse{}, nil
}

func (f *fakeBroker) StopReplica(ctx context.Context, in *replicadv1.StopReplicaRequest, _ ...grpc.CallOption) (*replicadv1.StopReplicaResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sr = append(f.sr, in)
	f.srSpans = append(f.srSpans, trace.SpanContextFromContext(ctx))
	resp := &replicadv1.StopReplicaResponse{}
	for _, p := range in.GetPartitions() {
		resp.PartitionErrors = append(resp.PartitionErrors, &replicadv1.PartitionError{Topic: p.GetTopic(), Partition: p.GetPartition()})
	}
	return resp, nil
}

func (f *fakeBroker) CheckpointHighWatermarks(context.Context, *replicadv1.CheckpointHighWatermarksRequest, ...grpc.CallOption) (*replicadv1.CheckpointHighWatermarksResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (f *fakeBroker) RunRetention(context.Context, *replicadv1.RunRetentionRequest, ...grpc.CallOption) (*replicadv1.RunRetentionResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

func (f *fakeBroker) AlterReplicaLogDirs(context.Context, *replicadv1.AlterReplicaLogDirsRequest, ...grpc.CallOption) (*replicadv1.AlterReplicaLogDirsResponse, error) {
	return nil, status.Error(codes.Unimplemented, "fake")
}

// DescribePartitions answers with the configured log end offset of the
// asked partition, or Unavailable when none is configured.
func (f *fakeBroker) DescribePartitions(_ context.Context, in *replicadv1.DescribePartitionsRequest, _ ...grpc.CallOption) (*replicadv1.DescribePartitionsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	leo, ok := f.leo[partitionKey{in.GetTopic(), in.GetPartition()}]
	if !ok || in.Partition == nil {
		return nil, status.Error(codes.Unavailable, "fake: no log end offset configured")
	}
	return &replicadv1.DescribePartitionsResponse{Partitions: []*replicadv1.PartitionDescription{{
		Topic: in.GetTopic(), Partition: in.GetPartition(), LogEndOffset: leo}}}, nil
}

func (f *fakeBroker) setLEO(topic string, partition int32, leo int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.leo == nil {
		f.leo = make(map[partitionKey]int64)
	}
	f.leo[partitionKey{topic, partition}] = leo
}

// reset forgets the requests received so far.
func (f *fakeBroker) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lai, f.um, f.sr = nil, nil, nil
	f.laiSpans, f.srSpans = nil, nil
}

func (f *fakeBroker) leaderAndIsrs() []*replicadv1.LeaderAndIsrRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.lai)
}

func (f *fakeBroker) updateMetadatas() []*replicadv1.UpdateMetadataRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.um)
}

func (f *fakeBroker) stopReplicas() []*replicadv1.StopReplicaRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.sr)
}

// laiState is the latest state of topic-partition received in a
// LeaderAndIsr, with the request that carried it, or nil.
func (f *fakeBroker) laiState(topic string, partition int32) (*replicadv1.PartitionState, *replicadv1.LeaderAndIsrRequest) {
	lais := f.leaderAndIsrs()
	for i := len(lais) - 1; i >= 0; i-- {
		for _, s := range lais[i].GetPartitionStates() {
			if s.GetTopic() == topic && s.GetPartition() == partition {
				return s, lais[i]
			}
		}
	}
	return nil, nil
}

// stopped reports whether a StopReplica with delete_partition for
// topic-partition was received.
func (f *fakeBroker) stoppedAndDeleted(topic string, partition int32) bool {
	for _, r := range f.stopReplicas() {
		for _, p := range r.GetPartitions() {
			if p.GetTopic() == topic && p.GetPartition() == partition && p.GetDeletePartition() {
				return true
			}
		}
	}
	return false
}

type fakeCloser struct{ f *fakeBroker }

func (c fakeCloser) Close() error {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.closes++
	return nil
}

// harness is a Controller over a store with a Manual clock and fake brokers.
type harness struct {
	t   *testing.T
	st  store.Store
	clk *clock.Manual
	// pclk is the controller's process clock: it stands still unless a
	// test plays a pause of the controller's process, so clock jumps of
	// clk read as time the controller heard through.
	pclk  *clock.Manual
	c     *Controller
	cfg   Config
	epoch map[int32]int64 // the broker epoch of each registration
	// minIsr is the --min-insync-replicas the harness's brokers register
	// with (0: they do not say).
	minIsr int32

	mu    sync.Mutex
	fakes map[string]*fakeBroker

	cancel context.CancelFunc
	done   chan struct{}
}

type harnessOption func(*Config)

func withUnclean() harnessOption { return func(c *Config) { c.UncleanLeaderElection = true } }

func withStore(s store.Store) harnessOption { return func(c *Config) { c.Store = s } }

func withSendTimeout(d time.Duration) harnessOption { return func(c *Config) { c.SendTimeout = d } }

func withElector(e store.Elector) harnessOption { return func(c *Config) { c.Elector = e } }

func withTracerProvider(tp trace.TracerProvider) harnessOption {
	return func(c *Config) { c.TracerProvider = tp }
}

// newHarness builds a controller; it does not start it.
func newHarness(t *testing.T, opts ...harnessOption) *harness {
	t.Helper()
	h := &harness{
		t:     t,
		clk:   clock.NewManual(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)),
		pclk:  clock.NewManual(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)),
		epoch: make(map[int32]int64),
		fakes: make(map[string]*fakeBroker),
	}
	cfg := Config{
		Store:           store.NewMemory(),
		ID:              100,
		SessionTimeout:  testSessionTimeout,
		QueueBackoff:    time.Millisecond,
		QueueMaxBackoff: 5 * time.Millisecond,
		SendTimeout:     5 * time.Second,
		Clock:           h.clk,
		processClock:    h.pclk,
		Logger:          zerolog.Nop(),
		DialBroker:      h.dial,
	}
	for _, o := range opts {
		o(&cfg)
	}
	h.cfg = cfg
	h.st = cfg.Store
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.c = c
	t.Cleanup(func() {
		h.stop()
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, f := range h.fakes {
			f.mu.Lock()
			for _, v := range f.violations {
				t.Errorf("sent before persisted: %s", v)
			}
			f.mu.Unlock()
		}
	})
	return h
}

func (h *harness) dial(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
	f := h.fakeAt(addr)
	f.mu.Lock()
	f.dials++
	f.mu.Unlock()
	return f, fakeCloser{f}, nil
}

func (h *harness) fakeAt(addr string) *fakeBroker {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.fakes[addr]
	if !ok {
		f = &fakeBroker{addr: addr, st: h.st}
		h.fakes[addr] = f
	}
	return f
}

func brokerHost(id int32) string { return fmt.Sprintf("broker%d", id) }
func brokerPort(id int32) int32  { return 9000 + id }

// fake is broker id's fake ReplicaManagerService.
func (h *harness) fake(id int32) *fakeBroker {
	return h.fakeAt(net.JoinHostPort(brokerHost(id), strconv.Itoa(int(brokerPort(id)))))
}

// start runs the controller and waits until it acts.
func (h *harness) start() {
	h.t.Helper()
	h.startRun()
	waitFor(h.t, "the controller to become active", func() bool { a, _ := h.c.Active(); return a })
}

// startRun runs the controller without waiting.
func (h *harness) startRun() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		_ = h.c.Run(ctx)
	}()
}

// stop stops Run and waits for it to return.
func (h *harness) stop() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(waitTimeout):
		h.t.Errorf("Run did not return after its context was cancelled")
	}
	h.cancel = nil
}

// register registers broker id as coming back from a clean shutdown (its
// previous broker epoch is its last registration's).
func (h *harness) register(id int32) int64 {
	h.t.Helper()
	return h.registerAfter(id, h.epoch[id])
}

// registerAfter registers broker id saying previousEpoch was the epoch of
// its life that ended cleanly (-1: its last shutdown was unclean).
func (h *harness) registerAfter(id int32, previousEpoch int64) int64 {
	h.t.Helper()
	resp, err := h.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{
		BrokerId: id, Host: brokerHost(id), Port: brokerPort(id), PreviousBrokerEpoch: previousEpoch, MinInsyncReplicas: h.minIsr})
	if err != nil {
		h.t.Fatalf("RegisterBroker(%d): %v", id, err)
	}
	if resp.GetErrorCode() != codeNone {
		h.t.Fatalf("RegisterBroker(%d): %v", id, resp.GetErrorCode())
	}
	if _, epoch := h.c.Active(); resp.GetControllerEpoch() != epoch || resp.GetSessionTimeoutMs() != int32(testSessionTimeout.Milliseconds()) {
		h.t.Errorf("RegisterBroker(%d) answered controller epoch %d, session timeout %dms; want %d, %v",
			id, resp.GetControllerEpoch(), resp.GetSessionTimeoutMs(), epoch, testSessionTimeout)
	}
	h.epoch[id] = resp.GetBrokerEpoch()
	return resp.GetBrokerEpoch()
}

func (h *harness) heartbeat(ids ...int32) {
	h.t.Helper()
	for _, id := range ids {
		resp, err := h.c.BrokerHeartbeat(context.Background(), &replicadv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: h.epoch[id]})
		if err != nil || resp.GetErrorCode() != codeNone || resp.GetIsFenced() {
			h.t.Fatalf("BrokerHeartbeat(%d): %v %v", id, resp, err)
		}
	}
}

// expire lets every broker but alive go silent past the session timeout and
// runs the session check.
func (h *harness) expire(alive ...int32) {
	h.t.Helper()
	h.clk.Advance(testSessionTimeout / 2)
	h.heartbeat(alive...)
	h.clk.Advance(testSessionTimeout/2 + time.Millisecond)
	h.c.expireSessions(context.Background())
}

func (h *harness) createTopic(topic string, partitions, rf int32) []*replicadv1.ClusterPartition {
	h.t.Helper()
	resp, err := h.c.CreateTopic(context.Background(), &replicadv1.CreateTopicRequest{Topic: topic, Partitions: partitions, ReplicationFactor: rf})
	if err != nil || resp.GetErrorCode() != codeNone {
		h.t.Fatalf("CreateTopic(%s): %v %v", topic, resp, err)
	}
	return resp.GetPartitions()
}

// part is topic-partition as stored.
func (h *harness) part(topic string, partition int32) store.Partition {
	h.t.Helper()
	p, err := h.st.Partition(context.Background(), topic, partition)
	if err != nil {
		h.t.Fatalf("store.Partition(%s-%d): %v", topic, partition, err)
	}
	return p
}

// snapshot is everything in the store, to check that nothing changed.
type snapshot struct {
	brokers []store.Broker
	parts   []store.Partition
	epoch   int32
	// lastProducerID is the end of the last producer ID block.
	lastProducerID int64
}

func (h *harness) snapshot() snapshot {
	h.t.Helper()
	ctx := context.Background()
	b, err := h.st.Brokers(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	p, err := h.st.Partitions(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	e, err := h.st.ControllerEpoch(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	pid, err := h.st.LastProducerID(ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	return snapshot{b, p, e, pid}
}

func (s snapshot) String() string {
	return fmt.Sprintf("%+v", struct{ B, P, E, PID any }{s.brokers, s.parts, s.epoch, s.lastProducerID})
}

func (h *harness) assertUnchanged(before snapshot) {
	h.t.Helper()
	if after := h.snapshot(); after.String() != before.String() {
		h.t.Errorf("store changed:\nbefore %v\nafter  %v", before, after)
	}
}

// alter sends one AlterPartition item as broker leader, with the stored
// broker epochs of the proposed ISR.
func (h *harness) alter(leader int32, p store.Partition, isr ...int32) *replicadv1.AlterPartitionResponse {
	h.t.Helper()
	item := &replicadv1.AlterPartitionItem{Topic: p.Topic, Partition: p.Partition, LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch}
	for _, id := range isr {
		item.NewIsr = append(item.NewIsr, &replicadv1.BrokerEpoch{BrokerId: id, BrokerEpoch: h.epoch[id]})
	}
	resp, err := h.c.AlterPartition(context.Background(), &replicadv1.AlterPartitionRequest{
		BrokerId: leader, BrokerEpoch: h.epoch[leader], Partitions: []*replicadv1.AlterPartitionItem{item}})
	if err != nil {
		h.t.Fatalf("AlterPartition: %v", err)
	}
	return resp
}

// mustAlter is alter that must be accepted.
func (h *harness) mustAlter(leader int32, p store.Partition, isr ...int32) {
	h.t.Helper()
	resp := h.alter(leader, p, isr...)
	if resp.GetErrorCode() != codeNone || len(resp.GetPartitions()) != 1 || resp.GetPartitions()[0].GetErrorCode() != codeNone {
		h.t.Fatalf("AlterPartition %v rejected: %v", isr, resp)
	}
}
