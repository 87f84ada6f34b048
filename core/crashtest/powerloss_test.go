package crashtest

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/checkpoint"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/log/producerstate"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

var (
	flagSeed     = flag.Int64("crash.seed", -1, "replay this seed alone (with -run TestPowerLoss/<mode>)")
	flagSeeds    = flag.Int("crash.seeds", 0, "seeds per flush mode (0: the default for go test)")
	flagProgress = flag.Bool("crash.progress", false, "print progress and a summary")
)

// defaultSeeds per flush mode in `go test`: with about 1.7 cuts a seed, the
// three modes together make over 10,000 cuts.
const defaultSeeds = 2000

var modes = []struct {
	name   string
	policy log.FlushPolicy
	// producers: a share of the batches are idempotent producers' (v1),
	// leaders' with valid sequences and retries, followers' any; after
	// each recovery the log's producer state must be what its batches
	// say. A quarter of the seeds: the other modes check the same storage.
	producers bool
}{
	{"every-batch", log.FlushEveryBatch, false},
	{"interval", log.FlushInterval, false},
	{"os", log.FlushOS, false},
	{"every-batch-idempotent", log.FlushEveryBatch, true},
	{"os-idempotent", log.FlushOS, true},
}

// TestPowerLoss drives the real storage code on a disk that loses power at a random operation, for every flush mode, and checks after each recovery that nothing promised durable was lost and nothing claims more than is on disk.
func TestPowerLoss(t *testing.T) {
	seeds := *flagSeeds
	if seeds == 0 {
		seeds = defaultSeeds
		if testing.Short() {
			seeds = 100
		}
	}
	var total, failedSeeds atomic.Int64
	start := time.Now()
	for _, mode := range modes {
		t.Run(mode.name, func(t *testing.T) {
			list := slices.Clone(regressionSeeds[mode.name])
			if *flagSeed >= 0 {
				list = []uint64{uint64(*flagSeed)}
			} else {
				n := seeds
				if mode.producers {
					n = max(seeds/4, 1)
				}
				for s := range uint64(n) {
					list = append(list, s)
				}
			}
			failures := 0
			for i, seed := range list {
				s := newSim(mode.name, mode.policy, seed)
				if mode.producers {
					s.producers, s.prng = true, rand.New(rand.NewPCG(seed, uint64(mode.policy)+2000))
				}
				err := s.run()
				total.Add(int64(s.cuts))
				if err != nil {
					failures++
					failedSeeds.Add(1)
					t.Errorf("%s seed %d: %v\nreplay: go test ./core/crashtest -run 'TestPowerLoss/%s$' -crash.seed=%d -count=20 -failfast -v\n%s",
						mode.name, seed, err, mode.name, seed, s.describe())
					if failures >= 3 {
						t.Fatalf("stopping after %d failing seeds", failures)
					}
				}
				if *flagProgress && (i+1)%1000 == 0 {
					fmt.Printf("crash-test: %s: %d/%d seeds, %d cuts so far, %d failing seeds, %s\n",
						mode.name, i+1, len(list), total.Load(), failedSeeds.Load(), time.Since(start).Round(time.Second))
				}
			}
		})
	}
	elapsed := time.Since(start)
	t.Logf("%d power cuts in %s (%.0f/s), %d failing seeds", total.Load(), elapsed.Round(time.Millisecond),
		float64(total.Load())/elapsed.Seconds(), failedSeeds.Load())
	t.Logf("file cache of %d descriptors: %d evictions, %d reopens", crashMaxOpenFiles, cacheEvictions.Load(), cacheReopens.Load())
	if *flagSeed < 0 && (cacheEvictions.Load() == 0 || cacheReopens.Load() == 0) {
		t.Errorf("the file cache closed %d files and reopened %d: the suite ran without evictions", cacheEvictions.Load(), cacheReopens.Load())
	}
	if *flagProgress {
		fmt.Printf("crash-test: %d power cuts in %s (%.0f cuts/s), %d failures\n", total.Load(),
			elapsed.Round(time.Second), float64(total.Load())/elapsed.Seconds(), failedSeeds.Load())
	}
}

// crashMaxOpenFiles is the simulated broker's --max-open-files.
const crashMaxOpenFiles = 4

// cacheEvictions and cacheReopens count the file cache's work over every
// seed: the suite checks that it ran with files closed and reopened.
var cacheEvictions, cacheReopens atomic.Int64

// countFileCache adds the current manager's file cache figures to the
// totals, before the manager is replaced or shut down.
func (s *sim) countFileCache() {
	if s.m != nil {
		st := s.m.FileCacheStats()
		cacheEvictions.Add(st.Evictions)
		cacheReopens.Add(st.Reopens)
	}
}

// The simulated broker: two log dirs on one disk, three partitions.
var (
	logDirs    = []string{"/data/d1", "/data/d2"}
	partitions = []tp.TopicPartition{{Topic: "t", Partition: 0}, {Topic: "t", Partition: 1}, {Topic: "u", Partition: 0}}
)

// replica is what the simulation knows of one log (a partition's current
// or future log): its batches as written, and how much of it the flush
// policy promised durable.
type replica struct {
	batches  []record.Batch
	logStart int64
	// promised: every batch ending at or below it must survive a cut.
	promised int64
}

func (r *replica) leo() int64 {
	if len(r.batches) == 0 {
		return r.logStart
	}
	return r.batches[len(r.batches)-1].NextOffset()
}

