package brokerqueue

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/syncbuf"
	"github.com/replicad/replicad/internal/testutil"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitTimeout bounds every wait on a condition (generous for -race on a
// slow machine).
const waitTimeout = 10 * time.Second

const (
	testBroker          = int32(2)
	testBrokerEpoch     = int64(42)
	testController      = int32(1)
	testControllerEpoch = int32(7)
)

// call is one request the fake broker received.
type call struct {
	lai *replicadv1.LeaderAndIsrRequest
	um  *replicadv1.UpdateMetadataRequest
	sr  *replicadv1.StopReplicaRequest
	at  time.Time
	// timeout is the time the call had left when it arrived (0: none).
	timeout time.Duration
	// deadline says whether the call had a deadline at all (timeout may be
	// negative when a loaded machine ran the fake after it passed).
	deadline bool
}

// fakeBroker is a replicadv1.ReplicaManagerServiceClient that records each
// request and answers it with its test's respond (nil: NONE). A
// LeaderAndIsr answered NONE lists every partition, with
// FENCED_LEADER_EPOCH for topic "fenced" and NONE for the others.
type fakeBroker struct {
	replicadv1.ReplicaManagerServiceClient // the other methods are not used

	// respond answers the n-th call (from 0). Set before New.
	respond func(ctx context.Context, n int, c *call) (replicadv1.ErrorCode, error)

	mu    sync.Mutex
	calls []*call
}

func (f *fakeBroker) record(ctx context.Context, c *call) (replicadv1.ErrorCode, error) {
	c.at = time.Now()
	if d, ok := ctx.Deadline(); ok {
		c.timeout, c.deadline = time.Until(d), true
	}
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	if f.respond == nil {
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}
	return f.respond(ctx, n, c)
}

func (f *fakeBroker) LeaderAndIsr(ctx context.Context, in *replicadv1.LeaderAndIsrRequest, _ ...grpc.CallOption) (*replicadv1.LeaderAndIsrResponse, error) {
	code, err := f.record(ctx, &call{lai: proto.Clone(in).(*replicadv1.LeaderAndIsrRequest)})
	if err != nil {
		return nil, err
	}
	resp := &replicadv1.LeaderAndIsrResponse{ErrorCode: code}
	if code == replicadv1.ErrorCode_ERROR_CODE_NONE {
		for _, s := range in.GetPartitionStates() {
			pe := &replicadv1.PartitionError{Topic: s.GetTopic(), Partition: s.GetPartition()}
			if s.GetTopic() == "fenced" {
				pe.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH
			}
			resp.PartitionErrors = append(resp.PartitionErrors, pe)
		}
	}
	return resp, nil
}

func (f *fakeBroker) UpdateMetadata(ctx context.Context, in *replicadv1.UpdateMetadataRequest, _ ...grpc.CallOption) (*replicadv1.UpdateMetadataResponse, error) {
	code, err := f.record(ctx, &call{um: proto.Clone(in).(*replicadv1.UpdateMetadataRequest)})
	if err != nil {
		return nil, err
	}
	return &replicadv1.UpdateMetadataResponse{ErrorCode: code}, nil
}

func (f *fakeBroker) StopReplica(ctx context.Context, in *replicadv1.StopReplicaRequest, _ ...grpc.CallOption) (*replicadv1.StopReplicaResponse, error) {
	code, err := f.record(ctx, &call{sr: proto.Clone(in).(*replicadv1.StopReplicaRequest)})
	if err != nil {
		return nil, err
	}
	return &replicadv1.StopReplicaResponse{ErrorCode: code}, nil
}

func (f *fakeBroker) got() []*call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeBroker) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// described is every call so far, as describe writes it.
func (f *fakeBroker) described() []string {
	var out []string
	for _, c := range f.got() {
		out = append(out, describe(c))
	}
	return out
}

// describe writes a call compactly: kind, partitions as topic/partition@leader_epoch
// (+del for a deletion), then the live leaders or brokers as id:host.
func describe(c *call) string {
	states := func(ss []*replicadv1.PartitionState) string {
		var parts []string
		for _, s := range ss {
			parts = append(parts, fmt.Sprintf("%s/%d@%d", s.GetTopic(), s.GetPartition(), s.GetLeaderEpoch()))
		}
		return strings.Join(parts, " ")
	}
	brokers := func(bs []*replicadv1.Broker) string {
		var parts []string
		for _, b := range bs {
			parts = append(parts, fmt.Sprintf("%d:%s", b.GetId(), b.GetHost()))
		}
		return strings.Join(parts, " ")
	}
	switch {
	case c.lai != nil:
		return "LAI " + states(c.lai.GetPartitionStates()) + " | " + brokers(c.lai.GetLiveLeaders())
	case c.um != nil:
		return "UM " + states(c.um.GetPartitionStates()) + " | " + brokers(c.um.GetLiveBrokers())
	default:
		var parts []string
		for _, p := range c.sr.GetPartitions() {
			s := fmt.Sprintf("%s/%d@%d", p.GetTopic(), p.GetPartition(), p.GetLeaderEpoch())
			if p.GetDeletePartition() {
				s += "+del"
			}
			parts = append(parts, s)
		}
		return "SR " + strings.Join(parts, " ")
	}
}

func st(topic string, partition, leaderEpoch int32) *replicadv1.PartitionState {
	return &replicadv1.PartitionState{
		Topic: topic, Partition: partition, ControllerEpoch: testControllerEpoch - 1,
		Leader: 1, LeaderEpoch: leaderEpoch, Isr: []int32{1, 2}, Replicas: []int32{1, 2}, PartitionEpoch: leaderEpoch,
	}
}

func br(id int32, host string) *replicadv1.Broker {
	return &replicadv1.Broker{Id: id, Host: host, Port: 9090 + id}
}

