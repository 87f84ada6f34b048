package core

import (
	"context"

	"github.com/replicad/replicad/core/tp"
)

// InitialFetchState is where a follower starts fetching a partition.
type InitialFetchState struct {
	Leader      Broker
	LeaderEpoch int32
	InitOffset  int64
	// TopicID is the partition's topic ID, sent with every fetch ("": none).
	TopicID string
}

// FetcherManager is the follower side of replication as the replica manager
// sees it (Kafka's ReplicaFetcherManager). The fetcher package implements it.
type FetcherManager interface {
	AddFetcherForPartitions(ctx context.Context, partitions map[tp.TopicPartition]InitialFetchState)
	RemoveFetcherForPartitions(partitions []tp.TopicPartition)
	ShutdownIdleFetchers()
	Shutdown()
}
