package controller

import (
	"slices"
	"testing"

	"github.com/replicad/replicad/controller/store"
)

func only(ids ...int32) func(int32) bool {
	return func(id int32) bool { return slices.Contains(ids, id) }
}

func all(int32) bool { return true }

func TestCleanLeader(t *testing.T) {
	tests := []struct {
		name     string
		replicas []int32
		isr      []int32
		eligible func(int32) bool
		want     int32
		elr      []int32
	}{
		{"first replica in ISR", []int32{1, 2, 3}, []int32{1, 2, 3}, all, 1, nil},
		{"assignment order, not ISR order", []int32{3, 1, 2}, []int32{1, 2, 3}, all, 3, nil},
		{"replica not in ISR skipped", []int32{1, 2, 3}, []int32{3, 2}, all, 2, nil},
		{"ineligible ISR member skipped", []int32{1, 2, 3}, []int32{1, 2, 3}, only(3), 3, nil},
		{"eligible but out of ISR never leads", []int32{1, 2, 3}, []int32{1}, only(2, 3), store.NoLeader, nil},
		{"empty ISR", []int32{1, 2, 3}, nil, all, store.NoLeader, nil},
		{"ISR member that is not a replica ignored", []int32{1, 2}, []int32{5}, all, store.NoLeader, nil},
		{"ELR member when no ISR member is eligible", []int32{1, 2, 3}, []int32{1}, only(3), 3, []int32{3}},
		{"ISR member before an ELR one", []int32{3, 1, 2}, []int32{1}, all, 1, []int32{3}},
		{"no eligible ISR or ELR member", []int32{1, 2, 3}, []int32{1}, only(2), store.NoLeader, []int32{3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := store.Partition{Topic: "t", Replicas: tt.replicas, ISR: tt.isr, ELR: tt.elr, Leader: store.NoLeader}
			if got := cleanLeader(p, tt.eligible); got != tt.want {
				t.Errorf("cleanLeader(replicas %v, isr %v) = %d, want %d", tt.replicas, tt.isr, got, tt.want)
			}
		})
	}
}

