package main

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// partitionKey names one partition.
type partitionKey struct {
	topic     string
	partition int32
}

func (k partitionKey) String() string { return fmt.Sprintf("%s-%d", k.topic, k.partition) }

// maxLeaderAttempts bounds the attempts of one call besides --timeout: a
// cluster whose answers keep contradicting each other does not hold a
// command for long.
var maxLeaderAttempts = 20

// newClient is the client library's Client for produce, consume, perf
// produce and delete-records: leaders found through --bootstrap brokers'
// Metadata, else the --controller, else everything sent to --broker (as
// before the controller existed). --bootstrap wins over --controller for
// finding leaders (a command that also talks to the controller still uses
// --controller). Connections carry the --tls-* credentials; --timeout
// bounds each RPC and the retries of one call through leader changes (at
// most maxLeaderAttempts attempts).
func (e *env) newClient() (*client.Client, error) {
	cfg := client.Config{
		Dial:           func(addr string) (*grpc.ClientConn, error) { return e.dialPeer(addr, "broker") },
		RequestTimeout: e.g.timeout,
		RetryTimeout:   e.g.timeout,
		MaxAttempts:    maxLeaderAttempts,
	}
	switch {
	case e.g.brokerOnly:
		cfg.Broker = e.g.broker
	case e.g.bootstrap != "":
		cfg.Bootstrap = e.g.bootstrapAddrs()
	case e.g.controller != "":
		ctl, err := e.controller()
		if err != nil {
			return nil, err
		}
		cfg.Leaders = controllerSource{ctl}
	default:
		cfg.Broker = e.g.broker
	}
	return client.New(cfg)
}

// controllerSource finds leaders in the controller's DescribeCluster. A
// partition the controller does not list is an error that no retry mends;
// one without a (known) leader is one that a retry may.
type controllerSource struct{ ctl *controllerClient }

func (s controllerSource) Lookup(ctx context.Context, _ *client.Client, k client.TopicPartition) (client.LeaderView, error) {
	resp, err := callController(ctx, s.ctl, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeClusterResponse, error) {
		return c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	})
	if status.Code(err) == codes.PermissionDenied {
		// A client certificate: the controller keeps the cluster's
		// description to the admin role, while every broker's Metadata
		// answers it (for the topics its ACLs let it describe).
		return client.LeaderView{}, &client.LookupError{Msg: "the controller does not describe the cluster to this certificate " +
			"(DescribeCluster is for the admin role): a client certificate finds leaders through the brokers; " +
			"give --bootstrap BROKER[,BROKER...] instead of --controller (" + status.Convert(err).Message() + ")"}
	}
	if err != nil {
		return client.LeaderView{}, err
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return client.LeaderView{}, &client.LookupError{Msg: "describe-cluster: " + codeName(resp.GetErrorCode()), Retry: true}
	}
	addrs := map[int32]string{}
	v := client.LeaderView{Leaders: map[client.TopicPartition]client.Leader{}, Partitions: map[string]int32{}}
	for _, b := range resp.GetBrokers() {
		addrs[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
		v.Brokers = append(v.Brokers, addrs[b.GetId()])
	}
	var found *replicadv1.ClusterPartition
	for _, p := range resp.GetPartitions() {
		pk := client.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		if pk == k {
			found = p
		}
		v.Partitions[pk.Topic] = max(v.Partitions[pk.Topic], pk.Partition+1)
		if addr, ok := addrs[p.GetLeader()]; ok && p.GetLeader() >= 0 {
			v.Leaders[pk] = client.Leader{Addr: addr, ID: p.GetLeader(), Epoch: -1}
		}
	}
	_, ok := v.Leaders[k]
	switch {
	case k.Topic == "":
		// A lookup for the brokers alone (InitProducerId).
	case found == nil:
		v.Err = &client.LookupError{Msg: fmt.Sprintf("%s: UNKNOWN_TOPIC_OR_PARTITION: the controller does not know it", k)}
	case found.GetLeader() < 0:
		v.Err = &client.LookupError{Msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: no leader", k), Retry: true}
	case !ok:
		v.Err = &client.LookupError{Msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: leader %d is not among the brokers", k, found.GetLeader()), Retry: true}
	}
	return v, nil
}