func sp(topic string, partition, leaderEpoch int32, del bool) *replicadv1.StopReplicaPartition {
	return &replicadv1.StopReplicaPartition{Topic: topic, Partition: partition, LeaderEpoch: leaderEpoch, DeletePartition: del}
}

// testLogger logs to the test when BROKERQUEUE_TEST_LOG is set.
func testLogger(t *testing.T) zerolog.Logger {
	if os.Getenv("BROKERQUEUE_TEST_LOG") == "" {
		return zerolog.Nop()
	}
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

// newQueue makes a Queue to f with short backoffs, closed at the test's end.
func newQueue(t *testing.T, f replicadv1.ReplicaManagerServiceClient, opts ...func(*Config)) *Queue {
	t.Helper()
	cfg := Config{
		BrokerID:        testBroker,
		BrokerEpoch:     testBrokerEpoch,
		ControllerID:    testController,
		ControllerEpoch: testControllerEpoch,
		Client:          f,
		RequestTimeout:  waitTimeout,
		Backoff:         time.Millisecond,
		MaxBackoff:      5 * time.Millisecond,
		Logger:          testLogger(t),
	}
	for _, o := range opts {
		o(&cfg)
	}
	q := New(cfg)
	t.Cleanup(q.Close)
	return q
}

// gateFirst holds the first call until gate is closed, then answers NONE;
// the other calls are answered NONE at once.
func gateFirst(gate <-chan struct{}) func(context.Context, int, *call) (replicadv1.ErrorCode, error) {
	return func(ctx context.Context, n int, _ *call) (replicadv1.ErrorCode, error) {
		if n == 0 {
			select {
			case <-gate:
			case <-ctx.Done():
				return 0, status.FromContextError(ctx.Err()).Err()
			}
		}
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}
}

func waitCalls(t *testing.T, f *fakeBroker, n int) {
	t.Helper()
	testutil.Eventually(t, waitTimeout, func() error {
		if got := f.count(); got < n {
			return fmt.Errorf("%d calls, want %d", got, n)
		}
		return nil
	})
}

func flush(t *testing.T, q *Queue) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := q.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
}

// boundedCtx is a context that ends after waitTimeout or with the test, so
// that a Flush that never returns fails the test instead of hanging it.
func boundedCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

func wantCalls(t *testing.T, f *fakeBroker, want []string) {
	t.Helper()
	if got := f.described(); !slices.Equal(got, want) {
		t.Fatalf("calls:\n  got  %q\n  want %q", got, want)
	}
}

// syncBuffer is a sink for a logger written from another goroutine.
type syncBuffer struct{ syncbuf.Buffer }

// lines returns the logged lines that contain every one of subs.
func (b *syncBuffer) lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(b.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// TestStampsEpochs checks that every kind of request carries the queue's
// controller id, controller epoch and broker epoch, and the caller's
// partition states untouched.
func TestStampsEpochs(t *testing.T) {
	f := &fakeBroker{}
	q := newQueue(t, f)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("a", 0, 3)}, []*replicadv1.Broker{br(1, "h1")})
	flush(t, q)
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1"), br(2, "h2")}, []*replicadv1.PartitionState{st("a", 0, 3)})
	flush(t, q)
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("a", 1, 2, true)})
	flush(t, q)

	wantCalls(t, f, []string{"LAI a/0@3 | 1:h1", "UM a/0@3 | 1:h1 2:h2", "SR a/1@2+del"})
	calls := f.got()
	type stamped interface {
		GetControllerId() int32
		GetControllerEpoch() int32
		GetBrokerEpoch() int64
	}
	for i, r := range []stamped{calls[0].lai, calls[1].um, calls[2].sr} {
		if r.GetControllerId() != testController || r.GetControllerEpoch() != testControllerEpoch || r.GetBrokerEpoch() != testBrokerEpoch {
			t.Errorf("call %d: controller %d epoch %d broker epoch %d, want %d %d %d", i,
				r.GetControllerId(), r.GetControllerEpoch(), r.GetBrokerEpoch(), testController, testControllerEpoch, testBrokerEpoch)
		}
	}
	if !proto.Equal(calls[0].lai.GetPartitionStates()[0], st("a", 0, 3)) {
		t.Errorf("partition state changed on the way: %v", calls[0].lai.GetPartitionStates()[0])
	}
	if got := calls[0].lai.GetPartitionStates()[0].GetControllerEpoch(); got != testControllerEpoch-1 {
		t.Errorf("partition state controller_epoch %d, want the caller's %d", got, testControllerEpoch-1)
	}
}

// TestBatchesEnqueuesWhileInFlight enqueues many LeaderAndIsr calls while
// the first request is in flight; they must go out as one request, in order.
func TestBatchesEnqueuesWhileInFlight(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: gateFirst(gate)}
	q := newQueue(t, f)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("t", 0, 1)}, []*replicadv1.Broker{br(1, "h1")})
	waitCalls(t, f, 1)
	var want []string
	for p := int32(1); p <= 100; p++ {
		q.LeaderAndIsr([]*replicadv1.PartitionState{st("t", p, 1)}, []*replicadv1.Broker{br(1, "h1")})
		want = append(want, fmt.Sprintf("t/%d@1", p))
	}
	if got := q.Pending(); got != 101 {
		t.Errorf("Pending = %d, want 101 (1 in flight + 100 waiting)", got)
	}
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{"LAI t/0@1 | 1:h1", "LAI " + strings.Join(want, " ") + " | 1:h1"})
	if got := q.Pending(); got != 0 {
		t.Errorf("Pending after Flush = %d, want 0", got)
	}
}

