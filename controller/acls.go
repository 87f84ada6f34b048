package controller

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/authz"
)

// ACLs: the controller stores them (the store is the truth, so they survive
// a restart and a failover) and sends every live broker the whole set in
// each UpdateMetadata (brokerqueue.Config.ACLs). A change is followed by an
// UpdateMetadata to every reachable broker, and a broker that registers
// gets the set with its full state. Brokers authorize clients with it; the
// controller serves no client operation, so it needs none itself.

// aclToProto is a stored ACL's wire form. The store holds authz's names
// (read, topic, literal), which the handlers validated.
func aclToProto(a store.ACL) *replicadv1.Acl {
	return authz.ACLToProto(authz.ACL{Principal: a.Principal, Operation: authz.Operation(a.Operation),
		Resource: a.ResourceType, PatternType: authz.PatternType(a.PatternType), Name: a.Name})
}

func aclsToProto(acls []store.ACL) []*replicadv1.Acl {
	out := make([]*replicadv1.Acl, len(acls))
	for i, a := range acls {
		out[i] = aclToProto(a)
	}
	return out
}

// wireACLSet is the ACL set as UpdateMetadata carries it.
type wireACLSet struct {
	acls    []*replicadv1.Acl
	version int64
}

// setACLsLocked makes acls (sorted) the set sent to brokers from now on,
// under a new version: a broker that has it ignores an older set sent by
// this controller epoch (a slow attempt overtaken by its retry).
func (c *Controller) setACLsLocked(acls []store.ACL) {
	c.acls = acls
	c.aclsVersions++
	c.wireACLs.Store(&wireACLSet{acls: aclsToProto(acls), version: c.aclsVersions})
}

// currentWireACLs is the set each UpdateMetadata carries; it takes no lock
// (it runs under a broker queue's).
func (c *Controller) currentWireACLs() ([]*replicadv1.Acl, int64) {
	if p := c.wireACLs.Load(); p != nil {
		return p.acls, p.version
	}
	return nil, 0
}

// loadACLsLocked reads the stored ACLs at activation.
func (c *Controller) loadACLsLocked(ctx context.Context) error {
	acls, err := c.cfg.Store.Acls(ctx)
	if err != nil {
		return err
	}
	c.setACLsLocked(acls)
	return nil
}

// alterAcls creates acls, or deletes those filters match (create false),
// then tells every live broker the new set and waits (SendTimeout at most)
// until they have it, so that `ctlclient acl add` returning means the
// brokers authorize with it. It returns the ACLs created or deleted.
func (c *Controller) alterAcls(ctx context.Context, create bool, acls []store.ACL, filters []store.ACLFilter) ([]store.ACL, error) {
	op := "delete"
	if create {
		op = "create"
	}
	ctx, span := c.tracer.Start(ctx, "Controller.alterAcls", trace.WithAttributes(
		attribute.String("replicad.acl_operation", op), attribute.Int("replicad.acls_requested", len(acls)),
		attribute.Int("replicad.acl_filters", len(filters))))
	defer span.End()
	c.lock()
	if !c.active {
		c.unlock()
		return nil, errNotController
	}
	var changed []store.ACL
	var err error
	sctx, cancel := c.storeCtx(ctx)
	if create {
		changed, err = c.cfg.Store.CreateAcls(sctx, acls)
	} else {
		changed, err = c.cfg.Store.DeleteAcls(sctx, filters)
	}
	cancel()
	// The copy the brokers get is re-read from the store, not derived from
	// the answer: a write whose outcome is unknown (an etcd transaction
	// that committed after ctx ended) must not leave the controller, and
	// its brokers, on a set the store no longer holds; a retry would find
	// nothing to change and never correct it.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.SendTimeout)
	stored, rerr := c.cfg.Store.Acls(rctx)
	cancel()
	var touched []int32
	if rerr == nil && !slices.Equal(stored, c.acls) {
		c.setACLsLocked(stored)
		live := c.liveBrokersLocked()
		for _, id := range c.sortedBrokerIDsLocked() {
			if bs := c.brokers[id]; bs.reachable() {
				bs.queue.UpdateMetadataContext(ctx, live, nil)
				touched = append(touched, id)
			}
		}
	}
	if err == nil {
		err = rerr
	}
	if err != nil {
		c.unlock()
		c.waitDelivered(ctx, touched)
		return nil, c.storeErr(err)
	}
	total := len(c.acls)
	c.unlock()
	span.SetAttributes(attribute.Int("replicad.acls_changed", len(changed)), attribute.Int("replicad.acls", total),
		attribute.Int("replicad.brokers_told", len(touched)))
	ev := c.log.Info().Str("operation", op).Int("changed", len(changed)).Int("acls", total).Int("brokers_told", len(touched))
	if len(changed) > 0 {
		strs := make([]string, len(changed))
		for i, a := range changed {
			strs[i] = aclString(a)
		}
		ev = ev.Strs("acl_changes", strs)
	}
	ev.Msg("acls changed")
	c.waitDelivered(ctx, touched)
	return changed, nil
}

