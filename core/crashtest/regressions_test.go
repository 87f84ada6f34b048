package crashtest

// regressionSeeds are the seeds that found a bug, by flush mode (in the
// code, or in the simulation itself: every-batch 8628 and 38486, os
// 11861). They run first, every time, whatever -crash.seeds says.
var regressionSeeds = map[string][]uint64{
	"every-batch": {1, 58, 135, 391, 433, 8628, 15752, 38486},
	"interval":    {10, 583, 694, 819, 2047, 24299},
	"os":          {1, 77, 111, 233, 849, 2890, 11861},
}
