package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// startCluster starts a controller with brokers 1..n registered.
func startCluster(t *testing.T, n int32, opts ...harnessOption) *harness {
	t.Helper()
	h := newHarness(t, opts...)
	h.start()
	for id := int32(1); id <= n; id++ {
		h.register(id)
	}
	return h
}

// wantElr checks the stored ELR of topic-partition.
func wantElr(t *testing.T, h *harness, topic string, partition int32, elr ...int32) {
	t.Helper()
	if p := h.part(topic, partition); !slices.Equal(p.ELR, elr) {
		t.Errorf("%s-%d stored with ELR %v, want %v", topic, partition, p.ELR, elr)
	}
}

// wantPartition checks the stored state of topic-partition.
func wantPartition(t *testing.T, h *harness, topic string, partition, leader, leaderEpoch, partitionEpoch int32, isr ...int32) store.Partition {
	t.Helper()
	p := h.part(topic, partition)
	if p.Leader != leader || p.LeaderEpoch != leaderEpoch || p.PartitionEpoch != partitionEpoch || !slices.Equal(p.ISR, isr) {
		t.Errorf("%s-%d stored as leader %d, leader epoch %d, partition epoch %d, ISR %v; want %d, %d, %d, %v",
			topic, partition, p.Leader, p.LeaderEpoch, p.PartitionEpoch, p.ISR, leader, leaderEpoch, partitionEpoch, isr)
	}
	return p
}

// waitLAI waits until broker id received a LeaderAndIsr with the stored
// state of p (leader, leader epoch, partition epoch, ISR, replicas), stamped
// with the controller's epoch, and returns the request.
func waitLAI(t *testing.T, h *harness, id int32, p store.Partition) *replicadv1.LeaderAndIsrRequest {
	t.Helper()
	_, epoch := h.c.Active()
	var req *replicadv1.LeaderAndIsrRequest
	waitFor(t, "broker to receive the LeaderAndIsr of "+p.Topic, func() bool {
		for _, r := range h.fake(id).leaderAndIsrs() {
			for _, s := range r.GetPartitionStates() {
				if s.GetTopic() == p.Topic && s.GetPartition() == p.Partition && s.GetLeader() == p.Leader &&
					s.GetLeaderEpoch() == p.LeaderEpoch && s.GetPartitionEpoch() == p.PartitionEpoch &&
					slices.Equal(s.GetIsr(), p.ISR) && slices.Equal(s.GetReplicas(), p.Replicas) &&
					slices.Equal(s.GetAddingReplicas(), p.AddingReplicas) && s.GetControllerEpoch() == epoch && r.GetControllerEpoch() == epoch {
					req = r
					return true
				}
			}
		}
		return false
	})
	return req
}

