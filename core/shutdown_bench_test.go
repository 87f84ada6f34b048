package core

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
)

// BenchmarkShutdown times ReplicaManager.Shutdown, what a broker does after
// its controlled shutdown before it exits: flush every log, write the HW
// checkpoint, close every log (and checkpoint recovery points and log
// starts). Every partition is a leader with one record not yet flushed
// (the os flush policy, as --log-flush os leaves them). Target (issue 20):
// a broker with 30,000 logs stops within seconds. A size whose logs need
// more descriptors than RLIMIT_NOFILE allows is skipped with the reason.
func BenchmarkShutdown(b *testing.B) {
	for _, n := range []int{1000, 18000, 30000} {
		b.Run(fmt.Sprintf("logs=%d", n), func(b *testing.B) {
			var rl syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
				b.Fatal(err)
			}
			if need := uint64(n + 512); rl.Max < need {
				b.Skipf("%d logs keep ~%d descriptors open; the RLIMIT_NOFILE hard limit is %d", n, need, rl.Max)
			}
			b.StopTimer()
			for range b.N {
				rm := benchRM(b, 1, func(c *Config) {
					c.LogConfig = log.DefaultConfig()
					c.LogConfig.FlushPolicy = log.FlushOS
					if os.Getenv("SHUTDOWN_BENCH_LOG") != "" {
						c.Logger = zerolog.New(os.Stderr)
					}
				})
				states := leaderStates(n, 1)
				for i := range states {
					states[i].Replicas, states[i].ISR = []int32{1}, []int32{1}
				}
				rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: states})
				for _, st := range states {
					r := rm.Produce(context.Background(), ProduceRequest{TopicPartition: st.TopicPartition, Acks: AcksLeader,
						Records: []record.Record{{Value: []byte("x")}}})
					if r.Error != ErrNone {
						b.Fatalf("produce %v: %v", st.TopicPartition, r.Error)
					}
				}
				b.StartTimer()
				if err := rm.Shutdown(context.Background()); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
			}
		})
	}
}
