package main

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/client"
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
		cfg.Leaders = controllerLeaders{ctl.Leaders(), ctl}
	default:
		cfg.Broker = e.g.broker
	}
	return client.New(cfg)
}

// controllerLeaders finds leaders in the controller's DescribeCluster
// (client.Admin.Leaders), its errors worded by controllerError.
type controllerLeaders struct {
	client.LeaderSource
	ctl *controllerClient
}

func (l controllerLeaders) Lookup(ctx context.Context, c *client.Client, k client.TopicPartition) (client.LeaderView, error) {
	v, err := l.LeaderSource.Lookup(ctx, c, k)
	if status.Code(err) == codes.PermissionDenied {
		// A client certificate: the controller keeps the cluster's
		// description to the admin role, while every broker's Metadata
		// answers it (for the topics its ACLs let it describe).
		return client.LeaderView{}, &client.LookupError{Msg: "the controller does not describe the cluster to this certificate " +
			"(DescribeCluster is for the admin role): a client certificate finds leaders through the brokers; " +
			"give --bootstrap BROKER[,BROKER...] instead of --controller (" + status.Convert(err).Message() + ")"}
	}
	return v, controllerError(err, l.ctl)
}
