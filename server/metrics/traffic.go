package metrics

import (
	"context"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// traffic is what clients and followers move through the broker, as Kafka's
// BrokerTopicMetrics: per topic, counters (never gauges, which would drop
// when a leadership moves away) of the records and bytes produced, the bytes
// consumed and the bytes read by followers, and the produce, consume and
// fetch outcomes by protocol error code. Bytes are record payload (key and
// value) for produce and consume, and the record batches sent for fetches.
type traffic struct {
	messagesIn, bytesIn, bytesOut, replicationBytesOut metric.Int64Counter
	produces, consumes, fetches                        metric.Int64Counter
	fetchStreams                                       metric.Int64UpDownCounter

	mu     sync.RWMutex
	topics map[string]metric.AddOption  // by topic
	codes  map[codeKey]metric.AddOption // by topic and error code
}

type codeKey struct {
	topic string
	code  replicadv1.ErrorCode
}

func newTraffic(meter metric.Meter) (*traffic, error) {
	t := &traffic{topics: make(map[string]metric.AddOption), codes: make(map[codeKey]metric.AddOption)}
	var errs []error
	counter := func(dst *metric.Int64Counter, name, desc string) {
		var err error
		*dst, err = meter.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
	}
	counter(&t.messagesIn, "replicad_topic_messages_in_total", "Records appended by produce requests this broker led, per topic (Kafka's MessagesInPerSec).")
	counter(&t.bytesIn, "replicad_topic_bytes_in_total", "Record bytes (keys and values) appended by produce requests, per topic (Kafka's BytesInPerSec).")
	counter(&t.bytesOut, "replicad_topic_bytes_out_total", "Record bytes (keys and values) answered to consumers, per topic (Kafka's BytesOutPerSec).")
	counter(&t.replicationBytesOut, "replicad_topic_replication_bytes_out_total", "Record batch bytes answered to followers' fetches, per topic (Kafka's ReplicationBytesOutPerSec).")
	counter(&t.produces, "replicad_produce_requests_total", "Produce requests answered, per topic and error code (NONE, NOT_LEADER_OR_FOLLOWER, ...).")
	counter(&t.consumes, "replicad_consume_requests_total", "Consume requests answered, per topic and error code.")
	counter(&t.fetches, "replicad_fetch_partition_results_total", "Partition results of follower fetch answers, per topic and error code.")
	var err error
	t.fetchStreams, err = meter.Int64UpDownCounter("replicad_fetch_streams", metric.WithDescription("Follower Fetch streams open on this broker."))
	errs = append(errs, err)
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return t, nil
}

// topicAttrs is the attribute option of topic, made once per topic.
func (t *traffic) topicAttrs(topic string) metric.AddOption {
	t.mu.RLock()
	opt, ok := t.topics[topic]
	t.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", topic)))
	t.mu.Lock()
	t.topics[topic] = opt
	t.mu.Unlock()
	return opt
}

// codeAttrs is the attribute option of (topic, code): the code by its Kafka
// name, as the logs and ctlclient write it.
func (t *traffic) codeAttrs(topic string, code replicadv1.ErrorCode) metric.AddOption {
	k := codeKey{topic, code}
	t.mu.RLock()
	opt, ok := t.codes[k]
	t.mu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(attribute.String("topic", topic),
		attribute.String("code", strings.TrimPrefix(code.String(), "ERROR_CODE_"))))
	t.mu.Lock()
	t.codes[k] = opt
	t.mu.Unlock()
	return opt
}

