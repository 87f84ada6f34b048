package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/core/vfs/crashfs"
)

// TestScenarios runs the scenario files of testdata/scenarios: a broker's
// ReplicaManager driven by text commands (the controller's requests, produces,
// followers' fetches, the clock), each followed by the state it produced, in
// the style of etcd-io/raft's testdata. A reviewer reads them without Go; the
// commands are described in testdata/scenarios/README.md. After a deliberate
// change of behaviour, regenerate the expected output with
//
//	go test ./core -run TestScenarios -rewrite
//
// and review the diff.
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata/scenarios", func(t *testing.T, path string) {
		if strings.HasSuffix(path, ".md") {
			return
		}
		s := newScenario(t)
		defer s.close()
		datadriven.RunTest(t, path, s.run)
	})
}

// scenario is one broker (the "broker under test") on a simulated disk
// (crashfs, so `crash` can cut its power) with a manual clock. Its fetcher
// manager only records what it is asked (followers do not fetch by
// themselves: the file says what the followers do, with `fetch` as them and
// `append-as-follower` for what this broker's own fetcher would write).
type scenario struct {
	t        *testing.T
	clock    *clock.Manual
	fs       *crashfs.FS
	cfg      Config
	rm       *ReplicaManager
	fetchers *fakeFetchers
	isr      *scriptedIsrChanger

	ctrlEpoch int32 // the controller epoch of the last request (default for the next)

	produces []*scenarioProduce
}

// scenarioProduce is an acks=-1 produce waiting in its own goroutine.
type scenarioProduce struct {
	id   int
	done chan ProduceResult
}

func newScenario(t *testing.T) *scenario {
	s := &scenario{t: t, clock: clock.NewManual(time.Unix(1_700_000_000, 0)), fs: crashfs.New(), ctrlEpoch: 1}
	s.isr = &scriptedIsrChanger{}
	s.cfg = Config{BrokerID: 1, LogDirs: []string{"/data"}, Clock: s.clock, Logger: zerolog.Nop(),
		HWCheckpointInterval: 5 * time.Second, ReplicaLagTimeMax: 10 * time.Second, MinInsyncReplicas: 1,
		LogConfig: log.DefaultConfig(), IsrChanger: s.isr}
	s.cfg.LogConfig.FlushPolicy = log.FlushOS
	return s
}

func (s *scenario) open(fs *crashfs.FS) {
	s.fs = fs
	s.fetchers = newFakeFetchers()
	cfg := s.cfg
	cfg.FS, cfg.Fetchers = fs, s.fetchers
	rm, err := NewReplicaManager(cfg)
	if err != nil {
		s.t.Fatalf("NewReplicaManager: %v", err)
	}
	s.rm = rm
}

func (s *scenario) close() {
	if s.rm != nil {
		_ = s.rm.Shutdown(context.Background())
	}
}

// run executes one command and returns what it produced.
func (s *scenario) run(t *testing.T, d *datadriven.TestData) string {
	if s.rm == nil && d.Cmd != "broker" {
		s.open(s.fs) // a default broker when the file does not configure one
	}
	var out strings.Builder
	switch d.Cmd {
	case "broker":
		s.cmdBroker(t, d, &out)
	case "leader-and-isr":
		s.cmdLeaderAndIsr(t, d, &out)
	case "produce":
		s.cmdProduce(t, d, &out)
	case "await-produce":
		s.cmdAwaitProduce(t, d, &out)
	case "fetch":
		s.cmdFetch(t, d, &out)
	case "consume":
		s.cmdConsume(t, d, &out)
	case "offsets-for-leader-epoch":
		s.cmdOffsetsForLeaderEpoch(t, d, &out)
	case "append-as-follower":
		s.cmdAppendAsFollower(t, d, &out)
	case "truncate-as-follower":
		var to int64
		d.ScanArgs(t, "to", &to)
		l, _, ok := s.rm.FollowerLog(partitionArg(t, d))
		if !ok {
			out.WriteString("not a follower\n")
			break
		}
		if err := l.TruncateTo(to); err != nil {
			fmt.Fprintf(&out, "truncate: %v\n", err)
			break
		}
		fmt.Fprintf(&out, "leo=%d\n", l.LogEndOffset())
	case "advance-clock":
		var dur time.Duration
		d.ScanArgs(t, "by", &dur)
		// Step so that periodic work (the ISR shrink check every lag-max/2)
		// runs at each of its due times, as it would with a real clock.
		for step := time.Second; dur > 0; dur -= step {
			s.clock.Advance(min(step, dur))
		}
		fmt.Fprintf(&out, "now +%s\n", s.clock.Now().Sub(time.Unix(1_700_000_000, 0)))
	case "stop-replica":
		s.cmdStopReplica(t, d, &out)
	case "isr-changer":
		var mode string
		d.ScanArgs(t, "mode", &mode)
		s.isr.setMode(t, mode)
		fmt.Fprintf(&out, "isr changes: %s\n", mode)
	case "complete-isr-change":
		code := ErrNone
		if d.HasArg("error") {
			code = scanCode(t, d, "error")
		}
		if !s.isr.complete(code) {
			out.WriteString("no ISR change in flight\n")
		}
	case "restart":
		_ = s.rm.Shutdown(context.Background())
		s.open(s.fs)
		out.WriteString("restarted (clean shutdown)\n")
	case "crash":
		seed := uint64(1)
		d.MaybeScanArgs(t, "seed", &seed)
		after := s.fs.CutPower(rand.New(rand.NewPCG(seed, seed)))
		_ = s.rm.Shutdown(context.Background()) // errors: the disk is gone
		s.open(after)
		out.WriteString("power cut; restarted on what the disk kept\n")
	case "state":
		s.writeState(&out)
	case "log":
		s.writeLog(t, d, &out)
	default:
		t.Fatalf("%s: unknown command %q", d.Pos, d.Cmd)
	}
	// ISR changes the command caused (a fetch expanding, the clock shrinking).
	for _, ev := range s.isr.drain() {
		out.WriteString(ev + "\n")
	}
	return out.String()
}

