package metrics

import (
	"context"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// fakeStream is a server stream whose sends succeed.
type fakeStream struct {
	ctx  context.Context
	sent int
}

func (s *fakeStream) SetHeader(metadata.MD) error  { return nil }
func (s *fakeStream) SendHeader(metadata.MD) error { return nil }
func (s *fakeStream) SetTrailer(metadata.MD)       {}
func (s *fakeStream) Context() context.Context     { return s.ctx }
func (s *fakeStream) SendMsg(any) error            { s.sent++; return nil }
func (s *fakeStream) RecvMsg(any) error            { return nil }

// The traffic counters count what produce, consume and fetch answers carry,
// per topic, and their outcomes by error code; a refused produce adds no
// bytes; the fetch stream gauge counts open streams.
func TestTrafficCounters(t *testing.T) {
	m := newMetrics(t)
	if err := m.Observe(Sources{Replicas: func() core.MetricsSnapshot { return core.MetricsSnapshot{} }}); err != nil {
		t.Fatal(err)
	}
	unary := m.UnaryServerInterceptor()
	call := func(method string, req, resp any) {
		t.Helper()
		if _, err := unary(context.Background(), req, &grpc.UnaryServerInfo{FullMethod: method},
			func(context.Context, any) (any, error) { return resp, nil }); err != nil {
			t.Fatal(err)
		}
	}
	produce := &replicadv1.ProduceRequest{Topic: "orders", Records: []*replicadv1.Record{
		{Key: []byte("k"), Value: []byte("0123456789")}, {Value: []byte("abc")}}}
	call(replicadv1.LogService_Produce_FullMethodName, produce, &replicadv1.ProduceResponse{})
	call(replicadv1.LogService_Produce_FullMethodName, produce, &replicadv1.ProduceResponse{})
	call(replicadv1.LogService_Produce_FullMethodName, produce, &replicadv1.ProduceResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER})
	call(replicadv1.LogService_Consume_FullMethodName, &replicadv1.ConsumeRequest{Topic: "orders"},
		&replicadv1.ConsumeResponse{Records: []*replicadv1.ConsumedRecord{{Value: []byte("12345")}, {Key: []byte("kk"), Value: []byte("x")}}})

	stream := m.StreamServerInterceptor()
	fs := &fakeStream{ctx: context.Background()}
	url := serve(t, m)
	err := stream(nil, fs, &grpc.StreamServerInfo{FullMethod: replicadv1.FetchService_Fetch_FullMethodName}, func(_ any, ss grpc.ServerStream) error {
		if s := get(t, url); s.value(t, "replicad_fetch_streams") != 1 {
			t.Errorf("fetch streams while one is open: %v", s.value(t, "replicad_fetch_streams"))
		}
		return ss.SendMsg(&replicadv1.FetchResponse{Partitions: []*replicadv1.FetchPartitionResult{
			{Topic: "orders", Records: make([]byte, 100)},
			{Topic: "events", ErrorCode: replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH},
		}})
	})
	if err != nil || fs.sent != 1 {
		t.Fatalf("stream: %v, %d sent", err, fs.sent)
	}
	s := get(t, url)
	for series, want := range map[string]float64{
		`replicad_topic_messages_in_total{topic="orders"}`:                                  4,
		`replicad_topic_bytes_in_total{topic="orders"}`:                                     28,
		`replicad_produce_requests_total{code="NONE",topic="orders"}`:                       2,
		`replicad_produce_requests_total{code="NOT_LEADER_OR_FOLLOWER",topic="orders"}`:     1,
		`replicad_consume_requests_total{code="NONE",topic="orders"}`:                       1,
		`replicad_topic_bytes_out_total{topic="orders"}`:                                    8,
		`replicad_topic_replication_bytes_out_total{topic="orders"}`:                        100,
		`replicad_fetch_partition_results_total{code="NONE",topic="orders"}`:                1,
		`replicad_fetch_partition_results_total{code="FENCED_LEADER_EPOCH",topic="events"}`: 1,
		"replicad_fetch_streams": 0,
	} {
		if got := s.value(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}

// BenchmarkProduceInterceptor: what the metrics interceptor costs one
// produce call of 100 records: the duration histogram alone ("timing"),
// then with the traffic counters ("counted").
func BenchmarkProduceInterceptor(b *testing.B) {
	m, err := New()
	if err != nil {
		b.Fatal(err)
	}
	defer m.Shutdown(context.Background())
	req := &replicadv1.ProduceRequest{Topic: "orders"}
	for range 100 {
		req.Records = append(req.Records, &replicadv1.Record{Value: make([]byte, 1024)})
	}
	resp := &replicadv1.ProduceResponse{}
	info := &grpc.UnaryServerInfo{FullMethod: replicadv1.LogService_Produce_FullMethodName}
	handler := func(context.Context, any) (any, error) { return resp, nil }
	for _, counted := range []bool{false, true} {
		name := "timing"
		if counted {
			name = "counted"
		}
		b.Run(name, func(b *testing.B) {
			saved := m.traffic
			if !counted {
				m.traffic = nil
			}
			defer func() { m.traffic = saved }()
			unary := m.UnaryServerInterceptor()
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := unary(context.Background(), req, info, handler); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// scriptedStream receives reqs in turn, then io.EOF.
type scriptedStream struct {
	fakeStream
	reqs []*replicadv1.ProduceRequest
}

func (s *scriptedStream) RecvMsg(m any) error {
	if len(s.reqs) == 0 {
		return io.EOF
	}
	proto.Merge(m.(*replicadv1.ProduceRequest), s.reqs[0])
	s.reqs = s.reqs[1:]
	return nil
}

// Each request of a ProduceStream counts as a unary Produce does: the
// produce counters for the answered ones, and the request duration by the
// code a unary call would have had (a refused one only there).
func TestProduceStreamCountsEachRequest(t *testing.T) {
	m := newMetrics(t)
	if err := m.Observe(Sources{Replicas: func() core.MetricsSnapshot { return core.MetricsSnapshot{} }}); err != nil {
		t.Fatal(err)
	}
	produce := &replicadv1.ProduceRequest{Topic: "orders", Records: []*replicadv1.Record{{Value: []byte("0123456789")}}}
	fs := &scriptedStream{fakeStream: fakeStream{ctx: context.Background()}, reqs: []*replicadv1.ProduceRequest{produce, produce, produce}}
	answers := []*replicadv1.ProduceResponse{
		{},
		{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER},
		{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, StatusCode: int32(codes.InvalidArgument)},
	}
	url := serve(t, m)
	err := m.StreamServerInterceptor()(nil, fs, &grpc.StreamServerInfo{FullMethod: replicadv1.LogService_ProduceStream_FullMethodName},
		func(_ any, ss grpc.ServerStream) error {
			for _, a := range answers {
				if err := ss.RecvMsg(&replicadv1.ProduceRequest{}); err != nil {
					return err
				}
				if err := ss.SendMsg(a); err != nil {
					return err
				}
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	s := get(t, url)
	const method = `method="/replicad.v1.LogService/ProduceStream"`
	for series, want := range map[string]float64{
		`replicad_topic_messages_in_total{topic="orders"}`:                               1,
		`replicad_topic_bytes_in_total{topic="orders"}`:                                  10,
		`replicad_produce_requests_total{code="NONE",topic="orders"}`:                    1,
		`replicad_produce_requests_total{code="NOT_LEADER_OR_FOLLOWER",topic="orders"}`:  1,
		`replicad_request_duration_seconds_count{code="OK",` + method + `}`:              2,
		`replicad_request_duration_seconds_count{code="InvalidArgument",` + method + `}`: 1,
	} {
		if got := s.value(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
}
