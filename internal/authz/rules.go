package authz

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// openPrefixes are the services anyone who passed the TLS handshake may
// call: load balancers and probes check health with whatever certificate
// they have, and reflection tells no secret (it lists what the proto files
// in the repository say).
var openPrefixes = []string{
	"/grpc.health.v1.Health/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

// IsOpen reports whether fullMethod needs no authorization.
func IsOpen(fullMethod string) bool {
	for _, p := range openPrefixes {
		if strings.HasPrefix(fullMethod, p) {
			return true
		}
	}
	return false
}

// The methods of each role. The controller sends the control requests, and
// DescribePartitions (log end offsets for an unclean election); it never
// sends CheckpointHighWatermarks, so it may not (an operator does). Admin
// manages topics and the cluster and describes it; it does not produce or
// consume (an ACL or --super-users grants that). ACL administration is
// admin's too: whoever may change ACLs may grant themselves anything, so it
// is the same trust as managing the cluster.
var (
	controllerMethods = set(
		replicadv1.ReplicaManagerService_LeaderAndIsr_FullMethodName,
		replicadv1.ReplicaManagerService_UpdateMetadata_FullMethodName,
		replicadv1.ReplicaManagerService_StopReplica_FullMethodName,
		replicadv1.ReplicaManagerService_DescribePartitions_FullMethodName,
	)
	adminMethods = set(
		replicadv1.ControllerService_CreateTopic_FullMethodName,
		replicadv1.ControllerService_DeleteTopic_FullMethodName,
		replicadv1.ControllerService_CreatePartitions_FullMethodName,
		replicadv1.ControllerService_AlterTopicConfig_FullMethodName,
		replicadv1.ControllerService_DescribeTopicConfig_FullMethodName,
		replicadv1.ControllerService_ElectLeader_FullMethodName,
		replicadv1.ControllerService_ElectLeaders_FullMethodName,
		replicadv1.ControllerService_ReassignPartition_FullMethodName,
		replicadv1.ControllerService_AlterReplicationThrottle_FullMethodName,
		replicadv1.ControllerService_DescribeCluster_FullMethodName,
		replicadv1.ControllerService_CreateAcls_FullMethodName,
		replicadv1.ControllerService_DeleteAcls_FullMethodName,
		replicadv1.ControllerService_DescribeAcls_FullMethodName,
		replicadv1.ReplicaManagerService_AlterReplicaLogDirs_FullMethodName,
		replicadv1.ReplicaManagerService_DescribePartitions_FullMethodName,
		replicadv1.ReplicaManagerService_CheckpointHighWatermarks_FullMethodName,
		replicadv1.LogService_DeleteRecords_FullMethodName,
		replicadv1.ReplicaManagerService_RunRetention_FullMethodName,
	)
	// brokerMethods are checked against the broker's own id (brokerIDOf).
	brokerMethods = set(
		replicadv1.FetchService_Fetch_FullMethodName,
		replicadv1.FetchService_OffsetsForLeaderEpoch_FullMethodName,
		replicadv1.ControllerService_RegisterBroker_FullMethodName,
		replicadv1.ControllerService_BrokerHeartbeat_FullMethodName,
		replicadv1.ControllerService_ControlledShutdown_FullMethodName,
		replicadv1.ControllerService_AlterPartition_FullMethodName,
		// Producer IDs (issue 21): a broker asks for a block of IDs to
		// hand out, and forwards a producer's epoch bump.
		replicadv1.ControllerService_AllocateProducerIds_FullMethodName,
		replicadv1.ControllerService_BumpProducerEpoch_FullMethodName,
	)
)

func set(methods ...string) map[string]bool {
	m := make(map[string]bool, len(methods))
	for _, s := range methods {
		m[s] = true
	}
	return m
}

// Denial is a refused call: who, what, and why.
type Denial struct {
	Principal string
	Method    string
	Reason    string
}

func (d *Denial) Error() string {
	return fmt.Sprintf("principal %s may not call %s: %s", d.Principal, strings.TrimPrefix(d.Method, "/"), d.Reason)
}

// Authorizer decides calls. It is safe for concurrent use; SetACLs swaps
// the ACLs atomically.
type Authorizer struct {
	superUsers map[string]bool
	acls       atomic.Pointer[ACLSet]
}

// New is an Authorizer whose superUsers (principal URIs) may do everything.
// It holds no ACLs until SetACLs: client produce and consume are denied.
func New(superUsers []string) *Authorizer {
	return &Authorizer{superUsers: set(superUsers...)}
}

// SetACLs replaces the ACLs (a broker: the set in the controller's last
// UpdateMetadata; the controller: its store's).
func (a *Authorizer) SetACLs(s *ACLSet) { a.acls.Store(s) }

// ACLs are the ACLs held (nil before the first SetACLs).
func (a *Authorizer) ACLs() *ACLSet { return a.acls.Load() }

// Authorize returns nil if p may call fullMethod with req (req may be nil
// at a stream's start: the message checks come with each message), or a
// *Denial.
func (a *Authorizer) Authorize(p Principal, fullMethod string, req any) error {
	if IsOpen(fullMethod) || a.superUsers[p.URI] {
		return nil
	}
	if fullMethod == replicadv1.LogService_Metadata_FullMethodName {
		// Every principal may ask: the answer holds only the topics it
		// may describe (MayDescribe, through Enforcer.DescribeFilter),
		// as Kafka's Metadata does.
		return nil
	}
	deny := func(format string, args ...any) error {
		return &Denial{Principal: p.URI, Method: fullMethod, Reason: fmt.Sprintf(format, args...)}
	}
	switch p.Role {
	case RoleController:
		if controllerMethods[fullMethod] {
			return nil
		}
		return deny("the controller role sends only LeaderAndIsr, UpdateMetadata, StopReplica and DescribePartitions")
	case RoleAdmin:
		if adminMethods[fullMethod] {
			return nil
		}
		return deny("the admin role manages topics and the cluster only (produce, consume and control requests need --super-users)")
	case RoleBroker:
		if !brokerMethods[fullMethod] {
			return deny("the broker role only fetches and talks to the controller as itself")
		}
		if id, ok := brokerIDOf(req); ok && id != p.BrokerID {
			return deny("broker %d may act only as broker %d, not %d", p.BrokerID, p.BrokerID, id)
		}
		return nil
	}
	// Clients and principals without a role: ACLs.
	if fullMethod == replicadv1.LogService_ProduceStream_FullMethodName && req == nil {
		// Opening the stream names no topic: each request is authorized
		// as a unary Produce (checkedStream).
		return nil
	}
	if fullMethod == replicadv1.LogService_InitProducerId_FullMethodName {
		// Kafka's IdempotentWrite on the cluster, which Write on any
		// topic implies: a producer ID is of use only to a principal that
		// may write somewhere, and names no topic of its own.
		if !a.acls.Load().AllowsAny(p.URI, OpWrite) {
			return deny("no ACL allows %s on any topic (an idempotent producer ID needs write on at least one)", OpWrite)
		}
		return nil
	}
	op, topics, ok := clientOperation(fullMethod, req)
	if !ok {
		return deny("not a client operation (topics, control and replication need the admin, controller or broker role)")
	}
	acls := a.acls.Load()
	if acls == nil {
		return deny("this server has no ACLs from the controller yet")
	}
	for _, topic := range topics {
		if !acls.Allows(p.URI, op, topic) {
			return deny("no ACL allows %s on topic %q", op, topic)
		}
	}
	return nil
}

// MayDescribe reports whether p may see topic in a Metadata answer:
// superusers and the admin, controller and broker roles see every topic
// (the cluster's own processes, and the operator); a client needs an ACL
// granting describe on it (READ, WRITE, ALTER and DELETE imply it).
func (a *Authorizer) MayDescribe(p Principal, topic string) bool {
	if a.superUsers[p.URI] {
		return true
	}
	switch p.Role {
	case RoleAdmin, RoleController, RoleBroker:
		return true
	}
	return a.acls.Load().Allows(p.URI, OpDescribe, topic)
}

// brokerIDOf is the broker a request acts as: the replica of a fetch, the
// broker of a controller request.
func brokerIDOf(req any) (int32, bool) {
	switch r := req.(type) {
	case *replicadv1.FetchRequest:
		return r.GetReplicaId(), true
	case *replicadv1.OffsetsForLeaderEpochRequest:
		return r.GetReplicaId(), true
	case *replicadv1.RegisterBrokerRequest:
		return r.GetBrokerId(), true
	case *replicadv1.BrokerHeartbeatRequest:
		return r.GetBrokerId(), true
	case *replicadv1.ControlledShutdownRequest:
		return r.GetBrokerId(), true
	case *replicadv1.AlterPartitionRequest:
		// The controller then takes the change only for partitions broker
		// id leads (checkAlterPartitionLocked: NOT_LEADER_OR_FOLLOWER).
		return r.GetBrokerId(), true
	case *replicadv1.AllocateProducerIdsRequest:
		return r.GetBrokerId(), true
	case *replicadv1.BumpProducerEpochRequest:
		return r.GetBrokerId(), true
	}
	return 0, false
}

// clientOperation is the ACL operation a client call needs and the topics
// it needs it on: Produce write, Consume read, DescribePartitions of one
// topic describe, DeleteRecords delete on each topic it names,
// CreatePartitions alter on its topic (as Kafka), RunRetention delete on its
// topic (it deletes records, if only those the topic's retention already
// lets go: whoever may delete a topic's records may run its retention, and
// nobody else, as for DeleteRecords).
// DescribeCluster (every topic's metadata) is not a client operation.
func clientOperation(fullMethod string, req any) (Operation, []string, bool) {
	switch fullMethod {
	case replicadv1.LogService_Produce_FullMethodName, replicadv1.LogService_ProduceStream_FullMethodName:
		r, _ := req.(*replicadv1.ProduceRequest)
		return OpWrite, []string{r.GetTopic()}, true
	case replicadv1.LogService_Consume_FullMethodName:
		r, _ := req.(*replicadv1.ConsumeRequest)
		return OpRead, []string{r.GetTopic()}, true
	case replicadv1.LogService_DeleteRecords_FullMethodName:
		r, _ := req.(*replicadv1.DeleteRecordsRequest)
		var topics []string
		for _, p := range r.GetPartitions() {
			if !slices.Contains(topics, p.GetTopic()) {
				topics = append(topics, p.GetTopic())
			}
		}
		// No partition (refused by validation later) names no topic:
		// still a delete, which needs an ACL on something.
		if len(topics) == 0 {
			topics = []string{""}
		}
		return OpDelete, topics, true
	case replicadv1.ControllerService_CreatePartitions_FullMethodName:
		// Kafka authorizes CreatePartitions as Alter on the topic: an
		// application may grow its own topics without the admin role.
		r, _ := req.(*replicadv1.CreatePartitionsRequest)
		return OpAlter, []string{r.GetTopic()}, true
	case replicadv1.ReplicaManagerService_RunRetention_FullMethodName:
		r, _ := req.(*replicadv1.RunRetentionRequest)
		// No topic (refused by validation later) is still a delete.
		return OpDelete, []string{r.GetTopic()}, true
	case replicadv1.ReplicaManagerService_DescribePartitions_FullMethodName:
		r, _ := req.(*replicadv1.DescribePartitionsRequest)
		if r.GetTopic() == "" {
			return "", nil, false // every topic: admin
		}
		return OpDescribe, []string{r.GetTopic()}, true
	}
	return "", nil, false
}
