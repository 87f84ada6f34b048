package crashtest

// regressionSeeds are the seeds that found a bug, by flush mode (in the
// code, or in the simulation itself: every-batch 8628 and 38486, os
// 11861). They run first, every time, whatever -crash.seeds says.
// every-batch 58 and 2567, interval 2011, 3787 and 4577, os 95, 6507 and
// 8356 found a truncation's cut torn or zeroed under a recovery point
// checkpointed before it, which recovery took for damage at rest.
// every-batch 35081 found recovery's cut of a torn tail undone by the next
// power loss, after new records had moved the recovery point past it.
// every-batch 41, interval 23 and 118 (a future log), os 37 found a log's
// HW checkpoint entry left in its dir by a deletion or a move, and given
// to the next log of the name there after a cut (once the simulation
// stopped excusing it: the removals now rewrite the HW checkpoint).
var regressionSeeds = map[string][]uint64{
	"every-batch": {1, 41, 58, 135, 391, 433, 2567, 8628, 15752, 35081, 38486},
	"interval":    {10, 23, 118, 583, 694, 819, 2011, 2047, 3787, 4577, 24299},
	"os":          {1, 37, 77, 95, 111, 233, 849, 2890, 6507, 8356, 11861},
}
