package core

import (
	"context"
	"testing"
)

// UpdateMetadata replaces the live brokers that makeFollowers looks leaders
// up in, and one from an older controller epoch is refused and changes nothing.
func TestUpdateMetadataReplacesLiveBrokersAndFencesStaleController(t *testing.T) {
	h := newHarness(t, 1)
	um := func(epoch int32, brokers ...Broker) ErrorCode {
		return h.rm.UpdateMetadata(context.Background(), UpdateMetadataRequest{ControllerID: 100, ControllerEpoch: epoch, LiveBrokers: brokers})
	}
	if code := um(3, Broker{ID: 7, Host: "127.0.0.1", Port: 9097}); code != ErrNone {
		t.Fatalf("update: %v", code)
	}
	if code := um(2, Broker{ID: 8, Host: "127.0.0.1", Port: 9098}); code != ErrStaleControllerEpoch {
		t.Fatalf("stale controller: %v, want STALE_CONTROLLER_EPOCH", code)
	}
	live := h.rm.LiveBrokers()
	if len(live) != 1 || live[0].ID != 7 || h.rm.ControllerEpoch() != 3 {
		t.Fatalf("live brokers %v controller epoch %d, want only broker 7 at epoch 3", live, h.rm.ControllerEpoch())
	}
	// A follower of broker 7 gets a fetcher to 7's endpoint (the request names no live leaders).
	h.rm.BecomeLeaderOrFollower(context.Background(), LeaderAndIsrRequest{ControllerID: 100, ControllerEpoch: 3,
		PartitionStates: []PartitionState{state("orders", 0, 7, 1, []int32{1, 7}, []int32{7})}})
	if s, ok := h.fetchers.fetching(tp0); !ok || s.Leader.Addr() != "127.0.0.1:9097" {
		t.Fatalf("fetcher %+v %v, want one to 127.0.0.1:9097", s, ok)
	}
}
