package service

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/protoconv"
)

// validState is a well-formed partition state that cases below break one field at a time.
func validState() *replicadv1.PartitionState {
	return &replicadv1.PartitionState{
		Topic: "orders", Partition: 0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1,
		Isr: []int32{1, 2}, PartitionEpoch: 0, Replicas: []int32{1, 2, 3},
	}
}

func validLeaderAndIsr() *replicadv1.LeaderAndIsrRequest {
	return &replicadv1.LeaderAndIsrRequest{ControllerId: 1, ControllerEpoch: 1, PartitionStates: []*replicadv1.PartitionState{validState()}}
}

func leaderAndIsrWith(mut func(r *replicadv1.LeaderAndIsrRequest)) *replicadv1.LeaderAndIsrRequest {
	r := validLeaderAndIsr()
	mut(r)
	return r
}

func stateWith(mut func(p *replicadv1.PartitionState)) *replicadv1.LeaderAndIsrRequest {
	return leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) { mut(r.PartitionStates[0]) })
}

func produceWith(mut func(r *replicadv1.ProduceRequest)) *replicadv1.ProduceRequest {
	r := &replicadv1.ProduceRequest{Topic: "orders", Partition: 0, Acks: 1, Records: []*replicadv1.Record{{Value: []byte("v")}}}
	mut(r)
	return r
}

func consumeWith(mut func(r *replicadv1.ConsumeRequest)) *replicadv1.ConsumeRequest {
	r := &replicadv1.ConsumeRequest{Topic: "orders", Partition: 0}
	mut(r)
	return r
}

func ptr[T any](v T) *T { return &v }

// manyStates is n valid partition states of one topic.
func manyStates(n int) []*replicadv1.PartitionState {
	out := make([]*replicadv1.PartitionState, n)
	for i := range out {
		out[i] = validState()
		out[i].Partition = int32(i)
	}
	return out
}

// manyStops is n StopReplica partitions of one topic.
func manyStops(n int) []*replicadv1.StopReplicaPartition {
	out := make([]*replicadv1.StopReplicaPartition, n)
	for i := range out {
		out[i] = &replicadv1.StopReplicaPartition{Topic: "t", Partition: int32(i), LeaderEpoch: -1}
	}
	return out
}

