package main

import "syscall"

// maxPartitionsPerDescriptor, minDefaultMaxPartitions and
// maxDefaultMaxPartitions make --max-partitions' default from the
// descriptor limit (RLIMIT_NOFILE, which the Go runtime raises to the hard
// limit at start): 4 partitions per descriptor, at least 1,000 and at most
// 1,000,000. With the bounded file cache (--max-open-files) an idle
// partition holds no descriptor, so descriptors no longer bound the count
// directly; but the limit still says how big the machine was sized, and
// every hosted partition costs memory, a directory and its share of the
// checkpoints. Under 20,000 descriptors the default is 80,000: 30,000 logs
// per broker and 100,000 partitions RF 3 on 5 brokers (60,000 each) fit,
// and the same 100,000 on 3 brokers (100,000 each) is refused up front.
const (
	maxPartitionsPerDescriptor = 4
	minDefaultMaxPartitions    = 1_000
	maxDefaultMaxPartitions    = 1_000_000
)

// maxPartitionsDefaultRule is how the default is made, for --help.
const maxPartitionsDefaultRule = "4 per descriptor of RLIMIT_NOFILE, 1000..1000000"

// defaultMaxPartitions is --max-partitions' default (see
// maxPartitionsPerDescriptor); a variable for tests.
var defaultMaxPartitions = func() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return minDefaultMaxPartitions
	}
	return maxPartitionsFor(rl.Cur)
}

// maxPartitionsFor is the default budget under a descriptor limit.
func maxPartitionsFor(nofile uint64) int {
	if nofile > maxDefaultMaxPartitions/maxPartitionsPerDescriptor {
		return maxDefaultMaxPartitions
	}
	return max(minDefaultMaxPartitions, int(nofile)*maxPartitionsPerDescriptor)
}