func TestFencingMovesLeadershipAndShrinksISR(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 3, 3) // p0 [1 2 3], p1 [2 3 1], p2 [3 1 2]
	for p := int32(0); p < 3; p++ {
		wantPartition(t, h, "t", p, p+1, 0, 0, h.part("t", p).Replicas...)
	}
	oldEpoch := h.epoch[1]

	// Broker 1 goes silent; 2 and 3 heartbeat. Half a session is not enough.
	h.clk.Advance(testSessionTimeout / 2)
	h.heartbeat(2, 3)
	h.c.expireSessions(context.Background())
	wantPartition(t, h, "t", 0, 1, 0, 0, 1, 2, 3)
	h.clk.Advance(testSessionTimeout/2 + time.Millisecond)
	h.c.expireSessions(context.Background())

	// Every partition broker 1 led has a new leader from the rest of the ISR;
	// every ISR drops it; both epochs rise once.
	parts := []store.Partition{
		wantPartition(t, h, "t", 0, 2, 1, 1, 2, 3),
		wantPartition(t, h, "t", 1, 2, 1, 1, 2, 3),
		wantPartition(t, h, "t", 2, 3, 1, 1, 3, 2),
	}
	brokers, err := h.st.Brokers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b := brokers[0]; b.ID != 1 || !b.Fenced || b.Epoch != oldEpoch {
		t.Errorf("broker 1 stored as %+v, want fenced at epoch %d", b, oldEpoch)
	}
	// The surviving brokers are told, with that state. (The fakes check on
	// receipt that the store held it already.)
	for _, id := range []int32{2, 3} {
		for _, p := range parts {
			req := waitLAI(t, h, id, p)
			if req.GetBrokerEpoch() != h.epoch[id] || req.GetControllerId() != h.cfg.ID {
				t.Errorf("LeaderAndIsr to %d stamped broker epoch %d controller %d, want %d and %d",
					id, req.GetBrokerEpoch(), req.GetControllerId(), h.epoch[id], h.cfg.ID)
			}
			var leaderListed bool
			for _, b := range req.GetLiveLeaders() {
				leaderListed = leaderListed || b.GetId() == p.Leader && b.GetHost() == brokerHost(p.Leader) && b.GetPort() == brokerPort(p.Leader)
			}
			if !leaderListed {
				t.Errorf("LeaderAndIsr to %d for %s-%d lacks the endpoint of leader %d: %v", id, p.Topic, p.Partition, p.Leader, req.GetLiveLeaders())
			}
		}
	}
	// The fenced broker is told nothing more, and its connection is closed.
	for _, r := range h.fake(1).leaderAndIsrs() {
		for _, s := range r.GetPartitionStates() {
			if s.GetLeaderEpoch() > 0 {
				t.Errorf("fenced broker 1 was sent %v", s)
			}
		}
	}
	f := h.fake(1)
	f.mu.Lock()
	closes := f.closes
	f.mu.Unlock()
	if closes == 0 {
		t.Errorf("the fenced broker's connection was not closed")
	}
	// The others learn that broker 1 is gone from the live brokers.
	waitFor(t, "an UpdateMetadata without broker 1", func() bool {
		ums := h.fake(2).updateMetadatas()
		if len(ums) == 0 {
			return false
		}
		last := ums[len(ums)-1]
		return len(last.GetLiveBrokers()) == 2 && !slices.ContainsFunc(last.GetLiveBrokers(), func(b *replicadv1.Broker) bool { return b.GetId() == 1 })
	})

	// Expiring again changes nothing.
	before := h.snapshot()
	h.clk.Advance(time.Millisecond)
	h.c.expireSessions(context.Background())
	h.assertUnchanged(before)

	dc, err := h.c.DescribeCluster(context.Background(), &replicadv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range dc.GetBrokers() {
		if b.GetAlive() != (b.GetId() != 1) {
			t.Errorf("DescribeCluster: broker %d alive=%v", b.GetId(), b.GetAlive())
		}
	}
}

// TestSessionTimeoutIsFromLastHeartbeat: a broker that heartbeats is never
// fenced, however long the test runs; one that stops is fenced exactly after
// the session timeout.
func TestSessionTimeoutIsFromLastHeartbeat(t *testing.T) {
	h := startCluster(t, 2)
	h.createTopic("t", 1, 2)
	for range 5 {
		h.clk.Advance(testSessionTimeout - time.Millisecond)
		h.heartbeat(1, 2)
		h.c.expireSessions(context.Background())
	}
	wantPartition(t, h, "t", 0, 1, 0, 0, 1, 2)
	h.clk.Advance(testSessionTimeout)
	h.heartbeat(2)
	h.c.expireSessions(context.Background())
	wantPartition(t, h, "t", 0, 1, 0, 0, 1, 2) // exactly the timeout: not yet
	h.clk.Advance(time.Millisecond)
	h.c.expireSessions(context.Background())
	wantPartition(t, h, "t", 0, 2, 1, 1, 2)
}

func TestNoLiveISRMember(t *testing.T) {
	tests := []struct {
		name       string
		unclean    bool
		leo        map[int32]int64 // log end offsets the brokers report
		wantLeader int32
	}{
		{name: "clean only: leaderless", unclean: false, leo: map[int32]int64{2: 5, 3: 10}, wantLeader: store.NoLeader},
		{name: "unclean: largest log end offset leads", unclean: true, leo: map[int32]int64{2: 5, 3: 10}, wantLeader: 3},
		{name: "unclean: largest log end offset leads, first replica", unclean: true, leo: map[int32]int64{2: 11, 3: 10}, wantLeader: 2},
		{name: "unclean: a replica that does not answer ranks last", unclean: true, leo: map[int32]int64{3: 0}, wantLeader: 3},
		{name: "unclean: nobody answers, assignment order", unclean: true, leo: nil, wantLeader: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts []harnessOption
			if tt.unclean {
				opts = append(opts, withUnclean())
			}
			h := startCluster(t, 3, opts...)
			h.createTopic("t", 1, 3) // [1 2 3], leader 1
			h.mustAlter(1, h.part("t", 0), 1)
			wantPartition(t, h, "t", 0, 1, 0, 1, 1)
			for id, o := range tt.leo {
				h.fake(id).setLEO("t", 0, o)
			}
			h.expire(2, 3)
			var p store.Partition
			if tt.wantLeader == store.NoLeader {
				// The last ISR member moves to the ELR, so it can lead when it returns.
				p = wantPartition(t, h, "t", 0, store.NoLeader, 1, 2)
				wantElr(t, h, "t", 0, 1)
			} else {
				p = wantPartition(t, h, "t", 0, tt.wantLeader, 1, 2, tt.wantLeader)
			}
			for _, id := range []int32{2, 3} {
				waitLAI(t, h, id, p)
			}
		})
	}
}

