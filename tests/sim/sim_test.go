package sim

import (
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
)

var (
	flagSeed    = flag.Uint64("sim.seed", 0, "run only this seed (replaying a failure)")
	flagSeeds   = flag.Int("sim.seeds", 6, "fresh random seeds to run besides the fixed ones")
	flagFaults  = flag.Int("sim.faults", -1, "inject at most this many faults (-1: no limit); a shrunk failure names it")
	flagReplay  = flag.Bool("sim.replay", true, "run each seed twice and compare the schedules' hashes")
	flagShrink  = flag.Bool("sim.shrink", true, "shrink a failing seed to its shortest failing fault prefix")
	flagLog     = flag.Bool("sim.log", false, "log the cluster (zerolog, debug) to stderr")
	flagTrace   = flag.Bool("sim.trace", false, "print the schedule of each run")
	flagDiffLog = flag.String("sim.difflog", "", "TestReplayDiff: write each run's debug log (JSON, virtual time) to DIR/a.json and DIR/b.json")
	flagTime    = flag.Duration("sim.time", 0, "virtual time of the fault phase (default 20s)")
	flagOps     = flag.Bool("sim.ops", true, "schedule the operator's commands (alter-config, reassign, elections, ...)")
	flagStore   = flag.Bool("sim.storefaults", true, "schedule store faults (writes that fail, land and fail, land late, or land as the controller dies)")
	flagStrict  = flag.Bool("sim.strictdelete", false, "hold a retried first batch appended again after DeleteRecords took its first copy and the producer's state as a duplicate")
	flagPlain   = flag.Bool("sim.plain", false, "run the plain workload of issue 19's findings (one plain producer per partition, never retried) instead of the idempotent producers")
)

// fixedSeeds always run, each twice: the first few seeds, and every seed
// that found a bug (see the comments). Their replays must match (see
// mustReplay in TestSim).
var fixedSeeds = []uint64{
	1, 2, 3,
	// A joining replica's stale broker epoch left the leader's ISR expansion
	// pending forever: the replica never rejoined the ISR after healing
	// (alterpartition: partition-level STALE_BROKER_EPOCH now maps to
	// INELIGIBLE_REPLICA).
	117115516,
	// The topic grown to 4 partitions (CreatePartitions), deleted and
	// created again with 3: b2's Metadata kept the deleted topic's sim-3
	// (its metadata cache forgot no partition), so a client would send
	// records to a partition that does not exist (core's metadata cache
	// now shows a topic's current incarnation only).
	781755675,
}

// retentionSeeds run with retention in the workload (issue 22; the fixed
// seeds and the findings run without, to keep their schedules): two whose
// RunRetention deletes, and two that caught a retention check deleting
// above the HW (PlanRetention and the log's guard both reading the LEO)
// with checkLogStartRaise. Together their RunRetentions must delete.
var retentionSeeds = []uint64{524304109, 702685510, 619176527, 349401467}

