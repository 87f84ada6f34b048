package server

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

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
//
// The gRPC client it returns, nil with an injected Network.LeaderClient,
// is the caller's to close after the manager's shutdown.
func newFetcherManager(cfg BrokerConfig, logger zerolog.Logger, tc *tlsconf.TLS, rm **core.ReplicaManager, brokerEpoch func() int64, tracers trace.TracerProvider) (*fetcher.Manager, *fetcher.GRPCClient, error) {
	var client *fetcher.GRPCClient
	leaders := cfg.Network.LeaderClient
	if leaders == nil {
		// The credentials replace the client's default (insecure) ones.
		client = fetcher.NewGRPCClientTracing(cfg.TraceDataPlane, tc.DialOptions(tlsconf.Roles{Peer: "leader", Self: "this broker"})...)
		leaders = client
	}
	m, err := fetcher.NewManager(fetcher.Config{
		BrokerID:    cfg.BrokerID,
		BrokerEpoch: brokerEpoch,
		NumFetchers: cfg.NumReplicaFetchers,
		Client:      leaders,
		Replicas: fetcher.ReplicasFunc(func(t tp.TopicPartition) (fetcher.Replica, bool) {
			l, leaderEpoch, ok := (*rm).FollowerLog(t)
			if !ok {
				return nil, false
			}
			return fetcher.NewLogReplica(l, leaderEpoch), true
		}),
		Rand:   cfg.Random.Float64,
		Logger: logger.With().Str("component", "fetcher").Logger(),
		Tracer: tracers.Tracer("github.com/replicad/replicad/fetcher"),
	})
	if err != nil {
		if client != nil {
			_ = client.Close()
		}
		return nil, nil, err
	}
	return m, client, nil
}

// newAlterLogDirsManager builds the alter-log-dirs side (Kafka's
// ReplicaAlterLogDirsManager): a second fetcher manager whose source is this
// broker's own current logs, read in process (no network), and whose
// replicas are the future logs of replicas being moved between log dirs.
func newAlterLogDirsManager(cfg BrokerConfig, logger zerolog.Logger, rm **core.ReplicaManager, tracers trace.TracerProvider) (*fetcher.Manager, error) {
	return fetcher.NewManager(fetcher.Config{
		BrokerID: cfg.BrokerID,
		Client: fetcher.NewLocalClient(cfg.BrokerID, func(ctx context.Context, req core.FetchRequest) core.FetchResponse {
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
		Tracer: tracers.Tracer("github.com/replicad/replicad/fetcher/alter-log-dirs"),
	})
}
