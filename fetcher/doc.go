// Package fetcher is the follower side of replication (Kafka's
// ReplicaFetcherManager and its fetcher threads): partitions this broker
// follows are grouped by (leader endpoint, fetcher id) onto fetchers, each
// holding one FetchService/Fetch stream to its leader.
//
// So far it holds the grouping rule, FetcherID; the fetchers themselves arrive
// with the replication work. Until then the replica manager runs without a
// FetcherManager and followers do not fetch.
package fetcher
