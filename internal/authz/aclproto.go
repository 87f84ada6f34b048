package authz

import (
	"fmt"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The wire forms of the ACL model (replicadv1.Acl), shared by the
// controller, which stores and sends ACLs, the brokers, which receive them
// in UpdateMetadata, and ctlclient.

var operationProtos = map[Operation]replicadv1.AclOperation{
	OpRead:          replicadv1.AclOperation_ACL_OPERATION_READ,
	OpWrite:         replicadv1.AclOperation_ACL_OPERATION_WRITE,
	OpDescribe:      replicadv1.AclOperation_ACL_OPERATION_DESCRIBE,
	OpAlter:         replicadv1.AclOperation_ACL_OPERATION_ALTER,
	OpDelete:        replicadv1.AclOperation_ACL_OPERATION_DELETE,
	OpClusterAction: replicadv1.AclOperation_ACL_OPERATION_CLUSTER_ACTION,
}

// OperationToProto is op's enum value (UNSPECIFIED for an unknown one).
func OperationToProto(op Operation) replicadv1.AclOperation { return operationProtos[op] }

// OperationFromProto is the operation of an enum value; ok is false for
// UNSPECIFIED and unknown values.
func OperationFromProto(op replicadv1.AclOperation) (Operation, bool) {
	for o, p := range operationProtos {
		if p == op {
			return o, true
		}
	}
	return "", false
}

// PatternToProto is pt's enum value (UNSPECIFIED for an unknown one).
func PatternToProto(pt PatternType) replicadv1.AclPatternType {
	switch pt {
	case PatternLiteral:
		return replicadv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL
	case PatternPrefix:
		return replicadv1.AclPatternType_ACL_PATTERN_TYPE_PREFIX
	}
	return replicadv1.AclPatternType_ACL_PATTERN_TYPE_UNSPECIFIED
}

// PatternFromProto is the pattern type of an enum value; ok is false for
// UNSPECIFIED and unknown values.
func PatternFromProto(pt replicadv1.AclPatternType) (PatternType, bool) {
	switch pt {
	case replicadv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL:
		return PatternLiteral, true
	case replicadv1.AclPatternType_ACL_PATTERN_TYPE_PREFIX:
		return PatternPrefix, true
	}
	return "", false
}

// ResourceToProto is a resource type's enum value.
func ResourceToProto(r string) replicadv1.AclResourceType {
	if r == ResourceTopic {
		return replicadv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC
	}
	return replicadv1.AclResourceType_ACL_RESOURCE_TYPE_UNSPECIFIED
}

// ResourceFromProto is the resource type of an enum value; ok is false for
// UNSPECIFIED and unknown values.
func ResourceFromProto(r replicadv1.AclResourceType) (string, bool) {
	if r == replicadv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC {
		return ResourceTopic, true
	}
	return "", false
}

// ACLToProto is a's wire form.
func ACLToProto(a ACL) *replicadv1.Acl {
	return &replicadv1.Acl{Principal: a.Principal, Operation: OperationToProto(a.Operation),
		ResourceType: ResourceToProto(a.Resource), PatternType: PatternToProto(a.PatternType), ResourceName: a.Name}
}

// ACLFromProto is the ACL of a wire form, validated.
func ACLFromProto(p *replicadv1.Acl) (ACL, error) {
	op, ok := OperationFromProto(p.GetOperation())
	if !ok {
		return ACL{}, fmt.Errorf("acl: operation %v: want read, write, describe, alter, delete or cluster-action", p.GetOperation())
	}
	res, ok := ResourceFromProto(p.GetResourceType())
	if !ok {
		return ACL{}, fmt.Errorf("acl: resource type %v: only topic", p.GetResourceType())
	}
	pt, ok := PatternFromProto(p.GetPatternType())
	if !ok {
		return ACL{}, fmt.Errorf("acl: pattern type %v: want literal or prefix", p.GetPatternType())
	}
	a := ACL{Principal: p.GetPrincipal(), Operation: op, Resource: res, PatternType: pt, Name: p.GetResourceName()}
	return a, a.Validate()
}

// ACLSetFromProto is the ACLSet of an UpdateMetadata's acls. A malformed
// ACL (from a newer controller: an operation this broker does not know) is
// left out and reported in skipped, rather than refusing the whole set: it
// grants nothing here, and the others still apply.
func ACLSetFromProto(acls []*replicadv1.Acl) (set *ACLSet, skipped []error) {
	out := make([]ACL, 0, len(acls))
	for _, p := range acls {
		a, err := ACLFromProto(p)
		if err != nil {
			skipped = append(skipped, err)
			continue
		}
		out = append(out, a)
	}
	return NewACLSet(out), skipped
}
