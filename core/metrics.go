package core

import (
	"sort"
	"time"

	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/tp"
)

// MetricsRecorder receives the replica manager's events that metrics count
// (Kafka's IsrShrinksPerSec, IsrExpandsPerSec and the checkpoint timing). The
// metrics package implements it; Config.Metrics nil records nothing.
//
// Methods are called from replication paths, some under a partition lock:
// they must be cheap and must not call back into the replica manager.
type MetricsRecorder interface {
	// IsrShrunk counts an ISR shrink this broker, as leader, proposed and
	// saw committed.
	IsrShrunk(t tp.TopicPartition)
	// IsrExpanded counts a committed ISR expansion.
	IsrExpanded(t tp.TopicPartition)
	// HighWatermarkCheckpointed times one CheckpointHighWatermarks (every
	// online log dir's replication-offset-checkpoint written).
	HighWatermarkCheckpointed(took time.Duration)
	// LogSetAside counts a log set aside rather than taken for a partition
	// (ReplicaManager.setAsideLog): kept on disk, never served.
	LogSetAside(t tp.TopicPartition)
}

// noMetrics is the MetricsRecorder of a broker without metrics.
type noMetrics struct{}

func (noMetrics) IsrShrunk(tp.TopicPartition)             {}
func (noMetrics) IsrExpanded(tp.TopicPartition)           {}
func (noMetrics) HighWatermarkCheckpointed(time.Duration) {}
func (noMetrics) LogSetAside(tp.TopicPartition)           {}

// recordIsrChange counts a committed ISR change, as Kafka counts a shrink or
// an expansion once the new ISR is written (not when proposed).
func (e *partitionEnv) recordIsrChange(t tp.TopicPartition, expand bool) {
	switch {
	case e.metrics == nil:
	case expand:
		e.metrics.IsrExpanded(t)
	default:
		e.metrics.IsrShrunk(t)
	}
}

// MetricsSnapshot is the broker's replica state as metrics report it, taken
// at scrape time by ReplicaManager.MetricsSnapshot. It keeps nothing between
// scrapes: a topic appears in a role's per-topic figures only while this
// broker holds at least one of its partitions in that role, so when
// makeLeaders or makeFollowers (or StopReplica, or a log dir failure) moves
// the last partition of a topic out of a role, that topic's metrics for the
// role are gone from the next scrape (the seed's KAFKA-8392 step, which
// removes the old leader or follower metrics of such topics).
type MetricsSnapshot struct {
	// Partitions counts the hosted partitions, offline ones included
	// (Kafka's PartitionCount).
	Partitions int
	// Leaders counts the online partitions this broker leads (Kafka's LeaderCount).
	Leaders int
	// UnderReplicated counts the partitions this broker leads whose
	// committed ISR is smaller than their replica set (Kafka's
	// UnderReplicatedPartitions).
	UnderReplicated int
	// Offline counts the hosted partitions that cannot be served here:
	// replicas in an offline log dir (Kafka's OfflineReplicaCount), and
	// partitions the controller left without a leader (leader -1 at a
	// known leader epoch).
	Offline int
	// Topics has one entry per topic with an online partition in a role,
	// sorted by topic.
	Topics []TopicMetrics
	// Throttle is the replication throttle and what it held back (throttle.go).
	Throttle ThrottleStats
	// FileCache is the cache of open segment and index files
	// (--max-open-files): how full it is and how often it evicts.
	FileCache log.FileCacheStats
	// ProducerIDs counts the idempotent producers held, summed over the
	// online partitions in a role (leaders and followers).
	ProducerIDs int
	// Logs has one entry per online partition in a role (leader or
	// follower: Kafka's kafka.log:type=Log metrics exist on every replica),
	// sorted by topic then partition.
	Logs []LogMetrics
}

// LogMetrics is one replica's log, as Kafka's per-log metrics (Size,
// LogStartOffset, LogEndOffset) plus the segments deleted below its log
// start since the log was opened (a count that starts over when the
// broker restarts or the replica moves dir, as a Prometheus counter may).
type LogMetrics struct {
	TopicPartition  tp.TopicPartition
	Leader          bool
	SizeBytes       int64
	LogStartOffset  int64
	LogEndOffset    int64
	SegmentsDeleted int64
}