// TestNewestStateWins checks the merging of LeaderAndIsr calls: a later
// state of a partition replaces the earlier one in its place, and live
// leaders merge by id with the later endpoint winning.
func TestNewestStateWins(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: gateFirst(gate)}
	q := newQueue(t, f)
	q.UpdateMetadata(nil, nil) // the request held in flight
	waitCalls(t, f, 1)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, []*replicadv1.Broker{br(1, "old")})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("q", 0, 1), st("p", 0, 2)}, []*replicadv1.Broker{br(2, "h2")})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 3), st("p", 0, 4)}, []*replicadv1.Broker{br(1, "new")})
	if got := q.Pending(); got != 3 {
		t.Errorf("Pending = %d, want 3 (the UpdateMetadata, p and q)", got)
	}
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{"UM  | ", "LAI p/0@4 q/0@1 | 1:new 2:h2"})
}

// TestUpdateMetadataMerges checks that consecutive UpdateMetadata calls
// become one request with the latest live brokers and the newest states.
func TestUpdateMetadataMerges(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: gateFirst(gate)}
	q := newQueue(t, f)
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("x", 0, 1, false)}) // held in flight
	waitCalls(t, f, 1)
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1"), br(2, "h2"), br(3, "h3")}, []*replicadv1.PartitionState{st("p", 0, 1), st("q", 0, 1)})
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1"), br(3, "h3")}, nil)
	q.UpdateMetadata([]*replicadv1.Broker{br(3, "h3b"), br(1, "h1")}, []*replicadv1.PartitionState{st("q", 0, 2), st("r", 0, 1)})
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{"SR x/0@1", "UM p/0@1 q/0@2 r/0@1 | 3:h3b 1:h1"})
}

// TestStopReplicaMerges checks that consecutive StopReplica calls become one
// request: the latest leader epoch wins and a deletion once asked is kept.
func TestStopReplicaMerges(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: gateFirst(gate)}
	q := newQueue(t, f)
	q.UpdateMetadata(nil, nil) // held in flight
	waitCalls(t, f, 1)
	delP := sp("p", 0, 1, true)
	q.StopReplica([]*replicadv1.StopReplicaPartition{delP, sp("q", 0, 1, false)})
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("p", 0, 2, false), sp("q", 0, 2, true), sp("r", 0, -1, false)})
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{"UM  | ", "SR p/0@2+del q/0@2+del r/0@-1"})
	if !delP.GetDeletePartition() || delP.GetLeaderEpoch() != 1 {
		t.Errorf("the caller's message was modified: %v", delP)
	}
}

// TestFIFOAcrossKinds checks that requests of different kinds are never
// merged across each other: they reach the broker in the order made.
func TestFIFOAcrossKinds(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: gateFirst(gate)}
	q := newQueue(t, f)
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, nil) // held in flight
	waitCalls(t, f, 1)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("p", 0, 1, true)})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 2)}, nil)
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, []*replicadv1.PartitionState{st("p", 0, 2)})
	q.UpdateMetadata([]*replicadv1.Broker{br(2, "h2")}, nil)
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("q", 0, 1, false)})
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("r", 0, 1, false)})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 3)}, nil)
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{
		"UM  | 1:h1",
		"LAI p/0@1 | ",
		"SR p/0@1+del",
		"LAI p/0@2 | ",
		"UM p/0@2 | 2:h2",
		"SR q/0@1 r/0@1",
		"LAI p/0@3 | ",
	})
}

// TestLeaderAndIsrMetadataPairsMerge checks that the pairs a decision split
// into chunks queues ([L1 U1 L2 U2 ...]) reach the broker as one
// LeaderAndIsr and one UpdateMetadata, not a round trip each, and that a
// pair whose LeaderAndIsr would overtake an unreplaced UpdateMetadata of
// the same partition ends the run.
func TestLeaderAndIsrMetadataPairsMerge(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: gateFirst(gate)}
	q := newQueue(t, f)
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("z", 0, 1, false)}) // held in flight
	waitCalls(t, f, 1)
	for p := int32(0); p < 3; p++ {
		q.LeaderAndIsr([]*replicadv1.PartitionState{st("a", p, 1)}, nil)
		q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, []*replicadv1.PartitionState{st("a", p, 1), st("m", p, 1)})
	}
	// b/0's UpdateMetadata, then a LeaderAndIsr of b/0 whose pair does not
	// name b/0 again: it must not overtake.
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("b", 0, 1)}, nil)
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, []*replicadv1.PartitionState{st("b", 0, 1)})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("b", 0, 2)}, nil)
	q.UpdateMetadata([]*replicadv1.Broker{br(2, "h2")}, []*replicadv1.PartitionState{st("c", 0, 1)})
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{
		"SR z/0@1",
		"LAI a/0@1 a/1@1 a/2@1 b/0@1 | ",
		"UM a/0@1 m/0@1 a/1@1 m/1@1 a/2@1 m/2@1 b/0@1 | 1:h1",
		"LAI b/0@2 | ",
		"UM c/0@1 | 2:h2",
	})
}

// TestMaxPartitionsPerRequest checks that no request holds more than
// MaxPartitionsPerRequest partitions: large calls are split in order, and
// calls merge only while the union fits.
func TestMaxPartitionsPerRequest(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: gateFirst(gate)}
	q := newQueue(t, f, func(c *Config) { c.MaxPartitionsPerRequest = 3 })
	q.UpdateMetadata(nil, nil) // held in flight
	waitCalls(t, f, 1)
	var seven []*replicadv1.PartitionState
	for p := int32(0); p < 7; p++ {
		seven = append(seven, st("t", p, 1))
	}
	q.LeaderAndIsr(seven, []*replicadv1.Broker{br(1, "h1")})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("t", 7, 1), st("t", 6, 2)}, nil)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("t", 0, 2), st("t", 8, 1)}, nil)
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("s", 0, 1, false), sp("s", 1, 1, false), sp("s", 0, 2, false), sp("s", 2, 1, false), sp("s", 3, 1, false)})
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{
		"UM  | ",
		"LAI t/0@1 t/1@1 t/2@1 | 1:h1",
		"LAI t/3@1 t/4@1 t/5@1 | 1:h1",
		"LAI t/6@2 t/7@1 | 1:h1",
		"LAI t/0@2 t/8@1 | ",
		"SR s/0@2 s/1@1 s/2@1",
		"SR s/3@1",
	})
}

