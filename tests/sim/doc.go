// Package sim is a deterministic simulation of a whole replicad cluster in
// one test process: three brokers (server.Broker, the assembly cmd/replicad
// runs: core.ReplicaManager, the fetcher managers, the AlterPartition
// sender, the producer ID client and the broker session) and the
// controller (with a Memory store
// kept across its restarts as its durable disk), under testing/synctest's
// fake clock. Run it with
//
//	go test ./tests/sim -run 'TestSim$' -v                 # fixed + 6 fresh seeds
//	go test ./tests/sim -run 'TestSim$' -sim.seed=N -v     # replay one seed
//	make sim SEEDS=500                                        # many seeds
//
// # Nodes
//
// A broker node owns a crashfs disk that outlives its lives; each start
// builds a server.Broker afresh on it, with server.BrokerConfig's injection
// points set to the simulation's disk, network, tracer (none) and seeded
// jitter (BootID changes with every power cut,
// so a broker's previous life counts as one that may have lost data). A
// crash cuts the power (crashfs.CutPower: what was not fsynced may be lost,
// page by page), takes the node off the network and stops its components in
// the background; a restart waits for that and reopens the logs from what
// the disk kept. The controller's crash fences its store view, so a dead
// process writes nothing, and a restart runs a new controller on the same
// store (a new controller epoch). A broker may also stop without a power
// loss (a killed process on a machine that stays up, or the end of a
// controlled shutdown): its disk keeps every write and it restarts clean,
// which keeps it in the ELRs it was in.
//
// # Network
//
// Every message goes through network: the product's own seams
// (controller.Config.DialBroker, and server.Network's DialController,
// LeaderClient and Serve) are given clients that
// queue each request on a pipe, one direction of one connection kind
// between two nodes ("b1>b2/fetch.b1-3"), FIFO as a gRPC stream or
// connection is. Handlers are the product's: service's ReplicaManagerService
// handlers (controller guard included), rm.FetchMessages for fetch streams,
// the controller's gRPC methods, and rm.Produce. Nothing moves unless the
// scheduler delivers it. Dropping a message breaks its connection (callers
// see Unavailable, handlers are cancelled), as a reset TCP connection does;
// a partition breaks the connections between two nodes and refuses new
// ones until healed. All waits are on channels, so a goroutine waiting for
// the network is durably blocked and synctest.Wait returns.
//
// # Scheduler
//
// The scheduler works in steps: synctest.Wait until every goroutine is
// blocked, check the invariants, then choose with a seeded PCG among the
// heads of the pipes (sorted by pipe key), letting virtual time pass
// (sleeping in the bubble: the next timers fire), or a fault (drop,
// partition, heal, crash or restart a broker or the controller). The
// product's backoff jitter is a fixed midpoint (seams in brokersession,
// brokerqueue, the fetcher), as goroutines would draw from a shared source
// in whatever order they run. Each step's action and virtual time go into
// an FNV hash: one seed, one schedule, which TestSim checks by running each
// seed twice (-sim.replay).
//
// synctest makes time deterministic, not the order in which goroutines
// that are runnable together run. Where that order decides what is sent,
// the scheduler takes the decision back to a point where the cluster is
// idle:
//   - a start (the controller's, a broker's) is let run until idle before
//     the next one, so that the controller's first requests find a broker
//     that restarts with it either always up or always down;
//   - ISR changes go through an isrGate, which hands them to the broker's
//     AlterPartition manager one at a time in TopicPartition order, idle in
//     between: the manager batches whatever is queued when its goroutine
//     wakes, which otherwise races the submitters (so, under the sim, changes
//     submitted together while the manager is idle go out one request each;
//     those queued while one is in flight are batched as in the product);
//   - a producer asks the scheduler for the partition's leader instead of
//     reading the store itself, when its timer may fire at the instant a
//     controller timer moves leadership.
//   - the controller's broker queues take what waits into a request only
//     at a step, idle (queueGate, through the queues' Gate seam): a queue
//     merges consecutive calls of one kind, and its goroutine, woken by
//     the first call or by the answer to the request before, raced a
//     second call from a decision that queues two in a row (a
//     registration's ELR change, then the live-broker list) or from a
//     goroutine woken by that same answer (a Flush waiter, an operator's
//     command waiting for delivery): one run sent one UpdateMetadata, the
//     next two.
//
// # Operator and store faults
//
// The scheduler also plays the operator (operator.go): at a step it may
// start one admin command (one at a time), sent over the network to the
// controller's own gRPC methods, as ctlclient sends them: min.insync.replicas
// set to 1, 2 or 3 or deleted on the topic; a reassignment to 2 or 3 of the
// brokers in a random order (a replication factor change, or a reorder) and
// its cancel; a preferred election, or the election of a chosen broker; a
// broker's controlled shutdown, after which it stops and restarts, maybe
// with another --min-insync-replicas; the topic deleted and created again;
// the replication throttle set or removed; partitions added to the topic
// (CreatePartitions: one or two more, the count it has, or validate only;
// each partition added gets its idempotent producers at the next step, see
// partitions.go). Once the faults stop, the
// operator creates the topic again if it is missing and removes the
// throttle.
//
// The controller's store (the Memory store, through each life's
// fencedStore) gets faults of its own, armed by the scheduler for the next
// write or the one after (the second write of an operation): the write
// fails with nothing written; it lands and returns an error (etcd's
// "request timed out"); it lands after the caller's deadline
// (context.DeadlineExceeded; the time itself cannot pass there, see
// fencedStore.write); or it lands and the controller dies before it hears,
// a failover between the writes of one operation. What fired is recorded at
// the next step, so it is part of the schedule.
//
// -sim.ops=false and -sim.storefaults=false leave either out, to tell which
// one a failure needs.
//
// # Workload: idempotent producers
//
// Each partition has Config.Producers (2) idempotent producers
// (producer.go). A producer gets its producer ID from InitProducerId at a
// broker, which hands it out of a block the controller allocated
// (AllocateProducerIds: a store write, under the store faults), and writes
// acks=all batches of one or two records carrying (producer ID, epoch, base
// sequence), up to three batches in flight on one connection, sent in
// sequence order. Every ambiguous outcome (a timeout, a reset connection,
// NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS, any error) is retried with
// the same producer, epoch and sequence, to whichever broker leads by then,
// with Kafka's exponential backoff (100 ms to 1 s), until it is answered
// NONE, a fresh append or a duplicate. UNKNOWN_PRODUCER_ID, or
// OUT_OF_ORDER_SEQUENCE_NUMBER on the oldest unacknowledged batch (the
// partition lost the producer's state), gives the pending batches up
// (ambiguous) and bumps the epoch (InitProducerId with the ID:
// BumpProducerEpoch at the controller), from sequence 0. The scheduler
// restarts a producer now and then (fault "restart producer"): the new
// instance bumps the ID's epoch while the old one goes on until a
// partition fences it (INVALID_PRODUCER_EPOCH). The operator also deletes
// the head of a partition (DeleteRecords at its leader, up to the HW or to
// half of it), which may take the producers' state with it. Result's
// Idempotence counts what the producers did, among it the retries that
// went out under another leader epoch than the attempt before, or after a
// replica truncated its log: TestSim demands some of each, over the fixed
// seeds.
//
// The findings of issue 19 (and -sim.plain) run the workload they were
// found with, so that their schedules stay what they were: one plain
// producer per partition, one record in flight, never retried, and none
// of the faults above.
//
// # Invariants
//
// After every step (checker): leader completeness (the leader the
// controller elected holds every record below the highest HW seen); log
// matching (every replica's records below its HW are the committed log);
// a leader's HW never moves back within one leader epoch of one life; an
// acknowledged acks=all record (the leader answered NONE) is on every ISR
// member the controller records whose log is open, with LEO past it; the
// ISR is within the replicas and holds the leader; one leader per
// (partition, leader epoch), as the brokers and as the store say;
// controller and broker epochs only grow. For the idempotent producers,
// over the committed log (every record seen below a replica's HW, kept past
// deletions): no record at two offsets (a retry appended again; an
// abandoned record may be there once); within one producer ID, its records
// in the order it wrote them, none of a fenced instance after one of the
// instance that replaced it, an epoch's sequence from 0 without a gap, each
// in a v1 batch carrying the producer ID, epoch and sequence it was sent
// with; every acknowledged record at its offset, a duplicate answer's
// original offset included, and no record acknowledged at two offsets;
// InitProducerId never hands out one (ID, epoch) twice, and a produce never
// refuses the newest instance's epoch. One duplicate is let through and
// counted (Idempotence.ReappendedAfterDelete; -sim.strictdelete fails on
// it): a retried first batch whose first copy, and with it the producer's
// state, a DeleteRecords took before the retry came, appended again (the
// partition cannot tell it from a new producer's first batch). All of these are per topic
// incarnation (the topic ID): a deleted topic's records are not lost, and
// the topic created again starts at leader epoch 0. Within one topic ID the
// store's partitions are numbered 0..n-1 and n never goes down (added
// partitions land whole, and none is lost through a failover), and the
// operator's CreatePartitions answers agree with the store. After the
// faults stop and every node is back, within Config.HealTime: every
// partition gets a leader and a full ISR, the controller's memory agrees
// with its store (PartitionStates: a controller whose copy fell behind
// refuses every later change of the partition, a wedge), every live
// broker's Metadata shows the topic's partitions as the store holds them,
// and every reassignment has completed or been cancelled.
//
// # Replay and shrinking
//
// A failing seed prints the command that replays it and the shortest
// failing prefix of its fault schedule, found by replaying with
// -sim.faults=K (faults after the K-th are not injected) in a binary search
// on K. TestReplayDiff prints where two runs of one seed part, to chase
// non-determinism.
package sim
