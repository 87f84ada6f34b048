package core_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/fetcher"
)

var moved = tp.TopicPartition{Topic: "moved", Partition: 0}

// alterFetchers is the alter-log-dirs fetcher manager as cmd/replicad wires
// it; the replica manager is read through rm, set once it exists.
func alterFetchers(t *testing.T, rm **core.ReplicaManager) *fetcher.Manager {
	t.Helper()
	m, err := fetcher.NewManager(fetcher.Config{
		BrokerID: 1,
		MaxWait:  20 * time.Millisecond,
		Client: fetcher.NewLocalClient(1, func(ctx context.Context, req core.FetchRequest) core.FetchResponse {
			return (*rm).FetchFromCurrentLog(ctx, req)
		}),
		Replicas: fetcher.ReplicasFunc(func(t tp.TopicPartition) (fetcher.Replica, bool) {
			l, epoch, ok := (*rm).FutureReplicaLog(t)
			if !ok {
				return nil, false
			}
			return fetcher.NewLogReplica(l, epoch), true
		}),
		PartitionBackoff: 10 * time.Millisecond,
		Clock:            clock.Real{},
		Logger:           zerolog.Nop(),
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// noMoves is an alter-log-dirs fetcher manager that never fetches, to hold a
// move in progress.
type noMoves struct{}

func (noMoves) AddFetcherForPartitions(context.Context, map[tp.TopicPartition]core.InitialFetchState) {
}
func (noMoves) RemoveFetcherForPartitions([]tp.TopicPartition) {}
func (noMoves) ShutdownIdleFetchers()                          {}
func (noMoves) IsFetching(tp.TopicPartition) bool              { return true }
func (noMoves) Shutdown()                                      {}

func openRM(t *testing.T, dirs []string, alter core.FetcherManager, rmp **core.ReplicaManager) *core.ReplicaManager {
	t.Helper()
	rm, err := core.NewReplicaManager(core.Config{
		BrokerID: 1, LogDirs: dirs, Clock: clock.Real{}, Logger: zerolog.Nop(),
		HWCheckpointInterval: time.Hour, AlterLogDirsFetchers: alter,
	})
	if err != nil {
		t.Fatal(err)
	}
	if rmp != nil {
		*rmp = rm
	}
	return rm
}

func lead(t *testing.T, rm *core.ReplicaManager, epoch int32) {
	t.Helper()
	resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{
		ControllerID: 0, ControllerEpoch: 1,
		PartitionStates: []core.PartitionState{{TopicPartition: moved, ControllerEpoch: 1, Leader: 1,
			LeaderEpoch: epoch, ISR: []int32{1}, Replicas: []int32{1}, IsNew: true}},
	})
	if c := resp.PartitionErrors[0].Error; c != core.ErrNone {
		t.Fatalf("LeaderAndIsr: %s", c)
	}
}

func produce(t *testing.T, rm *core.ReplicaManager, values ...string) {
	t.Helper()
	if err := tryProduce(rm, values...); err != nil {
		t.Fatal(err)
	}
}

// produceNumbered produces the values 0..n-1 in batches of 10.
func produceNumbered(t *testing.T, rm *core.ReplicaManager, n int) {
	t.Helper()
	for next := 0; next < n; next += 10 {
		vals := make([]string, min(10, n-next))
		for i := range vals {
			vals[i] = fmt.Sprint(next + i)
		}
		produce(t, rm, vals...)
	}
}

// tryProduce is produce for goroutines other than the test's, which must not call t.Fatal.
func tryProduce(rm *core.ReplicaManager, values ...string) error {
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	if res := rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: moved, Acks: core.AcksAll, Records: recs}); res.Error != core.ErrNone {
		return fmt.Errorf("produce: %s %s", res.Error, res.Message)
	}
	return nil
}

