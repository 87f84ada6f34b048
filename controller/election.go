package controller

import (
	"slices"

	"github.com/replicad/replicad/controller/store"
)

// The partition state changes of elections and ISR changes, as pure
// functions of the stored state (Kafka's PartitionChangeBuilder), with the
// eligible leader replicas of KIP-966:
//
//   - A leader does not move its HW while its ISR is smaller than the
//     effective min.insync.replicas (min ISR, capped at the replica count).
//     So a replica that leaves an ISR which is then below min ISR holds every
//     committed record: it joins the ELR.
//   - An ISR at min ISR or more commits records the ELR members may lack:
//     the ELR (and the last known ELR) is cleared.
//   - A clean election takes an eligible ISR member first, then an eligible
//     ELR member (who then makes up the ISR alone).
//   - The ISR may become empty: the partition is then leaderless, and its
//     ELR says who can lead when they return. (Before ELR the last ISR member
//     stayed in the ISR for that; it now moves to the ELR, and a broker that
//     comes back from an unclean shutdown, which may have lost its
//     unflushed tail, leaves the ELR: see withoutElr.)

// cleanLeader is Kafka's offline-partition election: the first replica, in
// assignment order, that is in the ISR and eligible, or else the first ELR
// member that is eligible. Only ISR and ELR members hold every committed
// record, so nothing else may lead in a clean election. It returns
// store.NoLeader when none is eligible.
func cleanLeader(p store.Partition, eligible func(int32) bool) int32 {
	for _, set := range [][]int32{p.ISR, p.ELR} {
		for _, r := range p.Replicas {
			if slices.Contains(set, r) && eligible(r) {
				return r
			}
		}
	}
	return store.NoLeader
}

// withLeader is p led by leader. An ELR member elected leaves the ELR for
// the ISR, which it makes up alone when the ISR had nobody else (KIP-966).
// NoLeader leaves the partition leaderless.
func withLeader(p store.Partition, leader int32) store.Partition {
	next := p.Clone()
	next.Leader = leader
	if leader != store.NoLeader && !slices.Contains(next.ISR, leader) {
		next.ISR = append(next.ISR, leader)
		next.ELR = without(next.ELR, leader)
	}
	return next
}

// withIsr is p with isr as its ISR: members that left join the ELR when the
// ISR is then below minIsr, members that joined leave it, and an ISR at
// minIsr or more clears the ELR and the last known ELR.
func withIsr(p store.Partition, isr []int32, minIsr int) store.Partition {
	next := p.Clone()
	next.ISR = slices.Clone(isr)
	for _, r := range isr {
		next.ELR = without(next.ELR, r)
		next.LastKnownELR = without(next.LastKnownELR, r)
	}
	if len(isr) >= minIsr {
		next.ELR, next.LastKnownELR = nil, nil
		return next
	}
	for _, r := range p.ISR {
		if !slices.Contains(isr, r) {
			next.ELR = with(next.ELR, r)
		}
	}
	return next
}

// withoutStaleElr is p with its ELR and last known ELR cleared when its ISR
// is at minIsr or more: the leader may then commit records without them, so
// they no longer hold every committed record (Kafka's PartitionChangeBuilder
// clears them at every change, and the controller re-checks every partition
// when min ISR falls: a topic's min.insync.replicas lowered or deleted, a
// broker registered with a lower --min-insync-replicas, a reassignment that
// changes the replicas). changed is false when there was nothing to clear.
func withoutStaleElr(p store.Partition, minIsr int) (next store.Partition, changed bool) {
	if len(p.ISR) < minIsr || (len(p.ELR) == 0 && len(p.LastKnownELR) == 0) {
		return p, false
	}
	next = p.Clone()
	next.ELR, next.LastKnownELR = nil, nil
	return next, true
}

// withoutElr is p after broker id came back from an unclean shutdown: it may
// have lost records it acknowledged, so it leaves the ELR. When nobody is left
// in the ISR or the ELR, it is kept in the last known ELR, the last resort
// of an election (lastResortCandidates).
func withoutElr(p store.Partition, id int32) store.Partition {
	if !slices.Contains(p.ELR, id) {
		return p
	}
	next := p.Clone()
	next.ELR = without(next.ELR, id)
	if len(next.ISR) == 0 && len(next.ELR) == 0 {
		next.LastKnownELR = with(next.LastKnownELR, id)
	}
	return next
}

// lastResortCandidates are the eligible last known ELR members, in
// assignment order, when nothing better exists: no ISR or ELR member at all
// (not merely none alive: an ELR member that is down may come back with
// every record). Kafka's balanced recovery of KIP-966 elects the most
// caught-up of them rather than leave the partition down for good.
func lastResortCandidates(p store.Partition, eligible func(int32) bool) []int32 {
	if len(p.ISR) > 0 || len(p.ELR) > 0 {
		return nil
	}
	var out []int32
	for _, r := range p.Replicas {
		if slices.Contains(p.LastKnownELR, r) && eligible(r) {
			out = append(out, r)
		}
	}
	return out
}

