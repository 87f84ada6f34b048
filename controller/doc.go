// Package controller is replicad's controller: it decides, persists and
// pushes leadership, as Kafka's controller does for its brokers.
//
// One Controller serves ControllerService (server.go). It keeps the cluster
// metadata in a store.Store and a copy in memory; every decision is made under
// one lock (Kafka's single controller event thread), persisted with
// compare-and-set transactions, and only then sent to the brokers through
// per-broker queues (package brokerqueue) that batch and retry, so a slow or
// dead broker never holds up the others.
//
// # Scale
//
// Heartbeats never wait behind a decision: a plain one is answered from a
// view published at every release of the lock and noted with an atomic
// store (liveness.go, as KRaft's BrokerHeartbeatManager keeps contact times
// apart from its event loop), and the session check takes the latest
// heartbeat whether or not the lock has seen it. Big decisions are split so
// that no hold of the lock covers a whole cluster (batches.go): a fencing's
// move and a controlled shutdown write at most Config.DecisionBatch
// partitions at a time, each write a valid state, releasing the lock
// between two; full states (activation, a returning broker) and a created
// topic's announcement are queued Config.SendBatch partitions per hold.
// Between two writes the store holds a broker fenced with part of its
// partitions moved, which the next controller finishes at activation, as
// after any crash between a fencing and its move. BenchmarkScale100k
// measures 100,000 partitions on 5 brokers.
//
// What it decides:
//
//   - Liveness. A broker registers (RegisterBroker gives it a broker epoch that
//     only grows) and heartbeats. A broker silent for the session timeout is
//     fenced: every partition it led gets a new leader from the rest of its
//     ISR (clean election, election.go), the ISRs it was in are shrunk to drop
//     it, and leader epoch and partition epoch rise. With no live ISR member
//     the partition stays leaderless, unless unclean election is switched on:
//     then the most caught-up live replica leads, and the controller says so
//     loudly. A broker that registers again is first fenced as its old
//     incarnation, then gets the full state of every partition it hosts.
//   - ISR changes. AlterPartition from a leader is checked against the leader
//     epoch, the partition epoch (INVALID_UPDATE_VERSION) and the broker epochs
//     of joining replicas (STALE_BROKER_EPOCH; fenced or stopping brokers may
//     not join), persisted, and answered with the committed state.
//   - Admin: topic creation (round-robin assignment with Kafka's replica
//     shift, leaders spread evenly) and deletion, chosen leader election,
//     preferred replica election (ElectLeaders, preferred.go), reassignment
//     (Kafka's KIP-455 steps: add the target replicas, wait until they are in
//     the ISR, switch, remove the old ones; a cancel reverts to the original
//     replicas and has the added ones delete their logs), the replication
//     throttle (stored, sent on every UpdateMetadata; throttle.go), topic
//     configs (topic_configs.go) and controlled shutdown.
//   - Producer IDs (producer_ids.go). Brokers get blocks of
//     ProducerIDBlockSize IDs for idempotent producers (Kafka's KIP-730)
//     and forward epoch bumps; both are decided by the store's own
//     transaction and answered only once stored, so no ID or epoch is
//     handed out twice, across restarts and failovers. The controller
//     keeps no copy of them.
//   - Leader balance. With AutoLeaderRebalance, every check interval the
//     partitions of a broker whose leader imbalance is above the percentage
//     go back to their preferred replica where it is in the ISR and
//     eligible, a bounded batch per check (preferred.go).
//
// # Who acts
//
// With the embedded store one controller runs and acts from the start. With
// etcd, several controllers campaign (store.Elector) and only the elected one
// acts; the others answer NOT_CONTROLLER. Each time a controller starts acting
// it bumps the persisted controller epoch, stamps it on every request, and
// sends every live broker its full state, so brokers follow the new
// controller and reject the old one (STALE_CONTROLLER_EPOCH). A controller
// that loses its election, or hears from a broker that a newer controller
// exists, stops acting at once: its queues close and its store writes are
// fenced by the store itself.
//
// # Tracing
//
// Every decision is a span (Controller.electLeader, Controller.fenceBrokers,
// Controller.alterPartition, Controller.createTopic, ...), a child of the
// caller's span when the call came over gRPC (ctlclient elect), a root when
// the controller decided on its own (a session expiry). Its events name each
// partition changed, with the old and new leader, leader epoch and ISR (at
// most MaxPartitionEvents, then a summary); AlterPartition records each ISR
// change accepted or rejected. The requests the decision queues for the
// brokers carry its span context (brokerqueue's ...Context methods): each
// is sent in a ControllerChannel.send span under the decision, and the
// gRPC client propagates it, so one election is one trace from ctlclient
// through the controller into every broker it touched.
//
// # Metrics
//
// MetricsSnapshot (metrics.go) is what the daemon's /metrics reads at each
// scrape, taken under the lock in one pass over the partitions: the
// brokers fenced, the offline, leaderless, under-min-ISR and
// under-replicated partitions, the preferred-leader imbalance, each broker
// queue's depth, and counts of the partition states committed. The
// controller keeps no other metric state.
package controller