func consumeAll(t *testing.T, rm *core.ReplicaManager) []string {
	t.Helper()
	var out []string
	for off := int64(0); ; {
		res := rm.Consume(context.Background(), core.ConsumeRequest{TopicPartition: moved, Offset: off, MaxBytes: 1 << 20})
		if res.Error != core.ErrNone {
			t.Fatalf("consume at %d: %s", off, res.Error)
		}
		if len(res.Records) == 0 {
			return out
		}
		for _, r := range res.Records {
			out = append(out, string(r.Value))
		}
		off = res.NextOffset
	}
}

func info(t *testing.T, rm *core.ReplicaManager) core.PartitionInfo {
	t.Helper()
	p := moved.Partition
	d := rm.Describe(moved.Topic, &p)
	if len(d.Partitions) != 1 {
		t.Fatalf("describe: %+v", d)
	}
	return d.Partitions[0]
}

func waitMoved(t *testing.T, rm *core.ReplicaManager, dest string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		in := info(t, rm)
		if in.FutureLogDir == "" && in.LogDir == dest {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("move did not finish: %+v", in)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

func wantValues(t *testing.T, got []string, n int) {
	t.Helper()
	if len(got) != n {
		t.Fatalf("got %d records, want %d", len(got), n)
	}
	for i, v := range got {
		if v != fmt.Sprint(i) {
			t.Fatalf("record %d is %q, want %q", i, v, fmt.Sprint(i))
		}
	}
}

func noDirLeft(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ents, _ := os.ReadDir(dir)
		var left []string
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), moved.String()) {
				left = append(left, e.Name())
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds %v", dir, left)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAlterReplicaLogDirMovesLeaderUnderLoad ensures a leader partition moved
// to another dir while producers append keeps every acknowledged record and
// its HW, ends up in the new dir only, and leaves nothing in the old one.
func TestAlterReplicaLogDirMovesLeaderUnderLoad(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	var rm *core.ReplicaManager
	alter := alterFetchers(t, &rm)
	openRM(t, dirs, alter, &rm)
	defer rm.Shutdown(context.Background())
	lead(t, rm, 1)
	src := info(t, rm).LogDir
	dest := dirs[0]
	if src == dest {
		dest = dirs[1]
	}
	next := 500
	produceNumbered(t, rm, next)

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var mu sync.Mutex
	var produceErr error
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			produceErr = tryProduce(rm, fmt.Sprint(next))
			if produceErr == nil {
				next++
			}
			mu.Unlock()
			if produceErr != nil {
				return
			}
		}
	})
	errs := rm.AlterReplicaLogDirs(context.Background(), []core.AlterReplicaLogDir{{TopicPartition: moved, LogDir: dest}})
	if errs[0].Error != core.ErrNone {
		t.Fatalf("alter: %s", errs[0].Error)
	}
	if in := info(t, rm); in.FutureLogDir != dest && in.LogDir != dest {
		t.Fatalf("describe during the move: %+v", in)
	}
	waitMoved(t, rm, dest)
	close(stop)
	wg.Wait()
	if produceErr != nil {
		t.Fatalf("producing during the move: %v", produceErr)
	}
	produce(t, rm, fmt.Sprint(next))
	next++

	wantValues(t, consumeAll(t, rm), next)
	in := info(t, rm)
	if in.HighWatermark != int64(next) || in.LogEndOffset != int64(next) {
		t.Fatalf("HW %d LEO %d, want %d", in.HighWatermark, in.LogEndOffset, next)
	}
	noDirLeft(t, src)
	if _, err := os.Stat(filepath.Join(dest, moved.String())); err != nil {
		t.Fatalf("moved log: %v", err)
	}
	if len(alter.Fetchers()) != 0 {
		t.Fatalf("alter-log-dirs fetchers left: %+v", alter.Fetchers())
	}
}

