package main

import (
	"context"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/fetcher"
)

// newFetcherManager builds the follower side of replication: fetchers stream
// from leaders over gRPC and append into the logs this broker follows. The
// replica manager is created after it (it takes the manager in its config),
// so the lookup reads it through rm, set before any fetcher starts: fetchers
// start only when the replica manager adds partitions. Every fetch carries
// brokerEpoch's current value (nil: 0, standalone).
func newFetcherManager(cfg config, logger zerolog.Logger, rm **core.ReplicaManager, brokerEpoch func() int64) (*fetcher.Manager, *fetcher.GRPCClient, error) {
	client := fetcher.NewGRPCClientTracing(cfg.traceDataPlane)
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
			return checkpointingReplica{Replica: fetcher.NewLogReplica(l, leaderEpoch),
				checkpoint: func() error { return (*rm).CheckpointAfterTruncation(t) }}, true
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
			// A future log truncated (its current log was) must have its
			// lowered recovery point checkpointed too: Open recovers future
			// logs from their dir's checkpoint like current ones.
			return checkpointingReplica{Replica: fetcher.NewLogReplica(l, leaderEpoch),
				checkpoint: func() error { return (*rm).CheckpointFutureAfterTruncation(t) }}, true
		}),
		Logger: logger.With().Str("component", "alter-log-dirs").Logger(),
		Tracer: otel.Tracer("github.com/replicad/replicad/fetcher/alter-log-dirs"),
	})
}

// checkpointingReplica writes the log dir's recovery-point checkpoint after
// every truncation of a follower's log, or of a future log being filled by the
// alter-log-dirs fetcher, as Kafka's LogManager.truncateTo does:
// a truncation lowers the recovery point in memory only, and a crash before
// the next periodic checkpoint would otherwise make recovery trust bytes
// appended after the truncation that never reached the disk.
type checkpointingReplica struct {
	fetcher.Replica
	checkpoint func() error
}

func (r checkpointingReplica) TruncateTo(offset int64) error {
	if err := r.Replica.TruncateTo(offset); err != nil {
		return err
	}
	return r.checkpoint()
}

func (r checkpointingReplica) TruncateFullyAndStartAt(offset int64) error {
	if err := r.Replica.TruncateFullyAndStartAt(offset); err != nil {
		return err
	}
	return r.checkpoint()
}
