package controller

import (
	"context"
	"maps"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/topicconfig"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// alterTopicConfig sets and deletes config overrides of a topic (Kafka's
// IncrementalAlterConfigs), stores them at the next version and sends every
// live broker an UpdateMetadata with the topic's partition states, which
// carry them: leaders and followers apply them over their flags. It
// returns the overrides that now hold (with validateOnly, that would).
func (c *Controller) alterTopicConfig(ctx context.Context, topic string, set map[string]string, del []string, validateOnly bool) (store.TopicConfig, error) {
	ctx, span := c.tracer.Start(ctx, "Controller.alterTopicConfig", trace.WithAttributes(
		attribute.String("replicad.topic", topic), attribute.String("replicad.configs.set", topicconfig.Format(set)),
		attribute.StringSlice("replicad.configs.delete", del), attribute.Bool("replicad.validate_only", validateOnly)))
	defer span.End()
	c.lock()
	if !c.active {
		c.unlock()
		return store.TopicConfig{}, errNotController
	}
	cur, ok := c.configs[topic]
	if !ok {
		c.unlock()
		return store.TopicConfig{}, refuse(replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "topic %q does not exist", topic)
	}
	next, err := topicconfig.Apply(cur.Configs, set, del)
	if err != nil { // the server validated: a caller bug
		c.unlock()
		return store.TopicConfig{}, refuse(replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST, "%v", err)
	}
	if validateOnly || maps.Equal(next, cur.Configs) {
		c.unlock()
		return store.TopicConfig{Version: cur.Version, Configs: next}, nil
	}
	stored := store.TopicConfig{Version: cur.Version + 1, Configs: next, MinIsrFloor: nextMinIsrFloor(cur, next)}
	// A lower minimum makes the ELR of partitions whose ISR is at it stale:
	// it is cleared in the same write as the config, so no leader ever
	// commits under the new value while a replica that lacks those records
	// may be elected (issue 19, path 1).
	c.configs[topic] = stored
	updates := c.staleElrUpdatesLocked(topic, c.minIsrLocked)
	c.configs[topic] = cur
	sctx, cancel := c.storeCtx(ctx)
	err = c.cfg.Store.AlterTopicConfig(sctx, topic, cur.Version, stored, updates)
	cancel()
	if err != nil {
		err = c.writeFailedLocked(ctx, "topic config change not stored", err)
		c.unlock()
		return store.TopicConfig{}, err
	}
	c.configs[topic] = stored
	if stored.MinIsrFloor != cur.MinIsrFloor {
		span.SetAttributes(attribute.Int("replicad.min_isr_floor", stored.MinIsrFloor))
	}
	span.SetAttributes(attribute.Int("replicad.partitions_changed", len(updates)))
	c.appliedLocked(ctx, "min.insync.replicas fell: the ELR is cleared, its members may lack what the ISR commits from now on", updates)
	var states []*replicadv1.PartitionState
	for p := range c.allPartitionsLocked() {
		if p.Topic == topic {
			states = append(states, c.stateProto(p, false))
		}
	}
	live := c.liveBrokersLocked()
	var touched []int32
	for _, id := range c.sortedBrokerIDsLocked() {
		if bs := c.brokers[id]; bs.reachable() {
			bs.queue.UpdateMetadataContext(ctx, live, states)
			touched = append(touched, id)
		}
	}
	epoch := c.epoch
	c.unlock()
	span.SetAttributes(attribute.Int64("replicad.config_version", stored.Version))
	c.log.Info().Str("topic", topic).Str("configs", topicconfig.Format(stored.Configs)).Int64("config_version", stored.Version).
		Str("set", topicconfig.Format(set)).Strs("delete", del).Int("min_isr_floor", stored.MinIsrFloor).Msg("topic configs changed")
	if c.waitDelivered(ctx, touched) && stored.MinIsrFloor > 0 {
		// Until every broker has the new value, leaders may still use the
		// old one: the floor counts until then. When a broker is behind,
		// the session checks try again, so the call waits only once.
		c.clearMinIsrFloorWhenDelivered(ctx, topic, stored.Version, epoch)
	}
	return stored, nil
}

// describeTopicConfig is every topic config key of topic with its value and
// where that comes from, and the overrides' version.
func (c *Controller) describeTopicConfig(topic string) ([]*replicadv1.ConfigEntry, int64, error) {
	c.lock()
	defer c.unlock()
	if !c.active {
		return nil, 0, errNotController
	}
	cur, ok := c.configs[topic]
	if !ok {
		return nil, 0, refuse(replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION, "topic %q does not exist", topic)
	}
	// Defaults the controller knows: min.insync.replicas from its replicas'
	// registrations (the smallest, as minIsrLocked), the flags' defaults
	// for the rest (a broker started with other flags uses those).
	def := topicconfig.Defaults()
	minIsr := 0
	for _, p := range c.parts {
		if p.Topic == topic {
			if m := c.brokerMinIsrLocked(p); minIsr == 0 || m < minIsr {
				minIsr = m
			}
		}
	}
	if minIsr > 0 {
		def.MinInsyncReplicas = minIsr
	}
	var out []*replicadv1.ConfigEntry
	for _, k := range topicconfig.Keys() { // sorted
		e := &replicadv1.ConfigEntry{Name: k, Value: def.Value(k), Source: replicadv1.ConfigSource_CONFIG_SOURCE_BROKER_DEFAULT}
		if v, ok := cur.Configs[k]; ok {
			e.Value, e.Source = v, replicadv1.ConfigSource_CONFIG_SOURCE_TOPIC
		}
		out = append(out, e)
	}
	return out, cur.Version, nil
}
