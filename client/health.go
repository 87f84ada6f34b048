package client

import (
	"cmp"
	"context"
	"slices"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Unhealthy reasons of a Health, rpk cluster health's names where it has
// one.
const (
	HealthNoBrokers       = "no_brokers"
	HealthBrokersDown     = "brokers_down"
	HealthLeaderless      = "leaderless_partitions"
	HealthUnderReplicated = "under_replicated_partitions"
)

// Health is a cluster's overview from one DescribeCluster answer, as rpk
// cluster health gives it. Healthy: some broker registered, none down,
// every partition has a live leader and a full ISR.
type Health struct {
	Healthy bool
	// UnhealthyReasons are the Health* reasons that hold, in that order;
	// empty (not nil) when healthy.
	UnhealthyReasons []string
	ControllerEpoch  int32
	// Brokers are the registered brokers, BrokersDown those of them whose
	// session expired; sorted, never nil.
	Brokers, BrokersDown []int32
	// Leaderless are the partitions with no leader or a leader whose
	// broker is down (Kafka's unavailable partitions); UnderReplicated
	// those whose ISR is smaller than the replicas that stay (a
	// reassignment's removing ones left out). By topic, then partition;
	// never nil.
	Leaderless, UnderReplicated []TopicPartition
}

// ClusterHealth evaluates one DescribeCluster answer.
func ClusterHealth(resp *replicadv1.DescribeClusterResponse) Health {
	h := Health{ControllerEpoch: resp.GetControllerEpoch(), UnhealthyReasons: []string{},
		Brokers: []int32{}, BrokersDown: []int32{}, Leaderless: []TopicPartition{}, UnderReplicated: []TopicPartition{}}
	alive := map[int32]bool{}
	for _, b := range resp.GetBrokers() {
		h.Brokers = append(h.Brokers, b.GetId())
		if b.GetAlive() {
			alive[b.GetId()] = true
		} else {
			h.BrokersDown = append(h.BrokersDown, b.GetId())
		}
	}
	slices.Sort(h.Brokers)
	slices.Sort(h.BrokersDown)
	for _, p := range sortedPartitions(resp.GetPartitions()) {
		tp := TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()}
		if Unavailable(p, alive) {
			h.Leaderless = append(h.Leaderless, tp)
		}
		if UnderReplicated(p) {
			h.UnderReplicated = append(h.UnderReplicated, tp)
		}
	}
	if len(h.Brokers) == 0 {
		h.UnhealthyReasons = append(h.UnhealthyReasons, HealthNoBrokers)
	}
	if len(h.BrokersDown) > 0 {
		h.UnhealthyReasons = append(h.UnhealthyReasons, HealthBrokersDown)
	}
	if len(h.Leaderless) > 0 {
		h.UnhealthyReasons = append(h.UnhealthyReasons, HealthLeaderless)
	}
	if len(h.UnderReplicated) > 0 {
		h.UnhealthyReasons = append(h.UnhealthyReasons, HealthUnderReplicated)
	}
	h.Healthy = len(h.UnhealthyReasons) == 0
	return h
}

// UnderReplicated reports whether p's ISR is smaller than its replica set
// (Kafka's isUnderReplicated), during a reassignment the replicas that are
// to stay (CurrentReplicas: the removing ones left out).
func UnderReplicated(p *replicadv1.ClusterPartition) bool {
	return len(p.GetIsr()) < len(p.GetReplicas())-len(p.GetRemovingReplicas())
}

// Unavailable reports whether p has no leader, or a leader whose broker is
// not among alive (Kafka's hasUnavailablePartitions).
func Unavailable(p *replicadv1.ClusterPartition, alive map[int32]bool) bool {
	return p.GetLeader() < 0 || !alive[p.GetLeader()]
}

// ClusterHealth asks the active controller for DescribeCluster and
// evaluates its answer (ClusterHealth). An answer with an error code is an
// *Error.
func (a *Admin) ClusterHealth(ctx context.Context) (Health, error) {
	resp, err := a.describeClusterOK(ctx)
	if err != nil {
		return Health{}, err
	}
	return ClusterHealth(resp), nil
}

// describeClusterOK is DescribeCluster with an error code as an
// *Error.
func (a *Admin) describeClusterOK(ctx context.Context) (*replicadv1.DescribeClusterResponse, error) {
	resp, err := a.DescribeCluster(ctx)
	if err != nil {
		return nil, err
	}
	if err := answerErr("describe-cluster", TopicPartition{}, resp.GetErrorCode(), ""); err != nil {
		return nil, err
	}
	return resp, nil
}

// answerErr is an *Error for code, nil for NONE.
func answerErr(op string, k TopicPartition, code replicadv1.ErrorCode, msg string) error {
	if code == replicadv1.ErrorCode_ERROR_CODE_NONE {
		return nil
	}
	return &Error{Op: op, Partition: k, Code: code, Message: msg}
}

// sortedPartitions is parts by topic, then partition.
func sortedPartitions(parts []*replicadv1.ClusterPartition) []*replicadv1.ClusterPartition {
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b *replicadv1.ClusterPartition) int {
		return cmp.Or(cmp.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	return parts
}