func aclString(a store.ACL) string {
	return a.Principal + " " + a.Operation + " " + a.ResourceType + ":" + a.PatternType + ":" + a.Name
}

// describeAcls is the ACLs filter matches, from the active controller's copy
// of the store.
func (c *Controller) describeAcls(filter store.ACLFilter) ([]store.ACL, error) {
	c.lock()
	defer c.unlock()
	if !c.active {
		return nil, errNotController
	}
	var out []store.ACL
	for _, a := range c.acls {
		if filter.Matches(a) {
			out = append(out, a)
		}
	}
	return out, nil
}

// ---- gRPC ----

// validateACL checks one ACL of a CreateAcls request; field names the ACL
// (acls[2]) so the error says which.
func validateACL(field string, p *replicadv1.Acl) (store.ACL, error) {
	if p == nil {
		return store.ACL{}, invalid(field, "must be set")
	}
	principal := p.GetPrincipal()
	switch {
	case principal == "":
		return store.ACL{}, invalid(field+".principal", "must not be empty")
	case principal != "*" && !strings.Contains(principal, "://"):
		return store.ACL{}, invalid(field+".principal", "%q: want a principal URI (spiffe://replicad/client/NAME) or *", principal)
	case strings.ContainsAny(principal, " \t\r\n\x00"):
		return store.ACL{}, invalid(field+".principal", "%q holds white space", principal)
	}
	op, ok := authz.OperationFromProto(p.GetOperation())
	if !ok {
		return store.ACL{}, invalid(field+".operation", "must be READ, WRITE, DESCRIBE, ALTER, DELETE or CLUSTER_ACTION (got %v)", p.GetOperation())
	}
	res, ok := authz.ResourceFromProto(p.GetResourceType())
	if !ok {
		return store.ACL{}, invalid(field+".resource_type", "must be TOPIC (got %v)", p.GetResourceType())
	}
	pt, ok := authz.PatternFromProto(p.GetPatternType())
	if !ok {
		return store.ACL{}, invalid(field+".pattern_type", "must be LITERAL or PREFIX (got %v)", p.GetPatternType())
	}
	if err := validateACLName(field+".resource_name", pt, p.GetResourceName()); err != nil {
		return store.ACL{}, err
	}
	return store.ACL{Principal: principal, Operation: string(op), ResourceType: res, PatternType: string(pt), Name: p.GetResourceName()}, nil
}

// validateACLName accepts a topic name, "*" (literal: every topic), or for
// a prefix the start of a topic name.
func validateACLName(field string, pt authz.PatternType, name string) error {
	if name == "" {
		return invalid(field, "must not be empty")
	}
	if pt == authz.PatternLiteral && name == "*" {
		return nil
	}
	if err := tp.ValidateTopic(name); err != nil {
		return invalid(field, "%v", err)
	}
	return nil
}