// findings are the seeds that found issue 19's control-plane bugs (run
// with the main branch of the time, without their fixes), kept so that
// `make test` runs them. They run once each (their schedules were checked
// to replay when they were added: the replay check is the fresh seeds'
// job), so that the slice stays about as fast as before. noStoreFaults:
// found with -sim.storefaults=false, and run so. They run the plain
// workload (Config.Plain, -sim.plain) they were found with: the idempotent
// one makes other schedules of the same seeds.
var findings = []struct {
	seed          uint64
	noStoreFaults bool
	// idempotent: found with the idempotent workload (issue 21), and run
	// so; the others run the plain one.
	idempotent bool
}{
	// Path 1: min.insync.replicas lowered to 1 while the ELR was {2} kept
	// the stale ELR; the leader committed alone; b2, elected from the ELR
	// after heal, lacked the commits (leader completeness, acked records
	// lost).
	{919637809, false, false},
	{179910017, true, false},
	// Paths 1 and 2 together: min.insync.replicas raised to 3 while b3 was
	// shut down (the raise could not reach it), the controller died between
	// the two writes of a reassignment (the new one took the raised value
	// for the ELR at once), then lowered to 1; b2, elected from the ELR,
	// lacked acknowledged records. Passes with h-minisr's fix alone.
	{968762410, false, false},
	// Path 3: a store write that landed but returned an error left the
	// controller's memory behind its store: every later change of the
	// partition conflicted, the ISR never grew back (wedge).
	{111839926, false, false},
	{211349803, false, false},
	// ... and one where the landed ISR expansion put a replica in the
	// stored ISR that the leader never counted: an acked record missing
	// from a stored ISR member.
	{254499479, false, false},
	// Path 4: a reassignment whose completion was due but failed was never
	// completed (replicas [2 1 3], removing [3], after heal).
	{207138893, false, false},
	{970799471, false, false},
	// A topic deleted and created again while a produce for the old one was
	// on its way: the new leader appended it at 0 and lost power before its
	// next HW checkpoint, whose file still held the deleted topic's entry
	// for the name; restarted with HW 1, it counted the record as committed
	// (leader completeness, log matching). Log removals now rewrite the
	// dir's HW checkpoint without the log (logmgr's checkpointRemoval).
	{504596852, false, false},
	{795871276, true, false},
	{150560177, true, false},
	{502628584, true, false},
	{355653967, false, false},
	// A topic deleted and created again: b1 took the new topic's state
	// before its leader b3 did, b3 answered its fetch with another topic ID,
	// and b1's fetcher set sim-1 aside until a LeaderAndIsr with the same
	// leader and epoch that did not add it back: the ISR never filled.
	{244401447, false, false},
	// A topic deleted and created again while the controller was down: b1's
	// ISR shrink of the deleted sim-0, retried until the controller came
	// back, was committed on the new sim-0 (AlterPartition names the topic
	// only; both start at epochs 0); b1 ignored the answer and kept ISR
	// [1 2 3] against the store's [1 2], so b3 never rejoined (wedge). A
	// partition now withdraws a change a LeaderAndIsr or a stop replaced.
	{647001108, false, false},
	// b2, fenced and registering again, sent an ISR expansion of sim-2
	// under its old broker epoch; the controller refused it as a whole,
	// core kept it pending until a LeaderAndIsr that never came (b2 kept
	// leading at the same epoch), and b3 never rejoined. The manager now
	// retries such a request with the current epoch.
	{112384444, false, false},
	// A fenced leader of sim-0 (ISR [1] at epoch 3, min ISR 2) took a
	// lowered min.insync.replicas from an UpdateMetadata that named leader
	// 3 at epoch 5, and moved its HW over an append nobody else had: a
	// zombie now takes no topic config from a request that ends its
	// leadership (core's applyTopicConfigs).
	{325941231, false, false},
	// Issue 21, on the core before idempotent produce (no producer state;
	// failures as they show with only the v1 batch written there): a batch
	// appended at leader epoch 0 whose answer did not come back, retried
	// with the same producer ID and sequence to the leader of epoch 1,
	// appended again (duplicate, committed at offsets 0 and 3);
	{4, false, true},
	// a restarted producer (its epoch bumped) whose old instance went on
	// appending after the new one's first record: nothing fenced it
	// (reorder: generation 1's record after generation 2's);
	{11, false, true},
	// the topic deleted and created again: a producer's next batch
	// (sequence 3) was appended to the new, empty partition, where it can
	// only be an unknown producer (gap: an epoch's first record at
	// sequence 3);
	{13, false, true},
	// a producer's batch at sequence 21 appended right after its sequence
	// 19, the batch at 20 (in flight with them, then retried) not there
	// (gap), where OUT_OF_ORDER_SEQUENCE_NUMBER keeps a producer's order.
	{53, false, true},
	// The operator's DeleteRecords to an offset inside a batch left the
	// leader's log start inside it; b1, behind it, restarted its log there,
	// failed to append the batch the leader answered with (it starts below
	// that offset) and set sim-2 aside for good: the ISR never filled
	// (fetcher: an empty log takes such a batch from its base now).
	{14, false, true},
}

