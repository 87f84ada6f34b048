package service

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Each RPC has a request size limit of its own, under the server-wide one
// that a Produce of a whole batch needs: a small request type over 64 KiB,
// or a Fetch message over 4 MiB, is refused ResourceExhausted naming the
// limit and the method, and never reaches the replica manager.
func TestRequestSizeLimitsPerRPC(t *testing.T) {
	rm := &fakeRM{maxBatch: 4 << 20} // the server-wide limit is then 9 MiB
	_, conn := startServer(t, rm)
	big := grpc.MaxCallSendMsgSize(16 << 20)
	ctx := context.Background()
	wantRefused := func(what string, err error, limit int) {
		t.Helper()
		st, _ := status.FromError(err)
		if st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "limit") {
			t.Fatalf("%s: %v, want ResourceExhausted naming the %d-byte limit", what, err, limit)
		}
	}

	_, err := replicadv1.NewLogServiceClient(conn).Consume(ctx, &replicadv1.ConsumeRequest{Topic: strings.Repeat("t", smallRequestBytes)}, big)
	wantRefused("a 64 KiB consume", err, smallRequestBytes)
	// The same request just under the limit passes the size check (and
	// its validation then names the topic).
	_, err = replicadv1.NewLogServiceClient(conn).Consume(ctx, &replicadv1.ConsumeRequest{Topic: strings.Repeat("t", 1000)}, big)
	if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument {
		t.Fatalf("consume with a 1000-byte topic: %v, want InvalidArgument from validation", err)
	}

	stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&replicadv1.FetchRequest{ReplicaId: 2, Partitions: []*replicadv1.FetchPartition{{Topic: "t"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("a small fetch: %v", err)
	}
	// A later message of the stream is checked too.
	parts := make([]*replicadv1.FetchPartition, 0, 20000)
	for range 20000 {
		parts = append(parts, &replicadv1.FetchPartition{Topic: strings.Repeat("p", 249)})
	}
	if err := stream.Send(&replicadv1.FetchRequest{ReplicaId: 2, Partitions: parts}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantRefused("a 5 MiB fetch", err, bulkRequestBytes)
	if n := len(rm.Calls()); n != 1 {
		t.Fatalf("%d requests reached the replica manager, want the one small fetch", n)
	}
}