// TestAlterReplicaLogDirErrors ensures the per-partition codes: unknown dir,
// unknown partition, already there; none of them creates a future log.
func TestAlterReplicaLogDirErrors(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	rm := openRM(t, dirs, noMoves{}, nil)
	defer rm.Shutdown(context.Background())
	lead(t, rm, 1)
	cur := info(t, rm).LogDir
	errs := rm.AlterReplicaLogDirs(context.Background(), []core.AlterReplicaLogDir{
		{TopicPartition: moved, LogDir: t.TempDir()},
		{TopicPartition: tp.TopicPartition{Topic: "other", Partition: 0}, LogDir: dirs[0]},
		{TopicPartition: moved, LogDir: cur},
	})
	want := []core.ErrorCode{core.ErrLogDirNotFound, core.ErrUnknownTopicOrPartition, core.ErrNone}
	for i, e := range errs {
		if e.Error != want[i] {
			t.Errorf("entry %d: %s, want %s", i, e.Error, want[i])
		}
	}
	if in := info(t, rm); in.FutureLogDir != "" || in.LogDir != cur {
		t.Fatalf("describe: %+v", in)
	}
}

// TestAlterReplicaLogDirResumesAfterRestart ensures a move interrupted by a
// restart while the future log lags resumes with the next LeaderAndIsr from
// the future log's end and completes with nothing lost.
func TestAlterReplicaLogDirResumesAfterRestart(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	rm1 := openRM(t, dirs, noMoves{}, nil)
	lead(t, rm1, 1)
	for i := 0; i < 100; i += 10 {
		vals := make([]string, 10)
		for j := range vals {
			vals[j] = fmt.Sprint(i + j)
		}
		produce(t, rm1, vals...)
	}
	src := info(t, rm1).LogDir
	dest := dirs[0]
	if src == dest {
		dest = dirs[1]
	}
	if errs := rm1.AlterReplicaLogDirs(context.Background(), []core.AlterReplicaLogDir{{TopicPartition: moved, LogDir: dest}}); errs[0].Error != core.ErrNone {
		t.Fatalf("alter: %s", errs[0].Error)
	}
	// Copy the first half into the future log by hand: a move half done.
	fut, _, ok := rm1.FutureReplicaLog(moved)
	if !ok {
		t.Fatal("no future log")
	}
	resp := rm1.FetchFromCurrentLog(context.Background(), core.FetchRequest{ReplicaID: 1, BrokerEpoch: -1,
		Partitions: []core.FetchPartition{{TopicPartition: moved, CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}}})
	if res := resp.Partitions[0]; res.Error != core.ErrNone || res.LogEndOffset != 100 {
		t.Fatalf("local fetch: %+v", res)
	}
	if _, err := fut.AppendAsFollower(batchesBelow(t, resp.Partitions[0].Records, 50)); err != nil {
		t.Fatal(err)
	}
	if fut.LogEndOffset() != 50 {
		t.Fatalf("future LEO %d", fut.LogEndOffset())
	}
	if in := info(t, rm1); in.FutureLogDir != dest {
		t.Fatalf("describe: %+v", in)
	}
	if err := rm1.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	var rm2 *core.ReplicaManager
	alter := alterFetchers(t, &rm2)
	openRM(t, dirs, alter, &rm2)
	defer rm2.Shutdown(context.Background())
	lead(t, rm2, 2)
	waitMoved(t, rm2, dest)
	wantValues(t, consumeAll(t, rm2), 100)
	if in := info(t, rm2); in.HighWatermark != 100 {
		t.Fatalf("HW %d, want 100", in.HighWatermark)
	}
	noDirLeft(t, src)
}

// batchesBelow returns the leading batches of data that end at or before offset.
func batchesBelow(t *testing.T, data []byte, offset int64) []byte {
	t.Helper()
	n := 0
	for rest := data; len(rest) > 0; {
		b, next, err := record.Next(rest)
		if err != nil || b.NextOffset() > offset {
			break
		}
		n += len(rest) - len(next)
		rest = next
	}
	return data[:n]
}

// replicaFetcherHook is the replica fetcher manager of a follower whose
// fetcher does nothing but run onRemove, once armed, when the swap check
// removes the partition from it: the last response of a real fetcher is
// processed there, between the fetch that found the future log caught up and
// the swap.
type replicaFetcherHook struct {
	mu       sync.Mutex
	onRemove func()
}

