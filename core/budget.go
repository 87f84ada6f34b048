package core

import "github.com/rs/zerolog"

// refuseOverBudget reports whether st names a partition this broker does
// not host yet while it already hosts Config.MaxPartitions: the controller
// never sends that (it refuses the create or reassignment up front, KIP-578),
// so the request is a stale controller's or a hand-made one. The new
// partition is refused with WILL_EXCEED_PARTITION_LIMITS and the hosted ones
// are untouched: hosting more must never break what is hosted (every
// partition over the machine's means once ran the broker out of descriptors,
// and then produce to every topic failed). Called under the state-change
// lock, which is what creates partitions, so the count cannot race past the
// budget.
func (rm *ReplicaManager) refuseOverBudget(slog zerolog.Logger, st PartitionState) bool {
	if rm.cfg.MaxPartitions <= 0 {
		return false
	}
	rm.partitionsMu.RLock()
	_, hosted := rm.partitions[st.TopicPartition]
	n := len(rm.partitions)
	rm.partitionsMu.RUnlock()
	if hosted || n < rm.cfg.MaxPartitions {
		return false
	}
	// A log already on disk is not a new partition: after a restart none is
	// hosted until the controller's full state arrives, and refusing a log
	// the broker has (a lowered --max-partitions, a machine with fewer
	// descriptors) would leave a partition it leads never served. Kafka
	// applies the limit only to creates and reassignments, too.
	if _, onDisk := rm.logs.GetLog(st.TopicPartition); onDisk {
		return false
	}
	// Logged at warn for the 1st, 2nd, 4th, 8th... refusal: a request of
	// 90,000 partitions too many must not write 90,000 warnings.
	rm.overBudget++
	ev := slog.Trace()
	if rm.overBudget&(rm.overBudget-1) == 0 {
		ev = slog.Warn()
	}
	stateFields(ev, st).Int("hosted_partitions", n).Int("max_partitions", rm.cfg.MaxPartitions).Int("refused_so_far", rm.overBudget).
		Msg("Ignoring LeaderAndIsr request: the broker already hosts --max-partitions partitions (WILL_EXCEED_PARTITION_LIMITS)")
	return true
}
