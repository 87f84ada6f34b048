package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/spantest"
)

var (
	codeNotNeeded    = replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED
	codeNotAvailable = replicadv1.ErrorCode_ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE
	codeUnknown      = replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION
)

func TestPreferredElection(t *testing.T) {
	all := func(int32) bool { return true }
	not1 := func(id int32) bool { return id != 1 }
	tests := []struct {
		name       string
		p          store.Partition
		eligible   func(int32) bool
		want       replicadv1.ErrorCode
		wantLeader int32
	}{
		{"already leads", store.Partition{Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 2, 3}}, all, codeNotNeeded, 1},
		{"not in the ISR", store.Partition{Replicas: []int32{1, 2, 3}, Leader: 2, ISR: []int32{2, 3}}, all, codeNotAvailable, 2},
		{"in the ELR only", store.Partition{Replicas: []int32{1, 2, 3}, Leader: 2, ISR: []int32{2}, ELR: []int32{1}}, all, codeNotAvailable, 2},
		{"not eligible", store.Partition{Replicas: []int32{1, 2, 3}, Leader: 2, ISR: []int32{1, 2, 3}}, not1, codeNotAvailable, 2},
		{"elected", store.Partition{Replicas: []int32{1, 2, 3}, Leader: 2, ISR: []int32{2, 3, 1}, LeaderEpoch: 4, PartitionEpoch: 7}, all, codeNone, 1},
		{"leaderless", store.Partition{Replicas: []int32{1, 2}, Leader: store.NoLeader, ISR: []int32{1}, LeaderEpoch: 4, PartitionEpoch: 7}, all, codeNone, 1},
	}
	for _, tt := range tests {
		next, code, msg := preferredElection(tt.p, tt.eligible)
		if code != tt.want || next.Leader != tt.wantLeader || (code != codeNone && msg == "") {
			t.Errorf("%s: %v %q, leader %d; want %v, leader %d", tt.name, code, msg, next.Leader, tt.want, tt.wantLeader)
		}
		switch {
		case code == codeNone && (next.LeaderEpoch != tt.p.LeaderEpoch+1 || next.PartitionEpoch != tt.p.PartitionEpoch+1 || !slices.Equal(next.ISR, tt.p.ISR)):
			t.Errorf("%s: elected %+v, want the epochs of %+v raised by one and the ISR kept", tt.name, next, tt.p)
		case code != codeNone && next.LeaderEpoch != tt.p.LeaderEpoch:
			t.Errorf("%s: refused but changed: %+v", tt.name, next)
		}
	}
}

// prefParts builds n partitions of topic preferring broker preferred, the first
// led led of them by leader, the rest by preferred; every replica in the ISR.
func prefParts(topic string, n int, preferred, other int32, led int, leader int32) []store.Partition {
	out := make([]store.Partition, n)
	for i := range out {
		l := preferred
		if i < led {
			l = leader
		}
		out[i] = store.Partition{Topic: topic, Partition: int32(i), Replicas: []int32{preferred, other}, ISR: []int32{preferred, other}, Leader: l}
	}
	return out
}

func TestLeaderImbalance(t *testing.T) {
	var parts []store.Partition
	parts = append(parts, prefParts("a", 10, 1, 2, 1, 2)...) // broker 1: 1 of 10 led elsewhere
	parts = append(parts, prefParts("b", 4, 2, 1, 4, 1)...)  // broker 2: all 4 led elsewhere
	parts = append(parts, prefParts("c", 3, 3, 1, 0, 0)...)  // broker 3: balanced
	parts = append(parts, store.Partition{Topic: "d", Replicas: []int32{3, 1}, Leader: store.NoLeader})
	got := leaderImbalance(parts)
	want := map[int32]brokerImbalance{1: {10, 1}, 2: {4, 4}, 3: {4, 1}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("leaderImbalance = %v, want %v", got, want)
	}
	for _, tt := range []struct {
		b    brokerImbalance
		pct  int
		want bool
	}{
		{brokerImbalance{10, 1}, 10, false}, // exactly at the threshold: Kafka's ratio > pct
		{brokerImbalance{10, 1}, 9, true},
		{brokerImbalance{10, 2}, 10, true},
		{brokerImbalance{4, 4}, 100, false},
		{brokerImbalance{4, 0}, 0, false},
		{brokerImbalance{4, 1}, 0, true},
		{brokerImbalance{0, 0}, 0, false},
	} {
		if got := tt.b.exceeds(tt.pct); got != tt.want {
			t.Errorf("%+v.exceeds(%d) = %v, want %v", tt.b, tt.pct, got, tt.want)
		}
	}
}