// TestRetriesWithBackoffUntilSuccess fails the first attempts (gRPC
// Unavailable, a bare transport error, DeadlineExceeded): the same request
// must be sent again after growing backoffs until it is answered.
func TestRetriesWithBackoffUntilSuccess(t *testing.T) {
	failures := []error{
		status.Error(codes.Unavailable, "connection refused"),
		errors.New("transport is closing"),
		status.Error(codes.DeadlineExceeded, "too slow"),
	}
	f := &fakeBroker{respond: func(_ context.Context, n int, _ *call) (replicadv1.ErrorCode, error) {
		if n < len(failures) {
			return 0, failures[n]
		}
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}}
	const base, maxBackoff = 20 * time.Millisecond, 40 * time.Millisecond
	q := newQueue(t, f, func(c *Config) { c.Backoff, c.MaxBackoff = base, maxBackoff })
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1), st("p", 1, 1)}, []*replicadv1.Broker{br(1, "h1")})
	flush(t, q)
	wantCalls(t, f, slices.Repeat([]string{"LAI p/0@1 p/1@1 | 1:h1"}, 4))
	calls := f.got()
	// Jitter takes off up to half: the waits are at least 10, 20 and 20ms
	// (40ms capped at MaxBackoff, less half).
	for i, least := range []time.Duration{base / 2, base, maxBackoff / 2} {
		if gap := calls[i+1].at.Sub(calls[i].at); gap < least {
			t.Errorf("attempt %d came %v after the failure, want at least %v", i+2, gap, least)
		}
	}
}

// TestBackoffDoublesWithJitterCapped checks the backoff: Backoff doubled per
// consecutive failure, capped at MaxBackoff, less a random part of up to half.
func TestBackoffDoublesWithJitterCapped(t *testing.T) {
	q := &Queue{cfg: Config{Backoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}}
	for failures := 1; failures <= 12; failures++ {
		d := min(10*time.Millisecond<<(failures-1), 100*time.Millisecond)
		seen := map[time.Duration]bool{}
		for range 200 {
			got := q.backoff(failures)
			if got < d/2 || got > d {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", failures, got, d/2, d)
			}
			seen[got] = true
		}
		if len(seen) < 10 {
			t.Errorf("backoff(%d) took %d distinct values in 200 draws: no jitter", failures, len(seen))
		}
	}
}

// TestRequestTimeoutRetried checks that a call is bounded by RequestTimeout
// and retried when it times out.
func TestRequestTimeoutRetried(t *testing.T) {
	const timeout = 50 * time.Millisecond
	f := &fakeBroker{respond: func(ctx context.Context, n int, _ *call) (replicadv1.ErrorCode, error) {
		if n == 0 {
			<-ctx.Done() // a broker that never answers
			return 0, status.FromContextError(ctx.Err()).Err()
		}
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}}
	q := newQueue(t, f, func(c *Config) { c.RequestTimeout, c.RequestTimeoutPerPartition = timeout, -1 })
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("p", 0, 1, false)})
	flush(t, q)
	wantCalls(t, f, []string{"SR p/0@1", "SR p/0@1"})
	for i, c := range f.got() {
		if !c.deadline || c.timeout > timeout {
			t.Errorf("call %d had %v left, want a deadline within %v", i, c.timeout, timeout)
		}
	}
}

// TestRetryCarriesSameKindEnqueuedMeanwhile fails a request after calls were
// queued behind it: the retry takes those of its kind that directly follow
// it, and nothing past a request of another kind.
func TestRetryCarriesSameKindEnqueuedMeanwhile(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: func(ctx context.Context, n int, _ *call) (replicadv1.ErrorCode, error) {
		if n == 0 {
			select {
			case <-gate:
			case <-ctx.Done():
			}
			return 0, status.Error(codes.Unavailable, "broker restarting")
		}
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}}
	q := newQueue(t, f)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	waitCalls(t, f, 1)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("q", 0, 1)}, nil)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 2), st("r", 0, 1)}, nil)
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, nil)
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("s", 0, 1)}, nil)
	close(gate)
	flush(t, q)
	wantCalls(t, f, []string{
		"LAI p/0@1 | ",
		"LAI p/0@2 q/0@1 r/0@1 | ",
		"UM  | 1:h1",
		"LAI s/0@1 | ",
	})
}

// TestEnqueueDuringBackoffJoinsWaitingBatch checks that calls made while a
// failed request waits for its retry join it when they are of its kind and
// nothing else waits, and that Close ends the wait at once.
func TestEnqueueDuringBackoffJoinsWaitingBatch(t *testing.T) {
	f := &fakeBroker{respond: func(context.Context, int, *call) (replicadv1.ErrorCode, error) {
		return 0, status.Error(codes.Unavailable, "down")
	}}
	q := newQueue(t, f, func(c *Config) { c.Backoff, c.MaxBackoff = time.Hour, time.Hour })
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	waitCalls(t, f, 1)
	entries := func() (n int, headSize int, headSending bool) {
		q.mu.Lock()
		defer q.mu.Unlock()
		if len(q.entries) == 0 {
			return 0, 0, false
		}
		return len(q.entries), q.entries[0].size(), q.entries[0].sending
	}
	testutil.Eventually(t, waitTimeout, func() error {
		if _, _, sending := entries(); sending {
			return errors.New("the failed request is still marked in flight")
		}
		return nil
	})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("q", 0, 1)}, nil)
	if n, size, _ := entries(); n != 1 || size != 2 {
		t.Errorf("after a LeaderAndIsr during the backoff: %d requests, the first of %d partitions; want 1 of 2", n, size)
	}
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("q", 0, 1, false)})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("r", 0, 1)}, nil)
	if n, size, _ := entries(); n != 3 || size != 2 {
		t.Errorf("after a StopReplica and a LeaderAndIsr: %d requests, the first of %d partitions; want 3, 2", n, size)
	}
	closeWithin(t, q, 5*time.Second)
	if got := f.count(); got != 1 {
		t.Errorf("%d calls, want 1 (the retry was an hour away)", got)
	}
}

