package service

import (
	"context"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func mustEqual(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %#v\nwant %#v", what, got, want)
	}
}

func mustProtoEqual(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

// TestLeaderAndIsrTranslatesBothWays ensures a LeaderAndIsr reaches core
// field for field and core's error codes come back in an OK response.
func TestLeaderAndIsrTranslatesBothWays(t *testing.T) {
	orders0 := tp.TopicPartition{Topic: "orders", Partition: 0}
	orders1 := tp.TopicPartition{Topic: "orders", Partition: 1}
	rm := &fakeRM{leaderAndIsr: core.LeaderAndIsrResponse{PartitionErrors: []core.PartitionError{
		{TopicPartition: orders0, Error: core.ErrNone},
		{TopicPartition: orders1, Error: core.ErrStaleControllerEpoch},
	}}}
	_, conn := startServer(t, rm)
	req := validLeaderAndIsr()
	req.BrokerEpoch = 7
	second := validState()
	second.Partition, second.Leader, second.IsNew, second.PartitionEpoch = 1, 2, true, 3
	second.AddingReplicas = []int32{3}
	req.PartitionStates = append(req.PartitionStates, second)
	req.LiveLeaders = []*replicadv1.Broker{{Id: 2, Host: "b2", Port: 9092}}

	resp, err := replicadv1.NewReplicaManagerServiceClient(conn).LeaderAndIsr(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "response", resp, &replicadv1.LeaderAndIsrResponse{PartitionErrors: []*replicadv1.PartitionError{
		{Topic: "orders", Partition: 0, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NONE},
		{Topic: "orders", Partition: 1, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH},
	}})
	mustEqual(t, "core request", rm.Calls(), []any{core.LeaderAndIsrRequest{
		ControllerID: 1, ControllerEpoch: 1, BrokerEpoch: 7,
		PartitionStates: []core.PartitionState{
			{TopicPartition: orders0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2}, Replicas: []int32{1, 2, 3}},
			{TopicPartition: orders1, ControllerEpoch: 1, Leader: 2, LeaderEpoch: 1, ISR: []int32{1, 2}, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, AddingReplicas: []int32{3}, IsNew: true},
		},
		LiveLeaders: []core.Broker{{ID: 2, Host: "b2", Port: 9092}},
	}})
}