// TestMalformedRequestsAreRejected ensures each malformed request gets
// InvalidArgument naming the offending field and never reaches the replica manager.
func TestMalformedRequestsAreRejected(t *testing.T) {
	rm := &fakeRM{maxBatch: 2048}
	_, conn := startServer(t, rm)
	ctx := context.Background()
	rmc := replicadv1.NewReplicaManagerServiceClient(conn)
	logc := replicadv1.NewLogServiceClient(conn)

	lai := func(r *replicadv1.LeaderAndIsrRequest) func() error {
		return func() error { _, err := rmc.LeaderAndIsr(ctx, r); return err }
	}
	um := func(r *replicadv1.UpdateMetadataRequest) func() error {
		return func() error { _, err := rmc.UpdateMetadata(ctx, r); return err }
	}
	sr := func(r *replicadv1.StopReplicaRequest) func() error {
		return func() error { _, err := rmc.StopReplica(ctx, r); return err }
	}
	desc := func(r *replicadv1.DescribePartitionsRequest) func() error {
		return func() error { _, err := rmc.DescribePartitions(ctx, r); return err }
	}
	prod := func(r *replicadv1.ProduceRequest) func() error {
		return func() error { _, err := logc.Produce(ctx, r); return err }
	}
	initPID := func(r *replicadv1.InitProducerIdRequest) func() error {
		return func() error { _, err := logc.InitProducerId(ctx, r); return err }
	}
	cons := func(r *replicadv1.ConsumeRequest) func() error {
		return func() error { _, err := logc.Consume(ctx, r); return err }
	}
	stop := func(p *replicadv1.StopReplicaPartition) *replicadv1.StopReplicaRequest {
		return &replicadv1.StopReplicaRequest{ControllerId: 1, ControllerEpoch: 1, Partitions: []*replicadv1.StopReplicaPartition{p}}
	}
	broker := func(id int32, host string, port int32) *replicadv1.Broker {
		return &replicadv1.Broker{Id: id, Host: host, Port: port}
	}

	cases := []struct {
		name string
		call func() error
		want string // the message must contain this (the field, and the reason)
	}{
		{"lai negative controller epoch", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) { r.ControllerEpoch = -1 })), "controller_epoch: must not be negative"},
		{"lai negative controller id", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) { r.ControllerId = -2 })), "controller_id: must not be negative"},
		{"lai empty topic", lai(stateWith(func(p *replicadv1.PartitionState) { p.Topic = "" })), "partition_states[0].topic: topic is empty"},
		{"lai illegal topic", lai(stateWith(func(p *replicadv1.PartitionState) { p.Topic = "a/b" })), "partition_states[0].topic:"},
		{"lai topic dot", lai(stateWith(func(p *replicadv1.PartitionState) { p.Topic = ".." })), "partition_states[0].topic:"},
		{"lai long topic", lai(stateWith(func(p *replicadv1.PartitionState) { p.Topic = strings.Repeat("t", 250) })), "partition_states[0].topic:"},
		{"lai negative partition", lai(stateWith(func(p *replicadv1.PartitionState) { p.Partition = -1 })), "partition_states[0].partition: must not be negative"},
		{"lai empty replicas", lai(stateWith(func(p *replicadv1.PartitionState) { p.Replicas = nil })), "partition_states[0].replicas: must not be empty"},
		{"lai duplicate replicas", lai(stateWith(func(p *replicadv1.PartitionState) { p.Replicas = []int32{1, 2, 1} })), "partition_states[0].replicas: broker 1 appears twice"},
		{"lai negative replica", lai(stateWith(func(p *replicadv1.PartitionState) { p.Replicas = []int32{1, -3} })), "partition_states[0].replicas: broker id -3"},
		{"lai leader outside replicas", lai(stateWith(func(p *replicadv1.PartitionState) { p.Leader = 9 })), "partition_states[0].leader: broker 9 is not in replicas"},
		{"lai leader below no leader", lai(stateWith(func(p *replicadv1.PartitionState) { p.Leader = -2 })), "partition_states[0].leader: broker -2 is not in replicas"},
		{"lai isr outside replicas", lai(stateWith(func(p *replicadv1.PartitionState) { p.Isr = []int32{1, 4} })), "partition_states[0].isr: broker 4 is not in replicas"},
		{"lai duplicate isr", lai(stateWith(func(p *replicadv1.PartitionState) { p.Isr = []int32{1, 1} })), "partition_states[0].isr: broker 1 appears twice"},
		{"lai adding outside replicas", lai(stateWith(func(p *replicadv1.PartitionState) { p.AddingReplicas = []int32{4} })), "partition_states[0].adding_replicas: broker 4 is not in replicas"},
		{"lai duplicate adding", lai(stateWith(func(p *replicadv1.PartitionState) { p.AddingReplicas = []int32{2, 2} })), "partition_states[0].adding_replicas: broker 2 appears twice"},
		{"lai negative leader epoch", lai(stateWith(func(p *replicadv1.PartitionState) { p.LeaderEpoch = -1 })), "partition_states[0].leader_epoch: must not be negative"},
		{"lai negative partition controller epoch", lai(stateWith(func(p *replicadv1.PartitionState) { p.ControllerEpoch = -1 })), "partition_states[0].controller_epoch: must not be negative"},
		{"lai negative partition epoch", lai(stateWith(func(p *replicadv1.PartitionState) { p.PartitionEpoch = -1 })), "partition_states[0].partition_epoch: must not be negative"},
		{"lai error in third state", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) {
			a, b := validState(), validState()
			a.Partition, b.Partition = 1, 2
			b.Isr = []int32{4}
			r.PartitionStates = append(r.PartitionStates, a, b)
		})), "partition_states[2].isr: broker 4 is not in replicas"},
		{"lai duplicate partition", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) {
			r.PartitionStates = append(r.PartitionStates, validState())
		})), "partition_states[1]: partition orders-0 already appears at partition_states[0]"},
		{"lai null state", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) {
			r.PartitionStates = append(r.PartitionStates, nil)
		})), "partition_states[1]"},
		{"lai live leader empty host", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) {
			r.LiveLeaders = []*replicadv1.Broker{broker(1, "", 9091)}
		})), "live_leaders[0].host: must not be empty"},
		{"lai live leader bad port", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) {
			r.LiveLeaders = []*replicadv1.Broker{broker(1, "h", 70000)}
		})), "live_leaders[0].port: must be in 1..65535"},
		{"lai live leader zero port", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) {
			r.LiveLeaders = []*replicadv1.Broker{broker(1, "h", 0)}
		})), "live_leaders[0].port"},
		{"lai duplicate live leader", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) {
			r.LiveLeaders = []*replicadv1.Broker{broker(1, "h", 1), broker(1, "h2", 2)}
		})), "live_leaders[1].id: broker 1 appears twice"},

		{"um negative controller epoch", um(&replicadv1.UpdateMetadataRequest{ControllerEpoch: -1}), "controller_epoch"},
		{"um empty host", um(&replicadv1.UpdateMetadataRequest{LiveBrokers: []*replicadv1.Broker{broker(2, "", 9092)}}), "live_brokers[0].host: must not be empty"},
		{"um port out of range", um(&replicadv1.UpdateMetadataRequest{LiveBrokers: []*replicadv1.Broker{broker(2, "h", -1)}}), "live_brokers[0].port"},
		{"um duplicate broker", um(&replicadv1.UpdateMetadataRequest{LiveBrokers: []*replicadv1.Broker{broker(2, "h", 1), broker(3, "h", 2), broker(2, "h", 3)}}), "live_brokers[2].id: broker 2 appears twice"},
		{"um negative broker id", um(&replicadv1.UpdateMetadataRequest{LiveBrokers: []*replicadv1.Broker{broker(-1, "h", 1)}}), "live_brokers[0].id"},
		{"um bad partition state", um(&replicadv1.UpdateMetadataRequest{PartitionStates: []*replicadv1.PartitionState{{Topic: "t", Leader: -1}}}), "partition_states[0].replicas: must not be empty"},

		{"stop empty topic", sr(stop(&replicadv1.StopReplicaPartition{Topic: ""})), "partitions[0].topic"},
		{"stop negative partition", sr(stop(&replicadv1.StopReplicaPartition{Topic: "t", Partition: -4})), "partitions[0].partition"},
		{"stop bad leader epoch", sr(stop(&replicadv1.StopReplicaPartition{Topic: "t", LeaderEpoch: -2})), "partitions[0].leader_epoch"},
		{"stop negative controller epoch", sr(&replicadv1.StopReplicaRequest{ControllerEpoch: -1}), "controller_epoch"},
		{"stop duplicate partition", sr(&replicadv1.StopReplicaRequest{Partitions: []*replicadv1.StopReplicaPartition{{Topic: "t"}, {Topic: "t"}}}), "partitions[1]: partition t-0 already appears"},

		{"describe illegal topic", desc(&replicadv1.DescribePartitionsRequest{Topic: "a b"}), "topic:"},
		{"describe negative partition", desc(&replicadv1.DescribePartitionsRequest{Topic: "t", Partition: ptr(int32(-1))}), "partition: must not be negative"},
		{"describe partition without topic", desc(&replicadv1.DescribePartitionsRequest{Partition: ptr(int32(0))}), "partition: needs a topic"},

		{"produce empty topic", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.Topic = "" })), "topic: topic is empty"},
		{"produce negative partition", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.Partition = -1 })), "partition: must not be negative"},
		{"produce bad acks", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.Acks = 2 })), "acks: must be -1 (all), 0 or 1"},
		{"produce negative timeout", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.TimeoutMs = -1 })), "timeout_ms: must not be negative"},
		{"produce no records", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.Records = nil })), "records: must not be empty"},
		{"produce batch too large", prod(produceWith(func(r *replicadv1.ProduceRequest) {
			r.Records = []*replicadv1.Record{{Value: bytes.Repeat([]byte("x"), 1500)}, {Value: bytes.Repeat([]byte("y"), 1500)}}
		})), "records: batch is"},

		{"produce negative producer id", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.ProducerId = -1 })), "producer_id: must not be negative"},
		{"produce epoch without producer id", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.ProducerEpoch = 1 })), "producer_epoch: set without a producer_id"},
		{"produce sequence without producer id", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.BaseSequence = 4 })), "base_sequence: set without a producer_id"},
		{"produce negative producer epoch", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.ProducerId, r.ProducerEpoch = 7, -1 })), "producer_epoch: must be in 0..32767"},
		{"produce producer epoch past int16", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.ProducerId, r.ProducerEpoch = 7, 32768 })), "producer_epoch: must be in 0..32767"},
		{"produce negative base sequence", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.ProducerId, r.BaseSequence = 7, -1 })), "base_sequence: must not be negative"},

		{"init producer id negative id", initPID(&replicadv1.InitProducerIdRequest{ProducerId: -1}), "producer_id: must not be negative"},
		{"init producer id negative epoch", initPID(&replicadv1.InitProducerIdRequest{ProducerId: 3, ProducerEpoch: -1}), "producer_epoch: must be in 0..32767"},
		{"init producer id epoch past int16", initPID(&replicadv1.InitProducerIdRequest{ProducerId: 3, ProducerEpoch: 40000}), "producer_epoch: must be in 0..32767"},
		{"init producer id epoch without id", initPID(&replicadv1.InitProducerIdRequest{ProducerEpoch: 2}), "producer_epoch: must be 0 without a producer_id"},
		{"init producer id negative timeout", initPID(&replicadv1.InitProducerIdRequest{TimeoutMs: -5}), "timeout_ms: must not be negative"},

		{"consume empty topic", cons(consumeWith(func(r *replicadv1.ConsumeRequest) { r.Topic = "" })), "topic:"},
		{"consume negative partition", cons(consumeWith(func(r *replicadv1.ConsumeRequest) { r.Partition = -1 })), "partition:"},
		{"consume negative offset", cons(consumeWith(func(r *replicadv1.ConsumeRequest) { r.Offset = -3 })), "offset: must not be negative, except -1"},
		{"consume negative max bytes", cons(consumeWith(func(r *replicadv1.ConsumeRequest) { r.MaxBytes = -1 })), "max_bytes: must not be negative"},
		{"consume negative max wait", cons(consumeWith(func(r *replicadv1.ConsumeRequest) { r.MaxWaitMs = -1 })), "max_wait_ms: must not be negative"},
		{"consume negative min bytes", cons(consumeWith(func(r *replicadv1.ConsumeRequest) { r.MinBytes = -1 })), "min_bytes: must not be negative"},

		// A legal topic whose dir name ("topic-partition") would not fit
		// Linux's 255 bytes (issue 12): refused before it reaches a disk.
		{"lai dir name too long", lai(stateWith(func(p *replicadv1.PartitionState) { p.Topic, p.Partition = strings.Repeat("t", 249), 100000 })), "partition_states[0].topic: partition 100000 of a 249-character topic needs a 256-byte dir name"},
		{"um dir name too long", um(&replicadv1.UpdateMetadataRequest{PartitionStates: []*replicadv1.PartitionState{{Topic: strings.Repeat("u", 249), Partition: 100000, Leader: -1, Replicas: []int32{1}}}}), "partition_states[0].topic: partition 100000"},
		{"stop dir name too long", sr(stop(&replicadv1.StopReplicaPartition{Topic: strings.Repeat("s", 249), Partition: 123456})), "partitions[0].topic: partition 123456"},
		{"produce dir name too long", prod(produceWith(func(r *replicadv1.ProduceRequest) { r.Topic, r.Partition = strings.Repeat("p", 249), 100000 })), "topic: partition 100000"},
		{"consume dir name too long", cons(consumeWith(func(r *replicadv1.ConsumeRequest) { r.Topic, r.Partition = strings.Repeat("c", 249), 100000 })), "topic: partition 100000"},
		{"alter log dirs future name too long", func() error {
			_, err := rmc.AlterReplicaLogDirs(ctx, &replicadv1.AlterReplicaLogDirsRequest{Partitions: []*replicadv1.AlterReplicaLogDir{{Topic: strings.Repeat("a", 214), Partition: 0, LogDir: "/data/b"}}})
			return err
		}, "partitions[0].topic: moving partition 0 of a 214-character topic needs a 256-byte future dir name"},

		// One request holds at most MaxPartitionsPerRequest partitions.
		{"lai too many partitions", lai(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) { r.PartitionStates = manyStates(MaxPartitionsPerRequest + 1) })), "partition_states: 10001 partitions, over the limit of 10000"},
		{"um too many partitions", um(&replicadv1.UpdateMetadataRequest{PartitionStates: manyStates(MaxPartitionsPerRequest + 1)}), "partition_states: 10001 partitions, over the limit"},
		{"stop too many partitions", sr(&replicadv1.StopReplicaRequest{Partitions: manyStops(MaxPartitionsPerRequest + 1)}), "partitions: 10001 partitions, over the limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			st, _ := status.FromError(err)
			if st.Code() != codes.InvalidArgument {
				t.Fatalf("code = %v (%v), want InvalidArgument", st.Code(), err)
			}
			if !strings.Contains(st.Message(), tc.want) {
				t.Fatalf("message %q does not contain %q", st.Message(), tc.want)
			}
		})
	}
	if calls := rm.Calls(); len(calls) != 0 {
		t.Fatalf("malformed requests reached the replica manager: %v", calls)
	}
}