// summary adds up the subtests' figures for the parent test's report.
type summary struct {
	mu                      sync.Mutex
	seeds, steps, failed    int
	replays, replaysMatched int
	wall                    time.Duration
	violations              int
	// fileEvictions, fileReopens: the brokers' file caches' work.
	fileEvictions, fileReopens int64
	// fixed adds up the fixed seeds' idempotent producers.
	fixed IdempotenceStats
	// retentionRuns, retentionDeleted: the retentionSeeds' RunRetentions
	// answered, and those that deleted.
	retentionRuns, retentionDeleted int
}

func (a *IdempotenceStats) add(b IdempotenceStats) {
	a.Batches += b.Batches
	a.Retries += b.Retries
	a.RetriesAfterLeaderChange += b.RetriesAfterLeaderChange
	a.RetriesAfterTruncation += b.RetriesAfterTruncation
	a.DuplicateAnswers += b.DuplicateAnswers
	a.ReappendedAfterDelete += b.ReappendedAfterDelete
	a.Abandoned += b.Abandoned
	a.Fenced += b.Fenced
	a.EpochBumps += b.EpochBumps
	a.Resets += b.Resets
	a.IDsIssued += b.IDsIssued
	a.Restarts += b.Restarts
}

// TestSim ensures that the whole cluster (3 brokers, the controller) keeps
// its safety invariants under a seeded schedule of message delays,
// reorderings, drops, partitions, crashes with power loss, process stops,
// operator commands and store faults, and, once the faults stop, gets
// every partition a leader and a full ISR, with the controller's memory
// agreeing with its store and no reassignment pending.
func TestSim(t *testing.T) {
	type simCase struct {
		seed          uint64
		noStoreFaults bool
		replay        bool
		// mustReplay fails the seed if its replay diverges: the fixed
		// seeds are known to replay, so a divergence is a new race (chase
		// it with TestReplayDiff). A fresh seed's is only logged.
		mustReplay  bool
		plain       bool
		noRetention bool
		// retention: a retentionSeeds case, counted for the check that
		// RunRetention deleted.
		retention bool
	}
	var cases []simCase
	if *flagSeed != 0 {
		cases = append(cases, simCase{seed: *flagSeed, noStoreFaults: !*flagStore, replay: *flagReplay, plain: *flagPlain})
	} else {
		for _, seed := range fixedSeeds {
			// Without retention, which came after them: their schedules
			// stay those that retry across leader changes and truncations.
			cases = append(cases, simCase{seed: seed, noStoreFaults: !*flagStore, replay: *flagReplay, mustReplay: true, plain: *flagPlain,
				noRetention: true})
		}
		for _, seed := range retentionSeeds {
			cases = append(cases, simCase{seed: seed, noStoreFaults: !*flagStore, replay: *flagReplay, mustReplay: true, retention: !*flagPlain})
		}
		for _, f := range findings {
			// Without retention (issue 22), which came after them: their
			// schedules stay those they were found with.
			cases = append(cases, simCase{seed: f.seed, noStoreFaults: f.noStoreFaults || !*flagStore, plain: !f.idempotent, noRetention: true})
		}
		for range *flagSeeds {
			cases = append(cases, simCase{seed: rand.Uint64() % 1_000_000_000, noStoreFaults: !*flagStore, replay: *flagReplay, plain: *flagPlain})
		}
	}
	t.Logf("seeds: %v", cases)
	var sum summary
	t.Cleanup(func() {
		sum.mu.Lock()
		defer sum.mu.Unlock()
		rate := 0.0
		if sum.wall > 0 {
			rate = float64(sum.steps) / sum.wall.Seconds()
		}
		t.Logf("summary: %d seeds, %d failed, %d simulated steps, %.0f steps/s (per run, wall), %d invariant violations, replay %d/%d identical, file cache %d evictions, %d reopens",
			sum.seeds, sum.failed, sum.steps, rate, sum.violations, sum.replaysMatched, sum.replays, sum.fileEvictions, sum.fileReopens)
		if sum.seeds > 1 && (sum.fileEvictions == 0 || sum.fileReopens == 0) {
			t.Errorf("the brokers' file caches closed %d files and reopened %d: the run did not exercise them", sum.fileEvictions, sum.fileReopens)
		}
		if *flagSeed == 0 && !*flagPlain {
			t.Logf("retention seeds: %d RunRetention answered NONE, %d of them deleted", sum.retentionRuns, sum.retentionDeleted)
			if sum.retentionDeleted == 0 {
				t.Errorf("the retention seeds' RunRetentions deleted nothing: the run did not exercise retention")
			}
		}
		// The fixed seeds must retry writes across leader changes and
		// truncations: the interleavings idempotence is for.
		if *flagSeed == 0 && !*flagPlain {
			f := sum.fixed
			t.Logf("fixed seeds' idempotent producers: %+v", f)
			if f.RetriesAfterLeaderChange == 0 || f.RetriesAfterTruncation == 0 || f.Restarts == 0 || f.Fenced == 0 || f.DuplicateAnswers == 0 {
				t.Errorf("the fixed seeds retried %d writes after a leader change, %d after a truncation, restarted %d producers (%d old instances fenced) and got %d duplicate answers: each must be above 0",
					f.RetriesAfterLeaderChange, f.RetriesAfterTruncation, f.Restarts, f.Fenced, f.DuplicateAnswers)
			}
		}
	})
	for _, c := range cases {
		seed := c.seed
		name := fmt.Sprintf("seed=%d", seed)
		opts := diffOpts{noStoreFaults: c.noStoreFaults, plain: c.plain, noRetention: c.noRetention}
		storeFlag := ""
		if c.noStoreFaults {
			name += "/nostorefaults"
			storeFlag = " -sim.storefaults=false"
		}
		if c.plain {
			name += "/plain"
			storeFlag += " -sim.plain"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, wall := runSeedWith(t, seed, *flagFaults, *flagTrace, opts)
			t.Logf("seed %d: %d steps in %v (%.0f steps/s), virtual %v, %d faults, produced %d, acked %d, outcomes %v, ops %v, file cache: %d evictions, %d reopens, idempotence %+v",
				seed, res.Steps, wall.Round(time.Millisecond), float64(res.Steps)/wall.Seconds(), res.VirtualTime.Round(time.Millisecond),
				len(res.Faults), res.Produced, res.Acked, res.Errors, res.Ops, res.FileEvictions, res.FileReopens, res.Idempotence)
			sum.mu.Lock()
			if c.mustReplay {
				sum.fixed.add(res.Idempotence)
			}
			if c.retention {
				sum.retentionRuns += res.Ops["run-retention:ERROR_CODE_NONE"]
				sum.retentionDeleted += res.Ops["run-retention-deleted:ERROR_CODE_NONE"]
			}
			sum.seeds++
			sum.steps += res.Steps
			sum.wall += wall
			sum.violations += len(res.Violations)
			sum.fileEvictions += res.FileEvictions
			sum.fileReopens += res.FileReopens
			if res.Failed() {
				sum.failed++
			}
			sum.mu.Unlock()
			if c.replay {
				again, _ := runSeedWith(t, seed, *flagFaults, false, opts)
				same := again.Hash == res.Hash
				sum.mu.Lock()
				sum.replays++
				if same {
					sum.replaysMatched++
				}
				sum.mu.Unlock()
				switch {
				case !same && c.mustReplay:
					t.Errorf("seed %d: replay diverged (schedule hash %x, then %x; steps %d, then %d); where: go test ./tests/sim -run TestReplayDiff -sim.seed=%d%s -v",
						seed, res.Hash, again.Hash, res.Steps, again.Steps, seed, storeFlag)
				case !same:
					t.Logf("seed %d: replay diverged (schedule hash %x, then %x; steps %d, then %d)", seed, res.Hash, again.Hash, res.Steps, again.Steps)
				}
			}
			if !res.Failed() {
				return
			}
			for _, v := range res.Violations {
				t.Errorf("seed %d: %s", seed, v)
			}
			faults := *flagFaults
			if *flagShrink {
				faults = shrink(t, seed, res, opts)
			}
			prefix := res.Faults
			if faults >= 0 && faults < len(prefix) {
				prefix = prefix[:faults]
			}
			t.Errorf("seed %d failed; shortest failing fault prefix (%d of %d faults):\n  %s\nreplay: go test ./tests/sim -run 'TestSim$' -sim.seed=%d -sim.faults=%d%s -v",
				seed, len(prefix), len(res.Faults), strings.Join(prefix, "\n  "), seed, faults, storeFlag)
		})
	}
}

