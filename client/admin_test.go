package client

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/replicad/replicad/controllerchannel"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// adminFake is a controller on loopback: active, a standby naming hint in
// its message (as the controller's admin methods do), or hung (it takes
// each request and never answers).
type adminFake struct {
	replicadv1.UnimplementedControllerServiceServer
	addr            string
	standby, hung   bool
	hint            string
	creates, descrs atomic.Int32
}

func (f *adminFake) answer(ctx context.Context) (replicadv1.ErrorCode, string, error) {
	switch {
	case f.hung:
		<-ctx.Done()
		return 0, "", ctx.Err()
	case f.standby:
		return replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER, "not the active controller; the active one is " + f.hint, nil
	}
	return replicadv1.ErrorCode_ERROR_CODE_NONE, "", nil
}

func (f *adminFake) CreateTopic(ctx context.Context, _ *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	f.creates.Add(1)
	code, msg, err := f.answer(ctx)
	if err != nil {
		return nil, err
	}
	return &replicadv1.CreateTopicResponse{ErrorCode: code, ErrorMessage: msg}, nil
}

func (f *adminFake) DescribeCluster(ctx context.Context, _ *replicadv1.DescribeClusterRequest) (*replicadv1.DescribeClusterResponse, error) {
	f.descrs.Add(1)
	code, msg, err := f.answer(ctx)
	if err != nil {
		return nil, err
	}
	return &replicadv1.DescribeClusterResponse{ErrorCode: code, ErrorMessage: msg, ControllerEpoch: 3}, nil
}

func serveAdminFake(t *testing.T, f *adminFake) *adminFake {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	replicadv1.RegisterControllerServiceServer(srv, f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	f.addr = lis.Addr().String()
	return f
}

func newAdmin(t *testing.T, timeout time.Duration, addrs ...string) *Admin {
	t.Helper()
	a, err := NewAdmin(AdminConfig{Controllers: addrs, Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// Admin calls reach the active controller past a standby, which names it.
func TestAdminReachesTheActiveController(t *testing.T) {
	active := serveAdminFake(t, &adminFake{})
	standby := serveAdminFake(t, &adminFake{standby: true, hint: active.addr})
	a := newAdmin(t, 10*time.Second, standby.addr, active.addr)
	if a.Active() != standby.addr {
		t.Fatalf("Active before any call: %s, want the first address", a.Active())
	}
	resp, err := a.DescribeCluster(context.Background())
	if err != nil || resp.GetControllerEpoch() != 3 {
		t.Fatalf("DescribeCluster: %v %v", resp, err)
	}
	if _, err := a.CreateTopic(context.Background(), &replicadv1.CreateTopicRequest{Topic: "t"}); err != nil {
		t.Fatal(err)
	}
	if a.Active() != active.addr || standby.creates.Load() != 0 {
		t.Fatalf("Active %s, standby creates %d; want %s and 0 (the second call goes straight to the active one)", a.Active(), standby.creates.Load(), active.addr)
	}
}

// A create that went out and got no answer is not sent to the next
// controller (it may have been applied); a describe is.
func TestAdminDoesNotResendACreate(t *testing.T) {
	hung := serveAdminFake(t, &adminFake{hung: true})
	active := serveAdminFake(t, &adminFake{})
	a := newAdmin(t, time.Second, hung.addr, active.addr)
	_, err := a.CreateTopic(context.Background(), &replicadv1.CreateTopicRequest{Topic: "t"})
	if !IsMaybeApplied(err) || errors.Is(err, controllerchannel.ErrNoController) {
		t.Fatalf("CreateTopic through a hung controller: %v, want ErrMaybeApplied only", err)
	}
	if n := active.creates.Load(); n != 0 {
		t.Fatalf("the create was sent again to the next controller (%d)", n)
	}
	a = newAdmin(t, time.Second, hung.addr, active.addr)
	if _, err := a.DescribeCluster(context.Background()); err != nil {
		t.Fatalf("DescribeCluster through a hung controller: %v, want the next one's answer", err)
	}
}

func TestIdempotentByAnswerType(t *testing.T) {
	for _, c := range []struct {
		answer any
		want   bool
	}{
		{(*replicadv1.DescribeClusterResponse)(nil), true},
		{(*replicadv1.AlterTopicConfigResponse)(nil), true},
		{(*replicadv1.CreateTopicResponse)(nil), false},
		{(*replicadv1.DeleteTopicResponse)(nil), false},
		{(*replicadv1.ReassignPartitionResponse)(nil), false},
		{(*replicadv1.ElectLeadersResponse)(nil), false},
	} {
		if got := Idempotent(c.answer); got != c.want {
			t.Errorf("Idempotent(%T) = %v, want %v", c.answer, got, c.want)
		}
	}
}
