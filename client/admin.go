package client

import (
	"context"
	"errors"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/replicad/replicad/controllerchannel"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// DefaultAdminTimeout bounds one Admin call when AdminConfig.Timeout is 0.
const DefaultAdminTimeout = 10 * time.Second

// AdminConfig configures an Admin.
type AdminConfig struct {
	// Controllers are the addresses (host:port) of the controllers, any
	// of which may be the active one; at least one.
	Controllers []string
	// Dial connects to one controller (with TLS, say), adding extra to its
	// options: the controller channel's interceptor, which carries the
	// standby's hint and tells a request that never went out from one
	// that may have been applied. Nil: plaintext with replicad's transport
	// options.
	Dial func(addr string, extra ...grpc.DialOption) (*grpc.ClientConn, error)
	// DialOptions are added to the default Dial's (unused with Dial).
	DialOptions []grpc.DialOption
	// Timeout bounds one call, every attempt and round included.
	// Default DefaultAdminTimeout.
	Timeout time.Duration
}

// Admin calls the controllers' ControllerService: topics, partitions,
// configs, elections, reassignments, throttles, ACLs and the cluster's
// description (the controller's part of Kafka's Admin client). It reaches
// the active controller through a controllerchannel: a standby's
// NOT_CONTROLLER sends the call on to the controller it names or the next
// address, and rounds repeat with a bounded backoff (an election under
// way) until the call's Timeout. A request that may not be sent twice (a
// create, a delete, a reassignment, an election) is not sent again after it
// went out without an answer: the call fails with
// controllerchannel.ErrMaybeApplied, and the caller checks (a describe)
// before retrying. A call that never reached the active controller fails
// with controllerchannel.ErrNoController alone. Safe for concurrent use.
type Admin struct {
	ch      *controllerchannel.Channel
	timeout time.Duration
}

// NewAdmin returns an Admin of the controllers at cfg.Controllers; it
// dials each at its first call.
func NewAdmin(cfg AdminConfig) (*Admin, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultAdminTimeout
	}
	var dial func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error)
	if cfg.Dial != nil {
		dial = func(addr string) (replicadv1.ControllerServiceClient, io.Closer, error) {
			conn, err := cfg.Dial(addr, controllerchannel.DialOption())
			if err != nil {
				return nil, nil, err
			}
			return replicadv1.NewControllerServiceClient(conn), conn, nil
		}
	}
	ch, err := controllerchannel.New(controllerchannel.Config{Addrs: cfg.Controllers, Dial: dial, DialOptions: cfg.DialOptions})
	if err != nil {
		return nil, err
	}
	return &Admin{ch: ch, timeout: cfg.Timeout}, nil
}

// Controllers are the controller addresses, as given.
func (a *Admin) Controllers() []string { return a.ch.Addrs() }

// Timeout is what bounds one call.
func (a *Admin) Timeout() time.Duration { return a.timeout }

// Active is the address that last answered as the active controller (the
// first address before any did).
func (a *Admin) Active() string {
	if addr := a.ch.Active(); addr != "" {
		return addr
	}
	return a.ch.Addrs()[0]
}

// Close closes the controller connections.
func (a *Admin) Close() error { return a.ch.Close() }

// AdminCall makes one ControllerService call through a: rpc gets a client
// of the controller tried and a context bounded by a's Timeout, and returns
// the RPC's answer as it is. The answer is returned whatever its error code
// other than NOT_CONTROLLER; the errors are described at Admin. Whether
// the request may be sent again after a lost answer follows from its
// answer's type (Idempotent).
func AdminCall[R controllerchannel.Answer](ctx context.Context, a *Admin, rpc func(context.Context, replicadv1.ControllerServiceClient) (R, error)) (R, error) {
	ctx, cancel := context.WithTimeout(ctx, a.timeout)
	defer cancel()
	var zero R
	return controllerchannel.Call(ctx, a.ch, controllerchannel.Policy{Idempotent: Idempotent(zero)}, rpc)
}

// Idempotent tells, by the type of its answer, a ControllerService request
// that may be sent again after its answer was lost: the describes, and the
// requests whose second application changes nothing (setting configs or a
// throttle, creating ACLs, which Kafka's CreateAcls also treats as a
// no-op for ACLs that exist). A create, delete, election or reassignment
// applied twice fails the second time (TOPIC_ALREADY_EXISTS, ...) or does
// something else, and is not resent.
func Idempotent(answer any) bool {
	switch answer.(type) {
	case *replicadv1.DescribeClusterResponse, *replicadv1.DescribeTopicConfigResponse, *replicadv1.DescribeAclsResponse,
		*replicadv1.AlterTopicConfigResponse, *replicadv1.AlterReplicationThrottleResponse, *replicadv1.CreateAclsResponse:
		return true
	}
	return false
}