// TestWholeRequestErrorCodes ensures request-level codes of UpdateMetadata
// and StopReplica come back as they left core.
func TestWholeRequestErrorCodes(t *testing.T) {
	rm := &fakeRM{
		updateMeta:  core.ErrStaleControllerEpoch,
		stopReplica: core.StopReplicaResponse{PartitionErrors: []core.PartitionError{{TopicPartition: tp.TopicPartition{Topic: "t"}, Error: core.ErrFencedLeaderEpoch}}},
	}
	_, conn := startServer(t, rm)
	c := replicadv1.NewReplicaManagerServiceClient(conn)
	ctx := context.Background()

	um, err := c.UpdateMetadata(ctx, &replicadv1.UpdateMetadataRequest{ControllerId: 3, ControllerEpoch: 2, LiveBrokers: []*replicadv1.Broker{{Id: 1, Host: "h", Port: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "update metadata code", um.GetErrorCode(), replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH)

	sr, err := c.StopReplica(ctx, &replicadv1.StopReplicaRequest{ControllerEpoch: 2, Partitions: []*replicadv1.StopReplicaPartition{{Topic: "t", LeaderEpoch: -1, DeletePartition: true}}})
	if err != nil {
		t.Fatal(err)
	}
	mustEqual(t, "stop replica code", sr.GetPartitionErrors()[0].GetErrorCode(), replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH)
	calls := rm.Calls()
	mustEqual(t, "update metadata request", calls[0], core.UpdateMetadataRequest{ControllerID: 3, ControllerEpoch: 2, LiveBrokers: []core.Broker{{ID: 1, Host: "h", Port: 1}}, PartitionStates: []core.PartitionState{}})
	mustEqual(t, "stop replica request", calls[1], core.StopReplicaRequest{ControllerEpoch: 2, Partitions: []core.StopReplicaPartition{{TopicPartition: tp.TopicPartition{Topic: "t"}, LeaderEpoch: core.NoEpoch, Delete: true}}})
}

// TestDescribeAndCheckpointTranslate ensures describe filters reach core and
// every field of the description and of a checkpoint outcome comes back.
func TestDescribeAndCheckpointTranslate(t *testing.T) {
	rm := &fakeRM{
		description: core.Description{BrokerID: 1, ControllerEpoch: 4,
			Partitions: []core.PartitionInfo{{TopicPartition: tp.TopicPartition{Topic: "t", Partition: 2}, Role: core.RoleFollower, Leader: 2, LeaderEpoch: 5,
				PartitionEpoch: 6, ControllerEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{2}, HighWatermark: 10, LogEndOffset: 12, LogStartOffset: 1, LogDir: "/d",
				DamagedOffset: ptr(int64(7)),
				TopicConfig: topicconfig.Config{RetentionMs: 60000, RetentionBytes: -1, SegmentBytes: 4096, SegmentMs: 100, MinInsyncReplicas: 2,
					CleanupPolicy: "delete"}, TopicConfigVersion: 3,
				ProducerCount: 2, Producers: []core.ProducerInfo{{ID: 9, Epoch: 1, LastSequence: 14, LastOffset: 11, LastTimestampMs: 1700}}}},
			LogDirs: []core.LogDirInfo{{Path: "/d", Online: true, PartitionCount: 1}, {Path: "/e"}},
		},
		checkpoint: []core.DirCheckpoint{{Dir: "/d", Partitions: 1}, {Dir: "/e", Error: core.ErrStorageError}},
	}
	_, conn := startServer(t, rm)
	c := replicadv1.NewReplicaManagerServiceClient(conn)
	ctx := context.Background()

	d, err := c.DescribePartitions(ctx, &replicadv1.DescribePartitionsRequest{Topic: "t", Partition: ptr(int32(2))})
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "describe", d, &replicadv1.DescribePartitionsResponse{BrokerId: 1, ControllerEpoch: 4,
		Partitions: []*replicadv1.PartitionDescription{{Topic: "t", Partition: 2, Role: replicadv1.ReplicaRole_REPLICA_ROLE_FOLLOWER, Leader: 2, LeaderEpoch: 5,
			PartitionEpoch: 6, ControllerEpoch: 4, Replicas: []int32{1, 2}, Isr: []int32{2}, HighWatermark: 10, LogEndOffset: 12, LogStartOffset: 1, LogDir: "/d",
			DamagedOffset: ptr(int64(7)),
			TopicConfig: map[string]string{"retention.ms": "60000", "retention.bytes": "-1", "segment.bytes": "4096", "segment.ms": "100",
				"min.insync.replicas": "2", "cleanup.policy": "delete"}, TopicConfigVersion: 3,
			ProducerCount: 2, Producers: []*replicadv1.ProducerStateDescription{{ProducerId: 9, ProducerEpoch: 1, LastSequence: 14, LastOffset: 11, LastTimestampMs: 1700}}}},
		LogDirs: []*replicadv1.LogDirDescription{{Path: "/d", Online: true, PartitionCount: 1}, {Path: "/e"}},
	})
	if _, err := c.DescribePartitions(ctx, &replicadv1.DescribePartitionsRequest{}); err != nil {
		t.Fatal(err)
	}

	cp, err := c.CheckpointHighWatermarks(ctx, &replicadv1.CheckpointHighWatermarksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "checkpoint", cp, &replicadv1.CheckpointHighWatermarksResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR,
		LogDirs: []*replicadv1.LogDirCheckpoint{{LogDir: "/d", Partitions: 1}, {LogDir: "/e", ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR}}})

	calls := rm.Calls()
	mustEqual(t, "describe filter", calls[0], describeCall{"t", ptr(int32(2))})
	mustEqual(t, "describe all", calls[1], describeCall{"", nil})
	mustEqual(t, "checkpoint call", calls[2], checkpointCall{})
}

// TestProduceAndConsumeTranslate ensures records, acks and time-outs reach
// core (with defaults for zero fields) and results come back whole.
func TestProduceAndConsumeTranslate(t *testing.T) {
	rm := &fakeRM{
		produce: core.ProduceResult{Error: core.ErrNotEnoughReplicas, BaseOffset: -1, HighWatermark: 3, Message: "isr 1 below min 2"},
		consume: core.ConsumeResult{HighWatermark: 2, LogStartOffset: 0, NextOffset: 2, Records: []record.Record{
			{Offset: 0, LeaderEpoch: 1, TimestampMs: 5, Key: []byte("k"), Value: []byte("a"), Headers: []record.Header{{Key: "h", Value: []byte("x")}}},
			{Offset: 1, LeaderEpoch: 1, TimestampMs: 6, Value: []byte("b")},
		}},
	}
	_, conn := startServer(t, rm)
	c := replicadv1.NewLogServiceClient(conn)
	ctx := context.Background()

	p, err := c.Produce(ctx, &replicadv1.ProduceRequest{Topic: "t", Partition: 1, Acks: -1, Records: []*replicadv1.Record{
		{Key: []byte("k"), Value: []byte("a"), Headers: []*replicadv1.Header{{Key: "h", Value: []byte("x")}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "produce", p, &replicadv1.ProduceResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, BaseOffset: -1, HighWatermark: 3, ErrorMessage: "isr 1 below min 2"})

	cr, err := c.Consume(ctx, &replicadv1.ConsumeRequest{Topic: "t", Partition: 1, Offset: 0, MaxWaitMs: 250, MinBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "consume", cr, &replicadv1.ConsumeResponse{HighWatermark: 2, NextOffset: 2, Records: []*replicadv1.ConsumedRecord{
		{Offset: 0, LeaderEpoch: 1, TimestampMs: 5, Key: []byte("k"), Value: []byte("a"), Headers: []*replicadv1.Header{{Key: "h", Value: []byte("x")}}, Sequence: -1},
		{Offset: 1, LeaderEpoch: 1, TimestampMs: 6, Value: []byte("b"), Sequence: -1},
	}})

	calls := rm.Calls()
	// The records reach core encoded once, as the batch the size check built.
	pr := calls[0].(core.ProduceRequest)
	recs, err := pr.Batch.Records()
	if err != nil {
		t.Fatalf("produce batch: %v", err)
	}
	for i := range recs {
		recs[i].TimestampMs, recs[i].LeaderEpoch = 0, 0
	}
	pr.Batch = nil
	mustEqual(t, "produce request", pr, core.ProduceRequest{TopicPartition: tp.TopicPartition{Topic: "t", Partition: 1}, Acks: core.AcksAll,
		Timeout: DefaultProduceTimeout, Producer: record.NoProducer})
	mustEqual(t, "produce records", recs, []record.Record{{Key: []byte("k"), Value: []byte("a"), Headers: []record.Header{{Key: "h", Value: []byte("x")}}}})
	mustEqual(t, "consume request", calls[1], core.ConsumeRequest{TopicPartition: tp.TopicPartition{Topic: "t", Partition: 1},
		MaxBytes: DefaultConsumeMaxBytes, MinBytes: 1, MaxWait: 250 * time.Millisecond})
}

// TestUnimplementedServices ensures the controller's RPCs answer
// Unimplemented rather than pretending to work.
func TestUnimplementedServices(t *testing.T) {
	_, conn := startServer(t, &fakeRM{})
	ctx := context.Background()
	_, err := replicadv1.NewControllerServiceClient(conn).DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("DescribeCluster: %v", err)
	}
}

// TestAlterReplicaLogDirs ensures the handler passes the moves to the replica
// manager and answers its per-partition codes, and rejects a malformed
// request with InvalidArgument naming the field, before the replica manager.
func TestAlterReplicaLogDirs(t *testing.T) {
	rm := &fakeRM{alterDirs: []core.PartitionError{
		{TopicPartition: tp.TopicPartition{Topic: "t", Partition: 0}, Error: core.ErrNone},
		{TopicPartition: tp.TopicPartition{Topic: "t", Partition: 1}, Error: core.ErrLogDirNotFound},
	}}
	_, conn := startServer(t, rm)
	c := replicadv1.NewReplicaManagerServiceClient(conn)
	ctx := context.Background()
	resp, err := c.AlterReplicaLogDirs(ctx, &replicadv1.AlterReplicaLogDirsRequest{Partitions: []*replicadv1.AlterReplicaLogDir{
		{Topic: "t", Partition: 0, LogDir: "/data/b"}, {Topic: "t", Partition: 1, LogDir: "/nope"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	codesGot := []replicadv1.ErrorCode{resp.GetPartitionErrors()[0].GetErrorCode(), resp.GetPartitionErrors()[1].GetErrorCode()}
	mustEqual(t, "codes", codesGot, []replicadv1.ErrorCode{replicadv1.ErrorCode_ERROR_CODE_NONE, replicadv1.ErrorCode_ERROR_CODE_LOG_DIR_NOT_FOUND})
	mustEqual(t, "call", rm.Calls(), []any{alterReplicaLogDirsCall{
		{TopicPartition: tp.TopicPartition{Topic: "t", Partition: 0}, LogDir: "/data/b"},
		{TopicPartition: tp.TopicPartition{Topic: "t", Partition: 1}, LogDir: "/nope"},
	}})

	for _, tc := range []struct {
		name  string
		parts []*replicadv1.AlterReplicaLogDir
		field string
	}{
		{"empty", nil, "partitions"},
		{"bad topic", []*replicadv1.AlterReplicaLogDir{{Topic: "a/b", LogDir: "/d"}}, "partitions[0].topic"},
		{"negative partition", []*replicadv1.AlterReplicaLogDir{{Topic: "t", Partition: -1, LogDir: "/d"}}, "partitions[0].partition"},
		{"relative dir", []*replicadv1.AlterReplicaLogDir{{Topic: "t", LogDir: "data/b"}}, "partitions[0].log_dir"},
		{"empty dir", []*replicadv1.AlterReplicaLogDir{{Topic: "t"}}, "partitions[0].log_dir"},
		{"duplicate", []*replicadv1.AlterReplicaLogDir{{Topic: "t", LogDir: "/a"}, {Topic: "t", LogDir: "/b"}}, "partitions[1]"},
	} {
		_, err := c.AlterReplicaLogDirs(ctx, &replicadv1.AlterReplicaLogDirsRequest{Partitions: tc.parts})
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.field) {
			t.Errorf("%s: got %v, want InvalidArgument naming %s", tc.name, err, tc.field)
		}
	}
	if n := len(rm.Calls()); n != 1 {
		t.Fatalf("rejected requests reached the replica manager: %d calls", n)
	}
}

// TestPanicBecomesInternal ensures a panicking handler answers Internal and
// the server keeps serving.
func TestPanicBecomesInternal(t *testing.T) {
	rm := &fakeRM{panicWith: "boom"}
	_, conn := startServer(t, rm)
	c := replicadv1.NewReplicaManagerServiceClient(conn)
	_, err := c.CheckpointHighWatermarks(context.Background(), &replicadv1.CheckpointHighWatermarksRequest{})
	if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "boom") {
		t.Fatalf("got %v, want Internal mentioning the panic", err)
	}
	rm.mu.Lock()
	rm.panicWith = nil
	rm.mu.Unlock()
	if _, err := c.CheckpointHighWatermarks(context.Background(), &replicadv1.CheckpointHighWatermarksRequest{}); err != nil {
		t.Fatalf("server did not survive the panic: %v", err)
	}
}

// TestHealthFollowsLifecycle ensures health reports SERVING while the server
// runs and NOT_SERVING once Shutdown begins.
func TestHealthFollowsLifecycle(t *testing.T) {
	srv, conn := startServer(t, &fakeRM{})
	hc := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	for _, svc := range append([]string{""}, servedServices...) {
		resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("Check(%q) = %v, %v; want SERVING", svc, resp, err)
		}
	}
	watch, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := watch.Recv(); err != nil || first.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("watch first = %v, %v", first, err)
	}
	shutdownCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	done := make(chan bool, 1)
	go func() { done <- srv.Shutdown(shutdownCtx) }()
	// The watch stream is an in-flight call, so it sees NOT_SERVING before the server stops.
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatalf("watch ended before NOT_SERVING: %v", err)
		}
		if resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING {
			break
		}
	}
	// The open watch keeps GracefulStop waiting; cancelling ends it.
	cancel()
	<-done
}

// TestReflectionListsEveryService ensures grpcurl can list all four replicad services.
func TestReflectionListsEveryService(t *testing.T) {
	_, conn := startServer(t, &fakeRM{})
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, s := range resp.GetListServicesResponse().GetService() {
		got[s.GetName()] = true
	}
	for _, want := range append(servedServices, "grpc.health.v1.Health") {
		if !got[want] {
			t.Errorf("reflection does not list %s (got %v)", want, got)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("reflection stream did not end: %v", err)
	}
}
