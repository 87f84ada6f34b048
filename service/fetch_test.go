package service

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// echoFetch answers each partition with its fetch offset as the HW and a
// diverging epoch when the follower's last fetched epoch is 9.
func echoFetch(req core.FetchRequest) core.FetchResponse {
	var resp core.FetchResponse
	for _, p := range req.Partitions {
		r := core.FetchPartitionResult{TopicPartition: p.TopicPartition, HighWatermark: p.FetchOffset,
			LogStartOffset: 1, LogEndOffset: 20, Records: []byte("raw")}
		if p.LastFetchedEpoch == 9 {
			r.DivergingEpoch, r.Records, r.Error = &core.EpochEndOffset{Epoch: 4, EndOffset: 11}, nil, core.ErrNone
		}
		resp.Partitions = append(resp.Partitions, r)
	}
	return resp
}

func fetchReq(correlationID, offset int64, lastFetchedEpoch int32) *replicadv1.FetchRequest {
	return &replicadv1.FetchRequest{CorrelationId: correlationID, ReplicaId: 2, BrokerEpoch: 3, MaxWaitMs: 250, MinBytes: 1, MaxBytes: 4096,
		Partitions: []*replicadv1.FetchPartition{{Topic: "t", Partition: 1, FetchOffset: offset, CurrentLeaderEpoch: 5, LastFetchedEpoch: lastFetchedEpoch, LogStartOffset: 1}}}
}

// TestFetchStreamAnswersEachRequestInOrder ensures two requests on one Fetch
// stream are each translated to core and answered with their own
// correlation id, and that the follower closing its side ends the stream cleanly.
func TestFetchStreamAnswersEachRequestInOrder(t *testing.T) {
	rm := &fakeRM{fetch: echoFetch}
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(fetchReq(7, 12, 5)); err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "first response", first, &replicadv1.FetchResponse{CorrelationId: 7, Partitions: []*replicadv1.FetchPartitionResult{
		{Topic: "t", Partition: 1, HighWatermark: 12, LogStartOffset: 1, LogEndOffset: 20, Records: []byte("raw")}}})
	if err := stream.Send(fetchReq(8, 13, 9)); err != nil {
		t.Fatal(err)
	}
	second, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "second response", second, &replicadv1.FetchResponse{CorrelationId: 8, Partitions: []*replicadv1.FetchPartitionResult{
		{Topic: "t", Partition: 1, HighWatermark: 13, LogStartOffset: 1, LogEndOffset: 20, DivergingEpoch: &replicadv1.EpochEndOffset{Epoch: 4, EndOffset: 11}}}})
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %v, want io.EOF", err)
	}
	calls := rm.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d calls, want 2", len(calls))
	}
	mustEqual(t, "first request", calls[0], core.FetchRequest{ReplicaID: 2, BrokerEpoch: 3, MaxWait: 250 * time.Millisecond, MinBytes: 1, MaxBytes: 4096, HardMaxBytes: true, // a new stream's grant is hard
		Partitions: []core.FetchPartition{{TopicPartition: tp.TopicPartition{Topic: "t", Partition: 1}, FetchOffset: 12, CurrentLeaderEpoch: 5, LastFetchedEpoch: 5, LogStartOffset: 1}}})
}

// TestMalformedFetchesAreRejected ensures each malformed fetch ends its
// stream with InvalidArgument naming the field, and never reaches core.
func TestMalformedFetchesAreRejected(t *testing.T) {
	rm := &fakeRM{fetch: echoFetch}
	_, conn := startServer(t, rm)
	with := func(mut func(r *replicadv1.FetchRequest)) *replicadv1.FetchRequest {
		r := fetchReq(1, 0, -1)
		mut(r)
		return r
	}
	cases := []struct {
		name string
		req  *replicadv1.FetchRequest
		want string
	}{
		{"negative replica", with(func(r *replicadv1.FetchRequest) { r.ReplicaId = -1 }), "replica_id"},
		{"negative max wait", with(func(r *replicadv1.FetchRequest) { r.MaxWaitMs = -1 }), "max_wait_ms"},
		{"negative min bytes", with(func(r *replicadv1.FetchRequest) { r.MinBytes = -1 }), "min_bytes"},
		{"negative max bytes", with(func(r *replicadv1.FetchRequest) { r.MaxBytes = -1 }), "max_bytes"},
		{"empty topic", with(func(r *replicadv1.FetchRequest) { r.Partitions[0].Topic = "" }), "partitions[0].topic"},
		{"illegal topic", with(func(r *replicadv1.FetchRequest) { r.Partitions[0].Topic = "a/b" }), "partitions[0].topic"},
		{"negative partition", with(func(r *replicadv1.FetchRequest) { r.Partitions[0].Partition = -1 }), "partitions[0].partition"},
		{"negative fetch offset", with(func(r *replicadv1.FetchRequest) { r.Partitions[0].FetchOffset = -1 }), "partitions[0].fetch_offset"},
		{"null partition", with(func(r *replicadv1.FetchRequest) { r.Partitions = append(r.Partitions, nil) }), "partitions[1]"},
		{"duplicate partition", with(func(r *replicadv1.FetchRequest) { r.Partitions = append(r.Partitions, r.Partitions[0]) }), "partitions[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := stream.Send(tc.req); err != nil {
				t.Fatal(err)
			}
			_, err = stream.Recv()
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("got %v, want InvalidArgument naming %q", err, tc.want)
			}
		})
	}
	if calls := rm.Calls(); len(calls) != 0 {
		t.Fatalf("malformed fetches reached the replica manager: %v", calls)
	}
}

