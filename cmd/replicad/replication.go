package main

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/fetcher"
	"github.com/replicad/replicad/internal/tlsconf"
)

// newFetcherManager builds the follower side of replication: fetchers stream
// from leaders over gRPC and append into the logs this broker follows. The
// replica manager is created after it (it takes the manager in its config),
// so the lookup reads it through rm, set before any fetcher starts: fetchers
// start only when the replica manager adds partitions. Every fetch carries
// brokerEpoch's current value (nil: 0, standalone).
func newFetcherManager(cfg config, logger zerolog.Logger, tc *tlsconf.TLS, rm **core.ReplicaManager, brokerEpoch func() int64) (*fetcher.Manager, *fetcher.GRPCClient, error) {
	// The credentials replace the client's default (insecure) ones.
	client := fetcher.NewGRPCClientTracing(cfg.traceDataPlane, tc.DialOptions(tlsconf.Roles{Peer: "leader", Self: "this broker"})...)
	m, err := fetcher.NewManager(fetcher.Config{
		BrokerID:    cfg.brokerID,
		BrokerEpoch: brokerEpoch,
		NumFetchers: cfg.numReplicaFetchers,
		Client:      client,
		Replicas: fetcher.ReplicasFunc(func(t tp.TopicPartition) (fetcher.Replica, bool) {
			l, leaderEpoch, ok := (*rm).FollowerLog(t)
			if !ok {
				return nil, false
			}
			return fetcher.NewLogReplica(l, leaderEpoch), true
		}),
		Logger: logger.With().Str("component", "fetcher").Logger(),
		// The provider telemetry.Setup installed (run sets it up first).
		Tracer: otel.Tracer("github.com/replicad/replicad/fetcher"),
	})
	if err != nil {
		_ = client.Close()
		return nil, nil, err
	}
	return m, client, nil
}

// newAlterLogDirsManager builds the alter-log-dirs side (Kafka's
// ReplicaAlterLogDirsManager): a second fetcher manager whose source is this
// broker's own current logs, read in process (no network), and whose
// replicas are the future logs of replicas being moved between log dirs.
func newAlterLogDirsManager(cfg config, logger zerolog.Logger, rm **core.ReplicaManager) (*fetcher.Manager, error) {
	return fetcher.NewManager(fetcher.Config{
		BrokerID: cfg.brokerID,
		Client: fetcher.NewLocalClient(cfg.brokerID, func(ctx context.Context, req core.FetchRequest) core.FetchResponse {
			return (*rm).FetchFromCurrentLog(ctx, req)
		}),
		Replicas: fetcher.ReplicasFunc(func(t tp.TopicPartition) (fetcher.Replica, bool) {
			l, leaderEpoch, ok := (*rm).FutureReplicaLog(t)
			if !ok {
				return nil, false
			}
			// A truncation of the log (follower or future) checkpoints its
			// dir's lowered recovery point itself, before it cuts anything
			// (logmgr's logOptions).
			return fetcher.NewLogReplica(l, leaderEpoch), true
		}),
		Logger: logger.With().Str("component", "alter-log-dirs").Logger(),
		Tracer: otel.Tracer("github.com/replicad/replicad/fetcher/alter-log-dirs"),
	})
}
