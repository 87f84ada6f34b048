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
//   - EtcdStore (OpenEtcd), shared by several controllers (`--store
//     etcd://...`), one of them elected: it implements Elector too. Every
//     write is one etcd transaction; its compare-and-sets are etcd Compares
//     on the mod revisions of the keys it read, re-read and re-checked when
//     another writer got in between. The key layout is documented in
//     etcd.go: one key per topic holding the topic with all its partitions,
//     so that a failover moving many partitions of a topic is one operation.
//
// # Election and fencing (etcd)
//
// Campaign stands in an etcd election (a key bound to a session lease of
// EtcdConfig.SessionTTL); the oldest candidate leads. Once a store has won,
// every one of its writes also compares, inside the same transaction, the
// creation revision of its election key. If the leadership was lost (lease
// expired or revoked, Resign, key deleted, store closed) that compare
// fails and so does the write, with ErrNotLeader, writing nothing: a deposed
// controller cannot change the metadata even before it notices it was
// deposed (a GC pause, a partition). Leadership.Done closes when the loss is
// seen; a crashed controller is replaced once its lease's TTL runs out.
// Before any Campaign is won, writes are not fenced (single-controller use
// and the test suite).
//
// etcd's server limits bound one transaction: --max-txn-ops (default 128
// compares, and 128 operations per branch) and --max-request-bytes (default
// 1.5 MiB). Hence an UpdatePartitions batch may touch at most 127 topics
// while elected (128 otherwise; one compare is the fence), and one topic's
// JSON, all its partitions, must fit in 1.5 MiB: some ten thousand partitions
// of three replicas. A transaction over either limit is refused whole, with an
// error naming both settings; raise them on every etcd member if needed.
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
// epoch that is not expected+1), ErrClosed and, for an elected etcd store,
// ErrNotLeader, wrapped with context naming the topic, partition or broker;
// test them with errors.Is.
//
// Values returned by a Store are copies: the caller may keep and modify them.
// Lists come sorted (brokers by id, partitions by topic then partition).
// Methods take a context and fail with its error if it is done before they
// start; a write that has started is not interrupted half-way.
package store