// diffOpts are TestReplayDiff's: keep the trace with the pending messages,
// and log (debug) into log instead of nowhere.
type diffOpts struct {
	keep bool
	log  io.Writer
	// noStoreFaults runs the seed without store faults.
	noStoreFaults bool
	// plain runs the plain workload (Config.Plain).
	plain bool
	// noRetention leaves retention out (Config.NoRetention).
	noRetention bool
}

// lockedBuf collects a run's log in memory: writing it to stderr as the
// run goes slows the goroutines down enough to hide the races TestReplayDiff
// chases.
type lockedBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func runSeedWith(t *testing.T, seed uint64, maxFaults int, trace bool, o diffOpts) (Result, time.Duration) {
	var res Result
	logger := zerolog.Nop()
	switch {
	case o.log != nil:
		logger = zerolog.New(o.log).Level(zerolog.DebugLevel).With().Timestamp().Logger()
	case *flagLog:
		logger = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: "15:04:05.000"}).Level(zerolog.DebugLevel).
			With().Timestamp().Uint64("seed", seed).Logger()
	}
	start := time.Now()
	synctest.Test(t, func(t *testing.T) {
		res = Run(Config{Seed: seed, MaxFaults: maxFaults, FaultTime: *flagTime, Wait: synctest.Wait, Logger: logger,
			NoOps: !*flagOps, NoStoreFaults: o.noStoreFaults, Plain: o.plain, NoRetention: o.noRetention, StrictDelete: *flagStrict,
			KeepTrace: trace || o.keep, TracePending: o.keep})
	})
	wall := time.Since(start)
	if trace {
		for _, l := range res.Trace {
			t.Log(l)
		}
	}
	return res, wall
}

