package controller

import (
	"context"
	"slices"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// item is an AlterPartition item of t-0 proposing isr, each member with the
// broker epoch the harness knows.
func (h *harness) item(leaderEpoch, partitionEpoch int32, isr ...int32) *replicadv1.AlterPartitionItem {
	it := &replicadv1.AlterPartitionItem{Topic: "t", Partition: 0, LeaderEpoch: leaderEpoch, PartitionEpoch: partitionEpoch}
	for _, id := range isr {
		it.NewIsr = append(it.NewIsr, &replicadv1.BrokerEpoch{BrokerId: id, BrokerEpoch: h.epoch[id]})
	}
	return it
}

func (h *harness) alterReq(leader int32, items ...*replicadv1.AlterPartitionItem) *replicadv1.AlterPartitionRequest {
	return &replicadv1.AlterPartitionRequest{BrokerId: leader, BrokerEpoch: h.epoch[leader], Partitions: items}
}

func TestAlterPartitionMatrix(t *testing.T) {
	const (
		none               = replicadv1.ErrorCode_ERROR_CODE_NONE
		notLeader          = replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER
		fencedLeaderEpoch  = replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH
		unknownLeaderEpoch = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_LEADER_EPOCH
		invalidVersion     = replicadv1.ErrorCode_ERROR_CODE_INVALID_UPDATE_VERSION
		staleBrokerEpoch   = replicadv1.ErrorCode_ERROR_CODE_STALE_BROKER_EPOCH
		ineligible         = replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA
		invalidRequest     = replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST
		unknownPartition   = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
	)
	var oldEpoch int64 // of an earlier incarnation, set by a prep
	// shrink12 leaves t-0 at ISR [1 2], partition epoch 1.
	shrink12 := func(h *harness) { h.mustAlter(1, h.part("t", 0), 1, 2) }
	type state struct {
		leader, leaderEpoch, partitionEpoch int32
		isr                                 []int32
	}
	tests := []struct {
		name    string
		prep    func(h *harness)
		req     func(h *harness) *replicadv1.AlterPartitionRequest
		wantTop replicadv1.ErrorCode
		want    replicadv1.ErrorCode
		// wantState is the committed state when want is NONE.
		wantState state
	}{
		{
			name:      "shrink accepted",
			req:       func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 0, 1, 2)) },
			want:      none,
			wantState: state{1, 0, 1, []int32{1, 2}},
		},
		{
			name:      "expand accepted",
			prep:      shrink12,
			req:       func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 1, 1, 2, 3)) },
			want:      none,
			wantState: state{1, 0, 2, []int32{1, 2, 3}},
		},
		{
			name: "expand accepted: joiner's broker epoch unknown (-1)",
			prep: shrink12,
			req: func(h *harness) *replicadv1.AlterPartitionRequest {
				it := h.item(0, 1, 1, 2, 3)
				it.NewIsr[2].BrokerEpoch = -1
				return h.alterReq(1, it)
			},
			want:      none,
			wantState: state{1, 0, 2, []int32{1, 2, 3}},
		},
		{
			name:      "the committed ISR again: accepted, nothing written",
			req:       func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 0, 3, 2, 1)) },
			want:      none,
			wantState: state{1, 0, 0, []int32{1, 2, 3}},
		},
		{
			name:      "stale partition epoch, ISR equal to the committed one: NONE with the committed state",
			prep:      shrink12,
			req:       func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 0, 2, 1)) },
			want:      none,
			wantState: state{1, 0, 1, []int32{1, 2}},
		},
		{
			name: "wrong leader",
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(2, h.item(0, 0, 2, 3)) },
			want: notLeader,
		},
		{
			name: "old leader epoch",
			prep: func(h *harness) {
				two := int32(2)
				resp, err := h.c.ElectLeader(context.Background(), &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0, Leader: &two})
				if err != nil || resp.GetErrorCode() != none {
					h.t.Fatalf("ElectLeader: %v %v", resp, err)
				}
			},
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(2, h.item(0, 1, 2, 3)) },
			want: fencedLeaderEpoch,
		},
		{
			name: "leader epoch from the future",
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(1, 0, 1, 2)) },
			want: unknownLeaderEpoch,
		},
		{
			name: "stale partition epoch",
			prep: shrink12,
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 0, 1)) },
			want: invalidVersion,
		},
		{
			name: "stale partition epoch, an ISR the committed one contains",
			prep: shrink12,
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 0, 1, 2, 3)) },
			want: invalidVersion,
		},
		{
			name: "partition epoch from the future",
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 5, 1, 2)) },
			want: invalidVersion,
		},
		{
			name: "joining replica with the wrong broker epoch",
			prep: shrink12,
			req: func(h *harness) *replicadv1.AlterPartitionRequest {
				it := h.item(0, 1, 1, 2, 3)
				it.NewIsr[2].BrokerEpoch = h.epoch[3] + 100
				return h.alterReq(1, it)
			},
			want: staleBrokerEpoch,
		},
		{
			name: "joining replica with an earlier incarnation's epoch",
			prep: func(h *harness) {
				shrink12(h)
				h.register(3) // a new epoch; the item below carries the old one
			},
			req: func(h *harness) *replicadv1.AlterPartitionRequest {
				it := h.item(0, 1, 1, 2, 3)
				it.NewIsr[2].BrokerEpoch = h.epoch[3] - 1
				return h.alterReq(1, it)
			},
			want: staleBrokerEpoch,
		},
		{
			name: "fenced joiner",
			prep: func(h *harness) {
				shrink12(h)
				h.expire(1, 2, 4) // broker 3 fenced; it led nothing and was in no ISR
			},
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 1, 1, 2, 3)) },
			want: ineligible,
		},
		{
			name: "shutting-down joiner",
			prep: func(h *harness) {
				shrink12(h)
				resp, err := h.c.ControlledShutdown(context.Background(), &replicadv1.ControlledShutdownRequest{BrokerId: 3, BrokerEpoch: h.epoch[3]})
				if err != nil || resp.GetErrorCode() != none {
					h.t.Fatalf("ControlledShutdown: %v %v", resp, err)
				}
			},
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 1, 1, 2, 3)) },
			want: ineligible,
		},
		{
			name: "joiner that is not a replica",
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 0, 1, 4)) },
			want: invalidRequest,
		},
		{
			name: "ISR without the leader",
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 0, 2, 3)) },
			want: invalidRequest,
		},
		{
			name: "a member listed twice",
			req:  func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(0, 0, 1, 2, 2)) },
			want: invalidRequest,
		},
		{
			name: "requester's broker epoch stale",
			req: func(h *harness) *replicadv1.AlterPartitionRequest {
				r := h.alterReq(1, h.item(0, 0, 1, 2))
				r.BrokerEpoch--
				return r
			},
			wantTop: staleBrokerEpoch,
		},
		{
			name: "requester re-registered since (old incarnation)",
			prep: func(h *harness) { oldEpoch = h.epoch[1]; h.register(1) },
			req: func(h *harness) *replicadv1.AlterPartitionRequest {
				r := h.alterReq(1, h.item(1, 1, 2, 3))
				r.BrokerEpoch = oldEpoch
				return r
			},
			wantTop: staleBrokerEpoch,
		},
		{
			name: "requester fenced",
			prep: func(h *harness) {
				h.expire(2, 3, 4)
			},
			req:     func(h *harness) *replicadv1.AlterPartitionRequest { return h.alterReq(1, h.item(1, 1, 1)) },
			wantTop: staleBrokerEpoch,
		},
		{
			name: "requester never registered",
			req: func(h *harness) *replicadv1.AlterPartitionRequest {
				r := h.alterReq(1, h.item(0, 0, 1, 2))
				r.BrokerId = 42
				return r
			},
			wantTop: staleBrokerEpoch,
		},
		{
			name: "unknown topic",
			req: func(h *harness) *replicadv1.AlterPartitionRequest {
				it := h.item(0, 0, 1, 2)
				it.Topic = "nope"
				return h.alterReq(1, it)
			},
			want: unknownPartition,
		},
		{
			name: "unknown partition of a known topic",
			req: func(h *harness) *replicadv1.AlterPartitionRequest {
				it := h.item(0, 0, 1, 2)
				it.Partition = 7
				return h.alterReq(1, it)
			},
			want: unknownPartition,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := startCluster(t, 4)
			h.createTopic("t", 1, 3) // [1 2 3], leader 1
			if tt.prep != nil {
				tt.prep(h)
			}
			before := h.snapshot()
			req := tt.req(h)
			resp, err := h.c.AlterPartition(context.Background(), req)
			if err != nil {
				t.Fatalf("AlterPartition: %v", err)
			}
			if resp.GetErrorCode() != tt.wantTop {
				t.Fatalf("top-level error %v, want %v (%v)", resp.GetErrorCode(), tt.wantTop, resp)
			}
			if tt.wantTop != none {
				if len(resp.GetPartitions()) != 0 {
					t.Errorf("top-level error with partition results: %v", resp.GetPartitions())
				}
				h.assertUnchanged(before)
				return
			}
			if len(resp.GetPartitions()) != 1 {
				t.Fatalf("%d results, want 1: %v", len(resp.GetPartitions()), resp)
			}
			res := resp.GetPartitions()[0]
			if res.GetTopic() != req.GetPartitions()[0].GetTopic() || res.GetPartition() != req.GetPartitions()[0].GetPartition() {
				t.Errorf("result names %s-%d, want the item's partition", res.GetTopic(), res.GetPartition())
			}
			if res.GetErrorCode() != tt.want {
				t.Fatalf("error %v, want %v (%v)", res.GetErrorCode(), tt.want, res)
			}
			if tt.want != none {
				h.assertUnchanged(before)
				return
			}
			w := tt.wantState
			p := wantPartition(t, h, "t", 0, w.leader, w.leaderEpoch, w.partitionEpoch, w.isr...)
			if res.GetLeader() != p.Leader || res.GetLeaderEpoch() != p.LeaderEpoch || res.GetPartitionEpoch() != p.PartitionEpoch ||
				!slices.Equal(res.GetIsr(), p.ISR) {
				t.Errorf("answer %v is not the committed state %+v", res, p)
			}
		})
	}
}