// IsMaybeApplied reports whether err says a request went out and no answer
// came back: the controller may have applied it.
func IsMaybeApplied(err error) bool { return errors.Is(err, controllerchannel.ErrMaybeApplied) }

// The typed calls: each is AdminCall of one method.

// DescribeCluster describes the brokers, partitions and pending deletions.
func (a *Admin) DescribeCluster(ctx context.Context) (*replicadv1.DescribeClusterResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeClusterResponse, error) {
		return c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	})
}

// CreateTopic creates a topic.
func (a *Admin) CreateTopic(ctx context.Context, req *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.CreateTopicResponse, error) {
		return c.CreateTopic(ctx, req)
	})
}

// CreatePartitions adds partitions to a topic.
func (a *Admin) CreatePartitions(ctx context.Context, req *replicadv1.CreatePartitionsRequest) (*replicadv1.CreatePartitionsResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.CreatePartitionsResponse, error) {
		return c.CreatePartitions(ctx, req)
	})
}

// DeleteTopic deletes a topic.
func (a *Admin) DeleteTopic(ctx context.Context, req *replicadv1.DeleteTopicRequest) (*replicadv1.DeleteTopicResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DeleteTopicResponse, error) {
		return c.DeleteTopic(ctx, req)
	})
}

// AlterTopicConfig sets or removes a topic's config overrides.
func (a *Admin) AlterTopicConfig(ctx context.Context, req *replicadv1.AlterTopicConfigRequest) (*replicadv1.AlterTopicConfigResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.AlterTopicConfigResponse, error) {
		return c.AlterTopicConfig(ctx, req)
	})
}

// DescribeTopicConfig describes a topic's configs.
func (a *Admin) DescribeTopicConfig(ctx context.Context, req *replicadv1.DescribeTopicConfigRequest) (*replicadv1.DescribeTopicConfigResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeTopicConfigResponse, error) {
		return c.DescribeTopicConfig(ctx, req)
	})
}

// ElectLeader elects a partition's leader.
func (a *Admin) ElectLeader(ctx context.Context, req *replicadv1.ElectLeaderRequest) (*replicadv1.ElectLeaderResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.ElectLeaderResponse, error) {
		return c.ElectLeader(ctx, req)
	})
}

// ElectLeaders elects the preferred leaders of many partitions.
func (a *Admin) ElectLeaders(ctx context.Context, req *replicadv1.ElectLeadersRequest) (*replicadv1.ElectLeadersResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.ElectLeadersResponse, error) {
		return c.ElectLeaders(ctx, req)
	})
}

// ReassignPartition starts (or cancels) a partition's reassignment.
func (a *Admin) ReassignPartition(ctx context.Context, req *replicadv1.ReassignPartitionRequest) (*replicadv1.ReassignPartitionResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.ReassignPartitionResponse, error) {
		return c.ReassignPartition(ctx, req)
	})
}

// AlterReplicationThrottle sets the replication throttle.
func (a *Admin) AlterReplicationThrottle(ctx context.Context, req *replicadv1.AlterReplicationThrottleRequest) (*replicadv1.AlterReplicationThrottleResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.AlterReplicationThrottleResponse, error) {
		return c.AlterReplicationThrottle(ctx, req)
	})
}

// CreateAcls stores ACLs.
func (a *Admin) CreateAcls(ctx context.Context, req *replicadv1.CreateAclsRequest) (*replicadv1.CreateAclsResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.CreateAclsResponse, error) {
		return c.CreateAcls(ctx, req)
	})
}

// DeleteAcls deletes the ACLs matching filters.
func (a *Admin) DeleteAcls(ctx context.Context, req *replicadv1.DeleteAclsRequest) (*replicadv1.DeleteAclsResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DeleteAclsResponse, error) {
		return c.DeleteAcls(ctx, req)
	})
}

// DescribeAcls lists the ACLs matching a filter.
func (a *Admin) DescribeAcls(ctx context.Context, req *replicadv1.DescribeAclsRequest) (*replicadv1.DescribeAclsResponse, error) {
	return AdminCall(ctx, a, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeAclsResponse, error) {
		return c.DescribeAcls(ctx, req)
	})
}
