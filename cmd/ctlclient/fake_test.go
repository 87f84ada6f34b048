package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	"github.com/replicad/replicad/service"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memBroker is a replica manager that keeps each partition's records in
// memory with HW = LEO, so ctlclient is tested against the real service
// layer without core.
type memBroker struct {
	mu        sync.Mutex
	logs      map[tp.TopicPartition][]record.Record
	lastLAI   core.LeaderAndIsrRequest
	laiResult core.LeaderAndIsrResponse // nil PartitionErrors: all NONE
	produces  []int                     // records per produce request
	// dirs is where each partition's log lives (default /data/a);
	// AlterReplicaLogDirs moves it at once to /data/b.
	dirs map[tp.TopicPartition]string
	// view answers Metadata (nil: nothing known); metadataCalls counts them.
	view          func() core.MetadataView
	metadataCalls atomic.Int32
}

func newMemBroker() *memBroker { return &memBroker{logs: map[tp.TopicPartition][]record.Record{}} }

func (b *memBroker) BecomeLeaderOrFollower(_ context.Context, req core.LeaderAndIsrRequest) core.LeaderAndIsrResponse {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastLAI = req
	if b.laiResult.Error != core.ErrNone || b.laiResult.PartitionErrors != nil {
		return b.laiResult
	}
	resp := core.LeaderAndIsrResponse{}
	for _, ps := range req.PartitionStates {
		resp.PartitionErrors = append(resp.PartitionErrors, core.PartitionError{TopicPartition: ps.TopicPartition})
	}
	return resp
}

func (b *memBroker) UpdateMetadata(context.Context, core.UpdateMetadataRequest) core.ErrorCode {
	return core.ErrNone
}

func (b *memBroker) StopReplicas(_ context.Context, req core.StopReplicaRequest) core.StopReplicaResponse {
	resp := core.StopReplicaResponse{}
	for _, p := range req.Partitions {
		resp.PartitionErrors = append(resp.PartitionErrors, core.PartitionError{TopicPartition: p.TopicPartition, Error: core.ErrFencedLeaderEpoch})
	}
	return resp
}

func (b *memBroker) CheckpointHighWatermarks(context.Context) []core.DirCheckpoint {
	return []core.DirCheckpoint{{Dir: "/data/a", Partitions: 2}}
}

func (b *memBroker) Describe(topic string, partition *int32) core.Description {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := core.Description{BrokerID: 1, ControllerEpoch: 1, LogDirs: []core.LogDirInfo{{Path: "/data/a", Online: true, PartitionCount: len(b.logs)}}}
	for t, recs := range b.logs {
		if (topic != "" && t.Topic != topic) || (partition != nil && t.Partition != *partition) {
			continue
		}
		n := int64(len(recs))
		d.Partitions = append(d.Partitions, core.PartitionInfo{TopicPartition: t, Role: core.RoleLeader, Leader: 1, LeaderEpoch: 1,
			Replicas: []int32{1}, ISR: []int32{1}, HighWatermark: n, LogEndOffset: n, LogDir: b.dirOfLocked(t)})
	}
	return d
}

func (b *memBroker) dirOfLocked(t tp.TopicPartition) string {
	if d, ok := b.dirs[t]; ok {
		return d
	}
	return "/data/a"
}

func (b *memBroker) AlterReplicaLogDirs(_ context.Context, reqs []core.AlterReplicaLogDir) []core.PartitionError {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []core.PartitionError
	for _, r := range reqs {
		code := core.ErrNone
		switch _, hosted := b.logs[r.TopicPartition]; {
		case r.LogDir != "/data/a" && r.LogDir != "/data/b":
			code = core.ErrLogDirNotFound
		case !hosted:
			code = core.ErrUnknownTopicOrPartition
		default:
			if b.dirs == nil {
				b.dirs = make(map[tp.TopicPartition]string)
			}
			b.dirs[r.TopicPartition] = r.LogDir
		}
		out = append(out, core.PartitionError{TopicPartition: r.TopicPartition, Error: code})
	}
	return out
}

