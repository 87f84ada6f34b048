package service

import (
	"context"
	"net"
	"sync"
	"testing"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/replicad/replicad/core"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRM records what the handlers pass to the replica manager and answers
// with canned results, so service tests do not need core to work.
type fakeRM struct {
	mu    sync.Mutex
	calls []any // every request received, in order

	leaderAndIsr core.LeaderAndIsrResponse
	updateMeta   core.ErrorCode
	stopReplica  core.StopReplicaResponse
	checkpoint   []core.DirCheckpoint
	description  core.Description
	produce      core.ProduceResult
	produceFn    func(context.Context, core.ProduceRequest) core.ProduceResult // when set, answers instead of produce
	consume      core.ConsumeResult
	fetch        func(core.FetchRequest) core.FetchResponse
	offsets      core.OffsetsForLeaderEpochResponse
	alterDirs    []core.PartitionError
	retention    core.RetentionResponse
	metadata     core.MetadataView
	maxBatch     int
	panicWith    any // when set, every call panics with it
}

func (f *fakeRM) record(req any) {
	f.mu.Lock()
	f.calls = append(f.calls, req)
	p := f.panicWith
	f.mu.Unlock()
	if p != nil {
		panic(p)
	}
}

func (f *fakeRM) Calls() []any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]any(nil), f.calls...)
}

func (f *fakeRM) BecomeLeaderOrFollower(_ context.Context, req core.LeaderAndIsrRequest) core.LeaderAndIsrResponse {
	f.record(req)
	return f.leaderAndIsr
}

func (f *fakeRM) UpdateMetadata(_ context.Context, req core.UpdateMetadataRequest) core.ErrorCode {
	f.record(req)
	return f.updateMeta
}

func (f *fakeRM) StopReplicas(_ context.Context, req core.StopReplicaRequest) core.StopReplicaResponse {
	f.record(req)
	return f.stopReplica
}

type alterReplicaLogDirsCall []core.AlterReplicaLogDir

func (f *fakeRM) AlterReplicaLogDirs(_ context.Context, reqs []core.AlterReplicaLogDir) []core.PartitionError {
	f.record(alterReplicaLogDirsCall(reqs))
	return f.alterDirs
}

type checkpointCall struct{}

func (f *fakeRM) CheckpointHighWatermarks(context.Context) []core.DirCheckpoint {
	f.record(checkpointCall{})
	return f.checkpoint
}

type describeCall struct {
	topic     string
	partition *int32
}

func (f *fakeRM) Describe(topic string, partition *int32) core.Description {
	f.record(describeCall{topic, partition})
	return f.description
}

func (f *fakeRM) Produce(ctx context.Context, req core.ProduceRequest) core.ProduceResult {
	f.record(req)
	if f.produceFn != nil {
		return f.produceFn(ctx, req)
	}
	return f.produce
}

func (f *fakeRM) Consume(_ context.Context, req core.ConsumeRequest) core.ConsumeResult {
	f.record(req)
	return f.consume
}

func (f *fakeRM) DeleteRecords(_ context.Context, req core.DeleteRecordsRequest) core.DeleteRecordsResponse {
	f.record(req)
	resp := core.DeleteRecordsResponse{}
	for _, p := range req.Partitions {
		resp.Partitions = append(resp.Partitions, core.DeleteRecordsResult{TopicPartition: p.TopicPartition, LowWatermark: p.Offset})
	}
	return resp
}

type runRetentionCall struct {
	topic     string
	partition *int32
}

func (f *fakeRM) RunRetention(_ context.Context, topic string, partition *int32) core.RetentionResponse {
	f.record(runRetentionCall{topic, partition})
	return f.retention
}

func (f *fakeRM) FetchMessages(_ context.Context, req core.FetchRequest) core.FetchResponse {
	f.record(req)
	if f.fetch == nil {
		return core.FetchResponse{}
	}
	return f.fetch(req)
}

func (f *fakeRM) OffsetsForLeaderEpoch(_ context.Context, req core.OffsetsForLeaderEpochRequest) core.OffsetsForLeaderEpochResponse {
	f.record(req)
	return f.offsets
}

// metadataCall is a Metadata call's topics (nil: every topic).
type metadataCall struct{ topics []string }

// Metadata answers the canned view, its topics narrowed to the ones asked
// for as core does (an unknown one UNKNOWN_TOPIC_OR_PARTITION).
func (f *fakeRM) Metadata(topics []string) core.MetadataView {
	f.record(metadataCall{topics})
	v := f.metadata
	if topics == nil {
		return v
	}
	v.Topics = nil
	for _, t := range topics {
		tm := core.TopicMetadata{Topic: t, Error: core.ErrUnknownTopicOrPartition}
		for _, have := range f.metadata.Topics {
			if have.Topic == t {
				tm = have
			}
		}
		v.Topics = append(v.Topics, tm)
	}
	return v
}

func (f *fakeRM) ControllerEpoch() int32 { return 0 }

func (f *fakeRM) MaxBatchBytes() int {
	if f.maxBatch == 0 {
		return 1 << 20
	}
	return f.maxBatch
}

// startServer serves rm on an in-memory listener and returns a client
// connection; both are torn down with the test.
func startServer(t *testing.T, rm ReplicaManager) (*Server, *grpc.ClientConn) {
	t.Helper()
	return startServerWith(t, Options{ReplicaManager: rm})
}

// startServerWith is startServer with more options (the logger is set here).
func startServerWith(t *testing.T, opts Options) (*Server, *grpc.ClientConn) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	opts.Logger = zerolog.New(zerolog.NewTestWriter(t))
	srv := NewServer(opts)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("dial bufconn: %v", err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Shutdown(context.Background())
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, conn
}
