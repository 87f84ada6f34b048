package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// silentController takes CreateTopic and never answers it, as a controller
// busy past the client's deadline (a slow store) does.
type silentController struct {
	*fakeController
}

func (s silentController) CreateTopic(ctx context.Context, req *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	s.note("CreateTopic", req)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestTimeoutSaysMayBeApplied ensures a create-topic the controller took but
// did not answer in time says so, that the topic may have been created and
// how to check, instead of "no active controller"; and that a controller
// never reached still says no active controller was found.
func TestTimeoutSaysMayBeApplied(t *testing.T) {
	f := newFakeController()
	addr := startController(t, silentController{f})
	r := ctl(t, "", "", "--controller", addr, "--timeout", "300ms", "create-topic", "orders", "--partitions", "1", "--replication-factor", "1")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "the controller at "+addr+" did not answer within 300ms",
		"may have been applied", "check with `ctlclient describe-topic orders`")
	if strings.Contains(r.stderr, "no active controller") {
		t.Errorf("stderr says no active controller: %s", r.stderr)
	}
	if n := f.callCount("CreateTopic"); n == 0 {
		t.Fatal("the controller never got the request")
	}

	// Nothing listens: never reached, nothing applied.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := lis.Addr().String()
	lis.Close()
	r = ctl(t, "", "", "--controller", dead, "--timeout", "300ms", "create-topic", "orders", "--partitions", "1", "--replication-factor", "1")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "no active controller within 300ms")
	if strings.Contains(r.stderr, "may have been applied") {
		t.Errorf("an unreached controller may have applied it? %s", r.stderr)
	}
}

// TestReassignWaitInterrupted ensures Ctrl-C during reassign --execute
// --wait says the moves go on and how to verify or cancel them, and exits
// 130, not 0 or 1 as if the moves had ended or failed.
func TestReassignWaitInterrupted(t *testing.T) {
	f := newFakeController()
	moving := orders(0, 1, 1, 2, 4, 3)
	moving.Isr = []int32{1, 2, 3}
	moving.AddingReplicas, moving.RemovingReplicas = []int32{4}, []int32{3}
	f.describe = func(n int) *replicadv1.DescribeClusterResponse {
		if n == 1 {
			return fourBrokers(orders(0, 1, 1, 2, 3))
		}
		return fourBrokers(moving)
	}
	addr := startController(t, f)
	plan := writePlan(t, `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,2,4]}]}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- ctlCtx(ctx, strings.NewReader(""), &out, &errOut, "--controller", addr, "reassign", "--execute", "--plan", plan, "--wait")
	}()
	waitFor(t, "the wait to show progress", 10*time.Second, func() bool { return strings.Contains(out.String(), "in progress") })
	cancel() // Ctrl-C
	var c int
	select {
	case c = <-code:
	case <-time.After(10 * time.Second):
		t.Fatal("reassign --wait did not stop on Ctrl-C")
	}
	if c != exitInterrupted {
		t.Errorf("exit %d, want %d\n%s", c, exitInterrupted, errOut.String())
	}
	wantContains(t, "stderr", errOut.String(), "0 of 1 partition(s) complete; the moves go on in the cluster",
		"ctlclient reassign --verify --plan "+plan, "ctlclient reassign --cancel --plan "+plan)
	if n := f.callCount("ReassignPartition"); n != 1 {
		t.Errorf("%d ReassignPartition calls, want 1 (an interrupt cancels nothing)", n)
	}
}

// deniedController refuses DescribeCluster, as a real controller refuses a
// client certificate.
type deniedController struct {
	*fakeController
}

func (deniedController) DescribeCluster(context.Context, *replicadv1.DescribeClusterRequest) (*replicadv1.DescribeClusterResponse, error) {
	return nil, status.Error(codes.PermissionDenied, "spiffe://replicad/client/app may not call ControllerService/DescribeCluster")
}

// TestClientCertWithControllerToldBootstrap ensures produce and consume
// through a controller that refuses to describe the cluster to the caller
// (a client certificate) say to use --bootstrap, at once, not after
// retrying to --timeout.
func TestClientCertWithControllerToldBootstrap(t *testing.T) {
	addr := startController(t, deniedController{newFakeController()})
	for _, args := range [][]string{
		{"produce", "orders", "--partition", "0", "--value", "x"},
		{"consume", "orders", "--partition", "0"},
	} {
		start := time.Now()
		r := ctl(t, "", "", append([]string{"--controller", addr}, args...)...)
		wantCode(t, r, 1)
		wantContains(t, "stderr", r.stderr, "give --bootstrap BROKER[,BROKER...] instead of --controller", "may not call ControllerService/DescribeCluster")
		if r.stdout != "" {
			t.Errorf("%s printed %q", args[0], r.stdout)
		}
		if el := time.Since(start); el > 5*time.Second {
			t.Errorf("%s took %v: retried a refusal", args[0], el)
		}
	}
}

// slowCreator creates on the first CreateTopic but answers too late, and
// answers TOPIC_ALREADY_EXISTS after: a controller slower than a client's
// share of --timeout.
type slowCreator struct {
	*fakeController
}

func (s slowCreator) CreateTopic(ctx context.Context, req *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	if n, _ := s.note("CreateTopic", req); n == 1 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &replicadv1.CreateTopicResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS}, nil
}

// TestCreateNotResentAfterNoAnswer ensures a create that reached the active
// controller and got no answer in time is not sent to the next address (the
// retry used to get TOPIC_ALREADY_EXISTS from its own first attempt): the
// error says it may have been applied and how to check.
func TestCreateNotResentAfterNoAnswer(t *testing.T) {
	active := startController(t, slowCreator{newFakeController()})
	standby := newFakeController()
	standby.standby = true
	standbyAddr := startController(t, standby)
	r := ctl(t, "", "", "--controller", active+","+standbyAddr, "--timeout", "2s", "create-topic", "orders", "--partitions", "1", "--replication-factor", "1")
	wantCode(t, r, 1)
	wantContains(t, "stderr", r.stderr, "may have been applied", "check with `ctlclient describe-topic orders`")
	if n := standby.callCount("CreateTopic"); n != 0 {
		t.Errorf("the create was sent again, to the standby %d times", n)
	}
}
