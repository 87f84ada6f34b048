package integration

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// TestMalformedRequestsChangeNothing ensures every malformed request gets
// InvalidArgument naming the field, and that neither the broker's state
// (DescribePartitions), its log dir nor the partition's records changed,
// even when the request's other parts were valid.
func TestMalformedRequestsChangeNothing(t *testing.T) {
	dir := t.TempDir()
	_, c := startBroker(t, 1, dir)
	c.becomeLeader(1, leaderState("orders", 0, 1, 1))
	c.produce("orders", 0, -1, "a", "b", "c")
	before := c.describe()
	entriesBefore := dirNames(t, dir)

	lai := func(controllerEpoch int32, states ...*replicadv1.PartitionState) error {
		_, err := c.rm.LeaderAndIsr(ctx(t), &replicadv1.LeaderAndIsrRequest{ControllerEpoch: controllerEpoch, PartitionStates: states})
		return err
	}
	with := func(mut func(*replicadv1.PartitionState)) *replicadv1.PartitionState {
		s := leaderState("orders", 0, 1, 9)
		mut(s)
		return s
	}
	fresh := func(p int32) *replicadv1.PartitionState { return leaderState("fresh", p, 1, 1) }

	cases := []struct {
		name string
		err  error
		want string
	}{
		{"valid partition then isr outside replicas", lai(5, fresh(0), with(func(s *replicadv1.PartitionState) { s.Isr = []int32{1, 4} })),
			"partition_states[1].isr: broker 4 is not in replicas"},
		{"duplicate replicas with a newer epoch", lai(5, with(func(s *replicadv1.PartitionState) { s.Replicas = []int32{1, 1} })),
			"partition_states[0].replicas: broker 1 appears twice"},
		{"empty replicas", lai(5, with(func(s *replicadv1.PartitionState) { s.Replicas = nil })), "partition_states[0].replicas"},
		{"leader outside replicas", lai(5, fresh(0), with(func(s *replicadv1.PartitionState) { s.Leader = 3 })),
			"partition_states[1].leader: broker 3 is not in replicas"},
		{"empty topic", lai(5, with(func(s *replicadv1.PartitionState) { s.Topic = "" })), "partition_states[0].topic"},
		{"illegal topic", lai(5, with(func(s *replicadv1.PartitionState) { s.Topic = "../etc" })), "partition_states[0].topic"},
		{"negative partition", lai(5, with(func(s *replicadv1.PartitionState) { s.Partition = -1 })), "partition_states[0].partition"},
		{"negative leader epoch", lai(5, with(func(s *replicadv1.PartitionState) { s.LeaderEpoch = -3 })), "partition_states[0].leader_epoch"},
		{"negative controller epoch", lai(-1, fresh(0)), "controller_epoch"},
		{"duplicate partition", lai(5, fresh(0), fresh(0)), "partition_states[1]: partition fresh-0 already appears"},
		{"live leader without host", func() error {
			_, err := c.rm.LeaderAndIsr(ctx(t), &replicadv1.LeaderAndIsrRequest{ControllerEpoch: 5, PartitionStates: []*replicadv1.PartitionState{fresh(0)},
				LiveLeaders: []*replicadv1.Broker{{Id: 1, Port: 9091}}})
			return err
		}(), "live_leaders[0].host"},
		{"update metadata duplicate broker", func() error {
			_, err := c.rm.UpdateMetadata(ctx(t), &replicadv1.UpdateMetadataRequest{ControllerEpoch: 5,
				LiveBrokers: []*replicadv1.Broker{{Id: 2, Host: "h", Port: 1}, {Id: 2, Host: "h", Port: 2}}})
			return err
		}(), "live_brokers[1].id: broker 2 appears twice"},
		{"stop replica with a bad second partition", func() error {
			_, err := c.rm.StopReplica(ctx(t), &replicadv1.StopReplicaRequest{ControllerEpoch: 5, Partitions: []*replicadv1.StopReplicaPartition{
				{Topic: "orders", Partition: 0, LeaderEpoch: -1, DeletePartition: true}, {Topic: "bad topic", Partition: 0}}})
			return err
		}(), "partitions[1].topic"},
		{"produce bad acks", func() error {
			_, err := c.log.Produce(ctx(t), &replicadv1.ProduceRequest{Topic: "orders", Acks: 2, Records: []*replicadv1.Record{{Value: []byte("x")}}})
			return err
		}(), "acks"},
		{"produce no records", func() error {
			_, err := c.log.Produce(ctx(t), &replicadv1.ProduceRequest{Topic: "orders", Acks: 1})
			return err
		}(), "records: must not be empty"},
		{"produce batch over max-batch-bytes", func() error {
			_, err := c.log.Produce(ctx(t), &replicadv1.ProduceRequest{Topic: "orders", Acks: 1,
				Records: []*replicadv1.Record{{Value: bytes.Repeat([]byte("x"), 1<<20)}, {Value: []byte("y")}}})
			return err
		}(), "records: batch is"},
		{"produce negative timeout", func() error {
			_, err := c.log.Produce(ctx(t), &replicadv1.ProduceRequest{Topic: "orders", Acks: -1, TimeoutMs: -5, Records: []*replicadv1.Record{{Value: []byte("x")}}})
			return err
		}(), "timeout_ms"},
		{"consume negative offset", func() error {
			_, err := c.log.Consume(ctx(t), &replicadv1.ConsumeRequest{Topic: "orders", Offset: -3})
			return err
		}(), "offset: must not be negative"},
		{"describe partition without topic", func() error {
			_, err := c.rm.DescribePartitions(ctx(t), &replicadv1.DescribePartitionsRequest{Partition: proto.Int32(0)})
			return err
		}(), "partition: needs a topic"},
	}
	for _, tc := range cases {
		st, _ := status.FromError(tc.err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("%s: got %v, want InvalidArgument containing %q", tc.name, tc.err, tc.want)
		}
	}

	if after := c.describe(); !proto.Equal(before, after) {
		t.Errorf("state changed:\nbefore %v\nafter  %v", before, after)
	}
	if after := dirNames(t, dir); strings.Join(after, " ") != strings.Join(entriesBefore, " ") {
		t.Errorf("log dir changed: before %v after %v", entriesBefore, after)
	}
	if recs := c.consumeAll("orders", 0); len(recs) != 3 {
		t.Errorf("orders-0 holds %d records, want 3", len(recs))
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