func TestMoveAway(t *testing.T) {
	base := store.Partition{Topic: "t", Partition: 0, Leader: 1, LeaderEpoch: 4, PartitionEpoch: 7,
		ISR: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}}
	with := func(f func(p *store.Partition)) store.Partition {
		p := base.Clone()
		f(&p)
		return p
	}
	tests := []struct {
		name        string
		p           store.Partition
		id          int32
		eligible    func(int32) bool
		minIsr      int // 1 when 0
		want        store.Partition
		wantChanged bool
	}{
		{
			name: "fenced leader: next ISR member leads, ISR shrinks, epochs rise",
			p:    base, id: 1, eligible: only(2, 3),
			want: with(func(p *store.Partition) {
				p.Leader, p.ISR, p.LeaderEpoch, p.PartitionEpoch = 2, []int32{2, 3}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "fenced leader: ineligible next member skipped",
			p:    base, id: 1, eligible: only(3),
			want: with(func(p *store.Partition) {
				p.Leader, p.ISR, p.LeaderEpoch, p.PartitionEpoch = 3, []int32{2, 3}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "eligible() saying yes for the fenced broker does not keep it leading",
			p:    base, id: 1, eligible: all,
			want: with(func(p *store.Partition) {
				p.Leader, p.ISR, p.LeaderEpoch, p.PartitionEpoch = 2, []int32{2, 3}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "follower in ISR dropped, leader kept",
			p:    base, id: 2, eligible: only(1, 3),
			want: with(func(p *store.Partition) {
				p.ISR, p.LeaderEpoch, p.PartitionEpoch = []int32{1, 3}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "last ISR member moves to the ELR, leader -1",
			p:    with(func(p *store.Partition) { p.ISR = []int32{1} }), id: 1, eligible: only(2, 3),
			want: with(func(p *store.Partition) {
				p.Leader, p.ISR, p.ELR, p.LeaderEpoch, p.PartitionEpoch = store.NoLeader, nil, []int32{1}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "min ISR 2: a follower leaving an ISR of 2 joins the ELR",
			p:    with(func(p *store.Partition) { p.ISR = []int32{1, 2} }), id: 2, eligible: only(1, 3), minIsr: 2,
			want: with(func(p *store.Partition) {
				p.ISR, p.ELR, p.LeaderEpoch, p.PartitionEpoch = []int32{1}, []int32{2}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "min ISR 2: leaving an ISR of 3 does not",
			p:    base, id: 3, eligible: only(1, 2), minIsr: 2,
			want: with(func(p *store.Partition) {
				p.ISR, p.LeaderEpoch, p.PartitionEpoch = []int32{1, 2}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "last ISR member fenced: an eligible ELR member leads, alone in the ISR",
			p: with(func(p *store.Partition) {
				p.ISR, p.ELR = []int32{1}, []int32{3}
			}), id: 1, eligible: only(2, 3), minIsr: 2,
			want: with(func(p *store.Partition) {
				p.Leader, p.ISR, p.ELR, p.LeaderEpoch, p.PartitionEpoch = 3, []int32{3}, []int32{1}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "leader fenced and no other ISR member eligible: leaderless, ISR shrinks",
			p:    with(func(p *store.Partition) { p.ISR = []int32{1, 2} }), id: 1, eligible: only(3),
			want: with(func(p *store.Partition) {
				p.Leader, p.ISR, p.LeaderEpoch, p.PartitionEpoch = store.NoLeader, []int32{2}, 5, 8
			}),
			wantChanged: true,
		},
		{
			name: "replica outside the ISR: untouched",
			p:    with(func(p *store.Partition) { p.ISR = []int32{1, 2} }), id: 3, eligible: only(1, 2),
			want: with(func(p *store.Partition) { p.ISR = []int32{1, 2} }),
		},
		{
			name: "not a replica: untouched",
			p:    base, id: 9, eligible: all,
			want: base,
		},
		{
			name: "last ISR member of a leaderless partition (kept there before ELR): moves to the ELR",
			p: with(func(p *store.Partition) {
				p.Leader, p.ISR = store.NoLeader, []int32{2}
			}),
			id: 2, eligible: only(1, 3),
			want: with(func(p *store.Partition) {
				p.Leader, p.ISR, p.ELR, p.LeaderEpoch, p.PartitionEpoch = store.NoLeader, nil, []int32{2}, 5, 8
			}),
			wantChanged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			orig := tt.p.Clone()
			got, changed := moveAway(tt.p, tt.id, tt.eligible, max(tt.minIsr, 1))
			if changed != tt.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tt.wantChanged)
			}
			if !equalPartition(got, tt.want) {
				t.Errorf("moveAway(%d) =\n %+v\nwant\n %+v", tt.id, got, tt.want)
			}
			if !equalPartition(tt.p, orig) {
				t.Errorf("moveAway modified its argument: %+v, was %+v", tt.p, orig)
			}
		})
	}
}

func equalPartition(a, b store.Partition) bool {
	return a.Topic == b.Topic && a.Partition == b.Partition && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch &&
		a.PartitionEpoch == b.PartitionEpoch && slices.Equal(a.ISR, b.ISR) && slices.Equal(a.Replicas, b.Replicas) &&
		slices.Equal(a.AddingReplicas, b.AddingReplicas) && slices.Equal(a.RemovingReplicas, b.RemovingReplicas) &&
		slices.Equal(a.ELR, b.ELR) && slices.Equal(a.LastKnownELR, b.LastKnownELR)
}

// The ELR follows the ISR: members that leave an ISR below min ISR join it,
// members that join the ISR leave it, and an ISR at min ISR clears it.
func TestWithIsr(t *testing.T) {
	p := store.Partition{Topic: "t", Replicas: []int32{1, 2, 3}, Leader: 1, ISR: []int32{1, 2, 3}}
	steps := []struct {
		isr                []int32
		wantELR, wantLKELR []int32
	}{
		{[]int32{1, 2}, nil, nil}, // min ISR 2: still at the minimum
		{[]int32{1}, []int32{2}, nil},
		{[]int32{1, 3}, nil, nil}, // back at the minimum: 2 may lack what is committed now
	}
	for _, s := range steps {
		p = withIsr(p, s.isr, 2)
		if !slices.Equal(p.ISR, s.isr) || !slices.Equal(p.ELR, s.wantELR) || !slices.Equal(p.LastKnownELR, s.wantLKELR) {
			t.Fatalf("withIsr(%v) = ISR %v ELR %v LKELR %v, want ELR %v LKELR %v", s.isr, p.ISR, p.ELR, p.LastKnownELR, s.wantELR, s.wantLKELR)
		}
	}
	// An ELR member that rejoins a still small ISR leaves the ELR.
	p = store.Partition{Topic: "t", Replicas: []int32{1, 2, 3, 4}, Leader: 1, ISR: []int32{1}, ELR: []int32{2, 3}}
	if p = withIsr(p, []int32{1, 2}, 3); !slices.Equal(p.ELR, []int32{3}) {
		t.Fatalf("ELR %v after 2 rejoined an ISR under min ISR 3, want [3]", p.ELR)
	}
}

// A broker back from an unclean shutdown leaves the ELR; when it was the
// last one there and the ISR is empty, it is kept as the last resort.
func TestWithoutElr(t *testing.T) {
	p := store.Partition{Topic: "t", Replicas: []int32{1, 2, 3}, Leader: store.NoLeader, ELR: []int32{1, 2}}
	p = withoutElr(p, 1)
	if !slices.Equal(p.ELR, []int32{2}) || len(p.LastKnownELR) != 0 {
		t.Fatalf("ELR %v LKELR %v, want [2] and none: 2 may still come back whole", p.ELR, p.LastKnownELR)
	}
	p = withoutElr(p, 2)
	if len(p.ELR) != 0 || !slices.Equal(p.LastKnownELR, []int32{2}) {
		t.Fatalf("ELR %v LKELR %v, want none and [2]", p.ELR, p.LastKnownELR)
	}
	if got := lastResortCandidates(p, all); !slices.Equal(got, []int32{2}) {
		t.Fatalf("last resort candidates %v, want [2]", got)
	}
	if got := withoutElr(p, 3); !equalPartition(got, p) {
		t.Fatalf("a broker outside the ELR changed the partition: %+v", got)
	}
}

func TestMostCaughtUp(t *testing.T) {
	tests := []struct {
		name       string
		candidates []int32
		leo        map[int32]int64
		want       int32
	}{
		{"largest log end offset", []int32{1, 2, 3}, map[int32]int64{1: 5, 2: 9, 3: 7}, 2},
		{"tie goes to the earlier candidate", []int32{3, 1, 2}, map[int32]int64{1: 9, 2: 9, 3: 9}, 3},
		{"unknown ranks below known", []int32{1, 2}, map[int32]int64{2: 0}, 2},
		{"all unknown: first candidate", []int32{4, 2}, nil, 4},
		{"no candidates", nil, map[int32]int64{1: 3}, store.NoLeader},
		{"offset of a non-candidate ignored", []int32{1, 2}, map[int32]int64{1: 1, 2: 2, 3: 100}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mostCaughtUp(tt.candidates, tt.leo); got != tt.want {
				t.Errorf("mostCaughtUp(%v, %v) = %d, want %d", tt.candidates, tt.leo, got, tt.want)
			}
		})
	}
}

func TestUncleanCandidates(t *testing.T) {
	p := store.Partition{Replicas: []int32{3, 1, 2}, ISR: []int32{3}}
	if got := uncleanCandidates(p, only(1, 2)); !slices.Equal(got, []int32{1, 2}) {
		t.Errorf("uncleanCandidates = %v, want [1 2] (eligible replicas in assignment order)", got)
	}
}

func TestAssignReplicas(t *testing.T) {
	tests := []struct {
		brokers               []int32
		partitions, rf, start int
	}{
		{[]int32{1, 2, 3}, 3, 3, 0},
		{[]int32{1, 2, 3}, 6, 2, 0},
		{[]int32{1, 2, 3, 4}, 8, 3, 1},
		{[]int32{2, 5, 7, 9, 11}, 10, 1, 3},
		{[]int32{1, 2, 3, 4, 5}, 7, 3, 2}, // not a multiple: leaders differ by at most one
	}
	for _, tt := range tests {
		got := assignReplicas(tt.brokers, tt.partitions, tt.rf, tt.start)
		if len(got) != tt.partitions {
			t.Fatalf("%+v: %d partitions, want %d", tt, len(got), tt.partitions)
		}
		leaders := make(map[int32]int)
		replicas := make(map[int32]int)
		for p, rs := range got {
			if len(rs) != tt.rf {
				t.Errorf("%+v: partition %d has replicas %v, want %d of them", tt, p, rs, tt.rf)
			}
			seen := make(map[int32]bool)
			for _, r := range rs {
				if seen[r] || !slices.Contains(tt.brokers, r) {
					t.Errorf("%+v: partition %d has replicas %v: duplicate or unknown broker", tt, p, rs)
				}
				seen[r] = true
				replicas[r]++
			}
			leaders[rs[0]]++
		}
		lo, hi := tt.partitions, 0
		rlo, rhi := tt.partitions*tt.rf, 0
		for _, b := range tt.brokers {
			lo, hi = min(lo, leaders[b]), max(hi, leaders[b])
			rlo, rhi = min(rlo, replicas[b]), max(rhi, replicas[b])
		}
		if hi-lo > 1 {
			t.Errorf("%+v: leaders per broker %v are not spread evenly (%v)", tt, leaders, got)
		}
		if rhi-rlo > tt.rf {
			t.Errorf("%+v: replicas per broker %v are not spread evenly", tt, replicas)
		}
	}
	// The start rotates where the first leader goes, and shifts the
	// second replica (Kafka's fixed start index and replica shift).
	a := assignReplicas([]int32{1, 2, 3}, 1, 2, 0)
	b := assignReplicas([]int32{1, 2, 3}, 1, 2, 1)
	if !slices.Equal(a[0], []int32{1, 2}) || !slices.Equal(b[0], []int32{2, 1}) {
		t.Errorf("assignReplicas with start 0 and 1 = %v and %v, want [[1 2]] and [[2 1]]", a, b)
	}
}

// TestAssignReplicasShiftSpreadsFailover checks the replica shift: the
// partitions one broker prefers to lead have their second replicas (who
// take over when it fails) spread evenly over every other broker, not
// piled on one. n*(n-1) partitions give each (first, second) pair exactly
// once; Kafka's own assignment for 3 brokers, start 0, is checked too.
func TestAssignReplicasShiftSpreadsFailover(t *testing.T) {
	kafka := [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}, {1, 3, 2}, {2, 1, 3}, {3, 2, 1}}
	if got := assignReplicas([]int32{1, 2, 3}, 6, 3, 0); !slices.EqualFunc(got, kafka, slices.Equal) {
		t.Errorf("assignReplicas(3 brokers, 6 partitions, RF 3, start 0) = %v, want Kafka's %v", got, kafka)
	}
	for _, tt := range []struct{ brokers, rf, start, rounds int }{
		{3, 3, 0, 1}, {3, 3, 1, 5}, {5, 3, 0, 1}, {5, 3, 3, 2}, {4, 2, 2, 3}, {5, 5, 1, 1},
	} {
		brokers := make([]int32, tt.brokers)
		for i := range brokers {
			brokers[i] = int32(i + 1)
		}
		n := tt.brokers
		got := assignReplicas(brokers, n*(n-1)*tt.rounds, tt.rf, tt.start)
		// next[first][second] counts the partitions first prefers to lead
		// whose second replica is second.
		next := make(map[int32]map[int32]int)
		for _, rs := range got {
			if next[rs[0]] == nil {
				next[rs[0]] = make(map[int32]int)
			}
			next[rs[0]][rs[1]]++
		}
		for _, first := range brokers {
			for _, second := range brokers {
				want := tt.rounds
				if second == first {
					want = 0
				}
				if next[first][second] != want {
					t.Errorf("%+v: broker %d prefers to lead %d partitions whose second replica is %d, want %d (failover targets %v; assignment %v)",
						tt, first, next[first][second], second, want, next[first], got)
				}
			}
		}
	}
}
