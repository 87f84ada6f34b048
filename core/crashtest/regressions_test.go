package crashtest

// regressionSeeds are the seeds that found a bug, by flush mode. They run
// first, every time, whatever -crash.seeds says.
var regressionSeeds = map[string][]uint64{
	"every-batch": {1, 58, 135, 391, 433, 15752},
	"interval":    {10, 583, 2047, 24299},
	"os":          {1, 77, 111, 2890},
}
