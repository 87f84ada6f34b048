package service

import (
	"context"
	"io"
	"net"
	"slices"
	"testing"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// serverSpans serves a fake broker with traceDataPlane, makes one
// LeaderAndIsr, Produce, Consume and Fetch call, and returns the names of
// the server spans recorded (sorted) and the spans themselves.
func serverSpans(t *testing.T, traceDataPlane bool) ([]string, []sdktrace.ReadOnlySpan) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(rec))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	rm := &fakeRM{fetch: echoFetch, leaderAndIsr: core.LeaderAndIsrResponse{}}
	lis := bufconn.Listen(1 << 20)
	srv := NewServer(Options{ReplicaManager: rm, Logger: zerolog.Nop(), TraceDataPlane: traceDataPlane})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := replicadv1.NewReplicaManagerServiceClient(conn).LeaderAndIsr(ctx, validLeaderAndIsr()); err != nil {
		t.Fatalf("LeaderAndIsr: %v", err)
	}
	logc := replicadv1.NewLogServiceClient(conn)
	if _, err := logc.Produce(ctx, &replicadv1.ProduceRequest{Topic: "t", Partition: 1, Acks: 1,
		Records: []*replicadv1.Record{{Value: []byte("v")}}}); err != nil {
		t.Fatalf("Produce: %v", err)
	}
	if _, err := logc.Consume(ctx, &replicadv1.ConsumeRequest{Topic: "t", Partition: 1}); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	ps, err := logc.ProduceStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := ps.Send(&replicadv1.ProduceRequest{Topic: "t", Partition: 1, Acks: 1,
		Records: []*replicadv1.Record{{Value: []byte("v")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ps.Recv(); err != nil {
		t.Fatalf("ProduceStream: %v", err)
	}
	_ = ps.CloseSend()
	if _, err := ps.Recv(); err != io.EOF {
		t.Fatalf("ProduceStream after CloseSend: %v", err)
	}
	stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(fetchReq(1, 12, 5)); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("Fetch: %v", err)
	}
	_ = stream.CloseSend()
	conn.Close()
	srv.Shutdown(ctx)
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	slices.Sort(names)
	return names, rec.Ended()
}

// TestDataPlaneSpansOffByDefault checks that Produce, Consume and Fetch
// create no server span unless TraceDataPlane is set, while the control
// plane always does.
func TestDataPlaneSpansOffByDefault(t *testing.T) {
	const lai = "replicad.v1.ReplicaManagerService/LeaderAndIsr"
	if got, _ := serverSpans(t, false); !slices.Equal(got, []string{lai}) {
		t.Errorf("server spans without TraceDataPlane: %v, want only %s", got, lai)
	}
	want := []string{FetchRequestSpanName, ProduceRequestSpanName, "replicad.v1.FetchService/Fetch", "replicad.v1.LogService/Consume",
		"replicad.v1.LogService/Produce", "replicad.v1.LogService/ProduceStream", lai}
	got, spans := serverSpans(t, true)
	if !slices.Equal(got, want) {
		t.Fatalf("server spans with TraceDataPlane: %v, want %v", got, want)
	}
	// The request's span is a root of its own linked to the stream's, which
	// ends only with the stream.
	var stream, req sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.Name() {
		case "replicad.v1.FetchService/Fetch":
			stream = s
		case FetchRequestSpanName:
			req = s
		}
	}
	if req.Parent().IsValid() || len(req.Links()) != 1 || req.Links()[0].SpanContext.SpanID() != stream.SpanContext().SpanID() {
		t.Errorf("fetch request span: parent %v links %v, want a root linked to the stream span %s",
			req.Parent().SpanID(), req.Links(), stream.SpanContext().SpanID())
	}
	a := map[string]int64{}
	for _, kv := range req.Attributes() {
		a[string(kv.Key)] = kv.Value.AsInt64()
	}
	if a["replicad.replica_id"] != 2 || a["replicad.broker_epoch"] != 3 || a["replicad.partitions"] != 1 || a["replicad.record_bytes"] == 0 {
		t.Errorf("fetch request span attributes %v, want replica_id 2, broker_epoch 3, 1 partition, the records' bytes", a)
	}

	// A ProduceStream's requests are traced as the fetch stream's are.
	var pstream, preq sdktrace.ReadOnlySpan
	for _, s := range spans {
		switch s.Name() {
		case "replicad.v1.LogService/ProduceStream":
			pstream = s
		case ProduceRequestSpanName:
			preq = s
		}
	}
	if preq.Parent().IsValid() || len(preq.Links()) != 1 || preq.Links()[0].SpanContext.SpanID() != pstream.SpanContext().SpanID() {
		t.Errorf("produce request span: parent %v links %v, want a root linked to the stream span", preq.Parent().SpanID(), preq.Links())
	}
	pa := map[string]string{}
	for _, kv := range preq.Attributes() {
		pa[string(kv.Key)] = kv.Value.Emit()
	}
	if pa["replicad.topic"] != "t" || pa["replicad.partition"] != "1" || pa["replicad.acks"] != "1" || pa["replicad.records"] != "1" ||
		pa["replicad.error_code"] != "ERROR_CODE_NONE" || pa["replicad.status_code"] != "OK" {
		t.Errorf("produce request span attributes %v", pa)
	}
}
