package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
	"github.com/replicad/replicad/internal/tlsconf"
)

// aclCtl runs ctlclient with the certificate name against the controller.
func aclCtl(t *testing.T, c *ctlCluster, dir, cert string, args ...string) ctlResult {
	t.Helper()
	return runCtlclient(t, nil, "", append(append([]string{"--controller", c.ctlAddr}, args...), tlsFlags(dir, cert, "")...)...)
}

// mustACLCtl is aclCtl that must exit 0.
func mustACLCtl(t *testing.T, c *ctlCluster, dir string, args ...string) ctlResult {
	t.Helper()
	r := aclCtl(t, c, dir, "admin", args...)
	if r.code != 0 {
		t.Fatalf("ctlclient %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// ACLs under mutual TLS: the client certificate may produce and consume
// only what an ACL the admin added allows, once the brokers have it; a
// removed ACL refuses again; a client cannot add ACLs (and nothing changes
// when it tries); ACLs survive a controller restart (bbolt), and a broker
// that starts again gets them when it registers.
func TestAuthzACLsGrantProduceAndConsume(t *testing.T) {
	dir := devCerts(t)
	c := newTLSCluster(t, dir, 2*time.Second)
	const topic = "granted"
	c.createTopic(topic, 1, 3)
	clientPrincipal := tlsconf.ClientPrincipal("default")
	// The leader may move (not in this test, but be safe): ask the
	// controller each time.
	asClient := func() (replicadv1.LogServiceClient, int32) {
		p, err := c.partitionState(topic, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := c.broker(p.GetLeader())
		return replicadv1.NewLogServiceClient(dialAs(t, dir, "client", b.Addr)), p.GetLeader()
	}
	produce := func() error {
		lc, _ := asClient()
		resp, err := lc.Produce(ctx(t), &replicadv1.ProduceRequest{Topic: topic, Partition: 0, Acks: -1, TimeoutMs: 5000,
			Records: []*replicadv1.Record{{Value: []byte("by acl")}}})
		if err == nil && resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			return fmt.Errorf("produce: %v", resp.GetErrorCode())
		}
		return err
	}
	consume := func() error {
		lc, _ := asClient()
		_, err := lc.Consume(ctx(t), &replicadv1.ConsumeRequest{Topic: topic, Partition: 0, MaxBytes: 1 << 20})
		return err
	}
	waitDenied := func(call func() error, method string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			err := call()
			if status.Code(err) != codes.PermissionDenied {
				return fmt.Errorf("%s: want PermissionDenied, got %v", method, err)
			}
			return nil
		})
		wantDenied(t, call(), clientPrincipal, method)
	}
	waitAllowed := func(call func() error, what string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			if err := call(); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			return nil
		})
	}
	// No ACL: refused.
	wantDenied(t, produce(), clientPrincipal, "LogService/Produce")
	if r := mustACLCtl(t, c, dir, "acl", "list"); strings.Contains(r.stdout, clientPrincipal) {
		t.Fatalf("acl list before any add:\n%s", r.stdout)
	}

	// A client certificate may not grant itself: PermissionDenied, nothing changes.
	before := mustACLCtl(t, c, dir, "acl", "list", "-o", "json").stdout
	r := aclCtl(t, c, dir, "client", "acl", "add", "--principal", clientPrincipal, "--operation", "write", "--topic", topic)
	if r.code != 1 || !strings.Contains(r.stderr, "PermissionDenied") {
		t.Fatalf("acl add as the client: exit %d\n%s", r.code, r.stderr)
	}
	_, err := replicadv1.NewControllerServiceClient(dialAs(t, dir, "client", c.ctlAddr)).CreateAcls(ctx(t), &replicadv1.CreateAclsRequest{
		Acls: []*replicadv1.Acl{{Principal: clientPrincipal, Operation: replicadv1.AclOperation_ACL_OPERATION_WRITE,
			ResourceType: replicadv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, PatternType: replicadv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
			ResourceName: topic}}})
	wantDenied(t, err, clientPrincipal, "ControllerService/CreateAcls")
	if after := mustACLCtl(t, c, dir, "acl", "list", "-o", "json").stdout; after != before {
		t.Fatalf("a refused CreateAcls changed the ACLs:\nbefore %s\nafter %s", before, after)
	}
	wantDenied(t, produce(), clientPrincipal, "LogService/Produce")

	// Usage errors exit 2.
	if r := aclCtl(t, c, dir, "admin", "acl", "add", "--principal", clientPrincipal, "--operation", "fly", "--topic", topic); r.code != 2 {
		t.Fatalf("acl add --operation fly: exit %d, want 2\n%s", r.code, r.stderr)
	}

	// write: produce goes through once the brokers have it; consume does not.
	r = mustACLCtl(t, c, dir, "acl", "add", "--principal", clientPrincipal, "--operation", "write", "--topic", topic)
	if !strings.Contains(r.stdout, clientPrincipal) || !strings.Contains(r.stdout, "write") {
		t.Fatalf("acl add printed:\n%s", r.stdout)
	}
	waitAllowed(produce, "produce with a write ACL")
	wantDenied(t, consume(), clientPrincipal, "LogService/Consume")

	// read (as a prefix): consume too.
	mustACLCtl(t, c, dir, "acl", "add", "--principal", clientPrincipal, "--operation", "read", "--topic", "gran", "--prefix")
	waitAllowed(consume, "consume with a read ACL")
	r = mustACLCtl(t, c, dir, "acl", "list", "--principal", clientPrincipal)
	if !strings.Contains(r.stdout, "prefix") || !strings.Contains(r.stdout, "literal") {
		t.Fatalf("acl list:\n%s", r.stdout)
	}

	// remove write: produce is refused again, consume still allowed.
	r = mustACLCtl(t, c, dir, "acl", "remove", "--principal", clientPrincipal, "--operation", "write", "--topic", topic)
	if !strings.Contains(r.stdout, "write") {
		t.Fatalf("acl remove printed:\n%s", r.stdout)
	}
	waitDenied(produce, "LogService/Produce")
	waitAllowed(consume, "consume after removing write")
	mustACLCtl(t, c, dir, "acl", "add", "--principal", clientPrincipal, "--operation", "write", "--topic", topic)
	waitAllowed(produce, "produce after adding write again")

	// A controller restart (bbolt): the ACLs are still there.
	listed := mustACLCtl(t, c, dir, "acl", "list", "-o", "json").stdout
	c.ctl.Kill()
	c.startController()
	testutil.Eventually(t, 30*time.Second, func() error {
		r := aclCtl(t, c, dir, "admin", "acl", "list", "-o", "json")
		if r.code != 0 {
			return fmt.Errorf("acl list: exit %d %s", r.code, r.stderr)
		}
		if r.stdout != listed {
			return fmt.Errorf("acl list after the restart:\n%s\nwant\n%s", r.stdout, listed)
		}
		return nil
	})
	waitAllowed(produce, "produce after a controller restart")

	// A broker started again gets the ACLs when it registers: the client may
	// describe the topic there (write implies describe).
	_, leader := asClient()
	b, _ := c.broker(leader)
	b.Kill()
	c.startBroker(leader)
	c.waitAlive(leader)
	b, _ = c.broker(leader)
	rm := replicadv1.NewReplicaManagerServiceClient(dialAs(t, dir, "client", b.Addr))
	testutil.Eventually(t, 30*time.Second, func() error {
		cctx, cancel := context.WithTimeout(ctx(t), 5*time.Second)
		defer cancel()
		_, err := rm.DescribePartitions(cctx, &replicadv1.DescribePartitionsRequest{Topic: topic})
		return err
	})
	waitAllowed(produce, "produce after the leader restarted")
}
