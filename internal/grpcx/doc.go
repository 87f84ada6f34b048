// Package grpcx holds the gRPC transport settings every replicad endpoint
// shares: the broker's server, ctlclient, and (with replication) the
// fetchers' streams to their leaders.
package grpcx