func (h *replicaFetcherHook) AddFetcherForPartitions(context.Context, map[tp.TopicPartition]core.InitialFetchState) {
}

func (h *replicaFetcherHook) RemoveFetcherForPartitions([]tp.TopicPartition) {
	h.mu.Lock()
	f := h.onRemove
	h.onRemove = nil
	h.mu.Unlock()
	if f != nil {
		f()
	}
}
func (h *replicaFetcherHook) ShutdownIdleFetchers()             {}
func (h *replicaFetcherHook) Shutdown()                         {}
func (h *replicaFetcherHook) IsFetching(tp.TopicPartition) bool { return true }

func (h *replicaFetcherHook) arm(f func()) {
	h.mu.Lock()
	h.onRemove = f
	h.mu.Unlock()
}

// followerBatch is one batch of values as a leader stamped it: at base, in leaderEpoch.
func followerBatch(base int64, leaderEpoch int32, values ...string) []byte {
	recs := make([]record.Record, len(values))
	for i, v := range values {
		recs[i] = record.Record{Value: []byte(v)}
	}
	b := record.Build(recs, 1)
	b.SetBaseOffset(base)
	b.SetLeaderEpoch(leaderEpoch)
	return b
}

// logRecords reads every record of l as "epoch:value".
func logRecords(t *testing.T, l *log.Log) []string {
	t.Helper()
	ri, err := l.Read(l.LogStartOffset(), 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rest := ri.Data; len(rest) > 0; {
		b, next, err := record.Next(rest)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := b.Records()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			out = append(out, fmt.Sprintf("%d:%s", r.LeaderEpoch, r.Value))
		}
		rest = next
	}
	return out
}

