package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"google.golang.org/grpc"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/fetcher"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The gRPC client interfaces the product dials, implemented over the
// simulated network: the seams controller.Config.DialBroker,
// brokersession.Config.Dial, alterpartition.Config.Dial and
// fetcher.Config.Client.

// controllerClient is a broker's client of the controller.
type controllerClient struct{ c *conn }

var _ replicadv1.ControllerServiceClient = controllerClient{}

func (k controllerClient) RegisterBroker(ctx context.Context, in *replicadv1.RegisterBrokerRequest, _ ...grpc.CallOption) (*replicadv1.RegisterBrokerResponse, error) {
	return invoke[*replicadv1.RegisterBrokerResponse](ctx, k.c, "RegisterBroker", in)
}
func (k controllerClient) BrokerHeartbeat(ctx context.Context, in *replicadv1.BrokerHeartbeatRequest, _ ...grpc.CallOption) (*replicadv1.BrokerHeartbeatResponse, error) {
	return invoke[*replicadv1.BrokerHeartbeatResponse](ctx, k.c, "BrokerHeartbeat", in)
}
func (k controllerClient) AllocateProducerIds(ctx context.Context, in *replicadv1.AllocateProducerIdsRequest, _ ...grpc.CallOption) (*replicadv1.AllocateProducerIdsResponse, error) {
	return invoke[*replicadv1.AllocateProducerIdsResponse](ctx, k.c, "AllocateProducerIds", in)
}
func (k controllerClient) BumpProducerEpoch(ctx context.Context, in *replicadv1.BumpProducerEpochRequest, _ ...grpc.CallOption) (*replicadv1.BumpProducerEpochResponse, error) {
	return invoke[*replicadv1.BumpProducerEpochResponse](ctx, k.c, "BumpProducerEpoch", in)
}
func (k controllerClient) AlterPartition(ctx context.Context, in *replicadv1.AlterPartitionRequest, _ ...grpc.CallOption) (*replicadv1.AlterPartitionResponse, error) {
	return invoke[*replicadv1.AlterPartitionResponse](ctx, k.c, "AlterPartition", in)
}
func (k controllerClient) CreateTopic(ctx context.Context, in *replicadv1.CreateTopicRequest, _ ...grpc.CallOption) (*replicadv1.CreateTopicResponse, error) {
	return invoke[*replicadv1.CreateTopicResponse](ctx, k.c, "CreateTopic", in)
}
func (k controllerClient) DeleteTopic(ctx context.Context, in *replicadv1.DeleteTopicRequest, _ ...grpc.CallOption) (*replicadv1.DeleteTopicResponse, error) {
	return invoke[*replicadv1.DeleteTopicResponse](ctx, k.c, "DeleteTopic", in)
}
func (k controllerClient) CreatePartitions(ctx context.Context, in *replicadv1.CreatePartitionsRequest, _ ...grpc.CallOption) (*replicadv1.CreatePartitionsResponse, error) {
	return invoke[*replicadv1.CreatePartitionsResponse](ctx, k.c, "CreatePartitions", in)
}
func (k controllerClient) AlterTopicConfig(ctx context.Context, in *replicadv1.AlterTopicConfigRequest, _ ...grpc.CallOption) (*replicadv1.AlterTopicConfigResponse, error) {
	return invoke[*replicadv1.AlterTopicConfigResponse](ctx, k.c, "AlterTopicConfig", in)
}
func (k controllerClient) DescribeTopicConfig(ctx context.Context, in *replicadv1.DescribeTopicConfigRequest, _ ...grpc.CallOption) (*replicadv1.DescribeTopicConfigResponse, error) {
	return invoke[*replicadv1.DescribeTopicConfigResponse](ctx, k.c, "DescribeTopicConfig", in)
}
func (k controllerClient) ElectLeader(ctx context.Context, in *replicadv1.ElectLeaderRequest, _ ...grpc.CallOption) (*replicadv1.ElectLeaderResponse, error) {
	return invoke[*replicadv1.ElectLeaderResponse](ctx, k.c, "ElectLeader", in)
}
func (k controllerClient) ElectLeaders(ctx context.Context, in *replicadv1.ElectLeadersRequest, _ ...grpc.CallOption) (*replicadv1.ElectLeadersResponse, error) {
	return invoke[*replicadv1.ElectLeadersResponse](ctx, k.c, "ElectLeaders", in)
}
func (k controllerClient) ReassignPartition(ctx context.Context, in *replicadv1.ReassignPartitionRequest, _ ...grpc.CallOption) (*replicadv1.ReassignPartitionResponse, error) {
	return invoke[*replicadv1.ReassignPartitionResponse](ctx, k.c, "ReassignPartition", in)
}
func (k controllerClient) AlterReplicationThrottle(ctx context.Context, in *replicadv1.AlterReplicationThrottleRequest, _ ...grpc.CallOption) (*replicadv1.AlterReplicationThrottleResponse, error) {
	return invoke[*replicadv1.AlterReplicationThrottleResponse](ctx, k.c, "AlterReplicationThrottle", in)
}
func (k controllerClient) DescribeCluster(ctx context.Context, in *replicadv1.DescribeClusterRequest, _ ...grpc.CallOption) (*replicadv1.DescribeClusterResponse, error) {
	return invoke[*replicadv1.DescribeClusterResponse](ctx, k.c, "DescribeCluster", in)
}
func (k controllerClient) ControlledShutdown(ctx context.Context, in *replicadv1.ControlledShutdownRequest, _ ...grpc.CallOption) (*replicadv1.ControlledShutdownResponse, error) {
	return invoke[*replicadv1.ControlledShutdownResponse](ctx, k.c, "ControlledShutdown", in)
}
func (k controllerClient) CreateAcls(ctx context.Context, in *replicadv1.CreateAclsRequest, _ ...grpc.CallOption) (*replicadv1.CreateAclsResponse, error) {
	return invoke[*replicadv1.CreateAclsResponse](ctx, k.c, "CreateAcls", in)
}
func (k controllerClient) DeleteAcls(ctx context.Context, in *replicadv1.DeleteAclsRequest, _ ...grpc.CallOption) (*replicadv1.DeleteAclsResponse, error) {
	return invoke[*replicadv1.DeleteAclsResponse](ctx, k.c, "DeleteAcls", in)
}
func (k controllerClient) DescribeAcls(ctx context.Context, in *replicadv1.DescribeAclsRequest, _ ...grpc.CallOption) (*replicadv1.DescribeAclsResponse, error) {
	return invoke[*replicadv1.DescribeAclsResponse](ctx, k.c, "DescribeAcls", in)
}

