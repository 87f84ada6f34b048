// Package fetcher is the follower side of replication (Kafka's
// ReplicaFetcherManager and its fetcher threads).
//
// Manager implements core.FetcherManager: partitions this broker follows are
// grouped by (leader broker id, fetcher id = FetcherID(tp, numFetchers)) onto
// fetchers, each holding one FetchService/Fetch stream to its leader (its
// sourceBroker). A fetcher sends fetchOffset (= the replica's LEO), its
// current leader epoch, lastFetchedEpoch and log start; appends the raw
// batches it gets (CRC-checked by the log); sets the follower HW to
// min(leader HW, LEO); truncates on a divergingEpoch without applying that
// answer's records (KIP-279); handles OFFSET_OUT_OF_RANGE both ways; sets a
// FENCED_LEADER_EPOCH partition aside as failed until the next
// AddFetcherForPartitions for it; retries other partition errors after
// Config.PartitionBackoff; and reopens a broken stream with exponential
// backoff and jitter, at most a second apart (GRPCClient's channel too), so
// that a follower is back within about a second of a healed network.
//
// The package declares its two seams: LeaderClient (a stream to a leader;
// GRPCClient and InmemClient implement it, and the tests run on both) and
// Replica (the local log a fetcher writes to; NewLogReplica adapts a
// *log.Log, core may implement its own). Time comes from Config.Clock.
//
// Spans (Config.Tracer, see trace.go): Log.truncate for each truncation and
// ReplicaFetcher.openStream for each stream (re)opened, roots linked to the
// LeaderAndIsr that added the partition.
package fetcher