// TestOffsetsForLeaderEpochTranslates ensures the RPC reaches core as asked and answers what core said.
func TestOffsetsForLeaderEpochTranslates(t *testing.T) {
	t1 := tp.TopicPartition{Topic: "t", Partition: 1}
	rm := &fakeRM{offsets: core.OffsetsForLeaderEpochResponse{Partitions: []core.OffsetForLeaderEpochResult{
		{TopicPartition: t1, Error: core.ErrFencedLeaderEpoch, LeaderEpoch: 3, EndOffset: 42}}}}
	_, conn := startServer(t, rm)
	resp, err := replicadv1.NewFetchServiceClient(conn).OffsetsForLeaderEpoch(context.Background(), &replicadv1.OffsetsForLeaderEpochRequest{
		ReplicaId: -1, Partitions: []*replicadv1.OffsetForLeaderEpochPartition{{Topic: "t", Partition: 1, CurrentLeaderEpoch: 4, LeaderEpoch: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "response", resp, &replicadv1.OffsetsForLeaderEpochResponse{Partitions: []*replicadv1.OffsetForLeaderEpochResult{
		{Topic: "t", Partition: 1, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH, LeaderEpoch: 3, EndOffset: 42}}})
	mustEqual(t, "request", rm.Calls()[0], core.OffsetsForLeaderEpochRequest{ReplicaID: -1,
		Partitions: []core.OffsetForLeaderEpochPartition{{TopicPartition: t1, CurrentLeaderEpoch: 4, LeaderEpoch: 3}}})
	_, err = replicadv1.NewFetchServiceClient(conn).OffsetsForLeaderEpoch(context.Background(), &replicadv1.OffsetsForLeaderEpochRequest{
		Partitions: []*replicadv1.OffsetForLeaderEpochPartition{{Topic: "", Partition: 1}}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "partitions[0].topic") {
		t.Fatalf("empty topic: %v", err)
	}
}

// TestFetchStreamLongPollWithRealReplicaManager ensures, end to end over the
// stream, that a follower's fetch returns the leader's stored batch, and that
// its next, caught-up fetch waits and is answered as soon as a record is appended.
func TestFetchStreamLongPollWithRealReplicaManager(t *testing.T) {
	rm, err := core.NewReplicaManager(core.Config{BrokerID: 1, LogDirs: []string{filepath.Join(t.TempDir(), "d")}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Shutdown(context.Background()) })
	t0 := tp.TopicPartition{Topic: "t", Partition: 0}
	rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: []core.PartitionState{{
		TopicPartition: t0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, IsNew: true}}})
	if r := rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: t0, Acks: core.AcksLeader, Records: []record.Record{{Value: []byte("a")}}}); r.Error != core.ErrNone {
		t.Fatalf("produce: %v", r.Error)
	}
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	req := func(corr, offset int64) *replicadv1.FetchRequest {
		return &replicadv1.FetchRequest{CorrelationId: corr, ReplicaId: 2, BrokerEpoch: 1, MaxWaitMs: 60_000, MinBytes: 1,
			Partitions: []*replicadv1.FetchPartition{{Topic: "t", Partition: 0, FetchOffset: offset, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}}}
	}
	if err := stream.Send(req(1, 0)); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil || resp.GetCorrelationId() != 1 || len(resp.GetPartitions()[0].GetRecords()) == 0 {
		t.Fatalf("first fetch: %v %v", resp, err)
	}
	if _, _, err := record.Next(resp.GetPartitions()[0].GetRecords()); err != nil {
		t.Fatalf("records are not a stored batch: %v", err)
	}
	if err := stream.Send(req(2, 1)); err != nil {
		t.Fatal(err)
	}
	// The second fetch waits (min_bytes 1, max wait a minute) until this append.
	time.AfterFunc(50*time.Millisecond, func() {
		rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: t0, Acks: core.AcksLeader, Records: []record.Record{{Value: []byte("b")}}})
	})
	start := time.Now()
	resp, err = stream.Recv()
	if err != nil || resp.GetCorrelationId() != 2 || len(resp.GetPartitions()[0].GetRecords()) == 0 {
		t.Fatalf("long poll: %v %v", resp, err)
	}
	if resp.GetPartitions()[0].GetHighWatermark() != 1 {
		t.Fatalf("HW %d, want 1 (the follower's fetch at offset 1 moved it)", resp.GetPartitions()[0].GetHighWatermark())
	}
	if waited := time.Since(start); waited > 10*time.Second {
		t.Fatalf("long poll took %v: not woken by the append", waited)
	}
	stream.CloseSend()
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("after CloseSend: %v", err)
	}
}
