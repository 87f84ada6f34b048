package service

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/protoconv"
)

// BenchmarkFetchWire10000 is what one idle fetch round of 10,000 partitions
// costs on the wire, both sides, without the leader's read of each
// partition (core.BenchmarkFetchRoundIdle10000): the follower's request
// encoded and decoded, validated, translated; the leader's answer (nothing
// new in any partition) translated, encoded and decoded. full is a request
// listing every partition; session an incremental one listing none.
func BenchmarkFetchWire10000(b *testing.B) {
	const n = 10_000
	full := &replicadv1.FetchRequest{ReplicaId: 2, BrokerEpoch: 1, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 10 << 20}
	for i := range n {
		full.Partitions = append(full.Partitions, &replicadv1.FetchPartition{Topic: fmt.Sprintf("failover-%d", i/3000),
			Partition: int32(i % 3000), FetchOffset: 1, CurrentLeaderEpoch: 2, LastFetchedEpoch: 2, LogStartOffset: 0})
	}
	answer := func(req core.FetchRequest) core.FetchResponse {
		resp := core.FetchResponse{Partitions: make([]core.FetchPartitionResult, len(req.Partitions))}
		for i, p := range req.Partitions {
			resp.Partitions[i] = core.FetchPartitionResult{TopicPartition: p.TopicPartition, HighWatermark: 1, LogStartOffset: 0, LogEndOffset: 1}
		}
		return resp
	}
	round := func(b *testing.B, req *replicadv1.FetchRequest, serve func(*replicadv1.FetchRequest) *replicadv1.FetchResponse) {
		wire, err := proto.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		got := new(replicadv1.FetchRequest)
		if err := proto.Unmarshal(wire, got); err != nil {
			b.Fatal(err)
		}
		if err := validateFetch(got); err != nil {
			b.Fatal(err)
		}
		out, err := proto.Marshal(serve(got))
		if err != nil {
			b.Fatal(err)
		}
		if err := proto.Unmarshal(out, new(replicadv1.FetchResponse)); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			round(b, full, func(r *replicadv1.FetchRequest) *replicadv1.FetchResponse {
				return protoconv.FetchResponseToProto(r.GetCorrelationId(), answer(protoconv.FetchRequestFromProto(r)))
			})
		}
	})
	b.Run("session", func(b *testing.B) {
		s := NewFetchSession()
		first := proto.Clone(full).(*replicadv1.FetchRequest)
		first.Session = true
		freq, err := s.Apply(first)
		if err != nil {
			b.Fatal(err)
		}
		s.Answer(0, answer(freq))
		idle := &replicadv1.FetchRequest{ReplicaId: 2, BrokerEpoch: 1, MaxWaitMs: 500, MinBytes: 1, MaxBytes: 10 << 20, Session: true}
		b.ReportAllocs()
		for b.Loop() {
			round(b, idle, func(r *replicadv1.FetchRequest) *replicadv1.FetchResponse {
				freq, err := s.Apply(r)
				if err != nil {
					b.Fatal(err)
				}
				return s.Answer(r.GetCorrelationId(), answer(freq))
			})
		}
	})
}
