package authz

import (
	"fmt"
	"strings"
)

// Operation is what an ACL grants, as Kafka's ACL operations.
type Operation string

// The operations. Read, Write, Delete and Alter imply Describe (as in
// Kafka: whoever may read a topic may learn its partitions).
const (
	OpRead          Operation = "read"
	OpWrite         Operation = "write"
	OpDescribe      Operation = "describe"
	OpAlter         Operation = "alter"
	OpDelete        Operation = "delete"
	OpClusterAction Operation = "cluster-action"
)

// Operations lists the operations, in order.
var Operations = []Operation{OpRead, OpWrite, OpDescribe, OpAlter, OpDelete, OpClusterAction}

// ParseOperation parses an operation name.
func ParseOperation(s string) (Operation, error) {
	for _, op := range Operations {
		if string(op) == strings.ToLower(s) {
			return op, nil
		}
	}
	return "", fmt.Errorf("operation %q: want one of read, write, describe, alter, delete, cluster-action", s)
}

// PatternType says how an ACL's resource name matches.
type PatternType string

// Literal matches the name exactly ("*" matches every name); prefix
// matches every name starting with it.
const (
	PatternLiteral PatternType = "literal"
	PatternPrefix  PatternType = "prefix"
)

// ResourceTopic is the only resource type yet: topics.
const ResourceTopic = "topic"

// ACL allows Principal Operation on the topics its pattern matches. There
// are no deny ACLs: everything not allowed is denied.
type ACL struct {
	Principal   string
	Operation   Operation
	Resource    string // ResourceTopic
	PatternType PatternType
	Name        string
}

func (a ACL) String() string {
	return fmt.Sprintf("%s %s %s:%s:%s", a.Principal, a.Operation, a.Resource, a.PatternType, a.Name)
}

// Validate reports a malformed ACL.
func (a ACL) Validate() error {
	switch {
	case a.Principal == "":
		return fmt.Errorf("acl: empty principal")
	case a.Resource != ResourceTopic:
		return fmt.Errorf("acl: resource type %q: only topic", a.Resource)
	case a.PatternType != PatternLiteral && a.PatternType != PatternPrefix:
		return fmt.Errorf("acl: pattern type %q: want literal or prefix", a.PatternType)
	case a.Name == "":
		return fmt.Errorf("acl: empty resource name")
	}
	_, err := ParseOperation(string(a.Operation))
	return err
}

func (a ACL) matches(principal string, op Operation, topic string) bool {
	if a.Principal != principal && a.Principal != "*" {
		return false
	}
	if a.Operation != op && !(op == OpDescribe && a.Operation != OpClusterAction) {
		return false
	}
	switch a.PatternType {
	case PatternPrefix:
		return strings.HasPrefix(topic, a.Name)
	default:
		return a.Name == topic || a.Name == "*"
	}
}

// ACLSet is the ACLs a broker holds, as the controller last sent them.
type ACLSet struct {
	acls []ACL
}

// NewACLSet holds acls (copied).
func NewACLSet(acls []ACL) *ACLSet { return &ACLSet{acls: append([]ACL(nil), acls...)} }

// Len is the number of ACLs.
func (s *ACLSet) Len() int {
	if s == nil {
		return 0
	}
	return len(s.acls)
}

// Allows reports whether an ACL grants principal op on topic.
func (s *ACLSet) Allows(principal string, op Operation, topic string) bool {
	if s == nil {
		return false
	}
	for _, a := range s.acls {
		if a.matches(principal, op, topic) {
			return true
		}
	}
	return false
}

// AllowsAny reports whether some ACL allows principal op on some topic (on
// any name its pattern matches): what InitProducerId asks of a client, as
// Kafka's Write on any topic implies IdempotentWrite on the cluster.
func (s *ACLSet) AllowsAny(principal string, op Operation) bool {
	if s == nil {
		return false
	}
	for _, a := range s.acls {
		if (a.Principal == principal || a.Principal == "*") && a.Operation == op {
			return true
		}
	}
	return false
}