// closeWithin fails the test if q.Close takes longer than d.
func closeWithin(t *testing.T, q *Queue, d time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		q.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Close did not return within %v", d)
	}
}

// TestSlowBrokerBlocksNeitherOthersNorCaller checks that a broker that never
// answers holds up neither another broker's queue nor the enqueueing caller,
// and that Close aborts its call in flight.
func TestSlowBrokerBlocksNeitherOthersNorCaller(t *testing.T) {
	dead := &fakeBroker{respond: func(ctx context.Context, _ int, _ *call) (replicadv1.ErrorCode, error) {
		<-ctx.Done()
		return 0, status.FromContextError(ctx.Err()).Err()
	}}
	live := &fakeBroker{}
	qDead := newQueue(t, dead, func(c *Config) { c.BrokerID = 3 })
	qLive := newQueue(t, live)

	qDead.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	waitCalls(t, dead, 1)
	qLive.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	flush(t, qLive)

	// Many calls of every kind to the dead broker return at once.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10000 {
			p := int32(i % 50)
			switch i % 3 {
			case 0:
				qDead.LeaderAndIsr([]*replicadv1.PartitionState{st("p", p, int32(i))}, nil)
			case 1:
				qDead.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, []*replicadv1.PartitionState{st("p", p, int32(i))})
			default:
				qDead.StopReplica([]*replicadv1.StopReplicaPartition{sp("p", p, int32(i), false)})
			}
			qLive.LeaderAndIsr([]*replicadv1.PartitionState{st("p", p, int32(i))}, nil)
		}
	}()
	select {
	case <-done:
	case <-time.After(waitTimeout):
		t.Fatal("enqueueing to the dead broker's queue blocked")
	}
	flush(t, qLive)
	if got := dead.count(); got != 1 {
		t.Errorf("dead broker got %d calls, want 1 (the first still in flight)", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := qDead.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Flush of the dead broker's queue: %v, want a deadline error", err)
	}
	closeWithin(t, qDead, 5*time.Second)
}

// TestCloseWhileRetrying closes a queue whose broker keeps failing: Close
// must return promptly, leave no goroutine behind and drop what waits.
func TestCloseWhileRetrying(t *testing.T) {
	f := &fakeBroker{respond: func(context.Context, int, *call) (replicadv1.ErrorCode, error) {
		return 0, status.Error(codes.Unavailable, "down")
	}}
	q := New(Config{
		BrokerID: testBroker, Client: f, Logger: testLogger(t),
		Backoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond,
	})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	q.UpdateMetadata(nil, nil)
	waitCalls(t, f, 5)
	closeWithin(t, q, 5*time.Second)
	closeWithin(t, q, time.Second) // idempotent
	goleak.VerifyNone(t)

	n := f.count()
	if got := q.Pending(); got != 0 {
		t.Errorf("Pending after Close = %d, want 0", got)
	}
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("q", 0, 1)}, nil)
	if got := q.Pending(); got != 0 {
		t.Errorf("Pending after a call after Close = %d, want 0", got)
	}
	if err := q.Flush(boundedCtx(t)); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v, want ErrClosed", err)
	}
	if got := f.count(); got != n {
		t.Errorf("%d calls after Close, want none", got-n)
	}
}

// TestInvalidArgumentDropped checks that a request the broker refuses as
// invalid is logged at error and dropped, not retried, and that the queue
// goes on with the next request.
func TestInvalidArgumentDropped(t *testing.T) {
	f := &fakeBroker{respond: func(_ context.Context, n int, _ *call) (replicadv1.ErrorCode, error) {
		if n == 0 {
			return 0, status.Error(codes.InvalidArgument, "partition_states[0].isr: leader 9 not in replicas")
		}
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}}
	var logs syncBuffer
	q := newQueue(t, f, func(c *Config) { c.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel) })
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := q.Flush(ctx); !errors.Is(err, ErrDropped) {
		t.Fatalf("Flush: %v, want ErrDropped", err)
	}
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, nil)
	testutil.Eventually(t, waitTimeout, func() error {
		if q.Pending() != 0 {
			return errors.New("UpdateMetadata not delivered yet")
		}
		return nil
	})
	// The LeaderAndIsr would come again before the UpdateMetadata if it
	// were retried.
	wantCalls(t, f, []string{"LAI p/0@1 | ", "UM  | 1:h1"})
	if got := logs.lines(`"level":"error"`, "leader 9 not in replicas", `"broker":2`); len(got) != 1 {
		t.Errorf("error lines naming the broker's message: %q, want one", got)
	}
	// The dropped call stays reported.
	if err := q.Flush(ctx); !errors.Is(err, ErrDropped) {
		t.Errorf("second Flush: %v, want ErrDropped", err)
	}
}

