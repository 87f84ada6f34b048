package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

const rpcTimeout = 30 * time.Second

// client is a test's view of one broker.
type client struct {
	t   *testing.T
	rm  replicadv1.ReplicaManagerServiceClient
	log replicadv1.LogServiceClient
}

func newClient(t *testing.T, conn *grpc.ClientConn) *client {
	return &client{t: t, rm: replicadv1.NewReplicaManagerServiceClient(conn), log: replicadv1.NewLogServiceClient(conn)}
}

func startBroker(t *testing.T, id int32, dirs ...string) (*testutil.Broker, *client) {
	t.Helper()
	b := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: dirs})
	return b, newClient(t, b.Dial(t))
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	t.Cleanup(cancel)
	return c
}

// leaderState makes broker the only replica and leader of topic-partition.
func leaderState(topic string, partition, broker, leaderEpoch int32) *replicadv1.PartitionState {
	return &replicadv1.PartitionState{Topic: topic, Partition: partition, ControllerEpoch: 1, Leader: broker,
		LeaderEpoch: leaderEpoch, Isr: []int32{broker}, Replicas: []int32{broker}, IsNew: true}
}

// becomeLeader sends a LeaderAndIsr and requires every code to be NONE.
func (c *client) becomeLeader(controllerEpoch int32, states ...*replicadv1.PartitionState) {
	c.t.Helper()
	for _, s := range states {
		s.ControllerEpoch = controllerEpoch
	}
	resp, err := c.rm.LeaderAndIsr(ctx(c.t), &replicadv1.LeaderAndIsrRequest{ControllerId: 0, ControllerEpoch: controllerEpoch, PartitionStates: states})
	if err != nil {
		c.t.Fatalf("LeaderAndIsr: %v", err)
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		c.t.Fatalf("LeaderAndIsr: %v", resp)
	}
	for _, pe := range resp.GetPartitionErrors() {
		if pe.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			c.t.Fatalf("LeaderAndIsr: %v", resp)
		}
	}
}

// produce sends values as one batch and requires NONE; it returns the base offset.
func (c *client) produce(topic string, partition, acks int32, values ...string) int64 {
	c.t.Helper()
	req := &replicadv1.ProduceRequest{Topic: topic, Partition: partition, Acks: acks, TimeoutMs: 10000}
	for _, v := range values {
		req.Records = append(req.Records, &replicadv1.Record{Value: []byte(v)})
	}
	resp, err := c.log.Produce(ctx(c.t), req)
	if err != nil {
		c.t.Fatalf("Produce: %v", err)
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		c.t.Fatalf("Produce: %v", resp)
	}
	return resp.GetBaseOffset()
}

// consumeAll reads from offset 0 up to the HW.
func (c *client) consumeAll(topic string, partition int32) []*replicadv1.ConsumedRecord {
	c.t.Helper()
	return c.consumeFrom(topic, partition, 0)
}

// consumeFrom reads from offset up to the HW.
func (c *client) consumeFrom(topic string, partition int32, offset int64) []*replicadv1.ConsumedRecord {
	c.t.Helper()
	var out []*replicadv1.ConsumedRecord
	for {
		resp, err := c.log.Consume(ctx(c.t), &replicadv1.ConsumeRequest{Topic: topic, Partition: partition, Offset: offset})
		if err != nil {
			c.t.Fatalf("Consume: %v", err)
		}
		if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			c.t.Fatalf("Consume at %d: %v", offset, resp)
		}
		out = append(out, resp.GetRecords()...)
		if len(resp.GetRecords()) > 0 {
			offset = resp.GetRecords()[len(resp.GetRecords())-1].GetOffset() + 1
		}
		if offset >= resp.GetHighWatermark() {
			return out
		}
		if len(resp.GetRecords()) == 0 {
			c.t.Fatalf("Consume at %d below HW %d returned nothing", offset, resp.GetHighWatermark())
		}
	}
}

func (c *client) describe() *replicadv1.DescribePartitionsResponse {
	c.t.Helper()
	resp, err := c.rm.DescribePartitions(ctx(c.t), &replicadv1.DescribePartitionsRequest{})
	if err != nil {
		c.t.Fatalf("DescribePartitions: %v", err)
	}
	return resp
}

func (c *client) partition(topic string, partition int32) (*replicadv1.PartitionDescription, error) {
	resp, err := c.rm.DescribePartitions(ctx(c.t), &replicadv1.DescribePartitionsRequest{Topic: topic, Partition: proto.Int32(partition)})
	if err != nil {
		return nil, err
	}
	for _, p := range resp.GetPartitions() {
		if p.GetTopic() == topic && p.GetPartition() == partition {
			return p, nil
		}
	}
	return nil, fmt.Errorf("%s-%d not hosted", topic, partition)
}