func TestReturningBrokerLeadsItsLeaderlessPartitionAndGetsFullState(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 3, 3) // p0 [1 2 3] L1, p1 [2 3 1] L2, p2 [3 1 2] L3
	h.createTopic("other", 1, 1)
	h.mustAlter(1, h.part("t", 0), 1)
	old := h.epoch[1]
	h.expire(2, 3)
	wantPartition(t, h, "t", 0, store.NoLeader, 1, 2)
	wantElr(t, h, "t", 0, 1)

	h.fake(1).reset()
	h.fake(2).reset()
	epoch := h.register(1)
	if epoch <= old {
		t.Errorf("broker epoch on return %d, want > %d", epoch, old)
	}
	// The leaderless partition whose last ISR member returned (cleanly) is
	// led by it, from the ELR.
	p0 := wantPartition(t, h, "t", 0, 1, 2, 3, 1)
	p1 := wantPartition(t, h, "t", 1, 2, 1, 1, 2, 3)
	p2 := wantPartition(t, h, "t", 2, 3, 1, 1, 3, 2)
	// The returning broker gets a LeaderAndIsr of every partition it hosts
	// and an UpdateMetadata of everything, stamped with its new epoch.
	for _, p := range []store.Partition{p0, p1, p2} {
		if req := waitLAI(t, h, 1, p); req.GetBrokerEpoch() != epoch {
			t.Errorf("LeaderAndIsr to the returning broker stamped broker epoch %d, want %d", req.GetBrokerEpoch(), epoch)
		}
	}
	if s, _ := h.fake(1).laiState("other", 0); s != nil && !slices.Contains(s.GetReplicas(), 1) {
		t.Errorf("broker 1 was sent a LeaderAndIsr for a partition it does not host: %v", s)
	}
	waitFor(t, "an UpdateMetadata with every partition and broker to the returning broker", func() bool {
		for _, um := range h.fake(1).updateMetadatas() {
			if um.GetBrokerEpoch() == epoch && len(um.GetLiveBrokers()) == 3 && len(um.GetPartitionStates()) == 4 {
				return true
			}
		}
		return false
	})
	// The new leader's followers are told too, and everyone learns broker
	// 1 is live again.
	waitLAI(t, h, 2, p0)
	waitFor(t, "broker 2 to learn broker 1 is live", func() bool {
		for _, um := range h.fake(2).updateMetadatas() {
			if slices.ContainsFunc(um.GetLiveBrokers(), func(b *replicadv1.Broker) bool { return b.GetId() == 1 }) {
				return true
			}
		}
		return false
	})
	// The old incarnation is stale; the new one is alive.
	resp, err := h.c.BrokerHeartbeat(context.Background(), &replicadv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: old})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
		t.Errorf("heartbeat of the old incarnation: %v %v, want STALE_BROKER_EPOCH", resp, err)
	}
	h.heartbeat(1)
}

