package core_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicad/replicad/core"
)

// RunRetention during a move to another log dir: the check runs on
// whichever log is current (a swap in between makes it plan again), its
// answers are ones the contract names, and what it deleted never comes
// back with the future log swapped in.
func TestRunRetentionDuringALogDirMove(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	var rm *core.ReplicaManager
	alter := alterFetchers(t, &rm)
	openRM(t, dirs, alter, &rm)
	defer rm.Shutdown(context.Background())
	resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerID: 0, ControllerEpoch: 1,
		PartitionStates: []core.PartitionState{{TopicPartition: moved, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1,
			ISR: []int32{1}, Replicas: []int32{1}, IsNew: true, TopicConfigVersion: 1,
			TopicConfigs: map[string]string{"segment.bytes": "1024", "retention.bytes": "4096"}}}})
	if c := resp.PartitionErrors[0].Error; c != core.ErrNone {
		t.Fatalf("LeaderAndIsr: %s", c)
	}
	dest := dirs[0]
	if info(t, rm).LogDir == dest {
		dest = dirs[1]
	}
	produceNumbered(t, rm, 300)
	var deletedTo atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := tryProduce(rm, strings.Repeat("x", 100), strings.Repeat("y", 100)); err != nil {
				t.Error(err)
				return
			}
			for _, r := range rm.RunRetention(context.Background(), moved.Topic, nil).Results {
				if !slices.Contains([]core.ErrorCode{core.ErrNone, core.ErrNotLeaderOrFollower, core.ErrOffsetOutOfRange}, r.Error) {
					t.Errorf("run retention during the move: %+v", r)
				}
				if r.Error == core.ErrNone && r.DeletedSegments > 0 {
					deletedTo.Store(max(deletedTo.Load(), r.LogStartAfter))
				}
			}
		}
	})
	if errs := rm.AlterReplicaLogDirs(context.Background(), []core.AlterReplicaLogDir{{TopicPartition: moved, LogDir: dest}}); errs[0].Error != core.ErrNone {
		t.Fatalf("alter: %s", errs[0].Error)
	}
	waitMoved(t, rm, dest)
	// A few more checks on the moved log.
	deadline := time.Now().Add(5 * time.Second)
	for deletedTo.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	in := info(t, rm)
	if d := deletedTo.Load(); d == 0 || in.LogStartOffset < d {
		t.Fatalf("log start %d after the move, retention deleted below %d: they came back (or nothing was deleted)", in.LogStartOffset, d)
	}
	if res := rm.Consume(context.Background(), core.ConsumeRequest{TopicPartition: moved, Offset: in.LogStartOffset - 1}); res.Error != core.ErrOffsetOutOfRange {
		t.Fatalf("consume below the log start after the move: %s", res.Error)
	}
	if res := rm.RunRetention(context.Background(), moved.Topic, nil).Results; len(res) != 1 || res[0].Error != core.ErrNone {
		t.Fatalf("run retention on the moved log: %+v", res)
	}
}
