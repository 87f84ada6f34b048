package sim

import (
	"flag"
	"fmt"
	"testing"
)

var (
	flagHashes    = flag.Int("sim.hashes", 0, "TestSeedHashes: run seeds 1..N once each and print each one's schedule hash")
	flagHashesRun = flag.Int("sim.hashes.from", 1, "TestSeedHashes: the first seed")
)

// TestSeedHashes prints one line per seed (its schedule hash, steps,
// produced, acked and violations), for comparing two builds of the
// simulation: a change that must not alter the schedule (a refactoring of
// the assembly) gives the same lines. Skipped without -sim.hashes.
func TestSeedHashes(t *testing.T) {
	if *flagHashes == 0 {
		t.Skip("needs -sim.hashes=N")
	}
	for seed := uint64(*flagHashesRun); seed < uint64(*flagHashesRun+*flagHashes); seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			res, _ := runSeedWith(t, seed, *flagFaults, false, diffOpts{noStoreFaults: !*flagStore, plain: *flagPlain})
			fmt.Printf("HASH seed=%d hash=%016x steps=%d produced=%d acked=%d violations=%d\n",
				seed, res.Hash, res.Steps, res.Produced, res.Acked, len(res.Violations))
		})
	}
}