// truncate keeps the batches that end before offset, as Log.TruncateTo does.
func (r *replica) truncate(offset int64) {
	keep := 0
	for keep < len(r.batches) && r.batches[keep].LastOffset() < offset {
		keep++
	}
	r.batches = r.batches[:keep]
	r.promised = min(r.promised, r.leo())
}

func (r *replica) restartAt(offset int64) {
	r.batches, r.logStart, r.promised = nil, offset, offset
}

// partition is what the simulation knows of one partition.
type partition struct {
	t tp.TopicPartition
	// cur is nil while the partition has no log.
	cur *replica
	fut *replica
	// durable: the log was created durably (or survived a cut), so a cut
	// must not lose it. Likewise futDurable.
	durable, futDurable bool
	// An operation that may leave the log there or not was cut: while
	// deleting or creating the log may be gone or there after a cut.
	deleting, creating, futChanging bool
	epoch                           int32
	// history holds every batch ever written at each offset since the log
	// was created: a recovered batch must be one of them.
	history map[int64][][]byte
}

type sim struct {
	mode   string
	policy log.FlushPolicy
	seed   uint64
	rng    *rand.Rand // the workload
	cutRng *rand.Rand // the cuts' choices
	cfg    logmgr.Config
	fs     *crashfs.FS
	m      *logmgr.Manager
	parts  []*partition
	// rpBound and hwBound lower, per dir and partition, what the
	// recovery-point and HW checkpoints may claim, after a truncation or
	// deletion that the checkpoint does not reflect yet.
	rpBound, hwBound map[string]map[tp.TopicPartition]int64

	// producers: some batches are idempotent producers', drawn from prng
	// (so that the other draws stay the seed's).
	producers bool
	prng      *rand.Rand

	cuts       int
	steps      []string // the trace of the run
	lastFS     *crashfs.FS
	lastReport []string
	goroutines int
}

func newSim(mode string, policy log.FlushPolicy, seed uint64) *sim {
	s := &sim{
		mode:   mode,
		policy: policy,
		seed:   seed,
		rng:    rand.New(rand.NewPCG(seed, uint64(policy))),
		cutRng: rand.New(rand.NewPCG(seed, uint64(policy)+1000)),
		fs:     crashfs.New(),
	}
	for _, t := range partitions {
		s.parts = append(s.parts, &partition{t: t})
	}
	s.resetBounds()
	segmentBytes := []int64{300, 700, 1500}[s.rng.IntN(3)]
	indexInterval := []int{64, 200, 4096}[s.rng.IntN(3)]
	s.cfg = logmgr.Config{
		Dirs:     logDirs,
		BrokerID: 1,
		// Four descriptors for every segment and index file of three
		// partitions and their future logs: the file cache closes and
		// reopens files all the time, between the cuts too (fixed, not
		// drawn, so that each seed keeps its draws).
		LogConfig: log.Config{SegmentBytes: segmentBytes, IndexIntervalBytes: indexInterval, FlushPolicy: policy,
			MaxOpenFiles: crashMaxOpenFiles},
		Logger:                zerolog.Nop(),
		RecoveryThreadsPerDir: 1,
		FS:                    s.fs,
	}
	return s
}

func (s *sim) resetBounds() {
	s.rpBound = make(map[string]map[tp.TopicPartition]int64)
	s.hwBound = make(map[string]map[tp.TopicPartition]int64)
	for _, d := range logDirs {
		s.rpBound[d] = make(map[tp.TopicPartition]int64)
		s.hwBound[d] = make(map[tp.TopicPartition]int64)
	}
}

func (s *sim) logf(format string, args ...any) {
	s.steps = append(s.steps, fmt.Sprintf(format, args...))
}

// describe is the failure report: the steps of the phase that failed, the
// file operations before its cut and what the cut kept.
func (s *sim) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "config: segment bytes %d, index interval %d; cut %d of the run\n",
		s.cfg.LogConfig.SegmentBytes, s.cfg.LogConfig.IndexIntervalBytes, s.cuts)
	b.WriteString("steps:\n")
	for _, st := range s.steps {
		b.WriteString("  " + st + "\n")
	}
	if s.lastFS != nil {
		tr := s.lastFS.Trace()
		from := max(0, len(tr)-80)
		fmt.Fprintf(&b, "the last %d of %d file operations before the cut:\n", len(tr)-from, len(tr))
		for _, e := range tr[from:] {
			b.WriteString("  " + e.String() + "\n")
		}
	}
	b.WriteString("what the cut kept:\n")
	for _, r := range s.lastReport {
		b.WriteString("  " + r + "\n")
	}
	return b.String()
}

// run is one seed: a few phases, each a random workload cut by a power loss
// at a random file operation, then recovery and the checks.
func (s *sim) run() error {
	s.goroutines = runtime.NumGoroutine()
	m, err := logmgr.Open(s.cfg)
	if err != nil {
		return fmt.Errorf("open on an empty disk: %w", err)
	}
	s.m = m
	phases := 1 + s.rng.IntN(3)
	for phase := range phases {
		s.logf("-- phase %d", phase+1)
		steps := 4 + s.rng.IntN(30)
		s.fs.CutPowerAfter(int64(s.rng.IntN(steps*12)), s.cutRng)
		for range steps {
			if err := s.step(); err != nil {
				if s.fs.PowerCut() != nil {
					break // the cut failed the step, as it should
				}
				return err
			}
			if err := s.quiesce(); err != nil {
				return err
			}
			if s.fs.PowerCut() != nil {
				break
			}
			select {
			case f := <-s.m.Failures():
				return fmt.Errorf("a dir failed with the power on: %s: %v", f.Dir, f.Err)
			default:
			}
		}
		if err := s.cutAndRecover(); err != nil {
			return err
		}
	}
	s.countFileCache()
	if err := s.m.Shutdown(); err != nil {
		return fmt.Errorf("final shutdown: %w", err)
	}
	return s.quiesce()
}