// partitionArg is the partition a command names (topic=, partition=), orders-0 by default.
func partitionArg(t *testing.T, d *datadriven.TestData) tp.TopicPartition {
	p := tp.TopicPartition{Topic: "orders"}
	d.MaybeScanArgs(t, "topic", &p.Topic)
	d.MaybeScanArgs(t, "partition", &p.Partition)
	return p
}

func scanCode(t *testing.T, d *datadriven.TestData, key string) ErrorCode {
	var name string
	d.ScanArgs(t, key, &name)
	for c, n := range errorNames {
		if n == name {
			return c
		}
	}
	t.Fatalf("%s: unknown error code %q", d.Pos, name)
	return 0
}

func (s *scenario) cmdBroker(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	if s.rm != nil {
		t.Fatalf("%s: broker must come first", d.Pos)
	}
	d.MaybeScanArgs(t, "id", &s.cfg.BrokerID)
	d.MaybeScanArgs(t, "min-isr", &s.cfg.MinInsyncReplicas)
	d.MaybeScanArgs(t, "lag-max", &s.cfg.ReplicaLagTimeMax)
	s.open(s.fs)
	fmt.Fprintf(out, "broker %d: min.insync.replicas=%d replica.lag.time.max=%s\n",
		s.cfg.BrokerID, s.cfg.MinInsyncReplicas, s.cfg.ReplicaLagTimeMax)
}

func (s *scenario) cmdLeaderAndIsr(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	st := PartitionState{TopicPartition: partitionArg(t, d), ControllerEpoch: s.ctrlEpoch}
	d.MaybeScanArgs(t, "ctrl-epoch", &st.ControllerEpoch)
	d.ScanArgs(t, "leader", &st.Leader)
	d.ScanArgs(t, "epoch", &st.LeaderEpoch)
	d.MaybeScanArgs(t, "partition-epoch", &st.PartitionEpoch)
	d.ScanArgs(t, "replicas", &st.Replicas)
	d.MaybeScanArgs(t, "isr", &st.ISR)
	st.IsNew = d.HasArg("new")
	s.ctrlEpoch = st.ControllerEpoch
	before := s.fetcherSnapshot()
	resp := s.rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{
		ControllerID: 100, ControllerEpoch: st.ControllerEpoch, PartitionStates: []PartitionState{st},
		LiveLeaders: []Broker{{ID: 1, Host: "b1", Port: 9091}, {ID: 2, Host: "b2", Port: 9092}, {ID: 3, Host: "b3", Port: 9093}},
	})
	if resp.Error != ErrNone {
		fmt.Fprintf(out, "request: %s\n", resp.Error)
	}
	for _, pe := range resp.PartitionErrors {
		fmt.Fprintf(out, "%s: %s\n", pe.TopicPartition, pe.Error)
	}
	s.writeFetcherChanges(before, out)
}