// TopicMetrics is one topic's share of a MetricsSnapshot. The Leader*
// figures are of the partitions this broker leads, FollowerPartitions of
// those it follows; a role with no partition here has all its figures 0.
// The log figures are the leader's only: a follower's would repeat them, one
// fetch behind, and every per-topic figure is a series per topic to scrape.
type TopicMetrics struct {
	Topic string
	// LeaderPartitions and FollowerPartitions count the topic's partitions
	// in each role.
	LeaderPartitions   int
	FollowerPartitions int
	// UnderReplicated counts the led partitions whose ISR is smaller than
	// their replica set.
	UnderReplicated int
	// LeaderLogEndOffset sums the led partitions' log end offsets: its rate
	// is the topic's messages appended per second here.
	LeaderLogEndOffset int64
	// LeaderLogBytes sums the led partitions' segment sizes.
	LeaderLogBytes int64
}

// partitionMetrics is what MetricsSnapshot reads of one partition.
type partitionMetrics struct {
	role            Role // RoleUnspecified: no LeaderAndIsr applied yet
	noLeader        bool // the controller left it without a leader
	underReplicated bool
	logEndOffset    int64
	logBytes        int64
	logStartOffset  int64
	segmentsDeleted int64
	producers       int
	hasLog          bool
}

// metricsState reads the partition's figures under its read lock. It reads
// atomics of the log, never its files.
func (p *Partition) metricsState() partitionMetrics {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var m partitionMetrics
	switch {
	case p.stopped || p.leaderEpoch < 0:
		return m
	case p.isLeaderLocked():
		m.role = RoleLeader
		m.underReplicated = len(p.isr) < len(p.assignment)
	default:
		m.role = RoleFollower
		m.noLeader = p.leader == noLeader
	}
	if p.log != nil {
		m.hasLog = true
		m.logEndOffset = p.log.LogEndOffset()
		m.logBytes = p.log.Size()
		m.logStartOffset = p.log.LogStartOffset()
		m.segmentsDeleted = p.log.SegmentsDeleted()
		m.producers = p.log.ProducerCount()
	}
	return m
}

// MetricsSnapshot computes the broker's replica metrics. It takes no
// state-change lock, so a scrape never waits for a LeaderAndIsr; it visits
// each hosted partition once under that partition's read lock, and costs
// O(hosted partitions) (about a millisecond for 10,000, see the metrics
// package's scrape benchmark).
func (rm *ReplicaManager) MetricsSnapshot() MetricsSnapshot {
	rm.partitionsMu.RLock()
	hosted := make([]*hostedPartition, 0, len(rm.partitions))
	for _, h := range rm.partitions {
		hosted = append(hosted, h)
	}
	rm.partitionsMu.RUnlock()

	s := MetricsSnapshot{Partitions: len(hosted), Throttle: rm.throttle.stats(), FileCache: rm.FileCacheStats()}
	topics := make(map[string]*TopicMetrics)
	for _, h := range hosted {
		if h.offline.Load() {
			s.Offline++
			continue
		}
		m := h.partition.metricsState()
		if m.role == RoleUnspecified {
			continue
		}
		if m.noLeader {
			s.Offline++
		}
		s.ProducerIDs += m.producers
		if m.hasLog {
			s.Logs = append(s.Logs, LogMetrics{TopicPartition: h.partition.topicPartition, Leader: m.role == RoleLeader,
				SizeBytes: m.logBytes, LogStartOffset: m.logStartOffset, LogEndOffset: m.logEndOffset, SegmentsDeleted: m.segmentsDeleted})
		}
		topic := h.partition.topicPartition.Topic
		tm := topics[topic]
		if tm == nil {
			tm = &TopicMetrics{Topic: topic}
			topics[topic] = tm
		}
		if m.role == RoleLeader {
			s.Leaders++
			tm.LeaderPartitions++
			tm.LeaderLogEndOffset += m.logEndOffset
			tm.LeaderLogBytes += m.logBytes
			if m.underReplicated {
				s.UnderReplicated++
				tm.UnderReplicated++
			}
		} else {
			tm.FollowerPartitions++
		}
	}
	s.Topics = make([]TopicMetrics, 0, len(topics))
	for _, tm := range topics {
		s.Topics = append(s.Topics, *tm)
	}
	sort.Slice(s.Topics, func(i, j int) bool { return s.Topics[i].Topic < s.Topics[j].Topic })
	sort.Slice(s.Logs, func(i, j int) bool {
		a, b := s.Logs[i].TopicPartition, s.Logs[j].TopicPartition
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})
	return s
}