// TestAlterPartitionMixed: in one request, the accepted item is committed and
// the rejected one changes nothing; the other brokers learn the new ISR.
func TestAlterPartitionMixed(t *testing.T) {
	h := startCluster(t, 4)
	h.createTopic("t", 2, 3) // p0 [1 2 3] L1, p1 [2 3 4] L2
	p1Before := h.part("t", 1)
	shrink := h.item(0, 0, 1, 3)
	foreign := &replicadv1.AlterPartitionItem{Topic: "t", Partition: 1, LeaderEpoch: 0, PartitionEpoch: 0,
		NewIsr: []*replicadv1.BrokerEpoch{{BrokerId: 2, BrokerEpoch: h.epoch[2]}}}
	resp, err := h.c.AlterPartition(context.Background(), h.alterReq(1, shrink, foreign))
	if err != nil || resp.GetErrorCode() != codeNone || len(resp.GetPartitions()) != 2 {
		t.Fatalf("AlterPartition: %v %v", resp, err)
	}
	if r := resp.GetPartitions()[0]; r.GetErrorCode() != codeNone || r.GetPartitionEpoch() != 1 || !slices.Equal(r.GetIsr(), []int32{1, 3}) {
		t.Errorf("accepted item answered %v", r)
	}
	if r := resp.GetPartitions()[1]; r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER || r.GetPartition() != 1 {
		t.Errorf("rejected item answered %v", r)
	}
	p0 := wantPartition(t, h, "t", 0, 1, 0, 1, 1, 3)
	if p1 := h.part("t", 1); !equalPartition(p1, p1Before) {
		t.Errorf("rejected item changed the store: %+v, was %+v", p1, p1Before)
	}
	// The ISR change reaches the other brokers' metadata.
	waitFor(t, "broker 4 to get the new ISR of t-0 in an UpdateMetadata", func() bool {
		for _, um := range h.fake(4).updateMetadatas() {
			for _, s := range um.GetPartitionStates() {
				if s.GetTopic() == "t" && s.GetPartition() == 0 && s.GetPartitionEpoch() == p0.PartitionEpoch && slices.Equal(s.GetIsr(), p0.ISR) {
					return true
				}
			}
		}
		return false
	})
}
