package main

import (
	"context"
	"flag"
	"strings"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/authz"
)

// The ACL commands: acl add, acl remove, acl list. They ask the active
// controller (CreateAcls, DeleteAcls, DescribeAcls, which need the admin
// role), which stores the ACLs and sends every broker the whole set.

const aclDetails = `An ACL allows a principal (a certificate's spiffe:// URI, or * for every
principal) an operation on topics: --topic NAME names one topic (* every
topic), --topic NAME --prefix every topic starting with NAME. Operations:
read (Consume), write (Produce), describe (DescribePartitions of the topic),
alter, delete, cluster-action; read, write, alter and delete imply describe.
There are no deny ACLs: what no ACL allows is refused. The brokers enforce
ACLs under --tls-client-auth require; the commands need the admin
certificate (or a --super-users one): another is refused with
PermissionDenied, and nothing changes.`

// aclFlags are the flags shared by the acl commands.
type aclFlags struct {
	fs        *flag.FlagSet
	principal *string
	operation *string
	topic     *string
	prefix    *bool
}

func registerACLFlags(fs *flag.FlagSet) *aclFlags {
	return &aclFlags{
		fs:        fs,
		principal: fs.String("principal", "", "principal `URI`, such as spiffe://replicad/client/default, or * for everyone"),
		operation: fs.String("operation", "", "read, write, describe, alter, delete or cluster-action"),
		topic:     fs.String("topic", "", "topic `NAME` (* every topic), or with --prefix the start of the names"),
		prefix:    fs.Bool("prefix", false, "--topic is a prefix: every topic whose name starts with it"),
	}
}

// operation is --operation as an enum (UNSPECIFIED when absent).
func (f *aclFlags) operationProto() (replicadv1.AclOperation, error) {
	if *f.operation == "" {
		return replicadv1.AclOperation_ACL_OPERATION_UNSPECIFIED, nil
	}
	op, err := authz.ParseOperation(*f.operation)
	if err != nil {
		return 0, usagef("--operation: %v", err)
	}
	return authz.OperationToProto(op), nil
}

func (f *aclFlags) checkTopic() error {
	switch t := *f.topic; {
	case *f.prefix && t == "":
		return usagef("--prefix needs --topic")
	case t == "*" && *f.prefix:
		return usagef("--topic '*' is a literal (every topic): drop --prefix")
	case t != "" && t != "*":
		return checkTopicName(t)
	}
	return nil
}

func (f *aclFlags) patternProto() replicadv1.AclPatternType {
	if *f.prefix {
		return replicadv1.AclPatternType_ACL_PATTERN_TYPE_PREFIX
	}
	return replicadv1.AclPatternType_ACL_PATTERN_TYPE_LITERAL
}

// filter is the flags as a filter: an absent flag matches anything;
// --topic without --prefix matches literal ACLs only.
func (f *aclFlags) filter() (*replicadv1.AclFilter, error) {
	if err := f.checkTopic(); err != nil {
		return nil, err
	}
	op, err := f.operationProto()
	if err != nil {
		return nil, err
	}
	out := &replicadv1.AclFilter{Principal: *f.principal, Operation: op}
	if *f.topic != "" {
		out.ResourceType = replicadv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC
		out.PatternType = f.patternProto()
		out.ResourceName = *f.topic
	}
	return out, nil
}

func printACLs(e *env, acls []*replicadv1.Acl) error {
	t := newTable(e.stdout, "PRINCIPAL", "OPERATION", "RESOURCE", "PATTERN", "NAME")
	for _, a := range acls {
		t.row(a.GetPrincipal(), aclEnumName(a.GetOperation().String(), "ACL_OPERATION_"),
			aclEnumName(a.GetResourceType().String(), "ACL_RESOURCE_TYPE_"),
			aclEnumName(a.GetPatternType().String(), "ACL_PATTERN_TYPE_"), a.GetResourceName())
	}
	return t.flush()
}

// aclEnumName is an enum value as the flags spell it (cluster-action).
func aclEnumName(s, prefix string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(s, prefix)), "_", "-")
}