func (b *memBroker) Produce(_ context.Context, req core.ProduceRequest) core.ProduceResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	if req.TopicPartition.Topic == "notleader" {
		return core.ProduceResult{Error: core.ErrNotLeaderOrFollower, BaseOffset: -1}
	}
	// The service hands records over encoded, as the batch it size-checked.
	recs, err := req.Batch.Records()
	if err != nil {
		return core.ProduceResult{Error: core.ErrCorruptMessage, BaseOffset: -1}
	}
	base := int64(len(b.logs[req.TopicPartition]))
	for i, r := range recs {
		r.Offset = base + int64(i)
		b.logs[req.TopicPartition] = append(b.logs[req.TopicPartition], r)
	}
	b.produces = append(b.produces, len(recs))
	return core.ProduceResult{BaseOffset: base, HighWatermark: base + int64(len(recs))}
}

// Consume answers at most 3 records per call so clients have to loop.
func (b *memBroker) Consume(_ context.Context, req core.ConsumeRequest) core.ConsumeResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	recs := b.logs[req.TopicPartition]
	hw := int64(len(recs))
	if req.Offset > hw {
		return core.ConsumeResult{Error: core.ErrOffsetOutOfRange, HighWatermark: hw}
	}
	end := min(req.Offset+3, hw)
	return core.ConsumeResult{HighWatermark: hw, Records: append([]record.Record(nil), recs[req.Offset:end]...), NextOffset: end}
}

// DeleteRecords answers the offset as the low watermark, or
// OFFSET_OUT_OF_RANGE past the partition's records.
func (b *memBroker) DeleteRecords(_ context.Context, req core.DeleteRecordsRequest) core.DeleteRecordsResponse {
	b.mu.Lock()
	defer b.mu.Unlock()
	var resp core.DeleteRecordsResponse
	for _, p := range req.Partitions {
		hw := int64(len(b.logs[p.TopicPartition]))
		r := core.DeleteRecordsResult{TopicPartition: p.TopicPartition, LowWatermark: p.Offset}
		if p.Offset == core.DeleteRecordsHighWatermark {
			r.LowWatermark = hw
		} else if p.Offset > hw {
			r.Error, r.LowWatermark = core.ErrOffsetOutOfRange, -1
		}
		resp.Partitions = append(resp.Partitions, r)
	}
	return resp
}

func (b *memBroker) MaxBatchBytes() int { return 1 << 20 }

// Metadata answers b.view, narrowed to the topics asked for as core does.
func (b *memBroker) Metadata(topics []string) core.MetadataView {
	b.metadataCalls.Add(1)
	var v core.MetadataView
	if b.view != nil {
		v = b.view()
	}
	if topics == nil {
		return v
	}
	all := v.Topics
	v.Topics = nil
	for _, t := range topics {
		tm := core.TopicMetadata{Topic: t, Error: core.ErrUnknownTopicOrPartition}
		for _, have := range all {
			if have.Topic == t {
				tm = have
			}
		}
		v.Topics = append(v.Topics, tm)
	}
	return v
}

func (b *memBroker) ControllerEpoch() int32 { return 0 }

func (b *memBroker) produceCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.produces)
}

// FetchMessages and OffsetsForLeaderEpoch complete the service's interface;
// ctlclient sends neither (followers do).
func (b *memBroker) FetchMessages(context.Context, core.FetchRequest) core.FetchResponse {
	return core.FetchResponse{}
}

func (b *memBroker) OffsetsForLeaderEpoch(context.Context, core.OffsetsForLeaderEpochRequest) core.OffsetsForLeaderEpochResponse {
	return core.OffsetsForLeaderEpochResponse{}
}

// startBroker serves b (a memBroker, or one wrapping it) on a loopback port
// and returns its address.
func startBroker(t *testing.T, b service.ReplicaManager, opts ...grpc.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := service.NewServer(service.Options{ReplicaManager: b, Logger: zerolog.Nop(), ServerOptions: opts})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Shutdown(context.Background())
		<-served
	})
	return lis.Addr().String()
}

// result is one ctlclient run.
type result struct {
	code           int
	stdout, stderr string
}

// ctl runs ctlclient in-process against broker (passed through CTLCLIENT_BROKER).
func ctl(t *testing.T, broker, stdin string, args ...string) result {
	t.Helper()
	return ctlReader(t, broker, strings.NewReader(stdin), args...)
}

func ctlReader(t *testing.T, broker string, stdin io.Reader, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "CTLCLIENT_BROKER" {
			return broker
		}
		return ""
	}
	code := run(context.Background(), args, stdin, &out, &errOut, getenv)
	return result{code, out.String(), errOut.String()}
}