// filterFromProto is a filter's store form; unset fields match anything.
func filterFromProto(field string, f *replicadv1.AclFilter) (store.ACLFilter, error) {
	var out store.ACLFilter
	if f == nil {
		return out, nil
	}
	out.Principal, out.Name = f.GetPrincipal(), f.GetResourceName()
	if f.GetOperation() != replicadv1.AclOperation_ACL_OPERATION_UNSPECIFIED {
		op, ok := authz.OperationFromProto(f.GetOperation())
		if !ok {
			return out, invalid(field+".operation", "unknown operation %v", f.GetOperation())
		}
		out.Operation = string(op)
	}
	if f.GetResourceType() != replicadv1.AclResourceType_ACL_RESOURCE_TYPE_UNSPECIFIED {
		res, ok := authz.ResourceFromProto(f.GetResourceType())
		if !ok {
			return out, invalid(field+".resource_type", "unknown resource type %v", f.GetResourceType())
		}
		out.ResourceType = res
	}
	if f.GetPatternType() != replicadv1.AclPatternType_ACL_PATTERN_TYPE_UNSPECIFIED {
		pt, ok := authz.PatternFromProto(f.GetPatternType())
		if !ok {
			return out, invalid(field+".pattern_type", "unknown pattern type %v", f.GetPatternType())
		}
		out.PatternType = string(pt)
	}
	return out, nil
}

// CreateAcls implements ControllerService.
func (c *Controller) CreateAcls(ctx context.Context, req *replicadv1.CreateAclsRequest) (*replicadv1.CreateAclsResponse, error) {
	if len(req.GetAcls()) == 0 {
		return nil, invalid("acls", "must not be empty")
	}
	acls := make([]store.ACL, len(req.GetAcls()))
	for i, p := range req.GetAcls() {
		a, err := validateACL("acls["+strconv.Itoa(i)+"]", p)
		if err != nil {
			return nil, err
		}
		acls[i] = a
	}
	created, err := c.alterAcls(ctx, true, acls, nil)
	if errors.Is(err, errNotController) {
		return &replicadv1.CreateAclsResponse{ErrorCode: codeNotController, ErrorMessage: c.notActiveMessage()}, nil
	}
	if err != nil {
		return nil, internalErr(err)
	}
	return &replicadv1.CreateAclsResponse{Created: aclsToProto(created)}, nil
}

// DeleteAcls implements ControllerService.
func (c *Controller) DeleteAcls(ctx context.Context, req *replicadv1.DeleteAclsRequest) (*replicadv1.DeleteAclsResponse, error) {
	var filters []store.ACLFilter
	for i, f := range req.GetFilters() {
		sf, err := filterFromProto("filters["+strconv.Itoa(i)+"]", f)
		if err != nil {
			return nil, err
		}
		if sf == (store.ACLFilter{}) && !req.GetMatchAll() {
			return nil, invalid("filters["+strconv.Itoa(i)+"]", "matches every ACL: set match_all to delete them all")
		}
		filters = append(filters, sf)
	}
	switch {
	case len(filters) == 0 && !req.GetMatchAll():
		return nil, invalid("filters", "must not be empty (or set match_all to delete every ACL)")
	case len(filters) == 0:
		filters = []store.ACLFilter{{}}
	}
	deleted, err := c.alterAcls(ctx, false, nil, filters)
	if errors.Is(err, errNotController) {
		return &replicadv1.DeleteAclsResponse{ErrorCode: codeNotController, ErrorMessage: c.notActiveMessage()}, nil
	}
	if err != nil {
		return nil, internalErr(err)
	}
	return &replicadv1.DeleteAclsResponse{Deleted: aclsToProto(deleted)}, nil
}

// DescribeAcls implements ControllerService.
func (c *Controller) DescribeAcls(_ context.Context, req *replicadv1.DescribeAclsRequest) (*replicadv1.DescribeAclsResponse, error) {
	filter, err := filterFromProto("filter", req.GetFilter())
	if err != nil {
		return nil, err
	}
	acls, err := c.describeAcls(filter)
	if errors.Is(err, errNotController) {
		return &replicadv1.DescribeAclsResponse{ErrorCode: codeNotController, ErrorMessage: c.notActiveMessage()}, nil
	}
	if err != nil {
		return nil, internalErr(err)
	}
	return &replicadv1.DescribeAclsResponse{Acls: aclsToProto(acls)}, nil
}
