package controller

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func topicACL(principal string, op replicadv1.AclOperation, pt replicadv1.AclPatternType, name string) *replicadv1.Acl {
	return &replicadv1.Acl{Principal: principal, Operation: op, ResourceType: replicadv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC,
		PatternType: pt, ResourceName: name}
}

// lastACLs is the ACL set of the last UpdateMetadata broker id was sent
// (nil, false: none carried one).
func lastACLs(h *harness, id int32) ([]*replicadv1.Acl, bool) {
	um := lastACLUpdate(h, id)
	return um.GetAcls(), um != nil
}

// lastACLUpdate is the last UpdateMetadata broker id was sent with an ACL
// set; nil: none.
func lastACLUpdate(h *harness, id int32) *replicadv1.UpdateMetadataRequest {
	ums := h.fake(id).updateMetadatas()
	for i := len(ums) - 1; i >= 0; i-- {
		if ums[i].GetAclsPresent() {
			return ums[i]
		}
	}
	return nil
}

// TestAcls ensures ACLs are stored, sent to every live broker in an
// UpdateMetadata (the whole set, flagged present) before CreateAcls and
// DeleteAcls return, described, survive a controller restart, and reach a
// broker that registers with its full state.
func TestAcls(t *testing.T) {
	h := startCluster(t, 2)
	ctx := context.Background()
	const app = "spiffe://replicad/client/app"
	lit, pre := replicadv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL, replicadv1.AclPatternType_ACL_PATTERN_TYPE_PREFIX
	write, read := replicadv1.AclOperation_ACL_OPERATION_WRITE, replicadv1.AclOperation_ACL_OPERATION_READ

	for id := int32(1); id <= 2; id++ {
		waitFor(t, "the full state of a registered broker, with the (empty) ACL set", func() bool {
			acls, ok := lastACLs(h, id)
			return ok && len(acls) == 0
		})
	}
	resp, err := h.c.CreateAcls(ctx, &replicadv1.CreateAclsRequest{Acls: []*replicadv1.Acl{
		topicACL(app, write, lit, "orders"), topicACL(app, read, pre, "ord"), topicACL(app, write, lit, "orders")}})
	if err != nil || resp.GetErrorCode() != codeNone || len(resp.GetCreated()) != 2 {
		t.Fatalf("CreateAcls: %v %v", resp, err)
	}
	firstVersion := lastACLUpdate(h, 1).GetAclsVersion()
	for id := int32(1); id <= 2; id++ {
		if acls, _ := lastACLs(h, id); len(acls) != 2 {
			t.Fatalf("broker %d was sent %v after CreateAcls returned, want both ACLs", id, acls)
		}
	}
	if stored, _ := h.st.Acls(ctx); len(stored) != 2 {
		t.Fatalf("stored %+v", stored)
	}
	d, err := h.c.DescribeAcls(ctx, &replicadv1.DescribeAclsRequest{Filter: &replicadv1.AclFilter{PatternType: pre}})
	if err != nil || len(d.GetAcls()) != 1 || d.GetAcls()[0].GetResourceName() != "ord" {
		t.Fatalf("DescribeAcls prefix: %v %v", d, err)
	}

	// Every later UpdateMetadata carries the set, the full state of a broker
	// that registers again included.
	h.fake(1).reset()
	h.register(1)
	waitFor(t, "broker 1's full state", func() bool { acls, _ := lastACLs(h, 1); return len(acls) == 2 })

	del, err := h.c.DeleteAcls(ctx, &replicadv1.DeleteAclsRequest{Filters: []*replicadv1.AclFilter{{Operation: write}}})
	if err != nil || len(del.GetDeleted()) != 1 || del.GetDeleted()[0].GetOperation() != write {
		t.Fatalf("DeleteAcls: %v %v", del, err)
	}
	if acls, _ := lastACLs(h, 2); len(acls) != 1 || acls[0].GetOperation() != read {
		t.Fatalf("broker 2 was sent %v after DeleteAcls, want the read ACL only", acls)
	}
	// Each change is a newer version: a broker orders the sets by it.
	if v := lastACLUpdate(h, 2).GetAclsVersion(); v <= firstVersion || firstVersion <= 0 {
		t.Fatalf("acls_version %d after DeleteAcls, %d after CreateAcls: want positive and growing", v, firstVersion)
	}

	// A restarted controller loads them from the store.
	h.stop()
	h.start()
	d, err = h.c.DescribeAcls(ctx, &replicadv1.DescribeAclsRequest{})
	if err != nil || len(d.GetAcls()) != 1 {
		t.Fatalf("DescribeAcls after a restart: %v %v", d, err)
	}
}