// quiesce waits for the goroutines the storage code started (background
// seals of rolled segments, removals of deleted logs) to finish, so that
// one step's background work never overlaps the next. A seed then mostly
// replays the same file operations; where the storage code runs goroutines
// within one call (two segments rolled by one append, the per-dir work of
// Open, FlushAll, CheckpointLogOffsets, SyncDirs) they may come in another
// order, about one seed in six, hence -count=20 in the replay command.
func (s *sim) quiesce() error {
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > s.goroutines {
		if time.Now().After(deadline) {
			return fmt.Errorf("background goroutines still running after 10s")
		}
		runtime.Gosched()
	}
	return nil
}

func (s *sim) pick() *partition { return s.parts[s.rng.IntN(len(s.parts))] }

// step runs one random operation of a broker's storage workload.
func (s *sim) step() error {
	p := s.pick()
	if p.cur == nil {
		return s.create(p)
	}
	switch n := s.rng.IntN(100); {
	case n < 25:
		return s.appendAsLeader(p)
	case n < 40:
		return s.appendAsFollower(p)
	case n < 46:
		return s.truncateTo(p)
	case n < 49:
		return s.truncateFully(p)
	case n < 57:
		return s.flush(p)
	case n < 61:
		return s.flushAll()
	case n < 67:
		return s.checkpointHighWatermarks()
	case n < 71:
		return s.checkpointLogOffsets()
	case n < 74:
		return s.deleteLog(p)
	case n < 86:
		return s.moveStep(p)
	case n < 88:
		return s.syncDirs()
	case n < 91:
		return s.cleanRestart()
	default:
		return s.appendAsLeader(p)
	}
}

func (s *sim) log(p *partition) *log.Log {
	l, ok := s.m.GetLog(p.t)
	if !ok {
		panic(fmt.Sprintf("crashtest: no log for %s in the model's live state", p.t))
	}
	return l
}

func (s *sim) create(p *partition) error {
	syncMetadata := s.rng.IntN(2) == 0
	s.logf("create log %s (sync metadata %v)", p.t, syncMetadata)
	p.creating = true
	p.history = make(map[int64][][]byte) // a new log: nothing of an old one may come back
	l, err := s.m.GetOrCreateLog(p.t, syncMetadata)
	if err != nil {
		return fmt.Errorf("create log %s: %w", p.t, err)
	}
	p.creating = false
	p.cur = &replica{logStart: l.LogStartOffset(), promised: l.LogStartOffset()}
	p.durable = syncMetadata
	return nil
}

// newBatch is a batch of one to four records of random sizes (n, when
// positive), of producer prod (record.NoProducer: a plain batch).
func (s *sim) newBatch(p *partition, prod record.Producer, n int) record.Batch {
	if n <= 0 {
		n = 1 + s.rng.IntN(4)
	}
	recs := make([]record.Record, n)
	for i := range recs {
		v := make([]byte, 1+s.rng.IntN(200))
		for j := range v {
			v[j] = byte(s.rng.Uint32())
		}
		recs[i] = record.Record{Key: []byte(p.t.String()), Value: v}
	}
	return record.BuildProducer(recs, 1, prod)
}

// leaderProducer draws the producer of a leader's next batch, as a client
// would send it: plain, the next sequence of one of three producers (its
// next epoch, now and then), or a retry of one of its last batches. n is
// the batch's record count (0: any); retry: it must be a duplicate.
func (s *sim) leaderProducer(l *log.Log) (prod record.Producer, n int, retry bool) {
	if !s.producers || s.prng.IntN(3) == 0 {
		return record.NoProducer, 0, false
	}
	id := int64(1 + s.prng.IntN(3))
	e := l.ProducerState().Get(id)
	switch {
	case e == nil:
		return record.Producer{ID: id}, 0, false
	case s.prng.IntN(8) == 0:
		return record.Producer{ID: id, Epoch: e.Epoch + 1}, 0, false
	case s.prng.IntN(5) == 0:
		bs := e.Batches()
		b := bs[s.prng.IntN(len(bs))]
		return record.Producer{ID: id, Epoch: e.Epoch, BaseSequence: b.FirstSeq}, int(b.LastOffset-b.FirstOffset) + 1, true
	}
	return record.Producer{ID: id, Epoch: e.Epoch, BaseSequence: record.IncrementSequence(e.Last().LastSeq, 1)}, 0, false
}

// followerProducer draws the producer of a follower's batch: the follower
// checks nothing, so any.
func (s *sim) followerProducer() record.Producer {
	if !s.producers || s.prng.IntN(3) == 0 {
		return record.NoProducer
	}
	return record.Producer{ID: int64(1 + s.prng.IntN(3)), Epoch: int16(s.prng.IntN(3)), BaseSequence: int32(s.prng.IntN(100))}
}