// TestStaleBrokerEpochDropped checks that a request answered
// STALE_BROKER_EPOCH is dropped, not retried, and sending goes on.
func TestStaleBrokerEpochDropped(t *testing.T) {
	f := &fakeBroker{respond: func(_ context.Context, n int, _ *call) (replicadv1.ErrorCode, error) {
		if n == 0 {
			return replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, nil
		}
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}}
	var responses atomic.Int32
	q := newQueue(t, f, func(c *Config) {
		c.OnLeaderAndIsrResponse = func(int32, *replicadv1.LeaderAndIsrResponse) { responses.Add(1) }
	})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := q.Flush(ctx); !errors.Is(err, ErrDropped) {
		t.Fatalf("Flush: %v, want ErrDropped", err)
	}
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("p", 0, 1, false)})
	testutil.Eventually(t, waitTimeout, func() error {
		if q.Pending() != 0 {
			return errors.New("StopReplica not delivered yet")
		}
		return nil
	})
	wantCalls(t, f, []string{"LAI p/0@1 | ", "SR p/0@1"})
	if got := responses.Load(); got != 1 {
		t.Errorf("OnLeaderAndIsrResponse called %d times, want 1", got)
	}
}

// TestStaleControllerEpochStopsSending checks that a STALE_CONTROLLER_EPOCH
// answer, to any kind of request, calls OnStaleControllerEpoch once and
// stops the queue: what waits is dropped and nothing more is sent.
func TestStaleControllerEpochStopsSending(t *testing.T) {
	for _, k := range []kind{kindLeaderAndIsr, kindUpdateMetadata, kindStopReplica} {
		t.Run(k.String(), func(t *testing.T) {
			gate := make(chan struct{})
			f := &fakeBroker{respond: func(ctx context.Context, n int, _ *call) (replicadv1.ErrorCode, error) {
				if n == 0 {
					select {
					case <-gate:
					case <-ctx.Done():
					}
					return replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH, nil
				}
				return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
			}}
			var stale, responses atomic.Int32
			q := newQueue(t, f, func(c *Config) {
				c.OnStaleControllerEpoch = func(int32) { stale.Add(1) }
				c.OnLeaderAndIsrResponse = func(int32, *replicadv1.LeaderAndIsrResponse) { responses.Add(1) }
			})
			enqueue := func(k kind, p int32) {
				switch k {
				case kindLeaderAndIsr:
					q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", p, 1)}, nil)
				case kindUpdateMetadata:
					q.UpdateMetadata(nil, []*replicadv1.PartitionState{st("p", p, 1)})
				default:
					q.StopReplica([]*replicadv1.StopReplicaPartition{sp("p", p, 1, false)})
				}
			}
			enqueue(k, 0)
			waitCalls(t, f, 1)
			enqueue(kindLeaderAndIsr, 1) // waiting behind: dropped
			enqueue(kindStopReplica, 1)
			close(gate)
			select {
			case <-q.done:
			case <-time.After(waitTimeout):
				t.Fatal("the queue goroutine did not stop")
			}
			testutil.Eventually(t, waitTimeout, func() error {
				if stale.Load() == 0 {
					return errors.New("OnStaleControllerEpoch not called")
				}
				return nil
			})
			if got := q.Pending(); got != 0 {
				t.Errorf("Pending = %d, want 0", got)
			}
			enqueue(kindUpdateMetadata, 2)
			if got := q.Pending(); got != 0 {
				t.Errorf("Pending after a call once stale = %d, want 0", got)
			}
			if err := q.Flush(boundedCtx(t)); !errors.Is(err, ErrStaleControllerEpoch) {
				t.Errorf("Flush: %v, want ErrStaleControllerEpoch", err)
			}
			if got := f.count(); got != 1 {
				t.Errorf("%d calls, want 1", got)
			}
			if got := stale.Load(); got != 1 {
				t.Errorf("OnStaleControllerEpoch called %d times, want 1", got)
			}
			if got := responses.Load(); got != 0 {
				t.Errorf("OnLeaderAndIsrResponse called %d times for a stale answer, want 0", got)
			}
		})
	}
}

// TestStaleControllerEpochCallbackMayClose checks that the stale-epoch
// callback may close the queue it came from without deadlocking.
func TestStaleControllerEpochCallbackMayClose(t *testing.T) {
	f := &fakeBroker{respond: func(context.Context, int, *call) (replicadv1.ErrorCode, error) {
		return replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH, nil
	}}
	closed := make(chan struct{})
	var q *Queue
	q = newQueue(t, f, func(c *Config) {
		c.OnStaleControllerEpoch = func(int32) {
			q.Close()
			close(closed)
		}
	})
	q.UpdateMetadata(nil, nil)
	select {
	case <-closed:
	case <-time.After(waitTimeout):
		t.Fatal("Close from OnStaleControllerEpoch did not return")
	}
}

// TestLeaderAndIsrResponseCallback checks that LeaderAndIsr answers,
// partition errors included, reach OnLeaderAndIsrResponse with the broker id.
func TestLeaderAndIsrResponseCallback(t *testing.T) {
	f := &fakeBroker{}
	type got struct {
		broker int32
		resp   *replicadv1.LeaderAndIsrResponse
	}
	responses := make(chan got, 10)
	q := newQueue(t, f, func(c *Config) {
		c.OnLeaderAndIsrResponse = func(b int32, r *replicadv1.LeaderAndIsrResponse) { responses <- got{b, r} }
	})
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("ok", 0, 1), st("fenced", 0, 1)}, nil)
	q.UpdateMetadata(nil, nil) // no callback for this one
	flush(t, q)
	if len(responses) != 1 {
		t.Fatalf("%d callbacks, want 1", len(responses))
	}
	r := <-responses
	want := &replicadv1.LeaderAndIsrResponse{PartitionErrors: []*replicadv1.PartitionError{
		{Topic: "ok"},
		{Topic: "fenced", ErrorCode: replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH},
	}}
	if r.broker != testBroker || !proto.Equal(r.resp, want) {
		t.Errorf("callback got broker %d %v, want %d %v", r.broker, r.resp, testBroker, want)
	}
}