// TestRebalancePlan checks who a rebalance check moves: only the partitions
// of brokers above the threshold, only to a preferred replica that is in the
// ISR and eligible, never during a reassignment, at most the batch.
func TestRebalancePlan(t *testing.T) {
	var parts []store.Partition
	a := prefParts("a", 10, 1, 2, 3, 2) // broker 1: 3 of 10 led by 2 (30%)
	a[1].ISR = []int32{2}               // 1 out of the ISR: stays
	a[2].AddingReplicas = []int32{3}    // being reassigned: stays
	a[2].Replicas = []int32{1, 2, 3}
	parts = append(parts, a...)
	parts = append(parts, prefParts("b", 10, 2, 1, 1, 1)...) // broker 2: 10%, not above
	parts = append(parts, prefParts("c", 2, 3, 1, 2, 1)...)  // broker 3: 100%, but fenced
	parts = append(parts, prefParts("d", 5, 4, 1, 5, 1)...)  // broker 4: 100%
	eligibleFor := func(partitionKey) func(int32) bool { return func(id int32) bool { return id != 3 } }
	names := func(moves []store.Partition) []string {
		var out []string
		for _, p := range moves {
			if p.Leader != p.Replicas[0] {
				t.Errorf("move %+v is not to the preferred replica", p)
			}
			out = append(out, fmt.Sprintf("%s-%d", p.Topic, p.Partition))
		}
		return out
	}
	for _, tt := range []struct {
		pct, batch   int
		want         []string
		wantDeferred int
	}{
		{10, 100, []string{"a-0", "d-0", "d-1", "d-2", "d-3", "d-4"}, 0},
		{10, 4, []string{"a-0", "d-0", "d-1", "d-2"}, 2},
		{0, 100, []string{"a-0", "b-0", "d-0", "d-1", "d-2", "d-3", "d-4"}, 0},
		{50, 100, []string{"d-0", "d-1", "d-2", "d-3", "d-4"}, 0},
		{100, 100, nil, 0},
	} {
		moves, deferred := rebalancePlan(parts, eligibleFor, tt.pct, tt.batch)
		if got := names(moves); !slices.Equal(got, tt.want) || deferred != tt.wantDeferred {
			t.Errorf("rebalancePlan(pct %d, batch %d) = %v, %d deferred; want %v, %d", tt.pct, tt.batch, got, deferred, tt.want, tt.wantDeferred)
		}
	}
}

// restartBroker1 has broker 1 fenced (its leaderships move to the next ISR
// member), registered again and back in every ISR, as after a restart: the
// partitions it prefers to lead are then led by others.
func restartBroker1(t *testing.T, h *harness, topic string, partitions int32) {
	t.Helper()
	h.expire(2, 3)
	h.register(1)
	for i := range partitions {
		p := h.part(topic, i)
		if p.Leader == 1 {
			t.Fatalf("%s-%d still led by the fenced broker 1: %+v", topic, i, p)
		}
		if !slices.Contains(p.ISR, 1) {
			h.mustAlter(p.Leader, p, append(slices.Clone(p.ISR), 1)...)
		}
	}
}

