package crashtest

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// Under --log-flush every-batch a leader alone in its ISR lets consumers
// read only what it has fsynced: a record read is a record a power loss
// keeps, as an acknowledged one is. Two produces share one fsync (group
// commit): the first's fsync runs, the second appends meanwhile and waits
// for the next. When the first returns, its HW used to move to the LEO,
// over the second's unflushed record, which a consumer then read and the
// power cut took (issue 19, path 6).
func TestEveryBatchConsumersReadOnlyDurableRecords(t *testing.T) {
	fsys := crashfs.New()
	// The first flush's last step (its leader-epoch-checkpoint, written
	// once its segment is fsynced) waits for release: the second record is
	// appended then, after that fsync. Every later fsync of a segment waits
	// for the cut (it never runs with power on).
	var epochSyncs, segSyncs int
	var mu sync.Mutex
	firstSyncing, release, cut := make(chan struct{}), make(chan struct{}), make(chan struct{})
	fsys.SetFault(func(op crashfs.Op) error {
		if op.Kind != crashfs.OpSync {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case strings.Contains(op.Path, "leader-epoch-checkpoint"):
			if epochSyncs++; epochSyncs == 1 {
				close(firstSyncing)
				mu.Unlock()
				<-release
				mu.Lock()
			}
		case strings.HasSuffix(op.Path, ".log"):
			if segSyncs++; segSyncs > 1 {
				mu.Unlock()
				<-cut
				mu.Lock()
			}
		}
		return nil
	})
	t0 := tp.TopicPartition{Topic: "orders", Partition: 0}
	open := func(fsys *crashfs.FS) *core.ReplicaManager {
		rm, err := core.NewReplicaManager(core.Config{BrokerID: 1, LogDirs: []string{"/data"}, FS: fsys,
			LogConfig: log.Config{FlushPolicy: log.FlushEveryBatch}, Clock: clock.NewManual(time.Unix(1_700_000_000, 0)),
			Logger: zerolog.Nop(), HWCheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return rm
	}
	lead := func(rm *core.ReplicaManager, epoch int32) {
		resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1,
			PartitionStates: []core.PartitionState{{TopicPartition: t0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: epoch,
				Replicas: []int32{1}, ISR: []int32{1}, IsNew: epoch == 0}}})
		if resp.Error != core.ErrNone || resp.PartitionErrors[0].Error != core.ErrNone {
			t.Fatalf("LeaderAndIsr: %+v", resp)
		}
	}
	produce := func(rm *core.ReplicaManager, v string) core.ProduceResult {
		return rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: t0, Acks: core.AcksAll, Timeout: 10 * time.Second,
			Records: []record.Record{{Value: []byte(v)}}})
	}
	consume := func(rm *core.ReplicaManager) []string {
		res := rm.Consume(context.Background(), core.ConsumeRequest{TopicPartition: t0, Offset: 0, MaxBytes: 1 << 20})
		if res.Error != core.ErrNone {
			t.Fatalf("consume: %v", res.Error)
		}
		var out []string
		for _, r := range res.Records {
			out = append(out, string(r.Value))
		}
		return out
	}
	leo := func(rm *core.ReplicaManager) int64 {
		for _, p := range rm.Describe(t0.Topic, &t0.Partition).Partitions {
			return p.LogEndOffset
		}
		return -1
	}

	rm := open(fsys)
	lead(rm, 0)
	acked := make(chan core.ProduceResult, 2)
	go func() { acked <- produce(rm, "a") }()
	<-firstSyncing
	go func() { acked <- produce(rm, "b") }()
	for deadline := time.Now().Add(10 * time.Second); leo(rm) < 2; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the second record was not appended")
		}
	}
	close(release)
	if r := <-acked; r.Error != core.ErrNone || r.BaseOffset != 0 {
		t.Fatalf("first produce: %+v", r)
	}
	// "b" is appended, not fsynced, not acknowledged: no consumer may see it.
	seen := consume(rm)

	// Power is cut while "b"'s fsync waits; what the disk kept comes back
	// (this seed's cut drops "b": without the fix, the read record is lost).
	after := fsys.CutPower(rand.New(rand.NewPCG(1, 2)))
	close(cut)
	if r := <-acked; r.Error == core.ErrNone {
		t.Fatalf("second produce acknowledged across the power cut: %+v", r)
	}
	_ = rm.Shutdown(context.Background())
	rm2 := open(after)
	defer func() {
		if err := rm2.Shutdown(context.Background()); err != nil && !errors.Is(err, crashfs.ErrPowerCut) {
			t.Error(err)
		}
	}()
	lead(rm2, 1)
	kept := consume(rm2)
	for i, v := range seen {
		if i >= len(kept) || kept[i] != v {
			t.Fatalf("consumers read %v before the power cut; after it the log holds %v: read records were lost", seen, kept)
		}
	}
	if len(seen) != 1 || seen[0] != "a" {
		t.Fatalf("consumers read %v, want [a] (the acknowledged record alone)", seen)
	}
}

// After a power cut, a leader's recovered log holds its acknowledged
// records past its recovery point (the recovery-point checkpoint is
// written now and then, not at every fsync). Under every-batch its HW
// covers only what is durable (see above), so the log is fsynced when it
// becomes leader: consumers read every acknowledged record at once, not
// after the next produce.
func TestEveryBatchLeaderServesRecoveredRecordsAtOnce(t *testing.T) {
	fsys := crashfs.New()
	t0 := tp.TopicPartition{Topic: "orders", Partition: 0}
	open := func(fsys *crashfs.FS) *core.ReplicaManager {
		rm, err := core.NewReplicaManager(core.Config{BrokerID: 1, LogDirs: []string{"/data"}, FS: fsys,
			LogConfig: log.Config{FlushPolicy: log.FlushEveryBatch}, Clock: clock.NewManual(time.Unix(1_700_000_000, 0)),
			Logger: zerolog.Nop(), HWCheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return rm
	}
	lead := func(rm *core.ReplicaManager, epoch int32) {
		resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1,
			PartitionStates: []core.PartitionState{{TopicPartition: t0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: epoch,
				Replicas: []int32{1}, ISR: []int32{1}, IsNew: epoch == 0}}})
		if resp.Error != core.ErrNone || resp.PartitionErrors[0].Error != core.ErrNone {
			t.Fatalf("LeaderAndIsr: %+v", resp)
		}
	}
	rm := open(fsys)
	lead(rm, 0)
	var acked []string
	for _, v := range []string{"a", "b", "c"} {
		r := rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: t0, Acks: core.AcksAll, Timeout: 10 * time.Second,
			Records: []record.Record{{Value: []byte(v)}}})
		if r.Error != core.ErrNone {
			t.Fatalf("produce %s: %+v", v, r)
		}
		acked = append(acked, v)
	}
	after := fsys.CutPower(rand.New(rand.NewPCG(1, 2)))
	_ = rm.Shutdown(context.Background())
	rm2 := open(after)
	defer func() { _ = rm2.Shutdown(context.Background()) }()
	lead(rm2, 1)
	res := rm2.Consume(context.Background(), core.ConsumeRequest{TopicPartition: t0, Offset: 0, MaxBytes: 1 << 20})
	var got []string
	for _, r := range res.Records {
		got = append(got, string(r.Value))
	}
	if res.Error != core.ErrNone || res.HighWatermark != int64(len(acked)) || !slices.Equal(got, acked) {
		t.Fatalf("after the power cut the new leader serves %v (HW %d, %v), want every acknowledged record %v", got, res.HighWatermark, res.Error, acked)
	}
}
