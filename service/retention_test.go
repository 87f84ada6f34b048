package service

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// RunRetention reaches core with its topic and partition (none: every
// partition hosted), every result field comes back, and bad requests are
// refused InvalidArgument naming the field before core sees them.
func TestRunRetentionTranslatesAndValidates(t *testing.T) {
	rm := &fakeRM{retention: core.RetentionResponse{BrokerID: 3, Results: []core.RetentionResult{
		{TopicPartition: tp.TopicPartition{Topic: "orders", Partition: 0}, Leader: true, LogStartBefore: 10, LogStartAfter: 40,
			DeletedSegments: 3, DeletedBytes: 3000, Reason: "retention.ms,retention.bytes"},
		{TopicPartition: tp.TopicPartition{Topic: "orders", Partition: 1}, Error: core.ErrStorageError, Message: "offline",
			LogStartBefore: -1, LogStartAfter: -1},
	}}}
	_, conn := startServer(t, rm)
	c := replicadv1.NewReplicaManagerServiceClient(conn)
	ctx := context.Background()
	resp, err := c.RunRetention(ctx, &replicadv1.RunRetentionRequest{Topic: "orders"})
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "run retention", resp, &replicadv1.RunRetentionResponse{BrokerId: 3, Results: []*replicadv1.RetentionResult{
		{Topic: "orders", Partition: 0, LogStartOffsetBefore: 10, LogStartOffsetAfter: 40, DeletedSegments: 3, DeletedBytes: 3000,
			Reason: "retention.ms,retention.bytes", Role: replicadv1.ReplicaRole_REPLICA_ROLE_LEADER},
		{Topic: "orders", Partition: 1, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR, ErrorMessage: "offline",
			LogStartOffsetBefore: -1, LogStartOffsetAfter: -1},
	}})
	if _, err := c.RunRetention(ctx, &replicadv1.RunRetentionRequest{Topic: "orders", Partition: ptr(int32(2))}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		req   *replicadv1.RunRetentionRequest
		field string
	}{
		{&replicadv1.RunRetentionRequest{}, "topic"},
		{&replicadv1.RunRetentionRequest{Partition: ptr(int32(0))}, "topic"},
		{&replicadv1.RunRetentionRequest{Topic: "bad/name"}, "topic"},
		{&replicadv1.RunRetentionRequest{Topic: "orders", Partition: ptr(int32(-1))}, "partition"},
	} {
		_, err := c.RunRetention(ctx, bad.req)
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), bad.field+":") {
			t.Errorf("%v: got %v, want InvalidArgument naming %s", bad.req, err, bad.field)
		}
	}
	calls := rm.Calls()
	if len(calls) != 2 {
		t.Fatalf("core saw %d calls, want the 2 valid ones: %v", len(calls), calls)
	}
	mustEqual(t, "every partition", calls[0], runRetentionCall{"orders", nil})
	mustEqual(t, "one partition", calls[1], runRetentionCall{"orders", ptr(int32(2))})
}

// DescribePartitions carries the periodic retention check's times in Unix
// ms, 0 for not yet.
func TestDescribeCarriesRetentionCheckTimes(t *testing.T) {
	last := time.UnixMilli(1_700_000_000_123)
	rm := &fakeRM{description: core.Description{BrokerID: 1, LastRetentionCheck: last, NextRetentionCheck: last.Add(5 * time.Minute)}}
	_, conn := startServer(t, rm)
	c := replicadv1.NewReplicaManagerServiceClient(conn)
	d, err := c.DescribePartitions(context.Background(), &replicadv1.DescribePartitionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if d.GetLastRetentionCheckMs() != 1_700_000_000_123 || d.GetNextRetentionCheckMs() != 1_700_000_300_123 {
		t.Fatalf("times %d %d", d.GetLastRetentionCheckMs(), d.GetNextRetentionCheckMs())
	}
	rm.description = core.Description{BrokerID: 1}
	if d, _ := c.DescribePartitions(context.Background(), &replicadv1.DescribePartitionsRequest{}); d.GetLastRetentionCheckMs() != 0 || d.GetNextRetentionCheckMs() != 0 {
		t.Fatalf("not yet: %d %d, want 0 0", d.GetLastRetentionCheckMs(), d.GetNextRetentionCheckMs())
	}
}
