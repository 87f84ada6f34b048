package controller

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// hbSink is a broker that takes every request (the heartbeat benchmark's).
type hbSink struct {
	replicadv1.ReplicaManagerServiceClient
}

func (hbSink) LeaderAndIsr(context.Context, *replicadv1.LeaderAndIsrRequest, ...grpc.CallOption) (*replicadv1.LeaderAndIsrResponse, error) {
	return &replicadv1.LeaderAndIsrResponse{}, nil
}

func (hbSink) UpdateMetadata(context.Context, *replicadv1.UpdateMetadataRequest, ...grpc.CallOption) (*replicadv1.UpdateMetadataResponse, error) {
	return &replicadv1.UpdateMetadataResponse{}, nil
}

// BenchmarkHeartbeat is the cost of one BrokerHeartbeat (5 brokers, 1,000
// partitions, heartbeats sent in parallel), the handler alone: issue 20
// answers a plain heartbeat from a published view without the decision
// lock (liveness.go).
//
//	go test -run '^$' -bench BenchmarkHeartbeat -count 5 ./controller/
func BenchmarkHeartbeat(b *testing.B) {
	c, err := New(Config{Store: store.NewMemory(), ID: 1, Logger: zerolog.Nop(),
		DialBroker: func(string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
			return hbSink{}, io.NopCloser(nil), nil
		}})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	defer func() { cancel(); <-done }()
	for ok := false; !ok; ok, _ = c.Active() {
		time.Sleep(time.Millisecond)
	}
	epochs := make([]int64, 6)
	for id := int32(1); id <= 5; id++ {
		resp, err := c.RegisterBroker(ctx, &replicadv1.RegisterBrokerRequest{BrokerId: id, Host: "b", Port: 9000 + id})
		if err != nil {
			b.Fatal(err)
		}
		epochs[id] = resp.GetBrokerEpoch()
	}
	if _, err := c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "t", Partitions: 1000, ReplicationFactor: 3}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := int32(1)
		for pb.Next() {
			resp, err := c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: id, BrokerEpoch: epochs[id]})
			if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
				b.Fatalf("heartbeat: %v %v", resp, err)
			}
			id = id%5 + 1
		}
	})
}