// writing records b in p's history before it is written: a write that
// fails (the cut) may still reach the disk.
func (s *sim) writing(p *partition, b record.Batch) {
	hist := p.history[b.BaseOffset()]
	for _, h := range hist {
		if bytes.Equal(h, b) {
			return
		}
	}
	p.history[b.BaseOffset()] = append(hist, bytes.Clone(b))
}

// written adds b, appended, to r.
func (s *sim) written(r *replica, b record.Batch) {
	r.batches = append(r.batches, record.Batch(bytes.Clone(b)))
}

func (s *sim) appendAsLeader(p *partition) error {
	l := s.log(p)
	if s.rng.IntN(5) == 0 || p.epoch == 0 {
		// A LeaderAndIsr made this broker leader at a new epoch (makeLeader).
		p.epoch++
		s.logf("%s: leader at epoch %d from %d", p.t, p.epoch, l.LogEndOffset())
		if err := l.MaybeAssignEpochStartOffset(p.epoch, l.LogEndOffset()); err != nil {
			return fmt.Errorf("assign epoch: %w", err)
		}
	}
	prod, n, retry := s.leaderProducer(l)
	b := s.newBatch(p, prod, n)
	if retry {
		s.logf("%s: retry of producer %d's batch at sequence %d", p.t, prod.ID, prod.BaseSequence)
		info, err := l.AppendAsLeader(b, p.epoch)
		if err != nil {
			return fmt.Errorf("retry as leader: %w", err)
		}
		if !info.Duplicate {
			return fmt.Errorf("retry of producer %d's batch at sequence %d appended at %d", prod.ID, prod.BaseSequence, info.FirstOffset)
		}
		return nil
	}
	s.logf("%s: append as leader at %d, epoch %d, %d bytes, producer %+v", p.t, l.LogEndOffset(), p.epoch, len(b), prod)
	// Stamped as the append will stamp it, for the history.
	b.SetBaseOffset(l.LogEndOffset())
	b.SetLeaderEpoch(p.epoch)
	s.writing(p, b)
	if _, err := l.AppendAsLeader(b, p.epoch); err != nil {
		return fmt.Errorf("append as leader: %w", err)
	}
	s.written(p.cur, b)
	if s.policy == log.FlushEveryBatch {
		p.cur.promised = p.cur.leo()
	}
	return nil
}

// appendAsFollower appends batches built as a leader builds them, some at
// a new epoch, in one call as a fetch answer brings them.
func (s *sim) appendAsFollower(p *partition) error {
	l := s.log(p)
	var data []byte
	var batches []record.Batch
	next := l.LogEndOffset()
	for range 1 + s.rng.IntN(3) {
		if s.rng.IntN(4) == 0 || p.epoch == 0 {
			p.epoch++
		}
		b := s.newBatch(p, s.followerProducer(), 0)
		b.SetBaseOffset(next)
		b.SetLeaderEpoch(p.epoch)
		next = b.NextOffset()
		data = append(data, b...)
		batches = append(batches, b)
		s.writing(p, b)
	}
	s.logf("%s: append as follower at %d, %d batches up to epoch %d, %d bytes", p.t, l.LogEndOffset(), len(batches), p.epoch, len(data))
	if _, err := l.AppendAsFollower(data); err != nil {
		return fmt.Errorf("append as follower: %w", err)
	}
	for _, b := range batches {
		s.written(p.cur, b)
	}
	if s.policy == log.FlushEveryBatch {
		p.cur.promised = p.cur.leo()
	}
	return nil
}

// lowerBounds records that p's log in its dir lost everything from offset
// on in memory, which the checkpoints learn only when next written.
func (s *sim) lowerBounds(p *partition, dir string, offset int64) {
	for _, b := range []map[string]map[tp.TopicPartition]int64{s.rpBound, s.hwBound} {
		if cur, ok := b[dir][p.t]; !ok || offset < cur {
			b[dir][p.t] = offset
		}
	}
}

// truncateTo is a follower's truncation to the leader's epoch end offset;
// the log has its dir checkpoint the lowered recovery point before it cuts
// (logmgr's logOptions).
func (s *sim) truncateTo(p *partition) error {
	l := s.log(p)
	offset := p.cur.logStart + s.rng.Int64N(l.LogEndOffset()-p.cur.logStart+1)
	s.logf("%s: truncate to %d (log end %d)", p.t, offset, l.LogEndOffset())
	dir, _ := s.m.DirOf(p.t)
	p.cur.truncate(offset)
	s.lowerBounds(p, dir, p.cur.leo())
	if err := l.TruncateTo(offset); err != nil {
		return fmt.Errorf("truncate to %d: %w", offset, err)
	}
	if l.LogEndOffset() != p.cur.leo() {
		return fmt.Errorf("truncate to %d left log end %d, want %d", offset, l.LogEndOffset(), p.cur.leo())
	}
	s.rpBound[dir][p.t] = math.MaxInt64
	return nil
}

// truncateFully is a follower whose leader's log starts past its own.
func (s *sim) truncateFully(p *partition) error {
	l := s.log(p)
	offset := l.LogEndOffset() + s.rng.Int64N(5)
	s.logf("%s: truncate fully and start at %d", p.t, offset)
	dir, _ := s.m.DirOf(p.t)
	s.lowerBounds(p, dir, p.cur.logStart) // a cut may leave any prefix of the old segments
	p.cur.restartAt(offset)
	if err := l.TruncateFullyAndStartAt(offset); err != nil {
		return fmt.Errorf("truncate fully: %w", err)
	}
	s.rpBound[dir][p.t] = math.MaxInt64
	return nil
}

