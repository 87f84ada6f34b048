// Package core is replicad's replica state machine: the ReplicaManager that
// handles the controller's LeaderAndIsr, UpdateMetadata and StopReplica
// requests, the Partition objects that become leader or follower, the high
// watermark (HW) and its checkpoint, and produce/consume on a leader. It
// keeps the cluster view those requests give (metadata_cache.go), which the
// Metadata RPC answers clients with so they find leaders without the
// controller (metadata.go).
//
// It follows Kafka's broker-side ReplicaManager and Partition (see
// seeds/000_609ad5baec433afe.txt and SPEC.md's "Semantics"): becomeLeaderOrFollower
// in three phases under one state-change lock, makeLeaders / makeFollowers,
// Partition.makeLeader / makeFollower, the HW checkpoint loop.
//
// On a leader, FetchMessages (fetch.go) answers followers: leader epoch
// fencing, KIP-279 diverging epochs, out-of-range bounds, raw batches up to
// the LEO, and updateFollowerFetchState, which may expand the ISR and move the
// HW; replicas a reassignment is adding read within the replication throttle
// the controller sets until they join the ISR (throttle.go); no other
// follower waits on it. The ISR shrink check (isr.go) runs every replica-lag-time-max / 2. ISR
// changes go through an IsrChanger (StandaloneIsrChanger without a
// controller), one in flight per partition.
//
// The package knows nothing of gRPC or the network. Its collaborators come in
// through Config: a clock (tests use clock.Manual and never sleep), the log
// dirs (through core/logmgr), a FetcherManager that the fetcher package
// implements, and a logger.
//
// Locks, always taken in this order: ReplicaManager.checkpointMu (one HW
// checkpoint write, or one log dir swap, at a time) -> ReplicaManager.stateChangeMu (one
// LeaderAndIsr / StopReplica at a time) -> ReplicaManager.partitionsMu (the map
// of hosted partitions) -> Partition.mu (a partition's leader and ISR state).
// No lock is held across a network call, nor across IsrChanger.Submit, whose
// answer takes Partition.mu. ReplicaManager.brokerEpochsMu, the metadata
// cache's mutex, the throttle's tokenBucket.mu and each notifier's mutex are
// leaves: nothing is taken while they are held.
//
// Every state change is traced (Config.Tracer; see trace.go for the span
// names, the replicad.* attributes and the per-partition span cap) and
// logged by a dedicated logger=state.change logger (Kafka's
// stateChangeLogger) at the seed's points and levels: a request's summary
// at info, each partition's steps at trace, what is ignored at warn (debug
// for a repeated leader epoch), failures at error; every line carries
// controller_id, controller_epoch and, when traced, trace_id.
package core
