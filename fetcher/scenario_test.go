package fetcher

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// TestScenarios runs the scenario files of testdata/scenarios: one fetcher
// of follower broker 1 fetching partition orders-0 from a fake leader
// (broker 2), one round at a time, as Kafka's AbstractFetcherThreadTest
// drives doWork(). Each `fetch` prints the request, the leader's answer and
// the follower's log after the fetcher applied it, so that truncation on a
// diverging epoch, fencing and out-of-range handling read as a story. The
// commands are described in testdata/scenarios/README.md. After a
// deliberate change of behaviour, regenerate the expected output with
//
//	go test ./fetcher -run TestScenarios -rewrite
//
// and review the diff.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		if strings.HasSuffix(path, ".md") {
			return
		}
		s := newFetchScenario(t)
		datadriven.RunTest(t, path, s.run)
	})
}

// fetchScenario is the fetcher under test (no goroutine of its own: `fetch`
// runs one round of its loop), its follower replica and the fake leader.
type fetchScenario struct {
	t        *testing.T
	clock    *clock.Manual
	start    time.Time
	p        tp.TopicPartition
	leader   *fakeLeader
	follower *followerReplica
	f        *fetcher
}

func newFetchScenario(t *testing.T) *fetchScenario {
	start := time.Unix(1_700_000_000, 0)
	s := &fetchScenario{t: t, clock: clock.NewManual(start), start: start, p: tp.TopicPartition{Topic: "orders"}, leader: newFakeLeader(t)}
	// The fetcher never opens a stream here: Client and Replicas only
	// satisfy the config.
	cfg, err := Config{BrokerID: 1, BrokerEpoch: func() int64 { return 1 }, Clock: s.clock, PartitionBackoff: time.Second,
		MaxBytes: 1 << 20, DisableFetchSessions: true, Logger: zerolog.Nop(),
		Client: NewInmemClient(), Replicas: ReplicasFunc(func(tp.TopicPartition) (Replica, bool) { return nil, false })}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	s.f = &fetcher{key: fetcherKey{LeaderID: 2}, cfg: &cfg, failed: &failedPartitions{}, logger: zerolog.Nop(),
		partitions: make(map[tp.TopicPartition]*partitionState), wake: make(chan struct{}, 1)}
	return s
}