func (s *sim) flush(p *partition) error {
	l, r, what := s.log(p), p.cur, "log"
	if p.fut != nil && s.rng.IntN(3) == 0 {
		l, _ = s.m.FutureLog(p.t)
		r, what = p.fut, "future log"
	}
	s.logf("%s: flush %s (log end %d)", p.t, what, l.LogEndOffset())
	leo := l.LogEndOffset()
	if err := l.Flush(); err != nil {
		return fmt.Errorf("flush %s: %w", what, err)
	}
	r.promised = leo
	return nil
}

// flushAll is the interval policy's periodic flush (and Shutdown's).
func (s *sim) flushAll() error {
	s.logf("flush all")
	if err := s.m.FlushAll(); err != nil {
		return fmt.Errorf("flush all: %w", err)
	}
	s.allPromised()
	return nil
}

// allPromised: a flush of every log made everything durable.
func (s *sim) allPromised() {
	for _, p := range s.parts {
		for _, r := range []*replica{p.cur, p.fut} {
			if r != nil {
				r.promised = r.leo()
			}
		}
	}
}

// checkpointHighWatermarks moves some HWs and writes every dir's
// replication-offset-checkpoint as the replica manager does.
func (s *sim) checkpointHighWatermarks() error {
	for _, p := range s.parts {
		if p.cur != nil && s.rng.IntN(2) == 0 {
			l := s.log(p)
			l.UpdateHighWatermark(l.LogStartOffset() + s.rng.Int64N(l.LogEndOffset()-l.LogStartOffset()+1))
		}
	}
	s.logf("checkpoint HWs")
	for dir, hws := range sortedDirs(s.m.HighWatermarks()) {
		if err := s.m.WriteHighWatermarks(dir, hws); err != nil {
			return fmt.Errorf("write HW checkpoint of %s: %w", dir, err)
		}
		for t := range hws {
			s.hwBound[dir][t] = math.MaxInt64
		}
	}
	return nil
}

