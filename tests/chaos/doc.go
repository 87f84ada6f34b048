// Package chaos is replicad's Jepsen-style test: a real cluster (a
// controller, or three on a real three-member etcd, and three or five
// brokers, each its own process) under a concurrent acks=all workload and
// a seeded nemesis, then a checker that reads every replica.
//
// The parts:
//
//   - Network (proxy.go): every connection between the processes goes
//     through a TCP proxy, one listener per node, the address the node
//     advertises. The proxy attributes each accepted connection to the
//     process that opened it (its socket's inode, found in /proc), so a
//     fault applies to one directed link: bytes from A to B are held while
//     A->B is cut, or delayed. Held, not dropped: after the heal they
//     arrive, as TCP retransmission would bring them. A refused link
//     instead resets every connection between the two at once, as a
//     closed port does.
//   - Cluster (cluster.go, proc.go): starts, kills (-9), pauses (SIGSTOP)
//     and restarts the processes, each process's stderr appended to its
//     log file in the run folder; crash markers (panic, fatal error, data
//     race) and exits nobody asked for are problems. As root, each
//     broker's first log dir is a 64 MiB tmpfs, for disk-full faults.
//   - Workload (workload.go, producer.go): idempotent producers (issue
//     21), each with a producer ID from InitProducerId, writing every
//     partition one acks=all record at a time per partition; each value
//     names its producer, the producer's incarnation and the record's
//     index (history.go). A timeout, a leader change or a reset
//     connection is retried with the same producer ID, epoch and
//     sequence until the cluster acknowledges the record (NONE, with its
//     offset) or refuses it. A consumer per partition reads from the
//     leader. -chaos.noidem sends plain batches retried as they are.
//   - Nemesis (nemesis.go): the schedule is drawn from the seed alone
//     (Schedule), so a seed replays the same faults; a fault names "the
//     leader of partition 2", which the cluster resolves when it runs. The
//     default mix keeps at most one broker faulty at a time, and waits
//     after each heal until the cluster is whole and every partition takes
//     writes again; the harsh mix also takes two brokers down at once.
//     During half the fault rounds (a stream of its own) a producer
//     restarts with its producer ID: the epoch is bumped, the new
//     instance takes over, and the old one sends on for 1.5 s, to be
//     fenced (INVALID_PRODUCER_EPOCH) where the new one wrote.
//   - Extra rounds (operator.go), from a stream of their own so a seed's
//     faults stay the same: operator actions (min.insync.replicas up and
//     down, reassign and cancel with an RF change under a throttle,
//     chosen and preferred elections, controlled shutdown, delete and
//     re-create of a scratch topic) and long cuts of a leader from its
//     followers, silent or refused.
//   - Checker (checker.go): after the final heal and full ISRs, every
//     partition is read from its leader and then from every other replica
//     made leader in turn; acknowledged writes lost or moved, replicas
//     differing below the HW, consumer reads the final log contradicts,
//     duplicates (a producer's record twice, acknowledged or not: a retry
//     the cluster appended again), a producer's records out of the order
//     it sent them, a record of an older producer epoch after a newer
//     one's, and the longest time without an acknowledgement (bounded
//     in the default mix outside controller outages, long cuts and min ISR
//     3) are reported; so are operator actions the cluster did not carry
//     out, a controller decision fencing more than one broker (default
//     mix), and full ISRs coming back more than HealBound after the heal
//     of a network fault. A record not acknowledged (in doubt, refused,
//     or its instance fenced) may be absent, but not twice.
//
// Run writes summary.txt and history.jsonl (every produce attempt and
// fault) to the run folder beside the process logs. TestChaos runs a short
// fixed-seed and random-seed mix in `make test`; `make chaos ROUNDS=N
// SEED=S [ETCD=1] [HARSH=1] [BROKERS=5] [EXTRA=P] [EVERY=1] [RESTARTS=P]
// [NOIDEM=1]` runs as long
// as asked.
package chaos
