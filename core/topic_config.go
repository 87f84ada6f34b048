package core

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core/topicconfig"
)

// applyTopicConfigLocked takes the topic configs st carries when they are
// newer than those the partition holds (a higher version of the same topic
// ID, or any version of another), and sets its log's roll rules from the
// config in effect. A LeaderAndIsr and an UpdateMetadata both carry them,
// so a partition starts with its topic's configs and follows every change;
// the version keeps a request delivered late from bringing an old value
// back. Overrides this broker cannot read (a newer controller's key) are
// ignored with a warning: the partition keeps the config it has. It reports
// whether the config in effect changed. Runs under p.mu.
func (p *Partition) applyTopicConfigLocked(st PartitionState) (changed bool) {
	if st.TopicConfigVersion > 0 && (st.TopicID != p.topicConfigID || st.TopicConfigVersion > p.topicConfigVersion) {
		cfg, err := p.env.topicDefaults.With(st.TopicConfigs)
		if err != nil {
			p.env.logger.Warn().Err(err).Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
				Int64("config_version", st.TopicConfigVersion).Msg("ignoring topic configs this broker cannot read; keeping the ones in effect")
		} else {
			changed = cfg != p.topicConfig
			p.topicConfig, p.topicConfigVersion, p.topicConfigID = cfg, st.TopicConfigVersion, st.TopicID
		}
	}
	if p.log != nil {
		if err := p.log.SetRoll(p.topicConfig.SegmentBytes, p.topicConfig.SegmentMs); err != nil {
			p.env.logger.Warn().Err(err).Str("topic", p.topicPartition.Topic).Int32("partition", p.topicPartition.Partition).
				Msg("could not apply segment.bytes / segment.ms")
		}
	}
	return changed
}

// TopicConfig is the topic config in effect for the partition and its
// version (0: the broker's defaults, never told otherwise).
func (p *Partition) TopicConfig() (topicconfig.Config, int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.topicConfig, p.topicConfigVersion
}

// applyTopicConfigs applies the topic configs of an UpdateMetadata's
// partition states to the partitions hosted here (an alter-config reaches
// the brokers this way). A leader whose min.insync.replicas fell may move
// its HW at once, and its waiting acks=all produces are woken either way.
func (rm *ReplicaManager) applyTopicConfigs(ctx context.Context, states []PartitionState) {
	var span trace.Span
	changed := 0
	for _, st := range states {
		if st.TopicConfigVersion == 0 {
			continue
		}
		p, code := rm.onlinePartition(st.TopicPartition)
		if code != ErrNone {
			continue
		}
		p.mu.Lock()
		if p.isLeaderLocked() && supersedesLeadershipLocked(p, st) {
			// This broker still leads at an epoch the same request says is
			// over: a zombie whose LeaderAndIsr has not come yet. Taking a
			// lowered min.insync.replicas now would let it commit alone,
			// under its stale ISR, records the elected leader lacks (a HW
			// over an unreplicated append, then truncated away). The
			// LeaderAndIsr that makes it a follower carries the config.
			p.mu.Unlock()
			continue
		}
		if p.stopped || !p.applyTopicConfigLocked(st) {
			p.mu.Unlock()
			continue
		}
		if p.isLeaderLocked() {
			p.maybeIncrementLeaderHWLocked()
		}
		cfg := p.topicConfig
		p.mu.Unlock()
		p.changed.notify()
		if span == nil {
			_, span = rm.tracer.Start(ctx, "ReplicaManager.applyTopicConfigs")
			defer span.End()
		}
		changed++
		rm.stateLog.Info().Str("topic", st.TopicPartition.Topic).Int32("partition", st.TopicPartition.Partition).
			Int64("config_version", st.TopicConfigVersion).Str("configs", topicconfig.Format(st.TopicConfigs)).
			Int64("retention_ms", cfg.RetentionMs).Int64("retention_bytes", cfg.RetentionBytes).
			Int64("segment_bytes", cfg.SegmentBytes).Int64("segment_ms", cfg.SegmentMs).
			Int("min_insync_replicas", cfg.MinInsyncReplicas).Msg("topic config changed")
	}
	if span != nil {
		span.SetAttributes(attribute.Int("replicad.partitions", changed))
	}
}

// supersedesLeadershipLocked reports whether st, a partition state in an
// UpdateMetadata, says that p's leadership here is over: another leader, a
// newer leader epoch, or another topic incarnation. Runs under p.mu.
func supersedesLeadershipLocked(p *Partition, st PartitionState) bool {
	return st.Leader != p.env.brokerID || st.LeaderEpoch > p.leaderEpoch ||
		(st.TopicID != "" && p.topicID != "" && st.TopicID != p.topicID)
}

// topicDefaults is the topic config of a topic that overrides nothing: the
// broker's flags (Kafka's log.retention.ms, log.retention.bytes,
// log.segment.bytes, log.roll.ms, min.insync.replicas).
func (c *Config) topicDefaults() topicconfig.Config {
	return topicconfig.Config{
		RetentionMs:       c.Retention.Ms,
		RetentionBytes:    c.Retention.Bytes,
		SegmentBytes:      c.LogConfig.SegmentBytes,
		SegmentMs:         c.LogConfig.SegmentMs,
		MinInsyncReplicas: c.MinInsyncReplicas,
		CleanupPolicy:     topicconfig.CleanupDelete,
	}
}