// brokerClient is the controller's client of one broker.
type brokerClient struct{ c *conn }

var _ replicadv1.ReplicaManagerServiceClient = brokerClient{}

func (k brokerClient) LeaderAndIsr(ctx context.Context, in *replicadv1.LeaderAndIsrRequest, _ ...grpc.CallOption) (*replicadv1.LeaderAndIsrResponse, error) {
	return invoke[*replicadv1.LeaderAndIsrResponse](ctx, k.c, "LeaderAndIsr", in)
}
func (k brokerClient) UpdateMetadata(ctx context.Context, in *replicadv1.UpdateMetadataRequest, _ ...grpc.CallOption) (*replicadv1.UpdateMetadataResponse, error) {
	return invoke[*replicadv1.UpdateMetadataResponse](ctx, k.c, "UpdateMetadata", in)
}
func (k brokerClient) StopReplica(ctx context.Context, in *replicadv1.StopReplicaRequest, _ ...grpc.CallOption) (*replicadv1.StopReplicaResponse, error) {
	return invoke[*replicadv1.StopReplicaResponse](ctx, k.c, "StopReplica", in)
}
func (k brokerClient) CheckpointHighWatermarks(ctx context.Context, in *replicadv1.CheckpointHighWatermarksRequest, _ ...grpc.CallOption) (*replicadv1.CheckpointHighWatermarksResponse, error) {
	return invoke[*replicadv1.CheckpointHighWatermarksResponse](ctx, k.c, "CheckpointHighWatermarks", in)
}
func (k brokerClient) DescribePartitions(ctx context.Context, in *replicadv1.DescribePartitionsRequest, _ ...grpc.CallOption) (*replicadv1.DescribePartitionsResponse, error) {
	return invoke[*replicadv1.DescribePartitionsResponse](ctx, k.c, "DescribePartitions", in)
}
func (k brokerClient) RunRetention(ctx context.Context, in *replicadv1.RunRetentionRequest, _ ...grpc.CallOption) (*replicadv1.RunRetentionResponse, error) {
	return invoke[*replicadv1.RunRetentionResponse](ctx, k.c, "RunRetention", in)
}
func (k brokerClient) AlterReplicaLogDirs(ctx context.Context, in *replicadv1.AlterReplicaLogDirsRequest, _ ...grpc.CallOption) (*replicadv1.AlterReplicaLogDirsResponse, error) {
	return invoke[*replicadv1.AlterReplicaLogDirsResponse](ctx, k.c, "AlterReplicaLogDirs", in)
}

