package main

import (
	"context"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/syncbuf"
)

// fakeController is a ControllerService that records each request and
// answers what the test set. A standby answers NOT_CONTROLLER to everything.
type fakeController struct {
	replicadv1.UnimplementedControllerServiceServer

	mu       sync.Mutex
	standby  bool
	requests []proto.Message // every request, in arrival order
	calls    map[string]int  // per method

	createResp   *replicadv1.CreateTopicResponse
	deleteResp   *replicadv1.DeleteTopicResponse
	electResp    *replicadv1.ElectLeaderResponse
	reassignResp *replicadv1.ReassignPartitionResponse
	// describe answers the n-th DescribeCluster call (n from 1).
	describe func(n int) *replicadv1.DescribeClusterResponse
}

func newFakeController() *fakeController {
	return &fakeController{calls: map[string]int{}}
}

func (f *fakeController) note(method string, req proto.Message) (n int, standby bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, proto.Clone(req))
	f.calls[method]++
	return f.calls[method], f.standby
}

func (f *fakeController) callCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if method == "" {
		return len(f.requests)
	}
	return f.calls[method]
}

// lastRequest is the last request recorded, or nil.
func (f *fakeController) lastRequest() proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		return nil
	}
	return f.requests[len(f.requests)-1]
}

var notController = replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER

func (f *fakeController) CreateTopic(_ context.Context, req *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	if _, standby := f.note("CreateTopic", req); standby {
		return &replicadv1.CreateTopicResponse{ErrorCode: notController}, nil
	}
	return orEmpty(f.createResp), nil
}

func (f *fakeController) DeleteTopic(_ context.Context, req *replicadv1.DeleteTopicRequest) (*replicadv1.DeleteTopicResponse, error) {
	if _, standby := f.note("DeleteTopic", req); standby {
		return &replicadv1.DeleteTopicResponse{ErrorCode: notController}, nil
	}
	return orEmpty(f.deleteResp), nil
}

func (f *fakeController) ElectLeader(_ context.Context, req *replicadv1.ElectLeaderRequest) (*replicadv1.ElectLeaderResponse, error) {
	if _, standby := f.note("ElectLeader", req); standby {
		return &replicadv1.ElectLeaderResponse{ErrorCode: notController}, nil
	}
	return orEmpty(f.electResp), nil
}

func (f *fakeController) ReassignPartition(_ context.Context, req *replicadv1.ReassignPartitionRequest) (*replicadv1.ReassignPartitionResponse, error) {
	if _, standby := f.note("ReassignPartition", req); standby {
		return &replicadv1.ReassignPartitionResponse{ErrorCode: notController}, nil
	}
	return orEmpty(f.reassignResp), nil
}

func (f *fakeController) DescribeCluster(_ context.Context, req *replicadv1.DescribeClusterRequest) (*replicadv1.DescribeClusterResponse, error) {
	n, standby := f.note("DescribeCluster", req)
	if standby {
		return &replicadv1.DescribeClusterResponse{ErrorCode: notController}, nil
	}
	if f.describe == nil {
		return &replicadv1.DescribeClusterResponse{}, nil
	}
	return f.describe(n), nil
}

// orEmpty is m, or an empty answer (error code NONE) when the test set none.
func orEmpty[M interface {
	proto.Message
	*T
}, T any](m M) M {
	if m == nil {
		return M(new(T))
	}
	return m
}

// startController serves f (a fakeController, or one built on it) on a
// loopback port and returns its address.
func startController(t *testing.T, f replicadv1.ControllerServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	replicadv1.RegisterControllerServiceServer(srv, f)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return lis.Addr().String()
}

// deadAddr is a loopback address nothing listens on (connecting is refused).
func deadAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	return addr
}

// hungAddr is a loopback address that accepts TCP connections (the kernel
// completes them) but never speaks gRPC, like a host that stopped answering.
func hungAddr(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	return lis.Addr().String()
}

// brokerDesc describes the broker serving at addr for DescribeCluster.
func brokerDesc(t *testing.T, id int32, addr string) *replicadv1.BrokerDescription {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return &replicadv1.BrokerDescription{Id: id, Host: host, Port: int32(p), BrokerEpoch: int64(100 + id), Alive: true}
}

// switchBroker is a memBroker whose leadership the test takes away: once
// deposed it answers NOT_LEADER_OR_FOLLOWER to produce and consume. It can
// also answer UNKNOWN_TOPIC_OR_PARTITION to its first calls, as a broker does
// before the LeaderAndIsr of a partition just created reaches it.
type switchBroker struct {
	*memBroker
	deposed      atomic.Bool
	unknownFirst atomic.Int32 // calls still to answer UNKNOWN_TOPIC_OR_PARTITION
	refused      atomic.Int32 // calls answered with an error code by this wrapper
	// afterProduce runs after each produce the broker appended (outside its lock).
	afterProduce func(n int)
	produced     atomic.Int32
}

func newSwitchBroker() *switchBroker { return &switchBroker{memBroker: newMemBroker()} }

func (s *switchBroker) refusal() (core.ErrorCode, bool) {
	switch {
	case s.deposed.Load():
		s.refused.Add(1)
		return core.ErrNotLeaderOrFollower, true
	case s.unknownFirst.Add(-1) >= 0:
		s.refused.Add(1)
		return core.ErrUnknownTopicOrPartition, true
	}
	return core.ErrNone, false
}

func (s *switchBroker) Produce(ctx context.Context, req core.ProduceRequest) core.ProduceResult {
	if code, refused := s.refusal(); refused {
		return core.ProduceResult{Error: code, BaseOffset: -1}
	}
	res := s.memBroker.Produce(ctx, req)
	n := int(s.produced.Add(1))
	if s.afterProduce != nil {
		s.afterProduce(n)
	}
	return res
}

func (s *switchBroker) Consume(ctx context.Context, req core.ConsumeRequest) core.ConsumeResult {
	if code, refused := s.refusal(); refused {
		return core.ConsumeResult{Error: code}
	}
	return s.memBroker.Consume(ctx, req)
}

// records is how many records the broker holds for topic-partition.
func (s *switchBroker) records(topic string, partition int32) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, recs := range s.logs {
		if k.Topic == topic && k.Partition == partition {
			n += len(recs)
		}
	}
	return n
}

// syncBuffer is a buffer safe to read while a command writes it.
type syncBuffer = syncbuf.Buffer

// ctlCtx runs ctlclient in-process under ctx with no environment and
// stdout/stderr the caller can watch while it runs.
func ctlCtx(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, args ...string) int {
	return run(ctx, args, stdin, stdout, stderr, func(string) string { return "" })
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// lines splits output into its lines.
func lines(s string) []string {
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