// TestWellFormedRequestsPassValidation ensures the validators do not reject
// legal edge cases (the cases above must fail for the right reason only).
func TestWellFormedRequestsPassValidation(t *testing.T) {
	cases := []struct {
		name string
		err  error
	}{
		{"leader and isr", validateLeaderAndIsr(validLeaderAndIsr())},
		{"empty isr", validateLeaderAndIsr(stateWith(func(p *replicadv1.PartitionState) { p.Isr = nil }))},
		{"empty leader and isr", validateLeaderAndIsr(&replicadv1.LeaderAndIsrRequest{})},
		{"topic of 249 chars", validateLeaderAndIsr(stateWith(func(p *replicadv1.PartitionState) { p.Topic = strings.Repeat("t", 249) }))},
		{"255-byte dir name", validateLeaderAndIsr(stateWith(func(p *replicadv1.PartitionState) { p.Topic, p.Partition = strings.Repeat("t", 249), 99999 }))},
		{"partitions at the request limit", validateLeaderAndIsr(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) { r.PartitionStates = manyStates(MaxPartitionsPerRequest) }))},
		{"stops at the request limit", validateStopReplica(&replicadv1.StopReplicaRequest{Partitions: manyStops(MaxPartitionsPerRequest)})},
		{"same partition of two topics", validateLeaderAndIsr(leaderAndIsrWith(func(r *replicadv1.LeaderAndIsrRequest) {
			s := validState()
			s.Topic = "payments"
			r.PartitionStates = append(r.PartitionStates, s)
		}))},
		{"leader and isr leaderless partition", validateLeaderAndIsr(stateWith(func(p *replicadv1.PartitionState) {
			p.Leader = -1
			p.Isr = nil
		}))},
		{"update metadata leaderless partition", validateUpdateMetadata(&replicadv1.UpdateMetadataRequest{
			LiveBrokers:     []*replicadv1.Broker{{Id: 1, Host: "h", Port: 65535}},
			PartitionStates: []*replicadv1.PartitionState{{Topic: "t", Leader: -1, Replicas: []int32{1}}},
		})},
		{"stop any epoch", validateStopReplica(&replicadv1.StopReplicaRequest{Partitions: []*replicadv1.StopReplicaPartition{{Topic: "t", LeaderEpoch: -1}}})},
		{"describe all", validateDescribe(&replicadv1.DescribePartitionsRequest{})},
		{"consume zero values", validateConsume(&replicadv1.ConsumeRequest{Topic: "t"})},
	}
	for _, tc := range cases {
		if tc.err != nil {
			t.Errorf("%s: %v", tc.name, tc.err)
		}
	}
}

// TestValidationDoesNotMutateRequest ensures validation leaves the proto
// request as it came (conversion copies slices rather than aliasing them).
func TestValidationDoesNotMutateRequest(t *testing.T) {
	req := validLeaderAndIsr()
	before := proto.Clone(req)
	if err := validateLeaderAndIsr(req); err != nil {
		t.Fatal(err)
	}
	c := protoconv.LeaderAndIsrFromProto(req)
	c.PartitionStates[0].ISR[0] = 99
	if !proto.Equal(req, before) {
		t.Fatalf("request changed: %v", req)
	}
}