// nopCloser is the Closer of a simulated client: a connection holds nothing
// to release.
type nopCloser struct{}

func (nopCloser) Close() error { return nil }

// nodeOf is the node name of a host:port address ("b1:9092" -> "b1").
func nodeOf(addr string) string {
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		return addr[:i]
	}
	return addr
}

// leaderClient is a follower's fetcher.LeaderClient: one stream per Open.
type leaderClient struct {
	net  *network
	node string
	life int
}

var _ fetcher.LeaderClient = leaderClient{}

func (c leaderClient) Open(ctx context.Context, leader core.Broker) (fetcher.FetchStream, error) {
	st, err := c.net.openStream(ctx, c.node, c.life, brokerName(leader.ID), "fetch")
	if err != nil {
		return nil, err
	}
	return fetchStream{st}, nil
}

type fetchStream struct{ st *stream }

func (f fetchStream) Send(req *replicadv1.FetchRequest) error { return f.st.send(req) }
func (f fetchStream) Recv() (*replicadv1.FetchResponse, error) {
	r, err := f.st.recv()
	if err != nil {
		return nil, err
	}
	return r.(*replicadv1.FetchResponse), nil
}
func (f fetchStream) Close() { f.st.close() }

func brokerName(id int32) string { return fmt.Sprintf("b%d", id) }

// producerIDsClient is a broker's producer ID manager's client of the
// controller: block requests on one connection, and each producer ID's
// epoch bumps on a connection of its own. The manager serves concurrent
// InitProducerIds, whose bumps retry after the same fixed backoff: two that
// failed together retry at the same instant, and on one pipe their order
// would be the goroutines' (the scheduler orders pipes, not goroutines).
type producerIDsClient struct {
	controllerClient
	mu    sync.Mutex
	bumps map[int64]*conn
}

func newProducerIDsClient(c *conn) *producerIDsClient {
	return &producerIDsClient{controllerClient: controllerClient{c}, bumps: map[int64]*conn{}}
}

func (k *producerIDsClient) BumpProducerEpoch(ctx context.Context, in *replicadv1.BumpProducerEpochRequest, _ ...grpc.CallOption) (*replicadv1.BumpProducerEpochResponse, error) {
	k.mu.Lock()
	c := k.bumps[in.GetProducerId()]
	if c == nil {
		base := k.c
		c = &conn{net: base.net, client: base.client, clientLife: base.clientLife, server: base.server,
			kind: fmt.Sprintf("%s-bump-%d", base.kind, in.GetProducerId())}
		k.bumps[in.GetProducerId()] = c
	}
	k.mu.Unlock()
	return invoke[*replicadv1.BumpProducerEpochResponse](ctx, c, "BumpProducerEpoch", in)
}
