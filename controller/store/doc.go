// Package store is the controller's metadata store: the one place where
// cluster metadata lives durably — the controller epoch, the registered
// brokers and their broker epochs, the topics with each partition's
// assignment (replicas), leader, leader epoch, ISR and partition epoch.
//
// Everything goes through the Store interface. Implementations:
//
//   - BoltStore (OpenBolt), the embedded default: one bbolt file,
//     DIR/controller.db, under `ctlclient controller run --store DIR`.
//     Every write is one bbolt transaction, fsynced before it returns.
//   - Memory (NewMemory), for unit tests of the controller logic. It keeps
//     nothing across a restart.
//   - etcd (`--store etcd://...`) is to come; it must pass the same suite.
//
// All implementations pass one shared test suite, storetest.RunSuite (and
// storetest.RunDurabilitySuite for those that survive a restart); a new
// implementation runs it from its own _test.go file.
//
// # The rules
//
// The controller epoch (BumpControllerEpoch) rises at every call and is never
// reused: a controller calls it once when it starts or wins an election, and
// stamps every request it sends with the result, so brokers can reject a
// deposed controller (STALE_CONTROLLER_EPOCH).
//
// A broker epoch is assigned by RegisterBroker from one persisted counter
// shared by all brokers: each registration gets a larger epoch than any
// registration before it, across restarts of the store. UpdateBroker (for
// fencing) is itself a compare-and-set on that epoch, so fencing an old
// incarnation never fences the broker that registered again meanwhile.
//
// Partition state changes only through UpdatePartitions, a compare-and-set on
// the partition epoch (Kafka's zkVersion): each update names the epoch it
// read and carries the new state with epoch expected+1. The whole batch is
// one transaction: either every partition is written or none is, so a
// failover that moves many leaderships at once is persisted completely
// before any broker is told about it, or not at all.
//
// Errors are the sentinels ErrNotFound, ErrExists, ErrConflict (a
// compare-and-set lost), ErrInvalid (a caller bug, such as a new partition
// epoch that is not expected+1) and ErrClosed, wrapped with context naming the
// topic, partition or broker; test them with errors.Is.
//
// Values returned by a Store are copies: the caller may keep and modify them.
// Lists come sorted (brokers by id, partitions by topic then partition).
// Methods take a context and fail with its error if it is done before they
// start; a write that has started is not interrupted half-way.
package store