// shrink finds the fewest faults of the seed's schedule that still fail,
// by binary search on the number of fault steps kept.
func shrink(t *testing.T, seed uint64, failed Result, o diffOpts) int {
	lo, hi := 0, len(failed.Faults)
	for lo < hi {
		mid := (lo + hi) / 2
		res, _ := runSeedWith(t, seed, mid, false, o)
		if res.Failed() {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi
}

// TestReplayDiff runs -sim.seed twice and prints where the schedules part
// (a tool for chasing non-determinism; skipped without -sim.seed), with the
// messages pending at each step; -sim.difflog=DIR keeps both runs' debug
// logs to compare what the nodes did.
func TestReplayDiff(t *testing.T) {
	if *flagSeed == 0 {
		t.Skip("needs -sim.seed")
	}
	oa, ob := diffOpts{keep: true}, diffOpts{keep: true}
	var la, lb lockedBuf
	if *flagDiffLog != "" {
		oa.log, ob.log = &la, &lb
	}
	oa.noStoreFaults, ob.noStoreFaults = !*flagStore, !*flagStore
	oa.plain, ob.plain = *flagPlain, *flagPlain
	a, _ := runSeedWith(t, *flagSeed, *flagFaults, false, oa)
	b, _ := runSeedWith(t, *flagSeed, *flagFaults, false, ob)
	if *flagDiffLog != "" {
		for name, l := range map[string]*lockedBuf{"a.json": &la, "b.json": &lb} {
			if err := os.WriteFile(filepath.Join(*flagDiffLog, name), []byte(l.b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("the runs' logs: %s and %s", filepath.Join(*flagDiffLog, "a.json"), filepath.Join(*flagDiffLog, "b.json"))
	}
	for i := range min(len(a.Trace), len(b.Trace)) {
		if a.Trace[i] != b.Trace[i] {
			for j := max(0, i-9); j < min(i+15, len(a.Trace), len(b.Trace)); j++ {
				t.Logf("%d: %-60s | %s", j, a.Trace[j], b.Trace[j])
			}
			t.Fatalf("the runs part at trace line %d (pending lines included)", i)
		}
	}
	t.Logf("identical (%d steps)", a.Steps)
}