// TestFlush checks that Flush returns at once on an idle queue, waits for a
// request in flight, and waits only for the calls made before it.
func TestFlush(t *testing.T) {
	gate := make(chan struct{})
	f := &fakeBroker{respond: func(ctx context.Context, n int, c *call) (replicadv1.ErrorCode, error) {
		// The first request waits for gate; every StopReplica waits
		// for the end of the test.
		if n == 0 || c.sr != nil {
			wait := gate
			if c.sr != nil {
				wait = nil
			}
			select {
			case <-wait:
			case <-ctx.Done():
				return 0, status.FromContextError(ctx.Err()).Err()
			}
		}
		return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
	}}
	q := newQueue(t, f)
	flush(t, q) // nothing queued

	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	waitCalls(t, f, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := q.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with the request held: %v, want a deadline error", err)
	}
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("q", 0, 1)}, nil)
	q.mu.Lock()
	target := q.seq // what Flush would wait for now
	q.mu.Unlock()
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("p", 0, 1, false)}) // never answered
	close(gate)
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel2()
	if err := q.waitFor(ctx2, target); err != nil {
		t.Fatalf("waiting for the calls before the StopReplica: %v", err)
	}
	// The StopReplica goes out once the LeaderAndIsr before it is answered,
	// which may be just after waitFor returns.
	waitCalls(t, f, 3)
	wantCalls(t, f, []string{"LAI p/0@1 | ", "LAI q/0@1 | ", "SR p/0@1"})
	if got := q.Pending(); got != 1 {
		t.Errorf("Pending = %d, want 1 (the StopReplica)", got)
	}
	done := make(chan error, 1)
	go func() { done <- q.Flush(boundedCtx(t)) }()
	q.Close()
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Errorf("Flush interrupted by Close: %v, want ErrClosed", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("Flush did not return on Close")
	}
}

// TestRetryWarningsRateLimited checks the logging of a failing broker: every
// attempt at debug, the first failure at warn, and no more warnings within
// a few seconds.
func TestRetryWarningsRateLimited(t *testing.T) {
	f := &fakeBroker{respond: func(context.Context, int, *call) (replicadv1.ErrorCode, error) {
		return 0, status.Error(codes.Unavailable, "down")
	}}
	var logs syncBuffer
	q := newQueue(t, f, func(c *Config) { c.Logger = zerolog.New(&logs).Level(zerolog.DebugLevel) })
	start := time.Now()
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, nil)
	waitCalls(t, f, 20)
	q.Close()
	if time.Since(start) >= warnInterval {
		t.Skip("too slow a machine to check the rate limit")
	}
	if got := logs.lines(`"level":"warn"`, "retrying"); len(got) != 1 {
		t.Errorf("warn lines: %q, want 1", got)
	}
	if got := logs.lines(`"level":"debug"`, "request sent", `"kind":"LeaderAndIsr"`, `"partitions":1`, `"duration_ms"`); len(got) < 20 {
		t.Errorf("%d debug lines per request sent, want at least 20", len(got))
	}
}

// TestDefaults checks Config's defaults.
func TestDefaults(t *testing.T) {
	q := New(Config{Client: &fakeBroker{}})
	defer q.Close()
	c := q.cfg
	if c.RequestTimeout != 30*time.Second || c.RequestTimeoutPerPartition != 5*time.Millisecond || c.Backoff != 100*time.Millisecond || c.MaxBackoff != 2*time.Second ||
		c.MaxPartitionsPerRequest != 10000 {
		t.Errorf("defaults: timeout %v backoff %v max backoff %v max partitions %d",
			c.RequestTimeout, c.Backoff, c.MaxBackoff, c.MaxPartitionsPerRequest)
	}
}

// grpcBroker serves ReplicaManagerService on loopback and records requests.
type grpcBroker struct {
	replicadv1.UnimplementedReplicaManagerServiceServer
	mu       sync.Mutex
	requests []proto.Message
}

func (b *grpcBroker) add(m proto.Message) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.requests = append(b.requests, proto.Clone(m))
}

func (b *grpcBroker) got() []proto.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.requests)
}

func (b *grpcBroker) LeaderAndIsr(_ context.Context, req *replicadv1.LeaderAndIsrRequest) (*replicadv1.LeaderAndIsrResponse, error) {
	for _, s := range req.GetPartitionStates() {
		if s.GetTopic() == "" {
			return nil, status.Error(codes.InvalidArgument, "partition_states.topic: empty")
		}
	}
	b.add(req)
	return &replicadv1.LeaderAndIsrResponse{}, nil
}

func (b *grpcBroker) UpdateMetadata(_ context.Context, req *replicadv1.UpdateMetadataRequest) (*replicadv1.UpdateMetadataResponse, error) {
	b.add(req)
	return &replicadv1.UpdateMetadataResponse{}, nil
}

func (b *grpcBroker) StopReplica(_ context.Context, req *replicadv1.StopReplicaRequest) (*replicadv1.StopReplicaResponse, error) {
	b.add(req)
	return &replicadv1.StopReplicaResponse{}, nil
}

// serve serves b on addr and returns the server and the address it listens on.
func serve(t *testing.T, addr string, b *grpcBroker) (*grpc.Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	replicadv1.RegisterReplicaManagerServiceServer(srv, b)
	go func() { _ = srv.Serve(lis) }()
	return srv, lis.Addr().String()
}