func electLeaders(t *testing.T, h *harness, topics ...*replicadv1.ElectLeadersTopic) *replicadv1.ElectLeadersResponse {
	t.Helper()
	resp, err := h.c.ElectLeaders(context.Background(), &replicadv1.ElectLeadersRequest{
		ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED, Topics: topics})
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("ElectLeaders(%v): %v %v", topics, resp, err)
	}
	return resp
}

// outcomes is "topic-partition:CODE leader" per result.
func outcomes(resp *replicadv1.ElectLeadersResponse) []string {
	var out []string
	for _, r := range resp.GetResults() {
		out = append(out, fmt.Sprintf("%s-%d:%v %d", r.GetTopic(), r.GetPartition(), r.GetErrorCode(), r.GetState().GetLeader()))
	}
	return out
}

func TestElectLeadersPreferred(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 6, 3) // preferred leaders 1 2 3 1 2 3
	h.createTopic("u", 3, 2) // preferred leaders 2 3 1
	// Broker 1 fenced: t-0, t-3 and u-2 move away, 1 leaves every ISR.
	h.expire(2, 3)
	h.register(1)
	p0 := h.part("t", 0)
	if p0.Leader == 1 || slices.Contains(p0.ISR, 1) {
		t.Fatalf("t-0 after broker 1's fencing: %+v", p0)
	}
	before := h.snapshot()
	resp := electLeaders(t, h, &replicadv1.ElectLeadersTopic{Topic: "t", Partitions: []int32{0, 1}})
	want := []string{"t-0:ERROR_CODE_PREFERRED_LEADER_NOT_AVAILABLE 2", "t-1:ERROR_CODE_ELECTION_NOT_NEEDED 2"}
	if got := outcomes(resp); !slices.Equal(got, want) {
		t.Errorf("preferred 1 out of the ISR: %v, want %v", got, want)
	}
	h.assertUnchanged(before)

	// Back in the ISR: one partition, then the rest of the topic, then all.
	h.mustAlter(p0.Leader, p0, append(slices.Clone(p0.ISR), 1)...)
	p0 = h.part("t", 0)
	resp = electLeaders(t, h, &replicadv1.ElectLeadersTopic{Topic: "t", Partitions: []int32{0}})
	if got := outcomes(resp); !slices.Equal(got, []string{"t-0:ERROR_CODE_NONE 1"}) {
		t.Errorf("preferred election of t-0: %v", got)
	}
	p := h.part("t", 0)
	if p.Leader != 1 || p.LeaderEpoch != p0.LeaderEpoch+1 || p.PartitionEpoch != p0.PartitionEpoch+1 || !slices.Equal(p.ISR, p0.ISR) {
		t.Errorf("t-0 after the election: %+v, want led by 1 at the next epochs of %+v", p, p0)
	}
	for _, r := range p.Replicas {
		waitLAI(t, h, r, p)
	}
	for _, k := range []struct {
		topic string
		n     int32
	}{{"t", 3}, {"u", 2}} {
		q := h.part(k.topic, k.n)
		h.mustAlter(q.Leader, q, append(slices.Clone(q.ISR), 1)...)
	}
	resp = electLeaders(t, h, &replicadv1.ElectLeadersTopic{Topic: "t"})
	want = []string{"t-0:ERROR_CODE_ELECTION_NOT_NEEDED 1", "t-1:ERROR_CODE_ELECTION_NOT_NEEDED 2", "t-2:ERROR_CODE_ELECTION_NOT_NEEDED 3",
		"t-3:ERROR_CODE_NONE 1", "t-4:ERROR_CODE_ELECTION_NOT_NEEDED 2", "t-5:ERROR_CODE_ELECTION_NOT_NEEDED 3"}
	if got := outcomes(resp); !slices.Equal(got, want) {
		t.Errorf("preferred election of topic t: %v, want %v", got, want)
	}
	resp = electLeaders(t, h)
	if got := outcomes(resp); len(got) != 9 || got[6] != "u-0:ERROR_CODE_ELECTION_NOT_NEEDED 2" || got[8] != "u-2:ERROR_CODE_NONE 1" {
		t.Errorf("preferred election of everything: %v", got)
	}
	for _, topic := range []string{"t", "u"} {
		for i := int32(0); ; i++ {
			p, err := h.st.Partition(context.Background(), topic, i)
			if err != nil {
				break
			}
			if p.Leader != p.Replicas[0] {
				t.Errorf("%s-%d led by %d after electing everything, want its preferred %d", topic, i, p.Leader, p.Replicas[0])
			}
		}
	}

	// Unknown partitions and topics are answered per partition.
	resp = electLeaders(t, h, &replicadv1.ElectLeadersTopic{Topic: "t", Partitions: []int32{9, 2, 2}}, &replicadv1.ElectLeadersTopic{Topic: "nope"})
	want = []string{"nope--1:ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION 0", "t-2:ERROR_CODE_ELECTION_NOT_NEEDED 3", "t-9:ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION 0"}
	if got := outcomes(resp); !slices.Equal(got, want) {
		t.Errorf("unknown partitions: %v, want %v", got, want)
	}

	// Bad requests name the field.
	for _, tt := range []struct {
		req   *replicadv1.ElectLeadersRequest
		field string
	}{
		{&replicadv1.ElectLeadersRequest{}, "election_type"},
		{&replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED,
			Topics: []*replicadv1.ElectLeadersTopic{{Topic: "t"}, {Topic: "bad name"}}}, "topics[1].topic"},
		{&replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED,
			Topics: []*replicadv1.ElectLeadersTopic{{Topic: "t", Partitions: []int32{0, -1}}}}, "topics[0].partitions[1]"},
	} {
		_, err := h.c.ElectLeaders(context.Background(), tt.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tt.field) {
			t.Errorf("ElectLeaders(%v): %v, want InvalidArgument naming %s", tt.req, err, tt.field)
		}
	}
}

