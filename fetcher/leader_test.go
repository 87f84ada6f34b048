package fetcher

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/epoch"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// fakeLeader is a scriptable leader over real logs: it answers fetches as
// SPEC says a leader does (epoch fencing, diverging epoch, out of range,
// long poll woken on append), and tests can force errors, corrupt answers,
// broken streams, or script whole answers.
type fakeLeader struct {
	t testing.TB

	mu    sync.Mutex
	parts map[tp.TopicPartition]*leaderPartition
	// noDivergence makes the leader skip the diverging-epoch check, as an old
	// leader would: a follower ahead of it then gets OFFSET_OUT_OF_RANGE.
	noDivergence bool
	errs         map[tp.TopicPartition]replicadv1.ErrorCode // forced answers
	corrupt      map[tp.TopicPartition]int                  // corrupt the next n answers with records
	breakNext    int                                        // fail the next n fetches: the stream breaks
	// hw sets a partition's answered HW (clamped to its LEO); default LEO.
	hw map[tp.TopicPartition]int64
	// readLimit serves a partition's records only below this offset.
	readLimit map[tp.TopicPartition]int64
	// shareMaxBytes shares the request's max_bytes across its partitions in
	// request order, as core's leader does: once it is spent, the partitions
	// after get no records. Otherwise each partition reads up to 1 MiB.
	shareMaxBytes bool
	// script, when it returns non-nil, answers the partition instead.
	script   func(n int, p *replicadv1.FetchPartition) *replicadv1.FetchPartitionResult
	requests []*replicadv1.FetchRequest
	appended chan struct{} // closed and replaced on every append
}

type leaderPartition struct {
	log   *log.Log
	epoch int32
}

func newFakeLeader(t testing.TB) *fakeLeader {
	return &fakeLeader{
		t:         t,
		parts:     make(map[tp.TopicPartition]*leaderPartition),
		errs:      make(map[tp.TopicPartition]replicadv1.ErrorCode),
		hw:        make(map[tp.TopicPartition]int64),
		readLimit: make(map[tp.TopicPartition]int64),
		corrupt:   make(map[tp.TopicPartition]int),
		appended:  make(chan struct{}),
	}
}

