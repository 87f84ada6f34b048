// Package client is replicad's Go client: a Producer, a Consumer, and the
// Client they share, which finds partitions' leaders and keeps one gRPC
// connection per broker.
//
// # Finding leaders
//
// A Client is made from bootstrap brokers (Config.Bootstrap, Kafka's
// bootstrap.servers): it asks any live one of them, or of the brokers
// their answers name, for a topic's Metadata, so the controller may be
// down. It looks a partition up again when its leader refuses a call
// (NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH,
// UNKNOWN_TOPIC_OR_PARTITION: a topic just created), cannot be reached,
// or was looked up longer than Config.MetadataMaxAge ago. Config.Broker
// sends everything to one broker instead (no lookups, no retries
// elsewhere); Config.Leaders plugs in another lookup.
//
// # Producing
//
// A Producer batches records per partition (ProducerConfig.Linger,
// BatchRecords, BatchBytes) and sends each partition's batches in order
// on one ProduceStream to its leader, up to MaxInFlight (5) unanswered.
// The partition is the record's own (ManualPartition), else its key's
// (Kafka's murmur2 of the key modulo the partition count, so a key lands
// on the partition Kafka's default partitioner would pick), else a sticky
// one that moves on round-robin when its batch closes (KIP-480).
//
// It is idempotent by default, as Kafka's producer is since 3.0: at first
// use it takes a producer ID and epoch from the cluster (InitProducerId),
// numbers each partition's records from 0, and sends every batch with the
// sequence of its first record. A batch whose outcome is unknown (a
// timeout, a reset connection, a leader change) is sent again with the
// same sequence, to the new leader if the leader moved; the leader
// appends it only if it does not hold it, and otherwise answers with the
// original offsets (BatchResult.Duplicate). So each record is appended
// once per partition, in the order produced, through retries: exactly
// once per partition, for as long as the Producer lives. What it does not
// cover: a record given to two Producers (or to one after a restart, which
// takes a new ID), transactions across partitions, consumer groups. The
// rare cases in which a record may be appended twice even so are named
// at Producer.
//
// ProducerConfig.DisableIdempotence sends plain batches (and is needed
// for acks 1 and 0): a retry after an ambiguous failure may then append a
// batch twice.
//
// A cluster whose brokers predate idempotent produce answers
// InitProducerId with Unimplemented: an idempotent Producer fails then
// with ErrIdempotenceUnsupported rather than fall back silently.
//
// # Consuming
//
// A Consumer reads committed records (below the high watermark) of one
// partition or of every partition of a topic, from the earliest offset,
// the latest, or a given one, following leader changes.
//
// # Administering
//
// An Admin calls the controllers (AdminConfig.Controllers, any of which
// may be the active one): topics, partitions, configs, elections,
// reassignments, throttles, ACLs, DescribeCluster. It reaches the active
// controller through package controllerchannel, and does not send a
// request that is not idempotent (a create, a delete, an election, a
// reassignment) again after it went out without an answer: the call fails
// with controllerchannel.ErrMaybeApplied (IsMaybeApplied), to be checked
// before a retry. ErrNoController alone means no controller acted on it.
// An answer's error code is the answer's, except in the helpers below,
// which return it as an *Error.
//
// Beyond one method per RPC, Admin has what the operator tools do with
// them:
//   - ClusterHealth (and the pure ClusterHealth function over a
//     DescribeCluster answer): healthy or not and why, as rpk cluster
//     health says it: brokers down, leaderless partitions (no leader, or
//     one on a broker that is down), under-replicated ones.
//   - ElectPreferredLeaders: the preferred leaders of a topic or of every
//     topic, PreferredElectBatch partitions to a request, each partition's
//     result reported as its batch answers (kafka-leader-election).
//   - Leaders: a LeaderSource that finds leaders in DescribeCluster, for a
//     Client given controllers instead of bootstrap brokers.
//   - Reassignment plans in kafka-reassign-partitions' JSON format
//     (ReassignPlan): GeneratePlan proposes an even assignment over given
//     brokers moving as little as it can, ValidatePlan checks a whole plan
//     before anything starts, StartReassignments starts its moves,
//     PlanProgressOf and WaitReassignments follow them (ProgressOf: complete,
//     in progress, not started), CancelReassignments cancels those in
//     flight. WaitReassignment follows one partition's move.
package client
