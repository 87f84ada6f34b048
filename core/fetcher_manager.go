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
	// IsFetching reports whether a fetcher holds the partition's fetch
	// state: false when it was never added, was removed, or is set aside as
	// failed until its next AddFetcherForPartitions. makeFollowers re-adds
	// a follower that a LeaderAndIsr finds at the same leader and epoch but
	// not fetching (Kafka's KRaft brokers do the same).
	IsFetching(t tp.TopicPartition) bool
}