// openLog opens a log for tests in a fresh temp dir.
func openLog(t testing.TB, p tp.TopicPartition, logStart int64) *log.Log {
	t.Helper()
	l, err := log.Open(log.Options{
		Dir: t.TempDir() + "/" + p.String(), TopicPartition: p, LogStartOffset: logStart,
		Config: log.Config{FlushPolicy: log.FlushOS}, Logger: zerolog.Nop(),
	})
	if err != nil {
		t.Fatalf("open log: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// appendBatches appends n one-record batches at epoch, as a leader would.
func appendBatches(t testing.TB, l *log.Log, ep int32, n int) {
	t.Helper()
	for range n {
		b := record.Build([]record.Record{{Value: []byte("v")}}, 1)
		if _, err := l.AppendAsLeader(b, ep); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
}

// appendBatch appends one batch of n records at epoch, as a leader would.
func appendBatch(t testing.TB, l *log.Log, ep int32, n int) {
	t.Helper()
	recs := make([]record.Record, n)
	for i := range recs {
		recs[i] = record.Record{Value: []byte("v")}
	}
	if _, err := l.AppendAsLeader(record.Build(recs, 1), ep); err != nil {
		t.Fatalf("append: %v", err)
	}
}

// addPartition makes the leader lead p at epoch with a log starting at logStart.
func (fl *fakeLeader) addPartition(p tp.TopicPartition, ep int32, logStart int64) *log.Log {
	l := openLog(fl.t, p, logStart)
	fl.mu.Lock()
	fl.parts[p] = &leaderPartition{log: l, epoch: ep}
	fl.mu.Unlock()
	return l
}

// append appends n batches to p at its current epoch and wakes waiting fetches.
func (fl *fakeLeader) append(p tp.TopicPartition, n int) {
	fl.mu.Lock()
	lp := fl.parts[p]
	fl.mu.Unlock()
	appendBatches(fl.t, lp.log, lp.epoch, n)
	fl.mu.Lock()
	close(fl.appended)
	fl.appended = make(chan struct{})
	fl.mu.Unlock()
}

func (fl *fakeLeader) setEpoch(p tp.TopicPartition, ep int32) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	fl.parts[p].epoch = ep
}

func (fl *fakeLeader) with(f func(fl *fakeLeader)) {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	f(fl)
}

// requestsFor returns the FetchPartitions sent for p, in order.
func (fl *fakeLeader) requestsFor(p tp.TopicPartition) []*replicadv1.FetchPartition {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	var out []*replicadv1.FetchPartition
	for _, r := range fl.requests {
		for _, fp := range r.GetPartitions() {
			if fp.GetTopic() == p.Topic && fp.GetPartition() == p.Partition {
				out = append(out, fp)
			}
		}
	}
	return out
}

// lastFetchAt reports whether the last fetch of p was at offset.
func (fl *fakeLeader) lastFetchAt(p tp.TopicPartition, offset int64) bool {
	reqs := fl.requestsFor(p)
	return len(reqs) > 0 && reqs[len(reqs)-1].GetFetchOffset() == offset
}

var errBroken = errors.New("fake leader: stream broken")

// Fetch implements FetchHandler.
func (fl *fakeLeader) Fetch(ctx context.Context, req *replicadv1.FetchRequest) (*replicadv1.FetchResponse, error) {
	fl.mu.Lock()
	fl.requests = append(fl.requests, req)
	if fl.breakNext > 0 {
		fl.breakNext--
		fl.mu.Unlock()
		return nil, errBroken
	}
	fl.mu.Unlock()
	deadline := time.NewTimer(time.Duration(req.GetMaxWaitMs()) * time.Millisecond)
	defer deadline.Stop()
	for {
		fl.mu.Lock()
		resp, ready := fl.answerLocked(req)
		wake := fl.appended
		fl.mu.Unlock()
		if ready {
			return resp, nil
		}
		select {
		case <-wake:
		case <-deadline.C:
			return resp, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// answerLocked answers every partition; ready is false when the answer
// holds no records and no error, so the fetch may wait for data.
func (fl *fakeLeader) answerLocked(req *replicadv1.FetchRequest) (resp *replicadv1.FetchResponse, ready bool) {
	resp = &replicadv1.FetchResponse{CorrelationId: req.GetCorrelationId()}
	budget := 1 << 20
	if fl.shareMaxBytes {
		budget = int(req.GetMaxBytes())
	}
	for _, fp := range req.GetPartitions() {
		res := fl.answerPartitionLocked(len(fl.requests), fp, budget)
		if fl.shareMaxBytes {
			budget = max(0, budget-len(res.GetRecords()))
		}
		if res.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || len(res.GetRecords()) > 0 || res.GetDivergingEpoch() != nil {
			ready = true
		}
		resp.Partitions = append(resp.Partitions, res)
	}
	return resp, ready
}

func (fl *fakeLeader) answerPartitionLocked(n int, fp *replicadv1.FetchPartition, maxBytes int) *replicadv1.FetchPartitionResult {
	p := tp.TopicPartition{Topic: fp.GetTopic(), Partition: fp.GetPartition()}
	res := &replicadv1.FetchPartitionResult{Topic: p.Topic, Partition: p.Partition}
	if fl.script != nil {
		if r := fl.script(n, fp); r != nil {
			r.Topic, r.Partition = p.Topic, p.Partition
			return r
		}
	}
	lp, ok := fl.parts[p]
	if !ok {
		res.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
		return res
	}
	if code, ok := fl.errs[p]; ok {
		res.ErrorCode = code
		return res
	}
	switch {
	case fp.GetCurrentLeaderEpoch() < lp.epoch:
		res.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH
		return res
	case fp.GetCurrentLeaderEpoch() > lp.epoch:
		res.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH
		return res
	}
	l := lp.log
	leo := l.LogEndOffset()
	res.HighWatermark, res.LogStartOffset, res.LogEndOffset = leo, l.LogStartOffset(), leo
	if hw, ok := fl.hw[p]; ok {
		res.HighWatermark = min(hw, leo)
	}
	if last := fp.GetLastFetchedEpoch(); !fl.noDivergence && last >= 0 {
		e, end := l.EpochCache().EndOffsetFor(last, leo)
		if e == epoch.Undefined || e < last || end < fp.GetFetchOffset() {
			res.DivergingEpoch = &replicadv1.EpochEndOffset{Epoch: e, EndOffset: end}
			return res
		}
	}
	if fp.GetFetchOffset() < l.LogStartOffset() || fp.GetFetchOffset() > leo {
		res.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE
		return res
	}
	readEnd := leo
	if limit, ok := fl.readLimit[p]; ok {
		readEnd = min(limit, leo)
	}
	if fp.GetFetchOffset() >= readEnd || maxBytes <= 0 {
		return res
	}
	info, err := l.Read(fp.GetFetchOffset(), maxBytes, readEnd)
	if err != nil {
		res.ErrorCode = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR
		return res
	}
	res.Records = info.Data
	if fl.corrupt[p] > 0 {
		fl.corrupt[p]--
		bad := append([]byte(nil), info.Data...)
		bad[len(bad)-1] ^= 0xff // inside the CRC-covered part
		res.Records = bad
	}
	return res
}