// sortedDirs iterates a map by dir in order: the file operations must not
// depend on map order.
func sortedDirs[V any](m map[string]V) func(func(string, V) bool) {
	return func(yield func(string, V) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

func (s *sim) checkpointLogOffsets() error {
	s.logf("checkpoint recovery points and log starts")
	if failed := s.m.CheckpointLogOffsets(); len(failed) > 0 {
		return fmt.Errorf("checkpoint log offsets: %v", failed)
	}
	s.checkpointLogOffsetsDone()
	return nil
}

func (s *sim) deleteLog(p *partition) error {
	if p.fut != nil {
		return s.appendAsLeader(p)
	}
	dir, _ := s.m.DirOf(p.t)
	s.logf("%s: delete log in %s", p.t, dir)
	p.deleting = true
	if err := s.m.DeleteLog(p.t); err != nil {
		return fmt.Errorf("delete log: %w", err)
	}
	p.deleting, p.cur, p.durable = false, nil, false
	// DeleteLog rewrote the dir's checkpoints, the HWs' too, without the
	// log: a log created again under the name inherits nothing.
	s.rpBound[dir][p.t], s.hwBound[dir][p.t] = math.MaxInt64, math.MaxInt64
	return nil
}

func (s *sim) syncDirs() error {
	s.logf("sync dirs")
	if err := s.m.SyncDirs(); err != nil {
		return fmt.Errorf("sync dirs: %w", err)
	}
	for _, p := range s.parts {
		if p.cur != nil {
			p.durable = true
		}
	}
	return nil
}

// moveStep advances a move of p's log to the other dir (alter log dirs):
// create the future log, copy the current log's batches into it as the
// alter-log-dirs fetcher does, truncate it where it diverged, swap it in
// once caught up, or abort the move.
func (s *sim) moveStep(p *partition) error {
	if p.fut == nil {
		return s.startMove(p)
	}
	fut, _ := s.m.FutureLog(p.t)
	if p.fut.logStart != p.cur.logStart {
		// The current log restarted elsewhere: so does the copy.
		return s.startFutureAt(p, fut, p.cur.logStart)
	}
	if i := divergence(p.cur, p.fut); i < len(p.fut.batches) {
		offset := p.fut.batches[i].BaseOffset()
		s.logf("%s: truncate future log to %d", p.t, offset)
		futDir, _ := s.m.FutureDirOf(p.t)
		p.fut.truncate(offset)
		s.lowerBounds(p, futDir, offset)
		if err := fut.TruncateTo(offset); err != nil {
			return fmt.Errorf("truncate future log: %w", err)
		}
		s.rpBound[futDir][p.t] = math.MaxInt64
		return nil
	}
	if n := s.rng.IntN(10); n == 0 {
		s.logf("%s: delete future log", p.t)
		p.futChanging = true
		if err := s.m.DeleteFutureLog(p.t); err != nil {
			return fmt.Errorf("delete future log: %w", err)
		}
		p.fut, p.futChanging = nil, false
		return nil
	}
	if fut.LogEndOffset() < s.log(p).LogEndOffset() {
		return s.copyToFuture(p, fut)
	}
	return s.swap(p)
}

func (s *sim) startMove(p *partition) error {
	if !p.durable {
		return s.syncDirs()
	}
	cur, _ := s.m.DirOf(p.t)
	to := logDirs[0]
	if to == cur {
		to = logDirs[1]
	}
	s.logf("%s: create future log in %s", p.t, to)
	p.futChanging = true
	fut, err := s.m.GetOrCreateFutureLog(p.t, to)
	if err != nil {
		return fmt.Errorf("create future log: %w", err)
	}
	p.fut, p.futDurable, p.futChanging = &replica{}, true, false
	if start := p.cur.logStart; start > 0 {
		return s.startFutureAt(p, fut, start)
	}
	return nil
}

// startFutureAt restarts the future log at the current log's start, as the
// alter-log-dirs fetcher does.
func (s *sim) startFutureAt(p *partition, fut *log.Log, start int64) error {
	s.logf("%s: future log starts at %d", p.t, start)
	dir, _ := s.m.FutureDirOf(p.t)
	s.lowerBounds(p, dir, p.fut.logStart) // as truncateFully
	p.fut.restartAt(start)
	if err := fut.TruncateFullyAndStartAt(start); err != nil {
		return fmt.Errorf("start future log at %d: %w", start, err)
	}
	s.rpBound[dir][p.t] = math.MaxInt64
	return nil
}

// divergence is the index of the future log's first batch that the current
// log does not hold at the same place.
func divergence(cur, fut *replica) int {
	i := 0
	for i < len(fut.batches) && i < len(cur.batches) && bytes.Equal(fut.batches[i], cur.batches[i]) {
		i++
	}
	if cur.logStart != fut.logStart {
		return 0
	}
	return i
}

func (s *sim) copyToFuture(p *partition, fut *log.Log) error {
	from := fut.LogEndOffset()
	info, err := s.log(p).Read(from, 1+s.rng.IntN(2000), math.MaxInt64)
	if err != nil {
		return fmt.Errorf("read current log at %d for the future log: %w", from, err)
	}
	s.logf("%s: copy %d bytes at %d to the future log", p.t, len(info.Data), from)
	if _, err := fut.AppendAsFollower(info.Data); err != nil {
		return fmt.Errorf("append to future log: %w", err)
	}
	for rest := info.Data; len(rest) > 0; {
		b, next, err := record.Next(rest)
		if err != nil {
			return err
		}
		s.writing(p, b)
		s.written(p.fut, b)
		rest = next
	}
	if s.policy == log.FlushEveryBatch {
		p.fut.promised = p.fut.leo()
	}
	return nil
}

func (s *sim) swap(p *partition) error {
	hw := s.log(p).HighWatermark()
	s.logf("%s: replace the current log with the future log (hw %d)", p.t, hw)
	p.futChanging = true
	l, err := s.m.ReplaceCurrentWithFutureLog(p.t, hw)
	if err != nil {
		return fmt.Errorf("swap: %w", err)
	}
	p.cur, p.fut, p.futChanging = p.fut, nil, false
	p.cur.promised = p.cur.leo() // both logs were flushed and closed
	if l.HighWatermark() != hw {
		return fmt.Errorf("swapped log has HW %d, want %d", l.HighWatermark(), hw)
	}
	for _, d := range logDirs {
		// The swap rewrote both dirs' checkpoints, the HWs' too: the old
		// dir's name the partition no more.
		s.rpBound[d][p.t], s.hwBound[d][p.t] = math.MaxInt64, math.MaxInt64
	}
	return nil
}

// cleanRestart stops the broker as core's Shutdown does (flush, HW
// checkpoint, log manager shutdown) and starts it again: everything must be
// there, the HWs included.
func (s *sim) cleanRestart() error {
	s.logf("clean shutdown and restart")
	if err := s.flushAll(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := s.checkpointHighWatermarks(); err != nil {
		return err
	}
	want := make(map[tp.TopicPartition]int64)
	for _, p := range s.parts {
		if p.cur != nil {
			want[p.t] = s.log(p).HighWatermark()
		}
	}
	if err := s.m.Shutdown(); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	s.checkpointLogOffsetsDone()
	if err := s.quiesce(); err != nil {
		return err
	}
	if err := s.recover(s.fs, true); err != nil {
		return fmt.Errorf("after a clean restart: %w", err)
	}
	for t, hw := range want {
		if l, ok := s.m.GetLog(t); ok && l.HighWatermark() != hw {
			return fmt.Errorf("after a clean restart %s has HW %d, want %d as before", t, l.HighWatermark(), hw)
		}
	}
	return nil
}

func (s *sim) checkpointLogOffsetsDone() {
	for _, d := range logDirs {
		for t := range s.rpBound[d] {
			s.rpBound[d][t] = math.MaxInt64
		}
	}
}

// cutAndRecover cuts the power (now, unless the armed cut already did),
// recovers on what the disk kept and checks it.
func (s *sim) cutAndRecover() error {
	after := s.fs.PowerCut()
	if after == nil {
		after = s.fs.CutPower(s.cutRng)
		s.logf("power cut after the last step")
	} else {
		s.logf("power cut at file operation %d", len(s.fs.Trace()))
	}
	s.cuts++
	s.lastFS, s.lastReport = s.fs, after.Report()
	// The dead broker's goroutines see errors and end.
	if err := s.quiesce(); err != nil {
		return err
	}
	s.fs = after
	s.cfg.FS = after
	return s.recover(after, false)
}

// recover opens the log manager on fsys as a restarting broker does, gives
// the logs their HWs from the checkpoint, checks everything and makes the
// model what was recovered. clean: nothing was lost (a clean shutdown).
func (s *sim) recover(fsys *crashfs.FS, clean bool) error {
	// The checkpoints as the disk holds them, before recovery.
	rps := make(map[string]map[tp.TopicPartition]int64)
	hws := make(map[string]map[tp.TopicPartition]int64)
	for _, d := range logDirs {
		var err error
		if rps[d], err = checkpoint.ReadOffsets(fsys, path.Join(d, logmgr.RecoveryPointCheckpoint)); err != nil {
			return fmt.Errorf("read recovery points: %w", err)
		}
	}
	s.countFileCache()
	m, err := logmgr.Open(s.cfg)
	if err != nil {
		return fmt.Errorf("recovery failed: %w", err)
	}
	s.m = m
	if err := s.quiesce(); err != nil { // the removal of deleted logs' dirs
		return err
	}
	for _, d := range m.Dirs() {
		if !d.Online {
			return fmt.Errorf("recovery took %s offline: %v", d.Path, d.Err)
		}
		if hws[d.Path], err = m.ReadHighWatermarks(d.Path); err != nil {
			return fmt.Errorf("read HW checkpoint: %w", err)
		}
	}
	// As the replica manager does at start (loadHighWatermarks).
	if failed := m.LoadHighWatermarks(); len(failed) > 0 {
		return fmt.Errorf("load HW checkpoints: %v", failed)
	}
	for _, p := range s.parts {
		if err := s.checkPartition(p, rps, hws, clean); err != nil {
			return fmt.Errorf("%s: %w", p.t, err)
		}
	}
	select {
	case f := <-m.Failures():
		return fmt.Errorf("recovery reported a failed dir: %s: %v", f.Dir, f.Err)
	default:
	}
	s.resetBounds()
	for _, p := range s.parts {
		if _, ok := m.GetLog(p.t); ok {
			dir, _ := m.DirOf(p.t)
			s.rpBound[dir][p.t], s.hwBound[dir][p.t] = math.MaxInt64, math.MaxInt64
		}
	}
	return nil
}

// checkPartition checks p's recovered logs against the model and the
// checkpoints, and makes them the model.
func (s *sim) checkPartition(p *partition, rps, hws map[string]map[tp.TopicPartition]int64, clean bool) error {
	l, ok := s.m.GetLog(p.t)
	switch {
	case !ok && p.cur != nil && p.durable && !p.deleting:
		return fmt.Errorf("the log was durably created and not deleted, but recovery has none")
	case ok && p.cur == nil && !p.creating && !p.deleting:
		return fmt.Errorf("recovery found a log that was deleted or never created")
	}
	var recovered, recoveredFut *replica
	var err error
	if ok {
		dir, _ := s.m.DirOf(p.t)
		if recovered, err = s.checkLog(p, l, "log", dir, p.cur, rps, hws, clean); err != nil {
			return err
		}
	}
	fut, futOK := s.m.FutureLog(p.t)
	if !futOK && p.fut != nil && p.futDurable && !p.futChanging {
		return fmt.Errorf("the future log was durably created, but recovery has none")
	}
	if futOK {
		dir, _ := s.m.FutureDirOf(p.t)
		if recoveredFut, err = s.checkLog(p, fut, "future log", dir, p.fut, rps, hws, clean); err != nil {
			return err
		}
	}
	p.cur, p.fut = recovered, recoveredFut
	p.durable, p.futDurable = ok, futOK
	p.deleting, p.creating, p.futChanging = false, false, false
	if !ok {
		p.history = nil
	}
	return nil
}

// checkLog scans every segment of l on the disk on its own and checks the
// batches: all whole and contiguous, each once written at its offset, every
// promised one there; the log's offsets, the checkpoints and the epoch cache
// agree with them. It returns what was recovered as the new model. want
// nil: a log the model does not have (its creation was cut), so empty.
func (s *sim) checkLog(p *partition, l *log.Log, what, dir string, want *replica, rps, hws map[string]map[tp.TopicPartition]int64, clean bool) (*replica, error) {
	if want == nil {
		want = &replica{}
	}
	r, err := s.checkLogAgainst(p, l, dir, want, rps, hws, clean)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", what, dir, err)
	}
	return r, nil
}

func (s *sim) checkLogAgainst(p *partition, l *log.Log, dir string, want *replica, rps, hws map[string]map[tp.TopicPartition]int64, clean bool) (*replica, error) {
	if d, ok := l.Damaged(); ok {
		// Only damage at rest is found below the recovery point: a power
		// loss tears nothing that was fsynced.
		return nil, fmt.Errorf("the log opened damaged at %d, below its recovery point %d: %v", d.Offset, d.RecoveryPoint, d.Cause)
	}
	rp := rps[dir][p.t]
	batches, err := scanSegments(s.fs, l.Dir(), rp)
	if err != nil {
		return nil, err
	}
	got := &replica{batches: batches, logStart: l.LogStartOffset()}
	leo := got.leo()
	if len(batches) == 0 {
		leo = l.LogEndOffset() // an empty log: its single segment's base
	}
	if l.LogEndOffset() != leo {
		return nil, fmt.Errorf("log end offset %d, the segments end at %d", l.LogEndOffset(), leo)
	}
	got.promised = leo
	for _, b := range batches {
		if !slices.ContainsFunc(p.history[b.BaseOffset()], func(h []byte) bool { return bytes.Equal(h, b) }) {
			return nil, fmt.Errorf("batch at %d (epoch %d, %d bytes) was never written there", b.BaseOffset(), b.LeaderEpoch(), len(b))
		}
	}
	byBase := make(map[int64]record.Batch, len(batches))
	for _, b := range batches {
		byBase[b.BaseOffset()] = b
	}
	for _, b := range want.batches {
		if b.NextOffset() > want.promised && !clean {
			break
		}
		if got, ok := byBase[b.BaseOffset()]; !ok || !bytes.Equal(got, b) {
			return nil, fmt.Errorf("promised batch at %d (epoch %d) is lost (promised up to %d, recovered log end %d)",
				b.BaseOffset(), b.LeaderEpoch(), want.promised, leo)
		}
	}
	if clean && leo != want.leo() {
		return nil, fmt.Errorf("after a clean shutdown the log ends at %d, want %d", leo, want.leo())
	}
	if bound := min(rp, bound(s.rpBound, dir, p.t)); bound > leo {
		return nil, fmt.Errorf("recovery-point checkpoint claims %d, the log ends at %d", rp, leo)
	}
	if hw, ok := hws[dir][p.t]; ok && min(hw, bound(s.hwBound, dir, p.t)) > leo {
		return nil, fmt.Errorf("HW checkpoint claims %d, the log ends at %d", hw, leo)
	}
	if err := checkEpochs(l, batches, leo); err != nil {
		return nil, err
	}
	if err := checkProducerState(l, batches, leo); err != nil {
		return nil, err
	}
	return got, nil
}

func bound(b map[string]map[tp.TopicPartition]int64, dir string, t tp.TopicPartition) int64 {
	if v, ok := b[dir][t]; ok {
		return v
	}
	return math.MaxInt64
}

// checkProducerState checks the log's producer state, however it was
// rebuilt (from a snapshot or from the log), against a replay of its
// batches from the log start.
func checkProducerState(l *log.Log, batches []record.Batch, leo int64) error {
	want := producerstate.NewManager(0)
	for _, b := range batches {
		if b.HasProducer() && b.LastOffset() >= l.LogStartOffset() && b.LastOffset() < leo {
			want.ApplyBatch(b)
		}
	}
	if got := l.ProducerState(); !got.Equal(want) {
		return fmt.Errorf("producer state %+v, the batches say %+v", got.Describe(0), want.Describe(0))
	}
	return nil
}

// checkEpochs checks the leader-epoch cache against the batches.
func checkEpochs(l *log.Log, batches []record.Batch, leo int64) error {
	entries := l.EpochCache().Entries()
	for i, e := range entries {
		if i > 0 && (e.Epoch <= entries[i-1].Epoch || e.StartOffset <= entries[i-1].StartOffset) {
			return fmt.Errorf("epoch cache %v does not increase", entries)
		}
		if e.StartOffset > leo {
			return fmt.Errorf("epoch cache %v has an entry past the log end %d", entries, leo)
		}
	}
	for _, b := range batches {
		if got := l.EpochCache().EpochForOffset(b.BaseOffset()); got != b.LeaderEpoch() {
			return fmt.Errorf("batch at %d has epoch %d, the epoch cache %v says %d", b.BaseOffset(), b.LeaderEpoch(), entries, got)
		}
	}
	return nil
}

// scanSegments reads every segment file of a log dir, oldest first, and
// returns its batches, each verified (length, CRC, records) and continuing
// the offsets. It reads the files itself, not through the log.
func scanSegments(fsys *crashfs.FS, dir string, recoveryPoint int64) ([]record.Batch, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []string
	for _, e := range entries {
		if n := e.Name(); len(n) == 24 && strings.HasSuffix(n, ".log") {
			bases = append(bases, n)
		}
	}
	slices.Sort(bases)
	var out []record.Batch
	next := int64(-1)
	for _, name := range bases {
		var base int64
		if _, err := fmt.Sscanf(name, "%020d.log", &base); err != nil {
			return nil, fmt.Errorf("segment name %s: %w", name, err)
		}
		if next >= 0 && base != next {
			return nil, fmt.Errorf("segment %d follows a segment ending at %d (recovery point %d)", base, next, recoveryPoint)
		}
		next = base
		data, err := fsys.ReadFile(path.Join(dir, name))
		if err != nil {
			return nil, err
		}
		for pos := 0; len(data) > 0; {
			b, rest, err := record.Next(data)
			if err == nil {
				err = b.Verify()
			}
			if err == nil && b.BaseOffset() != next {
				err = fmt.Errorf("base offset %d, want %d", b.BaseOffset(), next)
			}
			if err != nil {
				where := "above"
				if next < recoveryPoint {
					where = "below"
				}
				return nil, fmt.Errorf("segment %d position %d, offset %d %s the checkpointed recovery point %d: bad batch: %w",
					base, pos, next, where, recoveryPoint, err)
			}
			out = append(out, record.Batch(bytes.Clone(b)))
			next = b.NextOffset()
			pos += len(b)
			data = rest
		}
	}
	return out, nil
}
