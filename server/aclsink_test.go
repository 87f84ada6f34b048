package server

import (
	"testing"

	"github.com/rs/zerolog"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/authz"
)

// The broker keeps the newest ACL set by (controller epoch, acls_version):
// an UpdateMetadata holding an older set, handled after a newer one, is
// ignored, so a removed ACL does not come back.
func TestACLSinkKeepsTheNewestSet(t *testing.T) {
	a := authz.New(nil)
	sink := newACLSink(a, zerolog.Nop())
	acl := func(name string) *replicadv1.Acl {
		return &replicadv1.Acl{Principal: "spiffe://replicad/client/app", Operation: replicadv1.AclOperation_ACL_OPERATION_WRITE,
			ResourceType: replicadv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, PatternType: replicadv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL,
			ResourceName: name}
	}
	steps := []struct {
		epoch   int32
		version int64
		acls    []*replicadv1.Acl
		want    int
	}{
		{3, 2, []*replicadv1.Acl{acl("a"), acl("b")}, 2},
		{3, 1, []*replicadv1.Acl{acl("a")}, 2},                     // older version: ignored
		{3, 2, []*replicadv1.Acl{acl("a"), acl("b")}, 2},           // the same again
		{2, 9, []*replicadv1.Acl{}, 2},                             // a deposed controller's: ignored
		{3, 3, []*replicadv1.Acl{acl("a")}, 1},                     // newer
		{4, 1, []*replicadv1.Acl{acl("a"), acl("c")}, 2},           // a new controller starts its count again
		{4, 0, []*replicadv1.Acl{}, 2},                             // older within its epoch
		{5, 0, []*replicadv1.Acl{acl("x"), acl("y"), acl("z")}, 3}, // unversioned, newer epoch
	}
	for i, s := range steps {
		sink(s.epoch, s.version, s.acls)
		if got := a.ACLs().Len(); got != s.want {
			t.Fatalf("step %d (epoch %d, version %d): the authorizer holds %d ACLs, want %d", i, s.epoch, s.version, got, s.want)
		}
	}
	if !a.ACLs().Allows("spiffe://replicad/client/app", authz.OpWrite, "x") {
		t.Fatal("the last set is not the one held")
	}
}
