package core

import (
	"slices"
	"sort"

	"github.com/replicad/replicad/core/tp"
)

// MetadataView is the cluster as this broker knows it (the Metadata RPC's
// answer, Kafka's MetadataResponse).
type MetadataView struct {
	BrokerID int32
	// ControllerID and ControllerEpoch are the controller of the last
	// request this broker took; -1 before any.
	ControllerID    int32
	ControllerEpoch int32
	// Brokers are the live brokers, by id.
	Brokers []Broker
	// Topics are in request order, or by name when none was asked for.
	Topics []TopicMetadata
}

// TopicMetadata is one topic of a MetadataView. Error is
// UNKNOWN_TOPIC_OR_PARTITION for a topic this broker knows nothing of.
type TopicMetadata struct {
	Topic      string
	TopicID    string
	Error      ErrorCode
	Partitions []PartitionMetadata // by partition number
	// Configs are the topic's config overrides as the controller last sent
	// them, at ConfigVersion (0: none heard).
	Configs       map[string]string
	ConfigVersion int64
}

// PartitionMetadata is one partition of a TopicMetadata. Error is
// LEADER_NOT_AVAILABLE, with Leader -1, when the partition has no leader or
// its leader is not a live broker (as Kafka's MetadataCache answers).
type PartitionMetadata struct {
	Partition       int32
	Error           ErrorCode
	Leader          int32
	LeaderEpoch     int32
	PartitionEpoch  int32
	Replicas        []int32
	ISR             []int32
	OfflineReplicas []int32
}

// Metadata answers what this broker knows of topics: every topic it knows
// when topics is nil, only the brokers when it is empty. The view comes from the controller's UpdateMetadata
// and LeaderAndIsr requests; for a partition this broker leads, its own
// state wins when it is newer (a leader learns its ISR changes
// from the controller's AlterPartition answer before any UpdateMetadata). It stays
// as it was when the controller goes: clients still find the leaders.
func (rm *ReplicaManager) Metadata(topics []string) MetadataView {
	var want map[string]bool
	if topics != nil {
		want = make(map[string]bool, len(topics))
		for _, t := range topics {
			want[t] = true
		}
	}
	live, controllerID, states := rm.metadata.snapshot(want)
	byTP := make(map[tp.TopicPartition]PartitionState, len(states))
	for _, st := range states {
		byTP[st.TopicPartition] = st
	}
	offlineHere := map[tp.TopicPartition]bool{}
	for _, h := range rm.hostedPartitions(want) {
		in := h.partition.info()
		if h.offline.Load() {
			offlineHere[in.TopicPartition] = true
		}
		own := PartitionState{TopicPartition: in.TopicPartition, Leader: in.Leader, LeaderEpoch: in.LeaderEpoch,
			PartitionEpoch: in.PartitionEpoch, ISR: in.ISR, Replicas: in.Replicas, TopicID: in.TopicID}
		if id := rm.metadata.incarnation(in.TopicPartition.Topic); id != "" && in.TopicID != "" && in.TopicID != id {
			// A replica of the deleted incarnation of a topic created
			// again, not stopped yet: not the topic clients ask for.
			continue
		}
		if in.Role != RoleLeader || h.offline.Load() {
			// Only the leader knows its partition's ISR: a follower
			// does not keep it, and the view's state is the one to show.
			continue
		}
		// At equal epochs the controller's state is the same ISR, in its order.
		if old, ok := byTP[own.TopicPartition]; !ok || (newerState(own, old) && !sameEpochs(own, old)) {
			byTP[own.TopicPartition] = own
		}
	}

	v := MetadataView{BrokerID: rm.cfg.BrokerID, ControllerID: controllerID, ControllerEpoch: rm.controllerEpoch.Load()}
	for _, b := range live {
		v.Brokers = append(v.Brokers, b)
	}
	sort.Slice(v.Brokers, func(i, j int) bool { return v.Brokers[i].ID < v.Brokers[j].ID })

	byTopic := map[string]*TopicMetadata{}
	for t, st := range byTP {
		tm := byTopic[t.Topic]
		if tm == nil {
			tm = &TopicMetadata{Topic: t.Topic, TopicID: st.TopicID}
			byTopic[t.Topic] = tm
		}
		if tm.TopicID == "" {
			tm.TopicID = st.TopicID
		}
		if st.TopicConfigVersion > tm.ConfigVersion {
			tm.Configs, tm.ConfigVersion = st.TopicConfigs, st.TopicConfigVersion
		}
		tm.Partitions = append(tm.Partitions, partitionMetadata(st, live, offlineHere[t], rm.cfg.BrokerID))
	}
	for _, tm := range byTopic {
		sort.Slice(tm.Partitions, func(i, j int) bool { return tm.Partitions[i].Partition < tm.Partitions[j].Partition })
	}
	if topics == nil {
		for _, tm := range byTopic {
			v.Topics = append(v.Topics, *tm)
		}
		sort.Slice(v.Topics, func(i, j int) bool { return v.Topics[i].Topic < v.Topics[j].Topic })
		return v
	}
	for _, t := range topics {
		if tm, ok := byTopic[t]; ok {
			v.Topics = append(v.Topics, *tm)
		} else {
			v.Topics = append(v.Topics, TopicMetadata{Topic: t, Error: ErrUnknownTopicOrPartition})
		}
	}
	return v
}

func sameEpochs(a, b PartitionState) bool {
	return a.TopicID == b.TopicID && a.LeaderEpoch == b.LeaderEpoch && a.PartitionEpoch == b.PartitionEpoch
}

// partitionMetadata is st as a client sees it: offline replicas are the
// ones on brokers not live, and self's when its log dir is offline.
func partitionMetadata(st PartitionState, live map[int32]Broker, offlineHere bool, self int32) PartitionMetadata {
	pm := PartitionMetadata{Partition: st.TopicPartition.Partition, Leader: st.Leader, LeaderEpoch: st.LeaderEpoch,
		PartitionEpoch: st.PartitionEpoch, Replicas: slices.Clone(st.Replicas), ISR: slices.Clone(st.ISR)}
	for _, r := range st.Replicas {
		if _, ok := live[r]; !ok || (r == self && offlineHere) {
			pm.OfflineReplicas = append(pm.OfflineReplicas, r)
		}
	}
	if _, ok := live[st.Leader]; st.Leader < 0 || !ok || (st.Leader == self && offlineHere) {
		pm.Leader, pm.Error = -1, ErrLeaderNotAvailable
	}
	return pm
}

// hostedPartitions are the partitions hosted here of the topics in want
// (every one when want is nil).
func (rm *ReplicaManager) hostedPartitions(want map[string]bool) []*hostedPartition {
	rm.partitionsMu.RLock()
	defer rm.partitionsMu.RUnlock()
	out := make([]*hostedPartition, 0, len(rm.partitions))
	for t, h := range rm.partitions {
		if want == nil || want[t.Topic] {
			out = append(out, h)
		}
	}
	return out
}