// TestRebalanceLeaders checks one rebalance check after a restart: it moves
// the restarted broker's leaderships back in batches of at most the cap,
// in a Controller.rebalanceLeaders span, and the brokers are told.
func TestRebalanceLeaders(t *testing.T) {
	h, rec, _ := tracedCluster(t, 3)
	h.c.cfg.LeaderImbalancePerBrokerPercentage = 10
	h.c.cfg.LeaderRebalanceBatch = 1
	h.createTopic("t", 6, 3) // broker 1 prefers t-0 and t-3
	restartBroker1(t, h, "t", 6)
	ctx := context.Background()
	if deferred := h.c.rebalanceLeaders(ctx); deferred != 1 {
		t.Errorf("first check deferred %d moves, want 1 (cap 1, 2 to move)", deferred)
	}
	p0, p3 := h.part("t", 0), h.part("t", 3)
	if p0.Leader != 1 || p3.Leader == 1 {
		t.Errorf("after one check with a cap of 1: t-0 led by %d, t-3 by %d; want 1 and not yet 1", p0.Leader, p3.Leader)
	}
	// The first move reaches broker 1 under the first check's span. Checked
	// before the second check: the broker queue merges a LeaderAndIsr still
	// queued with a later one, which then travels in the later trace.
	first := spantest.Named(rec, "Controller.rebalanceLeaders")
	if len(first) != 1 {
		t.Fatalf("%d Controller.rebalanceLeaders spans after the first check, want 1", len(first))
	}
	wantSentUnder(t, h, rec, 1, p0, first[0])
	if deferred := h.c.rebalanceLeaders(ctx); deferred != 0 {
		t.Errorf("second check deferred %d", deferred)
	}
	for i := range int32(6) {
		p := h.part("t", i)
		if p.Leader != p.Replicas[0] {
			t.Errorf("t-%d led by %d after the rebalance, want its preferred %d", i, p.Leader, p.Replicas[0])
		}
		if i%3 == 0 { // moved: every replica is told
			for _, r := range p.Replicas {
				waitLAI(t, h, r, p)
			}
		}
	}
	spans := spantest.Named(rec, "Controller.rebalanceLeaders")
	if len(spans) != 2 {
		t.Fatalf("%d Controller.rebalanceLeaders spans, want 2", len(spans))
	}
	a := spantest.Attrs(spans[0].Attributes())
	if got := a["replicad.imbalanced_brokers"].AsInt64Slice(); !slices.Equal(got, []int64{1}) ||
		a["replicad.partitions"].AsInt64() != 1 || a["replicad.partitions_deferred"].AsInt64() != 1 {
		t.Errorf("first Controller.rebalanceLeaders attributes %v", a)
	}
	// Balanced: a check does nothing and makes no span.
	before := h.snapshot()
	h.c.rebalanceLeaders(ctx)
	h.assertUnchanged(before)
	if n := len(spantest.Named(rec, "Controller.rebalanceLeaders")); n != 2 {
		t.Errorf("a balanced check made a span (%d in all)", n)
	}
}

