package alterpartition

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rs/zerolog"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
	"github.com/replicad/replicad/internal/testutil"
)

var orders0 = tp.TopicPartition{Topic: "orders", Partition: 0}

// leaderOfOrders0 is a ReplicaManager of broker 1 sending its ISR changes
// through a Manager to ctl, leading orders-0 at leader epoch 1 with replicas
// [1 2] and ISR [1].
func leaderOfOrders0(t *testing.T, ctl *fakeController, opts ...func(*core.Config)) *core.ReplicaManager {
	t.Helper()
	m := newManager(t, ctl.addr)
	cfg := core.Config{
		BrokerID:   1,
		LogDirs:    []string{filepath.Join(t.TempDir(), "dir")},
		Clock:      clock.NewManual(time.Unix(1_700_000_000, 0)),
		Logger:     zerolog.Nop(),
		IsrChanger: m,
	}
	for _, o := range opts {
		o(&cfg)
	}
	rm, err := core.NewReplicaManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Shutdown(context.Background()) })
	resp := rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 1,
		PartitionStates: []core.PartitionState{{TopicPartition: orders0, ControllerEpoch: 1, Leader: 1, LeaderEpoch: 1,
			ISR: []int32{1}, Replicas: []int32{1, 2}, IsNew: true}}})
	if resp.Error != core.ErrNone || len(resp.PartitionErrors) != 1 || resp.PartitionErrors[0].Error != core.ErrNone {
		t.Fatalf("LeaderAndIsr: %+v", resp)
	}
	return rm
}

// followerFetch is broker 2 (epoch 9) fetching orders-0 from offset 0, which
// puts it in sync on an empty log.
func followerFetch(t *testing.T, rm *core.ReplicaManager) {
	t.Helper()
	resp := rm.FetchMessages(context.Background(), core.FetchRequest{ReplicaID: 2, BrokerEpoch: 9, Partitions: []core.FetchPartition{
		{TopicPartition: orders0, FetchOffset: 0, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1},
	}})
	if len(resp.Partitions) != 1 || resp.Partitions[0].Error != core.ErrNone {
		t.Fatalf("fetch: %+v", resp)
	}
}

func describeOrders0(rm *core.ReplicaManager) core.PartitionInfo {
	for _, p := range rm.Describe(orders0.Topic, &orders0.Partition).Partitions {
		return p
	}
	return core.PartitionInfo{}
}

// The expansion a follower's fetch triggers on a real ReplicaManager reaches
// the controller with the follower's broker epoch; accepted, the partition
// takes the controller's ISR and partition epoch; rejected as not applied
// (INELIGIBLE_REPLICA), the ISR stays and the expansion is proposed again at
// a later fetch; answered unclearly (INVALID_UPDATE_VERSION: the controller
// may hold a newer state that includes it), it stays pending and nothing
// more is proposed until the controller's next LeaderAndIsr.
func TestReplicaManagerExpansionThroughController(t *testing.T) {
	wantReq := &replicadv1.AlterPartitionRequest{BrokerId: 1, BrokerEpoch: 3, Partitions: []*replicadv1.AlterPartitionItem{{
		Topic: "orders", Partition: 0, LeaderEpoch: 1, PartitionEpoch: 0,
		NewIsr: []*replicadv1.BrokerEpoch{{BrokerId: 1, BrokerEpoch: 3}, {BrokerId: 2, BrokerEpoch: 9}},
	}}}

	t.Run("accepted", func(t *testing.T) {
		ctl := startController(t, func(_ context.Context, _ int, _ *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
			return &replicadv1.AlterPartitionResponse{Partitions: []*replicadv1.AlterPartitionResult{{
				Topic: "orders", Partition: 0, Leader: 1, LeaderEpoch: 1, Isr: []int32{1, 2}, PartitionEpoch: 5,
			}}}, nil
		})
		rm := leaderOfOrders0(t, ctl)
		followerFetch(t, rm)
		if req := await(t, ctl.received, "AlterPartition"); !proto.Equal(req, wantReq) {
			t.Fatalf("controller got %v, want %v", req, wantReq)
		}
		testutil.Eventually(t, waitTimeout, func() error {
			if p := describeOrders0(rm); !slices.Equal(p.ISR, []int32{1, 2}) || p.PartitionEpoch != 5 {
				return fmt.Errorf("ISR %v partition epoch %d, want [1 2] and 5", p.ISR, p.PartitionEpoch)
			}
			return nil
		})
	})

	t.Run("rejected", func(t *testing.T) {
		ctl := startController(t, func(_ context.Context, _ int, _ *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
			return &replicadv1.AlterPartitionResponse{Partitions: []*replicadv1.AlterPartitionResult{{
				Topic: "orders", Partition: 0, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA,
			}}}, nil
		})
		rm := leaderOfOrders0(t, ctl)
		followerFetch(t, rm)
		if req := await(t, ctl.received, "AlterPartition"); !proto.Equal(req, wantReq) {
			t.Fatalf("controller got %v, want %v", req, wantReq)
		}
		// A second proposal shows the first was answered and dropped: the
		// Partition proposes nothing while a change is in flight.
		testutil.Eventually(t, waitTimeout, func() error {
			followerFetch(t, rm)
			if n := len(ctl.calls()); n < 2 {
				return fmt.Errorf("%d AlterPartition requests, want a second one after the rejection", n)
			}
			return nil
		})
		if p := describeOrders0(rm); !slices.Equal(p.ISR, []int32{1}) || p.PartitionEpoch != 0 {
			t.Fatalf("after rejection: ISR %v partition epoch %d, want [1] and 0", p.ISR, p.PartitionEpoch)
		}
	})

	t.Run("unclear", func(t *testing.T) {
		ctl := startController(t, func(_ context.Context, _ int, _ *replicadv1.AlterPartitionRequest) (*replicadv1.AlterPartitionResponse, error) {
			return &replicadv1.AlterPartitionResponse{Partitions: []*replicadv1.AlterPartitionResult{{
				Topic: "orders", Partition: 0, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION,
			}}}, nil
		})
		rec := tracetest.NewSpanRecorder()
		tracer := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
		rm := leaderOfOrders0(t, ctl, func(c *core.Config) { c.Tracer = tracer })
		followerFetch(t, rm)
		await(t, ctl.received, "AlterPartition")
		// The partition has taken the answer once its change's span ended.
		testutil.Eventually(t, waitTimeout, func() error {
			if len(spantest.Named(rec, "Partition.expandIsr")) == 0 {
				return fmt.Errorf("the expansion's answer has not reached the partition")
			}
			return nil
		})
		if r := rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: orders0, Acks: core.AcksLeader,
			Records: []record.Record{{Value: []byte("x")}}}); r.Error != core.ErrNone {
			t.Fatalf("produce: %+v", r)
		}
		for range 3 {
			followerFetch(t, rm)
		}
		if n := len(ctl.calls()); n != 1 {
			t.Fatalf("%d AlterPartition requests, want 1: the unclear change stays pending", n)
		}
		if p := describeOrders0(rm); !slices.Equal(p.ISR, []int32{1}) || p.HighWatermark != 0 {
			t.Fatalf("ISR %v HW %d, want committed [1] and HW 0: broker 2 (at offset 0) still counts", p.ISR, p.HighWatermark)
		}
	})
}