// copyToFuture fetches the current log from the future log's end, as the
// alter-log-dirs fetcher does, and appends what it read to the future log.
// It returns the fetch's result (a fetch at the current LEO queues the swap).
func copyToFuture(t *testing.T, rm *core.ReplicaManager, fut *log.Log) core.FetchPartitionResult {
	t.Helper()
	resp := rm.FetchFromCurrentLog(context.Background(), core.FetchRequest{ReplicaID: 1, BrokerEpoch: -1,
		Partitions: []core.FetchPartition{{TopicPartition: moved, FetchOffset: fut.LogEndOffset(),
			CurrentLeaderEpoch: -1, LastFetchedEpoch: fut.LatestEpoch()}}})
	res := resp.Partitions[0]
	if res.Error != core.ErrNone || res.DivergingEpoch != nil {
		t.Fatalf("local fetch at %d: %+v", fut.LogEndOffset(), res)
	}
	if len(res.Records) > 0 {
		if _, err := fut.AppendAsFollower(res.Records); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// TestAlterReplicaLogDirFollowerTruncatedBeforeSwap ensures that when a follower's current log is truncated and refilled with another epoch's records up to the same LEO between the fetch that found the future log caught up and the swap, the swap does not install the stale future log: it truncates the future log, the copy resumes, and the moved log holds the current log's records and epochs.
func TestAlterReplicaLogDirFollowerTruncatedBeforeSwap(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	replicaFetchers := &replicaFetcherHook{}
	rm, err := core.NewReplicaManager(core.Config{
		BrokerID: 1, LogDirs: dirs, Clock: clock.Real{}, Logger: zerolog.Nop(),
		HWCheckpointInterval: time.Hour, Fetchers: replicaFetchers, AlterLogDirsFetchers: noMoves{},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer rm.Shutdown(context.Background())
	resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{
		ControllerID: 0, ControllerEpoch: 1,
		PartitionStates: []core.PartitionState{{TopicPartition: moved, ControllerEpoch: 1, Leader: 2,
			LeaderEpoch: 1, ISR: []int32{2, 1}, Replicas: []int32{2, 1}, IsNew: true}},
		LiveLeaders: []core.Broker{{ID: 2, Host: "localhost", Port: 9}},
	})
	if c := resp.PartitionErrors[0].Error; c != core.ErrNone {
		t.Fatalf("LeaderAndIsr: %s", c)
	}
	cur, _, ok := rm.FollowerLog(moved)
	if !ok {
		t.Fatal("not a follower")
	}
	// Epoch 1's leader wrote 0-9; 5-9 never reached its ISR.
	for _, b := range [][]byte{followerBatch(0, 1, "a0", "a1", "a2", "a3", "a4"), followerBatch(5, 1, "stale5", "stale6", "stale7", "stale8", "stale9")} {
		if _, err := cur.AppendAsFollower(b); err != nil {
			t.Fatal(err)
		}
	}
	src := info(t, rm).LogDir
	dest := dirs[0]
	if src == dest {
		dest = dirs[1]
	}
	if errs := rm.AlterReplicaLogDirs(context.Background(), []core.AlterReplicaLogDir{{TopicPartition: moved, LogDir: dest}}); errs[0].Error != core.ErrNone {
		t.Fatalf("alter: %s", errs[0].Error)
	}
	fut, _, ok := rm.FutureReplicaLog(moved)
	if !ok {
		t.Fatal("no future log")
	}
	copyToFuture(t, rm, fut)
	if fut.LogEndOffset() != 10 {
		t.Fatalf("future LEO %d, want 10", fut.LogEndOffset())
	}

	// Epoch 2's leader kept 0-4 and acknowledged its own 5-9: the replica
	// fetcher truncates the current log and appends them, after the fetch
	// below found the future log caught up and before the swap.
	hooked := make(chan error, 1)
	replicaFetchers.arm(func() {
		err := cur.TruncateTo(5)
		if err == nil {
			_, err = cur.AppendAsFollower(followerBatch(5, 2, "new5", "new6", "new7", "new8", "new9"))
		}
		hooked <- err
	})
	if res := copyToFuture(t, rm, fut); res.LogEndOffset != 10 || len(res.Records) != 0 {
		t.Fatalf("caught-up fetch: %+v", res)
	}
	select {
	case err := <-hooked:
		if err != nil {
			t.Fatalf("truncating and refilling the current log: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the swap check never removed the replica fetcher")
	}
	want := []string{"1:a0", "1:a1", "1:a2", "1:a3", "1:a4", "2:new5", "2:new6", "2:new7", "2:new8", "2:new9"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		in := info(t, rm)
		if in.FutureLogDir == "" {
			l, _, _ := rm.FollowerLog(moved)
			t.Fatalf("the swap installed the future log from before the truncation: %q, want %q", logRecords(t, l), want)
		}
		if fut.LogEndOffset() < 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the swap check neither swapped nor truncated the future log: %+v", in)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
	if fut.LogEndOffset() != 5 {
		t.Fatalf("future log truncated to %d, want 5 (where the epochs diverge)", fut.LogEndOffset())
	}

	// The copy resumes from the divergence and the move completes.
	copyToFuture(t, rm, fut)
	if res := copyToFuture(t, rm, fut); res.LogEndOffset != 10 || len(res.Records) != 0 {
		t.Fatalf("caught-up fetch: %+v", res)
	}
	waitMoved(t, rm, dest)
	l, _, ok := rm.FollowerLog(moved)
	if !ok {
		t.Fatal("not a follower after the move")
	}
	if got := logRecords(t, l); !slices.Equal(got, want) {
		t.Fatalf("moved log holds %q, want %q", got, want)
	}
	wantEpochs := []checkpoint.EpochEntry{{Epoch: 1, StartOffset: 0}, {Epoch: 2, StartOffset: 5}}
	if got := l.EpochCache().Entries(); !slices.Equal(got, wantEpochs) {
		t.Fatalf("moved log's epochs %+v, want %+v", got, wantEpochs)
	}
	noDirLeft(t, src)
}

// DeleteRecords during a move: records deleted from the current log never
// come back with the future log swapped in, whenever the deletion lands
// (before the future log copied them, during the copy, or between its last
// fetch and the swap, when only the swap can raise it).
func TestAlterReplicaLogDirKeepsDeletedRecordsDeleted(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	var rm *core.ReplicaManager
	alter := alterFetchers(t, &rm)
	openRM(t, dirs, alter, &rm)
	defer rm.Shutdown(context.Background())
	lead(t, rm, 1)
	dest := dirs[0]
	if info(t, rm).LogDir == dest {
		dest = dirs[1]
	}
	produceNumbered(t, rm, 300)
	var deleted atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for off := int64(10); ; off += 10 {
			select {
			case <-stop:
				return
			default:
			}
			produce(t, rm, "x", "x", "x", "x", "x", "x", "x", "x", "x", "x")
			res := rm.DeleteRecords(context.Background(), core.DeleteRecordsRequest{Timeout: time.Second,
				Partitions: []core.DeleteRecordsPartition{{TopicPartition: moved, Offset: off}}})
			if res.Partitions[0].Error == core.ErrNone {
				deleted.Store(off)
			}
		}
	})
	errs := rm.AlterReplicaLogDirs(context.Background(), []core.AlterReplicaLogDir{{TopicPartition: moved, LogDir: dest}})
	if errs[0].Error != core.ErrNone {
		t.Fatalf("alter: %s", errs[0].Error)
	}
	waitMoved(t, rm, dest)
	close(stop)
	wg.Wait()
	in := info(t, rm)
	if d := deleted.Load(); d == 0 || in.LogStartOffset < d {
		t.Fatalf("log start %d after the move, records deleted below %d: they came back", in.LogStartOffset, d)
	}
	if res := rm.Consume(context.Background(), core.ConsumeRequest{TopicPartition: moved, Offset: in.LogStartOffset - 1}); res.Error != core.ErrOffsetOutOfRange {
		t.Fatalf("consume below the log start after the move: %s", res.Error)
	}
}

// TestAlterReplicaLogDirKeepsTheTopicsRollRules checks that a replica moved
// to another log dir keeps rolling by its topic's segment.bytes (1 KiB
// here), not the broker's 256 MiB default the moved log opens with.
func TestAlterReplicaLogDirKeepsTheTopicsRollRules(t *testing.T) {
	dirs := []string{t.TempDir(), t.TempDir()}
	var rm *core.ReplicaManager
	alter := alterFetchers(t, &rm)
	openRM(t, dirs, alter, &rm)
	defer rm.Shutdown(context.Background())
	resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerID: 0, ControllerEpoch: 1,
		PartitionStates: []core.PartitionState{{TopicPartition: moved, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1,
			ISR: []int32{1}, Replicas: []int32{1}, IsNew: true, TopicConfigVersion: 1, TopicConfigs: map[string]string{"segment.bytes": "1024"}}}})
	if c := resp.PartitionErrors[0].Error; c != core.ErrNone {
		t.Fatalf("LeaderAndIsr: %s", c)
	}
	dest := dirs[0]
	if info(t, rm).LogDir == dest {
		dest = dirs[1]
	}
	produceNumbered(t, rm, 20)
	if errs := rm.AlterReplicaLogDirs(context.Background(), []core.AlterReplicaLogDir{{TopicPartition: moved, LogDir: dest}}); errs[0].Error != core.ErrNone {
		t.Fatalf("alter: %s", errs[0].Error)
	}
	waitMoved(t, rm, dest)
	segments := func() int {
		names, err := filepath.Glob(filepath.Join(dest, "moved-0", "*.log"))
		if err != nil {
			t.Fatal(err)
		}
		return len(names)
	}
	before := segments()
	for range 20 {
		produce(t, rm, strings.Repeat("x", 200), strings.Repeat("y", 200))
	}
	if after := segments(); after < before+5 {
		t.Fatalf("%d segments after 16 KB more, from %d: the moved log does not roll at the topic's 1 KiB", after, before)
	}
}