// TestAutoLeaderRebalance checks that the active controller runs the checks
// by itself every LeaderImbalanceCheckInterval, and that with the rebalance
// off it has no timer to run them.
func TestAutoLeaderRebalance(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint("enabled=", on), func(t *testing.T) {
			h := startCluster(t, 3, func(c *Config) {
				c.AutoLeaderRebalance = on
				c.LeaderImbalanceCheckInterval = 20 * time.Millisecond
				c.LeaderImbalancePerBrokerPercentage = 10
			})
			h.createTopic("t", 6, 3)
			restartBroker1(t, h, "t", 6)
			if !on {
				if h.c.rebalanceTimer() != nil {
					t.Error("a controller with AutoLeaderRebalance off has a rebalance timer")
				}
				return
			}
			waitFor(t, "broker 1 to lead t-0 and t-3 again", func() bool {
				p0, _ := h.st.Partition(context.Background(), "t", 0)
				p3, _ := h.st.Partition(context.Background(), "t", 3)
				return p0.Leader == 1 && p3.Leader == 1
			})
		})
	}
}

// TestElectLeadersIsOneTrace: a preferred election made under a client's
// span is a Controller.electLeaders span under it, which the brokers' LeaderAndIsr
// carry.
func TestElectLeadersIsOneTrace(t *testing.T) {
	h, rec, client := tracedCluster(t, 3)
	h.createTopic("t", 3, 3)
	two := int32(2)
	if r, err := h.c.ElectLeader(context.Background(), &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0, Leader: &two}); err != nil || r.GetErrorCode() != codeNone {
		t.Fatalf("ElectLeader: %v %v", r, err)
	}
	ctx, span := client.Start(context.Background(), "ctlclient elect --preferred")
	resp, err := h.c.ElectLeaders(ctx, &replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED})
	span.End()
	if err != nil || len(resp.GetResults()) != 3 {
		t.Fatalf("ElectLeaders: %v %v", resp, err)
	}
	spans := spantest.Named(rec, "Controller.electLeaders")
	if len(spans) != 1 || spans[0].Parent().SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("Controller.electLeaders spans %v, want one under the client's", spans)
	}
	a := spantest.Attrs(spans[0].Attributes())
	if a["replicad.election_type"].AsString() != "preferred" || a["replicad.partitions"].AsInt64() != 3 || a["replicad.partitions_elected"].AsInt64() != 1 ||
		a["replicad.leader"].AsInt64() != 1 || a["replicad.old_leader"].AsInt64() != 2 {
		t.Errorf("Controller.electLeaders attributes %v", a)
	}
	p := h.part("t", 0)
	for _, r := range p.Replicas {
		wantSentUnder(t, h, rec, r, p, spans[0])
	}
}