// unary counts a Produce or Consume call from its request and answer; other
// calls are not counted here. A call that failed with a gRPC error (bad
// input, authorization) has no answer and is counted by the request
// duration histogram alone.
func (t *traffic) unary(ctx context.Context, req, resp any) {
	if t == nil {
		return
	}
	switch r := resp.(type) {
	case *replicadv1.ProduceResponse:
		in, ok := req.(*replicadv1.ProduceRequest)
		if !ok || r == nil {
			return
		}
		t.produces.Add(ctx, 1, t.codeAttrs(in.GetTopic(), r.GetErrorCode()))
		if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			return
		}
		var n int64
		for _, rec := range in.GetRecords() {
			n += int64(len(rec.GetKey()) + len(rec.GetValue()))
		}
		attrs := t.topicAttrs(in.GetTopic())
		t.messagesIn.Add(ctx, int64(len(in.GetRecords())), attrs)
		t.bytesIn.Add(ctx, n, attrs)
	case *replicadv1.ConsumeResponse:
		in, ok := req.(*replicadv1.ConsumeRequest)
		if !ok || r == nil {
			return
		}
		t.consumes.Add(ctx, 1, t.codeAttrs(in.GetTopic(), r.GetErrorCode()))
		var n int64
		for _, rec := range r.GetRecords() {
			n += int64(len(rec.GetKey()) + len(rec.GetValue()))
		}
		if n > 0 {
			t.bytesOut.Add(ctx, n, t.topicAttrs(in.GetTopic()))
		}
	}
}

// fetchAnswer counts one Fetch stream answer, partition by partition.
func (t *traffic) fetchAnswer(ctx context.Context, r *replicadv1.FetchResponse) {
	for _, p := range r.GetPartitions() {
		t.fetches.Add(ctx, 1, t.codeAttrs(p.GetTopic(), p.GetErrorCode()))
		if n := len(p.GetRecords()); n > 0 {
			t.replicationBytesOut.Add(ctx, int64(n), t.topicAttrs(p.GetTopic()))
		}
	}
}

// countingStream counts the FetchResponses a stream sends.
type countingStream struct {
	grpc.ServerStream
	t *traffic
}

func (s countingStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if r, ok := m.(*replicadv1.FetchResponse); ok && err == nil {
		s.t.fetchAnswer(s.Context(), r)
	}
	return err
}

// StreamServerInterceptor counts the Fetch streams open and what their
// answers carry (replicad_fetch_streams, replicad_topic_replication_bytes_out_total,
// replicad_fetch_partition_results_total). A nil *Metrics passes through.
func (m *Metrics) StreamServerInterceptor() grpc.StreamServerInterceptor {
	if m == nil || m.traffic == nil {
		return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
			return handler(srv, ss)
		}
	}
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if info.FullMethod == replicadv1.LogService_ProduceStream_FullMethodName {
			return handler(srv, &produceStream{ServerStream: ss, m: m})
		}
		if info.FullMethod != replicadv1.FetchService_Fetch_FullMethodName {
			return handler(srv, ss)
		}
		ctx := ss.Context()
		m.traffic.fetchStreams.Add(ctx, 1)
		defer m.traffic.fetchStreams.Add(ctx, -1)
		return handler(srv, countingStream{ServerStream: ss, t: m.traffic})
	}
}

// produceStream counts each request of a ProduceStream as a unary Produce
// call: replicad_request_duration_seconds (method ProduceStream, the code
// the request would have failed with), and the produce counters for the
// requests that got an answer. Requests are answered in order, one at a
// time, so an answer is the last request's.
type produceStream struct {
	grpc.ServerStream
	m     *Metrics
	req   *replicadv1.ProduceRequest
	start time.Time
}

func (s *produceStream) RecvMsg(msg any) error {
	err := s.ServerStream.RecvMsg(msg)
	s.start = time.Now()
	s.req = nil
	if err == nil {
		s.req, _ = msg.(*replicadv1.ProduceRequest)
	}
	return err
}

func (s *produceStream) SendMsg(msg any) error {
	err := s.ServerStream.SendMsg(msg)
	r, ok := msg.(*replicadv1.ProduceResponse)
	if !ok || err != nil {
		return err
	}
	ctx := s.Context()
	code := codes.Code(r.GetStatusCode())
	s.m.requests.Record(ctx, time.Since(s.start).Seconds(),
		s.m.requestAttributes(replicadv1.LogService_ProduceStream_FullMethodName, code))
	if code == codes.OK && s.req != nil {
		s.m.traffic.unary(ctx, s.req, r)
	}
	return err
}
