package crashtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"path"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// A topic deleted and created again before the next periodic checkpoint:
// the dir's checkpoint files are keyed by partition name, not topic ID, so
// an entry the deleted topic's log left there would be the new log's after
// a power cut. The simulation found it for the HW (tests/sim seed
// 504596852 and others): the new leader appended a record it never
// committed, lost power, and came back with HW min(old entry, LEO) = 1,
// counting the record as committed. The deletion now rewrites the HW
// checkpoint as well as the recovery-point and log-start ones (which it
// already did) before it is answered.
func TestRecreatedTopicInheritsNoCheckpointOfTheDeletedOne(t *testing.T) {
	const (
		oldTopic = "vXbx7Hc8TC2-LWVSwTLY7g"
		newTopic = "AQIDBAUGBwgJCgsMDQ4PEA"
		dir      = "/data"
	)
	t0 := tp.TopicPartition{Topic: "orders", Partition: 0}
	ctx := context.Background()
	fsys := crashfs.New()
	clk := clock.NewManual(time.Unix(1_700_000_000, 0))
	open := func(fsys *crashfs.FS) *core.ReplicaManager {
		rm, err := core.NewReplicaManager(core.Config{BrokerID: 1, LogDirs: []string{dir}, FS: fsys,
			LogConfig: log.Config{FlushPolicy: log.FlushEveryBatch}, Clock: clk, Logger: zerolog.Nop(),
			HWCheckpointInterval: time.Second, ReplicaLagTimeMax: time.Hour, RetentionCheckInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return rm
	}
	lead := func(rm *core.ReplicaManager, topicID string, epoch int32, isr []int32, isNew bool) {
		t.Helper()
		resp := rm.BecomeLeaderOrFollower(ctx, core.LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1,
			PartitionStates: []core.PartitionState{{TopicPartition: t0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: epoch,
				Replicas: isr, ISR: isr, IsNew: isNew, TopicID: topicID}}})
		if resp.Error != core.ErrNone || resp.PartitionErrors[0].Error != core.ErrNone {
			t.Fatalf("LeaderAndIsr: %+v", resp)
		}
	}
	produce := func(rm *core.ReplicaManager, acks int, v string) {
		t.Helper()
		r := rm.Produce(ctx, core.ProduceRequest{TopicPartition: t0, Acks: acks, Timeout: 10 * time.Second,
			Records: []record.Record{{Value: []byte(v)}}})
		if r.Error != core.ErrNone {
			t.Fatalf("produce %q: %+v", v, r)
		}
	}
	checkpoints := func(fsys *crashfs.FS) (hw, rp, start map[tp.TopicPartition]int64) {
		t.Helper()
		var out [3]map[tp.TopicPartition]int64
		for i, name := range []string{logmgr.ReplicationOffsetCheckpoint, logmgr.RecoveryPointCheckpoint, logmgr.LogStartOffsetCheckpoint} {
			m, err := checkpoint.ReadOffsets(fsys, path.Join(dir, name))
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			out[i] = m
		}
		return out[0], out[1], out[2]
	}

	// The old topic: five committed records, the first two deleted, and
	// every checkpoint written by the periodic work.
	rm := open(fsys)
	lead(rm, oldTopic, 0, []int32{1}, true)
	for _, v := range []string{"a", "b", "c", "d", "e"} {
		produce(rm, core.AcksAll, v)
	}
	if r := rm.DeleteRecords(ctx, core.DeleteRecordsRequest{Partitions: []core.DeleteRecordsPartition{{TopicPartition: t0, Offset: 2}}}); r.Partitions[0].Error != core.ErrNone {
		t.Fatalf("delete records: %+v", r)
	}
	clk.Advance(time.Second)
	if hw, rp, start := checkpoints(fsys); hw[t0] != 5 || rp[t0] != 5 || start[t0] != 2 {
		t.Fatalf("the old topic's checkpoints: HW %d, recovery point %d, log start %d; want 5, 5, 2", hw[t0], rp[t0], start[t0])
	}

	// Deleted, and created again with a follower that never fetches: the
	// new leader appends (and fsyncs) a record it does not commit. The
	// power goes before the next periodic checkpoint.
	if r := rm.StopReplicas(ctx, core.StopReplicaRequest{ControllerID: 100, ControllerEpoch: 1,
		Partitions: []core.StopReplicaPartition{{TopicPartition: t0, LeaderEpoch: core.NoEpoch, Delete: true, TopicID: oldTopic}}}); r.Error != core.ErrNone || r.PartitionErrors[0].Error != core.ErrNone {
		t.Fatalf("StopReplica: %+v", r)
	}
	lead(rm, newTopic, 0, []int32{1, 2}, true)
	produce(rm, core.AcksLeader, "uncommitted")
	after := fsys.CutPower(rand.New(rand.NewPCG(1, 2)))
	if err := rm.Shutdown(ctx); err != nil && !errors.Is(err, crashfs.ErrPowerCut) {
		t.Log(err)
	}

	hw, rp, start := checkpoints(after)
	if v, ok := hw[t0]; ok && v > 0 {
		t.Errorf("after the power cut, the HW checkpoint gives the new log %d: the deleted topic's entry", v)
	}
	if v, ok := rp[t0]; ok && v > 1 {
		t.Errorf("after the power cut, the recovery-point checkpoint gives the new log %d: the deleted topic's entry", v)
	}
	if v, ok := start[t0]; ok && v > 0 {
		t.Errorf("after the power cut, the log-start checkpoint gives the new log %d: the deleted topic's entry", v)
	}

	rm2 := open(after)
	defer func() {
		if err := rm2.Shutdown(ctx); err != nil {
			t.Error(err)
		}
	}()
	lead(rm2, newTopic, 1, []int32{1, 2}, false)
	for _, p := range rm2.Describe(t0.Topic, &t0.Partition).Partitions {
		if p.LogEndOffset != 1 {
			t.Fatalf("the new log ends at %d after the power cut, want 1 (its fsynced record)", p.LogEndOffset)
		}
		if p.HighWatermark != 0 || p.LogStartOffset != 0 {
			t.Errorf("the new topic's log restarted with HW %d and log start %d, want 0 and 0: the record at 0 was never committed, and none was deleted",
				p.HighWatermark, p.LogStartOffset)
		}
		return
	}
	t.Fatal("the new topic's partition is not hosted after the restart")
}
