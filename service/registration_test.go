package service

import (
	"context"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Until the broker has registered, a controller request naming a broker
// epoch is refused as Unavailable (the controller retries) and never reaches
// the replica manager: it may be meant for the broker's previous life. Once
// registered it goes through; epoch 0 (hand-driven) always goes through.
func TestControllerRequestsWaitForRegistration(t *testing.T) {
	var epoch atomic.Int64
	rm := &fakeRM{}
	_, conn := startServerWith(t, Options{ReplicaManager: rm, BrokerEpoch: epoch.Load})
	client := replicadv1.NewReplicaManagerServiceClient(conn)
	ctx := context.Background()

	lai := validLeaderAndIsr()
	lai.BrokerEpoch = 5
	um := &replicadv1.UpdateMetadataRequest{ControllerId: 1, ControllerEpoch: 1, BrokerEpoch: 5}
	sr := &replicadv1.StopReplicaRequest{ControllerId: 1, ControllerEpoch: 1, BrokerEpoch: 5,
		Partitions: []*replicadv1.StopReplicaPartition{{Topic: "orders", Partition: 0, LeaderEpoch: 1}}}
	calls := []struct {
		name string
		call func() error
	}{
		{"LeaderAndIsr", func() error { _, err := client.LeaderAndIsr(ctx, lai); return err }},
		{"UpdateMetadata", func() error { _, err := client.UpdateMetadata(ctx, um); return err }},
		{"StopReplica", func() error { _, err := client.StopReplica(ctx, sr); return err }},
	}
	for _, c := range calls {
		if err := c.call(); status.Code(err) != codes.Unavailable {
			t.Fatalf("%s before registration: %v, want Unavailable", c.name, err)
		}
	}
	if n := len(rm.Calls()); n != 0 {
		t.Fatalf("%d calls reached the replica manager before registration", n)
	}
	hand := validLeaderAndIsr() // broker epoch 0: no controller
	if _, err := client.LeaderAndIsr(ctx, hand); err != nil {
		t.Fatalf("hand-driven LeaderAndIsr: %v", err)
	}
	epoch.Store(5)
	for _, c := range calls {
		if err := c.call(); err != nil {
			t.Fatalf("%s after registration: %v", c.name, err)
		}
	}
	if n := len(rm.Calls()); n != 4 {
		t.Fatalf("%d calls reached the replica manager, want 4", n)
	}
}
