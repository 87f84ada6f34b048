package controllerchannel

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
)

// storeUnknown is an active controller whose first CreateTopic applies and
// then fails the way controller.internalErr maps a store write of unknown
// outcome (an etcd timeout after the proposal): gRPC Unavailable. Later
// calls find the topic.
type storeUnknown struct {
	replicadv1.UnimplementedControllerServiceServer
	calls atomic.Int32
}

func (s *storeUnknown) CreateTopic(context.Context, *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	if s.calls.Add(1) == 1 {
		return nil, status.Error(codes.Unavailable, "controller: store: etcd: context deadline exceeded")
	}
	return &replicadv1.CreateTopicResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS}, nil
}

// An Unavailable that a controller answered (the request reached it: the
// store write's outcome is unknown) is not "never sent": a request that is
// not idempotent must stop with ErrMaybeApplied rather than be sent again
// (here, to the same, only controller in the next round) and come back
// TOPIC_ALREADY_EXISTS, which reads as somebody else's topic.
func TestUnavailableAfterSendIsNotResent(t *testing.T) {
	srv := &storeUnknown{}
	f := startFakeServer(t, srv)
	ch := newChannel(t, Config{Addrs: []string{f}, MinBackoff: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := Call(ctx, ch, Policy{}, createTopic)
	if n := srv.calls.Load(); n != 1 {
		t.Fatalf("CreateTopic sent %d times (answer %v, err %v); want once, then ErrMaybeApplied", n, resp, err)
	}
	if !errors.Is(err, ErrMaybeApplied) {
		t.Fatalf("err %v, want ErrMaybeApplied", err)
	}
}

// startFakeServer serves srv on a loopback port and returns its address.
func startFakeServer(t *testing.T, srv replicadv1.ControllerServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	replicadv1.RegisterControllerServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// storeRefused is an active controller whose first CreateTopic is refused
// by its store before anything was written (controller.internalErr marks
// such an answer grpcx.NotApplied); the second succeeds.
type storeRefused struct {
	replicadv1.UnimplementedControllerServiceServer
	calls atomic.Int32
}

func (s *storeRefused) CreateTopic(context.Context, *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	if s.calls.Add(1) == 1 {
		return nil, grpcx.NotApplied("controller: store: conflict")
	}
	return &replicadv1.CreateTopicResponse{}, nil
}

// An Unavailable marked not applied wrote nothing: even a create is sent
// again, and succeeds, instead of stopping with ErrMaybeApplied.
func TestNotAppliedIsSentAgain(t *testing.T) {
	srv := &storeRefused{}
	f := startFakeServer(t, srv)
	ch := newChannel(t, Config{Addrs: []string{f}, MinBackoff: 10 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := Call(ctx, ch, Policy{}, createTopic)
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("answer %v, err %v; want the second attempt's NONE", resp, err)
	}
	if n := srv.calls.Load(); n != 2 {
		t.Fatalf("CreateTopic sent %d times, want 2", n)
	}
}