// TestLoopbackGRPC runs the queue against a real gRPC server: requests
// arrive stamped, a broker that goes away and comes back gets the request
// that waited, and InvalidArgument is dropped.
func TestLoopbackGRPC(t *testing.T) {
	b := &grpcBroker{}
	srv, addr := serve(t, "127.0.0.1:0", b)
	defer srv.Stop()
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	q := newQueue(t, replicadv1.NewReplicaManagerServiceClient(conn), func(c *Config) { c.Backoff, c.MaxBackoff = 5*time.Millisecond, 50*time.Millisecond })

	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 1)}, []*replicadv1.Broker{br(1, "h1")})
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, nil)
	q.StopReplica([]*replicadv1.StopReplicaPartition{sp("p", 1, 1, true)})
	flush(t, q)
	want := []proto.Message{
		&replicadv1.LeaderAndIsrRequest{ControllerId: testController, ControllerEpoch: testControllerEpoch, BrokerEpoch: testBrokerEpoch,
			PartitionStates: []*replicadv1.PartitionState{st("p", 0, 1)}, LiveLeaders: []*replicadv1.Broker{br(1, "h1")}},
		&replicadv1.UpdateMetadataRequest{ControllerId: testController, ControllerEpoch: testControllerEpoch, BrokerEpoch: testBrokerEpoch,
			LiveBrokers: []*replicadv1.Broker{br(1, "h1")}},
		&replicadv1.StopReplicaRequest{ControllerId: testController, ControllerEpoch: testControllerEpoch, BrokerEpoch: testBrokerEpoch,
			Partitions: []*replicadv1.StopReplicaPartition{sp("p", 1, 1, true)}},
	}
	if got := b.got(); !slices.EqualFunc(got, want, proto.Equal) {
		t.Fatalf("server got %v, want %v", got, want)
	}

	// The broker goes away: the request waits, and is delivered once it is back.
	srv.Stop()
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("p", 0, 2)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := q.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Flush with the broker down: %v, want a deadline error", err)
	}
	b2 := &grpcBroker{}
	srv2, _ := serve(t, addr, b2)
	defer srv2.Stop()
	flush(t, q)
	wantLAI := &replicadv1.LeaderAndIsrRequest{ControllerId: testController, ControllerEpoch: testControllerEpoch, BrokerEpoch: testBrokerEpoch,
		PartitionStates: []*replicadv1.PartitionState{st("p", 0, 2)}}
	if got := b2.got(); len(got) != 1 || !proto.Equal(got[0], wantLAI) {
		t.Fatalf("restarted server got %v, want %v", got, wantLAI)
	}

	// A request the server refuses as invalid is dropped, and the next one goes.
	q.LeaderAndIsr([]*replicadv1.PartitionState{st("", 0, 1)}, nil)
	ctx2, cancel2 := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel2()
	if err := q.Flush(ctx2); !errors.Is(err, ErrDropped) {
		t.Fatalf("Flush after an invalid request: %v, want ErrDropped", err)
	}
	q.UpdateMetadata(nil, nil)
	testutil.Eventually(t, waitTimeout, func() error {
		if n := len(b2.got()); n != 2 {
			return fmt.Errorf("server got %d requests, want 2", n)
		}
		return nil
	})
	q.Close()
}

// TestGateHoldsTheTake checks Config.Gate: the goroutine that finds calls
// waiting asks the gate before it takes them, so that a call queued while
// it is held joins the waiting one (the two UpdateMetadata of one decision
// are one request, whatever order goroutines run in: tests/sim relies
// on it to replay a seed), and Close ends a goroutine held there.
func TestGateHoldsTheTake(t *testing.T) {
	entered := make(chan struct{}, 1)
	open := make(chan struct{})
	f := &fakeBroker{}
	q := newQueue(t, f, func(c *Config) {
		c.Gate = func(ctx context.Context) {
			entered <- struct{}{}
			select {
			case <-open:
			case <-ctx.Done():
			}
		}
	})
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1")}, []*replicadv1.PartitionState{st("p", 0, 1)})
	select {
	case <-entered:
	case <-time.After(waitTimeout):
		t.Fatal("the queue took the call without asking its gate")
	}
	q.UpdateMetadata([]*replicadv1.Broker{br(1, "h1"), br(3, "h3")}, nil)
	if got := f.count(); got != 0 {
		t.Fatalf("%d requests sent while the gate held the queue, want 0", got)
	}
	close(open)
	flush(t, q)
	wantCalls(t, f, []string{"UM p/0@1 | 1:h1 3:h3"})

	held := newQueue(t, &fakeBroker{}, func(c *Config) {
		c.Gate = func(ctx context.Context) { <-ctx.Done() }
	})
	held.UpdateMetadata(nil, nil)
	closeWithin(t, held, waitTimeout)
}

// TestLongRequestNotResentWhileHandled checks that a call's deadline grows
// with its partitions: a big StopReplica that the broker handles for longer
// than RequestTimeout (but within its share per partition) is sent once,
// not resent while the broker still works on it.
func TestLongRequestNotResentWhileHandled(t *testing.T) {
	const base = 50 * time.Millisecond
	const n = 400
	f := &fakeBroker{respond: func(ctx context.Context, _ int, _ *call) (replicadv1.ErrorCode, error) {
		// Twice RequestTimeout of work, as a broker deleting the logs.
		select {
		case <-time.After(2 * base):
			return replicadv1.ErrorCode_ERROR_CODE_NONE, nil
		case <-ctx.Done():
			return 0, status.FromContextError(ctx.Err()).Err()
		}
	}}
	q := newQueue(t, f, func(c *Config) { c.RequestTimeout, c.RequestTimeoutPerPartition = base, time.Millisecond })
	var parts []*replicadv1.StopReplicaPartition
	for i := range int32(n) {
		parts = append(parts, sp("p", i, 1, true))
	}
	q.StopReplica(parts)
	flush(t, q)
	got := f.got()
	if len(got) != 1 {
		t.Fatalf("the request was sent %d times, want once", len(got))
	}
	if c := got[0]; !c.deadline || c.timeout <= base+n*time.Millisecond/2 || c.timeout > base+n*time.Millisecond {
		t.Errorf("a %d-partition call had %v left, want RequestTimeout + 1ms each (%v)", n, c.timeout, base+n*time.Millisecond)
	}
}