// TestAclsInvalid ensures malformed requests are refused with
// InvalidArgument naming the field, and change nothing.
func TestAclsInvalid(t *testing.T) {
	h := startCluster(t, 1)
	ctx := context.Background()
	lit := replicadv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL
	read := replicadv1.AclOperation_ACL_OPERATION_READ
	good := topicACL("spiffe://replicad/client/a", read, lit, "t")
	for _, tc := range []struct {
		acl   *replicadv1.Acl
		field string
	}{
		{topicACL("", read, lit, "t"), "acls[1].principal"},
		{topicACL("no-scheme", read, lit, "t"), "acls[1].principal"},
		{topicACL("spiffe://x", 0, lit, "t"), "acls[1].operation"},
		{topicACL("spiffe://x", 42, lit, "t"), "acls[1].operation"},
		{&replicadv1.Acl{Principal: "spiffe://x", Operation: read, PatternType: lit, ResourceName: "t"}, "acls[1].resource_type"},
		{topicACL("spiffe://x", read, 0, "t"), "acls[1].pattern_type"},
		{topicACL("spiffe://x", read, lit, ""), "acls[1].resource_name"},
		{topicACL("spiffe://x", read, lit, "bad name"), "acls[1].resource_name"},
		{topicACL("spiffe://x", read, replicadv1.AclPatternType_ACL_PATTERN_TYPE_PREFIX, "*"), "acls[1].resource_name"},
	} {
		_, err := h.c.CreateAcls(ctx, &replicadv1.CreateAclsRequest{Acls: []*replicadv1.Acl{good, tc.acl}})
		if status.Code(err) != codes.InvalidArgument || !strings.HasPrefix(status.Convert(err).Message(), tc.field+":") {
			t.Errorf("CreateAcls %v: %v, want InvalidArgument naming %s", tc.acl, err, tc.field)
		}
	}
	if _, err := h.c.CreateAcls(ctx, &replicadv1.CreateAclsRequest{}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("CreateAcls of nothing: %v", err)
	}
	for _, req := range []*replicadv1.DeleteAclsRequest{{}, {Filters: []*replicadv1.AclFilter{{}}}, {Filters: []*replicadv1.AclFilter{{Operation: 42}}}} {
		if _, err := h.c.DeleteAcls(ctx, req); status.Code(err) != codes.InvalidArgument {
			t.Errorf("DeleteAcls %v: %v, want InvalidArgument", req, err)
		}
	}
	if acls, _ := h.st.Acls(ctx); len(acls) != 0 {
		t.Fatalf("refused requests stored %+v", acls)
	}
	// match_all is the explicit way to remove every ACL.
	if _, err := h.c.CreateAcls(ctx, &replicadv1.CreateAclsRequest{Acls: []*replicadv1.Acl{good}}); err != nil {
		t.Fatal(err)
	}
	if resp, err := h.c.DeleteAcls(ctx, &replicadv1.DeleteAclsRequest{MatchAll: true}); err != nil || len(resp.GetDeleted()) != 1 {
		t.Fatalf("DeleteAcls match_all: %v %v", resp, err)
	}
}