func TestReRegisteringUnfencedBrokerIsFencedFirst(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 2, 3) // p0 [1 2 3] L1, p1 [2 3 1] L2
	old := h.epoch[1]
	epoch := h.register(1)
	if epoch <= old {
		t.Errorf("new broker epoch %d, want > %d", epoch, old)
	}
	// The old incarnation's leadership moved, and it left the ISRs.
	p0 := wantPartition(t, h, "t", 0, 2, 1, 1, 2, 3)
	p1 := wantPartition(t, h, "t", 1, 2, 1, 1, 2, 3)
	for _, id := range []int32{1, 2, 3} {
		waitLAI(t, h, id, p0)
		waitLAI(t, h, id, p1)
	}
	resp, err := h.c.BrokerHeartbeat(context.Background(), &replicadv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: old})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH {
		t.Errorf("heartbeat of the old incarnation: %v %v, want STALE_BROKER_EPOCH", resp, err)
	}
	h.heartbeat(1)
	// The old incarnation's connection is closed and a new one opened.
	f := h.fake(1)
	f.mu.Lock()
	dials, closes := f.dials, f.closes
	f.mu.Unlock()
	if dials != 2 || closes != 1 {
		t.Errorf("broker 1 dialled %d times and closed %d times, want 2 and 1", dials, closes)
	}
	brokers, err := h.st.Brokers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b := brokers[0]; b.Fenced || b.Epoch != epoch {
		t.Errorf("broker 1 stored as %+v, want unfenced at epoch %d", b, epoch)
	}
}

func TestHeartbeat(t *testing.T) {
	h := startCluster(t, 2)
	ctx := context.Background()
	tests := []struct {
		name       string
		id         int32
		epoch      int64
		wantCode   replicadv1.ErrorCode
		wantFenced bool
	}{
		{"current epoch", 1, h.epoch[1], codeNone, false},
		{"stale epoch", 1, h.epoch[1] - 1, replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, false},
		{"future epoch", 1, h.epoch[2] + 1, replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, false},
		{"unknown broker", 7, h.epoch[1], replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH, false},
	}
	for _, tt := range tests {
		resp, err := h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: tt.id, BrokerEpoch: tt.epoch})
		if err != nil || resp.GetErrorCode() != tt.wantCode || resp.GetIsFenced() != tt.wantFenced {
			t.Errorf("%s: %v %v, want %v fenced=%v", tt.name, resp, err, tt.wantCode, tt.wantFenced)
		}
	}
	// A stale heartbeat does not keep the session alive.
	h.clk.Advance(testSessionTimeout / 2)
	h.heartbeat(1)
	if resp, _ := h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: 2, BrokerEpoch: h.epoch[2] - 1}); resp.GetErrorCode() == codeNone {
		t.Fatalf("stale heartbeat accepted")
	}
	h.clk.Advance(testSessionTimeout/2 + time.Millisecond)
	h.c.expireSessions(ctx)
	resp, err := h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: 2, BrokerEpoch: h.epoch[2]})
	if err != nil || resp.GetErrorCode() != codeNone || !resp.GetIsFenced() {
		t.Errorf("heartbeat of a fenced broker: %v %v, want NONE with is_fenced", resp, err)
	}
	// Heartbeating does not unfence: only registering does.
	h.clk.Advance(time.Millisecond)
	h.c.expireSessions(ctx)
	if resp, _ := h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: 2, BrokerEpoch: h.epoch[2]}); !resp.GetIsFenced() {
		t.Errorf("fenced broker unfenced by a heartbeat")
	}
	h.register(2)
	h.heartbeat(2)
}

// TestReturningReplicaOutsideISR: every replica is gone; a replica that was
// not in the ISR returns. A clean election leaves the partition leaderless;
// an unclean one makes it leader with an ISR of just itself.
func TestReturningReplicaOutsideISR(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		t.Run(map[bool]string{false: "clean", true: "unclean"}[unclean], func(t *testing.T) {
			var opts []harnessOption
			if unclean {
				opts = append(opts, withUnclean())
			}
			h := startCluster(t, 3, opts...)
			h.createTopic("t", 1, 3) // [1 2 3], leader 1
			h.mustAlter(1, h.part("t", 0), 1)
			h.expire(1) // 2 and 3 fenced: they were in no ISR, nothing moves
			wantPartition(t, h, "t", 0, 1, 0, 1, 1)
			h.expire() // 1 fenced: nobody is left to lead
			wantPartition(t, h, "t", 0, store.NoLeader, 1, 2)
			wantElr(t, h, "t", 0, 1)

			h.fake(3).setLEO("t", 0, 42)
			h.register(3)
			if !unclean {
				wantPartition(t, h, "t", 0, store.NoLeader, 1, 2)
				wantElr(t, h, "t", 0, 1)
				return
			}
			p := wantPartition(t, h, "t", 0, 3, 2, 3, 3)
			waitLAI(t, h, 3, p)
		})
	}
}