func (s *fetchScenario) run(t *testing.T, d *datadriven.TestData) string {
	var out strings.Builder
	switch d.Cmd {
	case "leader":
		// A (new) log on the leader, starting at log-start, at leader epoch.
		var ep int32
		var logStart int64
		d.ScanArgs(t, "epoch", &ep)
		d.MaybeScanArgs(t, "log-start", &logStart)
		s.leader.addPartition(s.p, ep, logStart)
		s.leader.noDivergence = d.HasArg("no-divergence")
		fmt.Fprintf(&out, "leader: epoch %d, log starts at %d\n", ep, logStart)
	case "leader-append":
		count := 1
		d.MaybeScanArgs(t, "count", &count)
		s.leader.append(s.p, count)
		s.writeLeader(&out)
	case "leader-epoch":
		var ep int32
		d.ScanArgs(t, "epoch", &ep)
		s.leader.setEpoch(s.p, ep)
		s.writeLeader(&out)
	case "leader-hw":
		var hw int64
		d.ScanArgs(t, "hw", &hw)
		s.leader.with(func(fl *fakeLeader) { fl.hw[s.p] = hw })
		s.writeLeader(&out)
	case "leader-error":
		// A forced answer for the partition; code=NONE clears it.
		var name string
		d.ScanArgs(t, "code", &name)
		code, ok := replicadv1.ErrorCode_value["ERROR_CODE_"+name]
		if !ok {
			t.Fatalf("%s: unknown error code %q", d.Pos, name)
		}
		s.leader.with(func(fl *fakeLeader) {
			if code == 0 {
				delete(fl.errs, s.p)
			} else {
				fl.errs[s.p] = replicadv1.ErrorCode(code)
			}
		})
		fmt.Fprintf(&out, "leader answers %s\n", name)
	case "follower":
		// The follower's replica: a new log starting at log-start. A
		// replica the fetcher held is removed from it (as StopReplica
		// with delete does) first.
		var logStart int64
		d.MaybeScanArgs(t, "log-start", &logStart)
		s.f.removePartitions([]tp.TopicPartition{s.p})
		r := &followerReplica{log: openLog(t, s.p, logStart)}
		r.Replica = NewLogReplica(r.log, r.epoch.Load)
		s.follower = r
		s.writeFollower(&out)
	case "follower-append":
		// Records the follower wrote as an earlier leader (its own history).
		var ep int32
		count := 1
		d.ScanArgs(t, "epoch", &ep)
		d.MaybeScanArgs(t, "count", &count)
		appendBatches(t, s.follower.log, ep, count)
		s.writeFollower(&out)
	case "add-partition":
		// LeaderAndIsr made this broker follow broker 2 at epoch: the
		// replica takes the epoch and the fetcher starts at its log end.
		var ep int32
		d.ScanArgs(t, "epoch", &ep)
		s.follower.epoch.Store(ep)
		s.f.addPartitions(map[tp.TopicPartition]*partitionState{s.p: {replica: s.follower,
			fetchOffset: s.follower.LogEndOffset(), leaderEpoch: ep, caughtUpAt: s.clock.Now()}})
		s.writeFetchState(&out)
	case "replica-epoch":
		// A newer LeaderAndIsr moved the replica's epoch on, not yet told
		// to this fetcher.
		var ep int32
		d.ScanArgs(t, "epoch", &ep)
		s.follower.epoch.Store(ep)
		fmt.Fprintf(&out, "replica at leader epoch %d\n", ep)
	case "fetch":
		s.fetchRound(&out)
	case "advance-clock":
		var dur time.Duration
		d.ScanArgs(t, "by", &dur)
		s.clock.Advance(dur)
		fmt.Fprintf(&out, "now +%s\n", s.clock.Now().Sub(s.start))
	case "state":
		s.writeFollower(&out)
		s.writeFetchState(&out)
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	return out.String()
}

// fetchRound is one turn of the fetcher's loop (fetcher.run) without its
// stream: build the request, let the fake leader answer it at once, apply
// the answer.
func (s *fetchScenario) fetchRound(out *strings.Builder) {
	req, requested, wait := s.f.buildFetchRequest()
	if len(req.GetPartitions()) == 0 {
		if wait > 0 {
			fmt.Fprintf(out, "nothing to fetch (next partition due in %s)\n", wait)
		} else {
			out.WriteString("nothing to fetch\n")
		}
		s.writeFetchState(out)
		return
	}
	for _, fp := range req.GetPartitions() {
		fmt.Fprintf(out, "request: offset=%d epoch=%d last-fetched-epoch=%d log-start=%d\n",
			fp.GetFetchOffset(), fp.GetCurrentLeaderEpoch(), fp.GetLastFetchedEpoch(), fp.GetLogStartOffset())
	}
	s.leader.mu.Lock()
	s.leader.requests = append(s.leader.requests, req)
	resp, _ := s.leader.answerLocked(req)
	s.leader.mu.Unlock()
	for _, r := range resp.GetPartitions() {
		fmt.Fprintf(out, "answer: %s\n", describeAnswer(r))
	}
	s.f.processFetchResponse(requested, resp)
	s.writeFollower(out)
	s.writeFetchState(out)
}

func describeAnswer(r *replicadv1.FetchPartitionResult) string {
	switch c := r.GetErrorCode(); c {
	case replicadv1.ErrorCode_ERROR_CODE_NONE:
	case replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE:
		return fmt.Sprintf("%s leo=%d log-start=%d", codeName(c), r.GetLogEndOffset(), r.GetLogStartOffset())
	default:
		return codeName(c)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "hw=%d leo=%d log-start=%d", r.GetHighWatermark(), r.GetLogEndOffset(), r.GetLogStartOffset())
	if de := r.GetDivergingEpoch(); de != nil {
		fmt.Fprintf(&b, " diverging-epoch=%d end-offset=%d", de.GetEpoch(), de.GetEndOffset())
	}
	fmt.Fprintf(&b, " records=%s", describeBatches(r.GetRecords()))
	return b.String()
}

func codeName(c replicadv1.ErrorCode) string {
	return strings.TrimPrefix(c.String(), "ERROR_CODE_")
}

// describeBatches lists raw batches as offsets@epoch ("0-2@1 3@2"), "none" when empty.
func describeBatches(data []byte) string {
	var parts []string
	for rest := data; len(rest) > 0; {
		b, next, err := record.Next(rest)
		if err != nil {
			parts = append(parts, "corrupt")
			break
		}
		if b.BaseOffset() == b.LastOffset() {
			parts = append(parts, fmt.Sprintf("%d@%d", b.BaseOffset(), b.LeaderEpoch()))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d@%d", b.BaseOffset(), b.LastOffset(), b.LeaderEpoch()))
		}
		rest = next
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// logSummary is a log's offsets, epoch cache and batches (and its HW
// when withHW: the fake leader's own HW is not what it answers).
func logSummary(l *log.Log, withHW bool) string {
	var epochs []string
	for _, e := range l.EpochCache().Entries() {
		epochs = append(epochs, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
	}
	var data []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		info, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil || len(info.Data) == 0 {
			return fmt.Sprintf("unreadable at %d: %v", off, err)
		}
		data = append(data, info.Data...)
		off = lastNext(info.Data)
	}
	ep := strings.Join(epochs, " ")
	if ep == "" {
		ep = "none"
	}
	hw := ""
	if withHW {
		hw = fmt.Sprintf(" hw=%d", l.HighWatermark())
	}
	return fmt.Sprintf("log-start=%d leo=%d%s epochs=%s batches=%s",
		l.LogStartOffset(), l.LogEndOffset(), hw, ep, describeBatches(data))
}

func (s *fetchScenario) writeLeader(out *strings.Builder) {
	s.leader.mu.Lock()
	lp := s.leader.parts[s.p]
	s.leader.mu.Unlock()
	fmt.Fprintf(out, "leader (epoch %d): %s\n", lp.epoch, logSummary(lp.log, false))
}

func (s *fetchScenario) writeFollower(out *strings.Builder) {
	fmt.Fprintf(out, "follower: %s\n", logSummary(s.follower.log, true))
}

// writeFetchState says whether the fetcher holds the partition, and how.
func (s *fetchScenario) writeFetchState(out *strings.Builder) {
	st, ok := s.f.fetchState(s.p)
	switch {
	case s.f.failed.contains(s.p):
		out.WriteString("fetch state: failed (set aside until the next LeaderAndIsr)\n")
	case !ok:
		out.WriteString("fetch state: not fetched\n")
	default:
		delayed := ""
		if st.Delayed {
			delayed = ", delayed"
		}
		fmt.Fprintf(out, "fetch state: offset=%d epoch=%d lag=%d%s\n", st.FetchOffset, st.LeaderEpoch, st.Lag, delayed)
	}
}
