package controller

import (
	"slices"

	"github.com/replicad/replicad/controller/store"
)

// cleanLeader is Kafka's offline-partition election: the first replica, in
// assignment order, that is in the ISR and eligible. Only ISR members hold
// every acknowledged record, so nothing else may lead in a clean election.
// It returns store.NoLeader when no ISR member is eligible.
func cleanLeader(p store.Partition, eligible func(int32) bool) int32 {
	for _, r := range p.Replicas {
		if slices.Contains(p.ISR, r) && eligible(r) {
			return r
		}
	}
	return store.NoLeader
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

// withoutReplica returns the ISR without id, except that the last member
// stays: a leaderless partition keeps the replica that holds every
// acknowledged record in its ISR, so that replica can lead again when it
// returns (Kafka's removeReplicasFromIsr rule).
func withoutReplica(isr []int32, id int32) []int32 {
	if len(isr) == 1 && isr[0] == id {
		return slices.Clone(isr)
	}
	return slices.DeleteFunc(slices.Clone(isr), func(r int32) bool { return r == id })
}

// moveAway is the partition state after broker id stops being usable (fenced,
// or shutting down): if it led, a clean election among the rest of the ISR
// (NoLeader when nobody is left; the unclean fallback is the caller's); if it
// was in the ISR, it is dropped unless it was the last member. Leader epoch
// and partition epoch rise with any change. changed is false when id neither
// led nor was in the ISR (nothing to do).
func moveAway(p store.Partition, id int32, eligible func(int32) bool) (next store.Partition, changed bool) {
	inISR := slices.Contains(p.ISR, id)
	if p.Leader != id && !inISR {
		return p, false
	}
	next = p.Clone()
	others := func(r int32) bool { return r != id && eligible(r) }
	if p.Leader == id {
		next.Leader = cleanLeader(p, others)
	}
	next.ISR = withoutReplica(p.ISR, id)
	if slices.Equal(next.ISR, p.ISR) && next.Leader == p.Leader {
		return p, false
	}
	next.LeaderEpoch++
	next.PartitionEpoch++
	return next, true
}

// assignReplicas is the round-robin assignment of a new topic (Kafka's
// assignReplicasToBrokersRackUnaware without its random start): replica j of
// partition p is brokers[(start+p+j) % n]. The first replica, the preferred
// leader, rotates over the brokers, so leaders spread evenly. brokers must be
// sorted and hold at least rf ids.
func assignReplicas(brokers []int32, partitions, rf, start int) [][]int32 {
	n := len(brokers)
	out := make([][]int32, partitions)
	for p := range partitions {
		rs := make([]int32, rf)
		for j := range rf {
			rs[j] = brokers[(start+p+j)%n]
		}
		out[p] = rs
	}
	return out
}