// fetcherSnapshot is what the fetcher manager was told to fetch.
func (s *scenario) fetcherSnapshot() map[tp.TopicPartition]InitialFetchState {
	s.fetchers.mu.Lock()
	defer s.fetchers.mu.Unlock()
	m := make(map[tp.TopicPartition]InitialFetchState, len(s.fetchers.added))
	for k, v := range s.fetchers.added {
		m[k] = v
	}
	return m
}

// writeFetcherChanges says which partitions the command started or stopped fetching.
func (s *scenario) writeFetcherChanges(before map[tp.TopicPartition]InitialFetchState, out *strings.Builder) {
	after := s.fetcherSnapshot()
	var lines []string
	for t, st := range after {
		if b, ok := before[t]; !ok || b != st {
			lines = append(lines, fmt.Sprintf("fetcher: %s follows broker %d at leader epoch %d from offset %d",
				t, st.Leader.ID, st.LeaderEpoch, st.InitOffset))
		}
	}
	for t := range before {
		if _, ok := after[t]; !ok {
			lines = append(lines, fmt.Sprintf("fetcher: %s no longer fetched", t))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		out.WriteString(l + "\n")
	}
}

func (s *scenario) cmdProduce(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	acks, count := "1", 1
	d.MaybeScanArgs(t, "acks", &acks)
	d.MaybeScanArgs(t, "count", &count)
	req := ProduceRequest{TopicPartition: partitionArg(t, d), Timeout: time.Hour}
	switch acks {
	case "all", "-1":
		req.Acks = AcksAll
	case "1":
		req.Acks = AcksLeader
	case "0":
		req.Acks = AcksNone
	default:
		t.Fatalf("%s: acks=%s: want all, 1 or 0", d.Pos, acks)
	}
	for i := range count {
		req.Records = append(req.Records, record.Record{Value: []byte("v" + strconv.Itoa(i))})
	}
	pp := s.rm.StartProduce(req)
	if pp.p == nil { // refused before any append
		fmt.Fprintf(out, "%s\n", pp.res.Error)
		return
	}
	offsets := fmt.Sprintf("appended offsets %d-%d", pp.res.BaseOffset, pp.res.BaseOffset+int64(count)-1)
	if req.Acks != AcksAll {
		res := pp.Wait(context.Background())
		fmt.Fprintf(out, "%s: %s, hw=%d\n", offsets, res.Error, res.HighWatermark)
		return
	}
	sp := &scenarioProduce{id: len(s.produces) + 1, done: make(chan ProduceResult, 1)}
	s.produces = append(s.produces, sp)
	go func() { sp.done <- pp.Wait(context.Background()) }()
	fmt.Fprintf(out, "%s: produce #%d waits for the ISR (for hw >= %d)\n", offsets, sp.id, pp.required)
}

// cmdAwaitProduce waits (10 s at most) for an acks=-1 produce's answer.
func (s *scenario) cmdAwaitProduce(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	id := len(s.produces)
	d.MaybeScanArgs(t, "id", &id)
	if id < 1 || id > len(s.produces) {
		fmt.Fprintf(out, "no produce #%d\n", id)
		return
	}
	select {
	case res := <-s.produces[id-1].done:
		fmt.Fprintf(out, "produce #%d: %s, base offset %d, hw=%d\n", id, res.Error, res.BaseOffset, res.HighWatermark)
	case <-time.After(10 * time.Second):
		fmt.Fprintf(out, "produce #%d: still waiting after 10s\n", id)
	}
}

func (s *scenario) cmdFetch(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	fp := FetchPartition{TopicPartition: partitionArg(t, d), CurrentLeaderEpoch: -1, LastFetchedEpoch: -1}
	var replica int32
	d.ScanArgs(t, "replica", &replica)
	d.ScanArgs(t, "offset", &fp.FetchOffset)
	d.MaybeScanArgs(t, "epoch", &fp.CurrentLeaderEpoch)
	d.MaybeScanArgs(t, "last-fetched-epoch", &fp.LastFetchedEpoch)
	d.MaybeScanArgs(t, "log-start", &fp.LogStartOffset)
	resp := s.rm.FetchMessages(context.Background(), FetchRequest{ReplicaID: replica, BrokerEpoch: -1, Partitions: []FetchPartition{fp}})
	for _, r := range resp.Partitions {
		fmt.Fprintf(out, "%s\n", describeFetch(r))
	}
}

// describeFetch is one line for a fetch answer.
func describeFetch(r FetchPartitionResult) string {
	if r.Error != ErrNone {
		return r.Error.String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "hw=%d leo=%d log-start=%d", r.HighWatermark, r.LogEndOffset, r.LogStartOffset)
	if de := r.DivergingEpoch; de != nil {
		fmt.Fprintf(&b, " diverging-epoch=%d end-offset=%d", de.Epoch, de.EndOffset)
	}
	b.WriteString(" records=")
	b.WriteString(describeBatches(r.Records))
	return b.String()
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

func (s *scenario) cmdConsume(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	req := ConsumeRequest{TopicPartition: partitionArg(t, d), MaxBytes: 1 << 20}
	d.MaybeScanArgs(t, "offset", &req.Offset)
	res := s.rm.Consume(context.Background(), req)
	if res.Error != ErrNone {
		fmt.Fprintf(out, "%s\n", res.Error)
		return
	}
	vals := make([]string, len(res.Records))
	for i, r := range res.Records {
		vals[i] = string(r.Value)
	}
	fmt.Fprintf(out, "%d records [%s], next offset %d, hw=%d\n", len(vals), strings.Join(vals, " "), res.NextOffset, res.HighWatermark)
}

func (s *scenario) cmdOffsetsForLeaderEpoch(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	op := OffsetForLeaderEpochPartition{TopicPartition: partitionArg(t, d), CurrentLeaderEpoch: -1}
	d.ScanArgs(t, "epoch", &op.LeaderEpoch)
	d.MaybeScanArgs(t, "current", &op.CurrentLeaderEpoch)
	resp := s.rm.OffsetsForLeaderEpoch(context.Background(), OffsetsForLeaderEpochRequest{ReplicaID: 2, Partitions: []OffsetForLeaderEpochPartition{op}})
	for _, r := range resp.Partitions {
		if r.Error != ErrNone {
			fmt.Fprintf(out, "%s\n", r.Error)
			continue
		}
		fmt.Fprintf(out, "epoch %d ends at offset %d\n", r.LeaderEpoch, r.EndOffset)
	}
}

// cmdAppendAsFollower writes count one-record batches of a leader epoch to
// the follower's log, as this broker's fetcher would from its leader.
func (s *scenario) cmdAppendAsFollower(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	var ep int32
	count := 1
	d.ScanArgs(t, "epoch", &ep)
	d.MaybeScanArgs(t, "count", &count)
	l, _, ok := s.rm.FollowerLog(partitionArg(t, d))
	if !ok {
		out.WriteString("not a follower\n")
		return
	}
	for range count {
		b := record.Build([]record.Record{{Value: []byte("f")}}, s.clock.Now().UnixMilli())
		b.SetBaseOffset(l.LogEndOffset())
		b.SetLeaderEpoch(ep)
		if _, err := l.AppendAsFollower(b); err != nil {
			fmt.Fprintf(out, "append: %v\n", err)
			return
		}
	}
	fmt.Fprintf(out, "leo=%d\n", l.LogEndOffset())
}

func (s *scenario) cmdStopReplica(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	sp := StopReplicaPartition{TopicPartition: partitionArg(t, d), LeaderEpoch: NoEpoch, Delete: d.HasArg("delete")}
	d.MaybeScanArgs(t, "epoch", &sp.LeaderEpoch)
	ctrl := s.ctrlEpoch
	d.MaybeScanArgs(t, "ctrl-epoch", &ctrl)
	before := s.fetcherSnapshot()
	resp := s.rm.StopReplicas(context.Background(), StopReplicaRequest{ControllerID: 100, ControllerEpoch: ctrl, Partitions: []StopReplicaPartition{sp}})
	if resp.Error != ErrNone {
		fmt.Fprintf(out, "request: %s\n", resp.Error)
	}
	for _, pe := range resp.PartitionErrors {
		fmt.Fprintf(out, "%s: %s\n", pe.TopicPartition, pe.Error)
	}
	s.writeFetcherChanges(before, out)
}

// writeState prints every hosted partition: its role and leadership, ISR,
// offsets, and on a leader what it knows of each follower.
func (s *scenario) writeState(out *strings.Builder) {
	desc := s.rm.Describe("", nil)
	if len(desc.Partitions) == 0 {
		out.WriteString("no partitions\n")
	}
	for _, p := range desc.Partitions {
		fmt.Fprintf(out, "%s: %s leader=%d epoch=%d partition-epoch=%d replicas=%s isr=%s hw=%d leo=%d log-start=%d\n",
			p.TopicPartition, p.Role, p.Leader, p.LeaderEpoch, p.PartitionEpoch, ids(p.Replicas), ids(p.ISR),
			p.HighWatermark, p.LogEndOffset, p.LogStartOffset)
		part, code := s.rm.onlinePartition(p.TopicPartition)
		if code != ErrNone {
			continue
		}
		part.mu.RLock()
		if part.isLeaderLocked() {
			if part.pendingIsr != nil {
				fmt.Fprintf(out, "  ISR change in flight: %s\n", ids(part.pendingIsr.change.NewIsr))
			}
			now := s.clock.Now()
			for _, id := range part.assignment {
				r, ok := part.remoteReplicas[id]
				if !ok {
					continue
				}
				leo := "unknown"
				if r.logEndOffset != unknownOffset {
					leo = strconv.FormatInt(r.logEndOffset, 10)
				}
				caught := "never caught up"
				if !r.lastCaughtUpTime.IsZero() {
					caught = fmt.Sprintf("caught up %s ago", now.Sub(r.lastCaughtUpTime))
				}
				fmt.Fprintf(out, "  follower %d: leo=%s, %s\n", id, leo, caught)
			}
		}
		part.mu.RUnlock()
	}
}

// writeLog prints a partition's leader epoch cache and batches.
func (s *scenario) writeLog(t *testing.T, d *datadriven.TestData, out *strings.Builder) {
	l, ok := s.rm.LocalLog(partitionArg(t, d))
	if !ok {
		out.WriteString("no log\n")
		return
	}
	var epochs []string
	for _, e := range l.EpochCache().Entries() {
		epochs = append(epochs, fmt.Sprintf("%d@%d", e.Epoch, e.StartOffset))
	}
	fmt.Fprintf(out, "epochs (epoch@start offset): %s\n", strings.Join(epochs, " "))
	var data []byte
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		info, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil || len(info.Data) == 0 {
			t.Fatalf("read log at %d: %v", off, err)
		}
		data = append(data, info.Data...)
		for rest := info.Data; len(rest) > 0; {
			b, next, err := record.Next(rest)
			if err != nil {
				t.Fatalf("read log at %d: %v", off, err)
			}
			off, rest = b.NextOffset(), next
		}
	}
	fmt.Fprintf(out, "batches (offsets@epoch): %s\n", describeBatches(data))
}

func ids(v []int32) string {
	if len(v) == 0 {
		return "-"
	}
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = strconv.Itoa(int(id))
	}
	return strings.Join(s, ",")
}