// uncleanCandidates are the replicas an unclean election may choose from:
// every eligible replica, in assignment order. The caller picks the most
// caught-up one among them.
func uncleanCandidates(p store.Partition, eligible func(int32) bool) []int32 {
	var out []int32
	for _, r := range p.Replicas {
		if eligible(r) {
			out = append(out, r)
		}
	}
	return out
}

// withUncleanLeader is p led by leader elected uncleanly or as a last
// resort: its ISR is the leader alone, and nobody else is known to hold
// every record any more.
func withUncleanLeader(p store.Partition, leader int32) store.Partition {
	next := p.Clone()
	next.Leader, next.ISR, next.ELR, next.LastKnownELR = leader, []int32{leader}, nil, nil
	return next
}

// mostCaughtUp picks, among candidates in order, the one with the largest log
// end offset; a candidate whose offset is unknown (missing from leo) ranks
// below every known one, and ties go to the earlier candidate (the preferred
// order).
func mostCaughtUp(candidates []int32, leo map[int32]int64) int32 {
	best, bestLEO := store.NoLeader, int64(-2)
	for _, c := range candidates {
		o, ok := leo[c]
		if !ok {
			o = -1
		}
		if o > bestLEO {
			best, bestLEO = c, o
		}
	}
	return best
}

// moveAway is the partition state after broker id stops being usable for p
// (fenced, shutting down, or its replica offline): if it led, a clean
// election among the others (NoLeader when nobody is left; the unclean
// fallback is the caller's); if it was in the ISR, it leaves it (for the ELR
// when the ISR is then below minIsr). Leader epoch and partition epoch rise
// with any change. changed is false when id neither led nor was in the ISR
// (nothing to do).
func moveAway(p store.Partition, id int32, eligible func(int32) bool, minIsr int) (next store.Partition, changed bool) {
	inISR := slices.Contains(p.ISR, id)
	if p.Leader != id && !inISR {
		return p, false
	}
	next = p
	if inISR {
		next = withIsr(p, without(p.ISR, id), minIsr)
	}
	if p.Leader == id {
		others := func(r int32) bool { return r != id && eligible(r) }
		next = withLeader(next, cleanLeader(next, others))
	}
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, true
}

// effectiveMinIsr is Kafka's effective min ISR: the min ISR the partition's
// leaders use, never more than its replica count, at least 1.
func effectiveMinIsr(minIsr, replicas int) int {
	return max(1, min(minIsr, replicas))
}

// without is set without id, as a new slice (nil when empty).
func without(set []int32, id int32) []int32 {
	var out []int32
	for _, r := range set {
		if r != id {
			out = append(out, r)
		}
	}
	return out
}

// with is the sorted set with id added, as a new slice.
func with(set []int32, id int32) []int32 {
	if slices.Contains(set, id) {
		return slices.Clone(set)
	}
	out := append(slices.Clone(set), id)
	slices.Sort(out)
	return out
}

// assignReplicas is the assignment of a new topic, Kafka's
// assignReplicasToBrokersRackUnaware with start as both its fixed start
// index and its first replica shift (no random start): the first replica of
// partition p, its preferred leader, is brokers[(start+p) % n], so leaders
// rotate over the brokers; replica j >= 1 is brokers[(first + 1 + (shift +
// j-1) % (n-1)) % n], where shift is start + p/n, rising each time p wraps
// around the broker list. Without the shift every partition a broker prefers
// to lead would have the same second replica, which would then take all its
// leaderships when it fails; with it they spread over every other broker.
// brokers must be sorted and hold at least rf ids.
func assignReplicas(brokers []int32, partitions, rf, start int) [][]int32 {
	return assignReplicasFrom(brokers, 0, partitions, rf, start)
}

// assignReplicasFrom is partitions first..first+count-1 of assignReplicas:
// the partitions added to a topic of first partitions continue its
// pattern, assigned as if the topic had been created with them all.
func assignReplicasFrom(brokers []int32, first, count, rf, start int) [][]int32 {
	n := len(brokers)
	out := make([][]int32, count)
	for i := range count {
		p := first + i
		lead := (start + p) % n
		shift := start + p/n
		rs := make([]int32, rf)
		rs[0] = brokers[lead]
		for j := 1; j < rf; j++ {
			rs[j] = brokers[(lead+1+(shift+j-1)%(n-1))%n]
		}
		out[i] = rs
	}
	return out
}