func aclAddCommand() *command {
	return &command{
		name:    "acl add",
		summary: "allow a principal an operation on a topic or a topic prefix",
		usage:   "--principal URI --operation OP --topic NAME [--prefix]",
		details: aclDetails + `

Adding an ACL that exists changes nothing. When the command returns, every
live broker has been sent the new set (up to the controller's send timeout).
Prints the ACLs created. Exits 1 when the controller refuses.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 acl add --principal spiffe://replicad/client/default --operation write --topic orders\n" +
			"ctlclient --controller 127.0.0.1:9090 acl add --principal spiffe://replicad/client/default --operation read --topic logs- --prefix",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			f := registerACLFlags(fs)
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "principal", "operation", "topic"); err != nil {
					return err
				}
				if err := f.checkTopic(); err != nil {
					return err
				}
				op, err := f.operationProto()
				if err != nil {
					return err
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				req := &replicadv1.CreateAclsRequest{Acls: []*replicadv1.Acl{{Principal: *f.principal, Operation: op,
					ResourceType: replicadv1.AclResourceType_ACL_RESOURCE_TYPE_TOPIC, PatternType: f.patternProto(), ResourceName: *f.topic}}}
				resp, err := cc.CreateAcls(ctx, req)
				err = controllerError(err, cc)
				if err != nil {
					return mayBeApplied(err, "check with `ctlclient acl list --principal "+*f.principal+"`")
				}
				return e.printAdminAnswer(resp, func() error { return printACLs(e, resp.GetCreated()) }, "acl add")
			}
		},
	}
}

func aclRemoveCommand() *command {
	return &command{
		name:    "acl remove",
		summary: "remove the ACLs matching the flags",
		usage:   "[--principal URI] [--operation OP] [--topic NAME [--prefix]] | --all",
		details: aclDetails + `

The flags are a filter: each one given must match, an absent one matches
anything; --topic without --prefix matches literal ACLs of that name only.
At least one flag, or --all to remove every ACL. Prints the ACLs removed
(none matching is not an error). Exits 1 when the controller refuses.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 acl remove --principal spiffe://replicad/client/default --operation write --topic orders\n" +
			"ctlclient --controller 127.0.0.1:9090 acl remove --principal spiffe://replicad/client/default",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			f := registerACLFlags(fs)
			all := fs.Bool("all", false, "remove every ACL")
			return func(ctx context.Context, e *env) error {
				set := setFlags(fs)
				some := set["principal"] || set["operation"] || set["topic"]
				switch {
				case *all && (some || *f.prefix):
					return usagef("--all takes no other ACL flag")
				case !*all && !some:
					return usagef("give --principal, --operation or --topic (or --all to remove every ACL)")
				}
				req := &replicadv1.DeleteAclsRequest{MatchAll: *all}
				if !*all {
					filter, err := f.filter()
					if err != nil {
						return err
					}
					req.Filters = []*replicadv1.AclFilter{filter}
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				resp, err := cc.DeleteAcls(ctx, req)
				err = controllerError(err, cc)
				if err != nil {
					return mayBeApplied(err, "check with `ctlclient acl list`")
				}
				return e.printAdminAnswer(resp, func() error { return printACLs(e, resp.GetDeleted()) }, "acl remove")
			}
		},
	}
}

func aclListCommand() *command {
	return &command{
		name:    "acl list",
		summary: "list the ACLs (those matching the flags)",
		usage:   "[--principal URI] [--operation OP] [--topic NAME [--prefix]]",
		details: aclDetails + `

Without flags every ACL is listed, sorted by resource then principal; the
flags filter as for acl remove.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 acl list\nctlclient --controller 127.0.0.1:9090 acl list --principal spiffe://replicad/client/default -o json",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			f := registerACLFlags(fs)
			return func(ctx context.Context, e *env) error {
				filter, err := f.filter()
				if err != nil {
					return err
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				req := &replicadv1.DescribeAclsRequest{Filter: filter}
				resp, err := cc.DescribeAcls(ctx, req)
				err = controllerError(err, cc)
				if err != nil {
					return err
				}
				return e.printAdminAnswer(resp, func() error { return printACLs(e, resp.GetAcls()) }, "acl list")
			}
		},
	}
}
