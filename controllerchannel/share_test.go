package controllerchannel

import (
	"context"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

type slowActive struct {
	replicadv1.UnimplementedControllerServiceServer
	delay time.Duration
}

func (s *slowActive) CreateTopic(ctx context.Context, _ *replicadv1.CreateTopicRequest) (*replicadv1.CreateTopicResponse, error) {
	select {
	case <-time.After(s.delay):
		return &replicadv1.CreateTopicResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// A create to the active controller (first of three addresses) that it
// answers within the call's budget, but after a third of it: the first
// attempt gets only that third, and a request that may not be resent then
// fails ErrMaybeApplied though the controller would have answered in time.
func TestSlowActiveAnswersWithinTheBudget(t *testing.T) {
	active := startFakeServer(t, &slowActive{delay: 800 * time.Millisecond})
	ch := newChannel(t, Config{Addrs: []string{active, deadAddr(t), deadAddr(t)}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := Call(ctx, ch, Policy{}, createTopic); err != nil {
		t.Fatalf("a create the active controller answers in 0.8s of a 2s budget: %v", err)
	}
}

// Still, a create does not wait the whole budget on an address that never
// connects (a host gone without a reset): it goes on to the next at the
// end of the address's share.
func TestUnconnectedAddressStillGivesWay(t *testing.T) {
	active := startFakeServer(t, &slowActive{})
	ch := newChannel(t, Config{Addrs: []string{silentAddr(t), active}})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := Call(ctx, ch, Policy{}, createTopic); err != nil {
		t.Fatalf("after an address that never connected: %v, want the next one's answer", err)
	}
}