// scriptedIsrChanger is the scenario's controller for AlterPartition: in
// mode auto it accepts every change at once (as StandaloneIsrChanger);
// in mode hold it keeps the change until complete-isr-change answers it.
// Each change and answer is reported in the output of the command that
// caused it.
type scriptedIsrChanger struct {
	mu     sync.Mutex
	hold   bool
	held   *IsrChange
	done   func(IsrChangeResult)
	events []string
}

func (c *scriptedIsrChanger) setMode(t *testing.T, mode string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch mode {
	case "auto":
		c.hold = false
	case "hold":
		c.hold = true
	default:
		t.Fatalf("isr-changer mode=%s: want auto or hold", mode)
	}
}

func (c *scriptedIsrChanger) Submit(change IsrChange, done func(IsrChangeResult)) {
	c.mu.Lock()
	c.events = append(c.events, fmt.Sprintf("AlterPartition %s: isr=%s (based on partition epoch %d)",
		change.TopicPartition, ids(change.NewIsr), change.PartitionEpoch))
	if c.hold {
		c.held, c.done = &change, done
		c.mu.Unlock()
		return
	}
	c.events = append(c.events, fmt.Sprintf("  accepted: partition epoch %d", change.PartitionEpoch+1))
	c.mu.Unlock()
	done(IsrChangeResult{Isr: slices.Clone(change.NewIsr), PartitionEpoch: change.PartitionEpoch + 1})
}

// complete answers the held change: accepted (ErrNone) or refused with code.
func (c *scriptedIsrChanger) complete(code ErrorCode) bool {
	c.mu.Lock()
	change, done := c.held, c.done
	c.held, c.done = nil, nil
	if change == nil {
		c.mu.Unlock()
		return false
	}
	res := IsrChangeResult{Error: code}
	if code == ErrNone {
		res.Isr, res.PartitionEpoch = slices.Clone(change.NewIsr), change.PartitionEpoch+1
		c.events = append(c.events, fmt.Sprintf("  accepted: partition epoch %d", res.PartitionEpoch))
	} else {
		c.events = append(c.events, fmt.Sprintf("  refused: %s", code))
	}
	c.mu.Unlock()
	done(res)
	return true
}

func (c *scriptedIsrChanger) drain() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	ev := c.events
	c.events = nil
	return ev
}
