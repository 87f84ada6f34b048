// Package sim is a deterministic simulation of a whole replicad cluster in
// one test process: three brokers (core.ReplicaManager, the fetcher manager,
// the AlterPartition sender and the broker session, wired as
// cmd/replicad/main.go wires them) and the controller (with a Memory store
// kept across its restarts as its durable disk), under testing/synctest's
// fake clock. Run it with
//
//	go test ./internal/sim -run 'TestSim$' -v                 # fixed + 6 fresh seeds
//	go test ./internal/sim -run 'TestSim$' -sim.seed=N -v     # replay one seed
//	make sim SEEDS=500                                        # many seeds
//
// # Nodes
//
// A broker node owns a crashfs disk that outlives its lives; each start
// builds every component afresh on it (BootID changes with every power cut,
// so a broker's previous life counts as one that may have lost data). A
// crash cuts the power (crashfs.CutPower: what was not fsynced may be lost,
// page by page), takes the node off the network and stops its components in
// the background; a restart waits for that and reopens the logs from what
// the disk kept. The controller's crash fences its store view, so a dead
// process writes nothing, and a restart runs a new controller on the same
// store (a new controller epoch).
//
// # Network
//
// Every message goes through network: the product's own seams
// (controller.Config.DialBroker, brokersession.Config.Dial,
// alterpartition.Config.Dial, fetcher.LeaderClient) are given clients that
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
// controller and broker epochs only grow. After the faults stop and every
// node is back: every partition gets a leader and a full ISR within
// Config.HealTime.
//
// # Replay and shrinking
//
// A failing seed prints the command that replays it and the shortest
// failing prefix of its fault schedule, found by replaying with
// -sim.faults=K (faults after the K-th are not injected) in a binary search
// on K. TestReplayDiff prints where two runs of one seed part, to chase
// non-determinism.
package sim
