package controller

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Topic IDs (Kafka's KIP-516) and the deletions they make safe.
//
// Every topic gets a random ID when it is created; it travels in every
// partition state and StopReplica, so that a broker never takes a log of a
// deleted topic for the log of a new topic of the same name (leader epochs
// start at 0 again, so epochs alone cannot tell them apart). A deleted
// topic's replicas stay pending deletion (in the store) until each broker
// answered a StopReplica naming the ID: a broker that was down when the
// topic was deleted gets it when it registers again, before anything else.

// newTopicID is a random topic ID in Kafka's text form: 16 bytes in URL-safe
// base64 without padding (22 characters). Like Kafka it never hands out the
// all-zero ID, nor one starting with '-' (it would read as a flag).
func newTopicID() (string, error) {
	for {
		var b [16]byte
		if _, err := rand.Read(b[:]); err != nil {
			return "", fmt.Errorf("new topic id: %w", err)
		}
		if b == [16]byte{} {
			continue
		}
		if id := base64.RawURLEncoding.EncodeToString(b[:]); !strings.HasPrefix(id, "-") {
			return id, nil
		}
	}
}

// giveLegacyTopicsIDsLocked gives every topic stored without an ID (before
// topic IDs) one, in one transaction at activation: brokers take it for
// their logs of it, which have none (a LeaderAndIsr at the same leader epoch
// and a newer partition epoch refreshes a partition).
func (c *Controller) giveLegacyTopicsIDsLocked(ctx context.Context) error {
	ids := make(map[string]string)
	var updates []store.PartitionUpdate
	for p := range c.allPartitionsLocked() {
		if p.TopicID != "" {
			continue
		}
		id, ok := ids[p.Topic]
		if !ok {
			var err error
			if id, err = newTopicID(); err != nil {
				return err
			}
			ids[p.Topic] = id
		}
		next := p.Clone()
		next.TopicID = id
		next.PartitionEpoch++
		updates = append(updates, update(p, next))
	}
	if len(updates) == 0 {
		return nil
	}
	if _, err := c.commitLocked(ctx, updates, nil); err != nil {
		return fmt.Errorf("give topics stored without an ID one: %w", err)
	}
	c.log.Info().Int("topics", len(ids)).Msg("gave topics stored without a topic ID one")
	return nil
}

// loadDeletedLocked reads the deletions pending in the store.
func (c *Controller) loadDeletedLocked(ctx context.Context) error {
	deleted, err := c.cfg.Store.DeletedTopics(ctx)
	if err != nil {
		return c.storeErr(fmt.Errorf("load pending deletions: %w", err))
	}
	c.deleted = make(map[string]store.DeletedTopic, len(deleted))
	for _, d := range deleted {
		c.deleted[d.ID] = d
	}
	return nil
}

// sendPendingDeletionsLocked queues, for broker bs, a StopReplica with
// delete of every replica it still holds of a deleted topic. It returns
// whether it queued any.
func (c *Controller) sendPendingDeletionsLocked(ctx context.Context, bs *brokerState) bool {
	if !bs.reachable() {
		return false
	}
	var stops []*replicadv1.StopReplicaPartition
	for _, id := range c.sortedDeletedIDsLocked() {
		d := c.deleted[id]
		for _, pr := range d.Pending {
			if slices.Contains(pr.Brokers, bs.info.ID) {
				stops = append(stops, deletionStop(d, pr.Partition))
			}
		}
	}
	if len(stops) == 0 {
		return false
	}
	bs.queue.StopReplicaContext(ctx, stops)
	return true
}

func (c *Controller) sortedDeletedIDsLocked() []string {
	ids := make([]string, 0, len(c.deleted))
	for id := range c.deleted {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// deletionStop is the StopReplica item that deletes a replica of partition
// of the deleted topic d, and only of d (its topic ID).
func deletionStop(d store.DeletedTopic, partition int32) *replicadv1.StopReplicaPartition {
	id := d.ID
	if strings.HasPrefix(id, "name:") {
		id = "" // stored before topic IDs: whatever log the broker has
	}
	return &replicadv1.StopReplicaPartition{Topic: d.Name, Partition: partition, LeaderEpoch: -1, DeletePartition: true, TopicId: id}
}

// completeDeletions records the replicas of deleted topics that broker id
// (incarnation epoch) answered a StopReplica with delete for with NONE: it
// holds no log of them any more. It runs on its own goroutine, off the
// broker queue's (see noteStorageOutcomes).
func (c *Controller) completeDeletions(id int32, epoch int64, req *replicadv1.StopReplicaRequest, resp *replicadv1.StopReplicaResponse) {
	if len(resp.GetPartitionErrors()) != len(req.GetPartitions()) {
		return // not an answer item by item: the next registration resends
	}
	c.lock()
	defer c.unlock()
	bs, ok := c.brokers[id]
	if !c.active || !ok || bs.info.Epoch != epoch {
		return
	}
	done := make(map[string][]store.Replica)
	for i, sp := range req.GetPartitions() {
		if !sp.GetDeletePartition() || resp.GetPartitionErrors()[i].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			continue
		}
		key := sp.GetTopicId()
		if key == "" {
			key = "name:" + sp.GetTopic()
		}
		if d, ok := c.deleted[key]; ok && d.Name == sp.GetTopic() {
			done[key] = append(done[key], store.Replica{Partition: sp.GetPartition(), Broker: id})
		}
	}
	if len(done) == 0 {
		return
	}
	ctx, span := c.tracer.Start(context.Background(), "Controller.completeDeletions", trace.WithAttributes(
		attribute.Int("replicad.broker", int(id)), attribute.Int("replicad.topics", len(done))))
	defer span.End()
	for topicID, replicas := range done {
		sctx, cancel := c.storeCtx(ctx)
		err := c.cfg.Store.CompleteDeletions(sctx, topicID, replicas)
		cancel()
		if err != nil {
			span.RecordError(err)
			c.log.Error().Err(c.writeFailedLocked(ctx, "completed deletions not stored", err)).Str("topic_id", topicID).Msg("record completed deletions (retried at the broker's next registration)")
			continue
		}
		d := c.deleted[topicID]
		for _, r := range replicas {
			for i := range d.Pending {
				if d.Pending[i].Partition == r.Partition {
					d.Pending[i].Brokers = slices.DeleteFunc(slices.Clone(d.Pending[i].Brokers), func(b int32) bool { return b == r.Broker })
				}
			}
		}
		d.Pending = slices.DeleteFunc(d.Pending, func(pr store.PendingReplicas) bool { return len(pr.Brokers) == 0 })
		if len(d.Pending) == 0 {
			delete(c.deleted, topicID)
			c.log.Info().Str("topic", d.Name).Str("topic_id", topicID).Msg("topic deletion complete: every replica deleted its log")
			span.AddEvent("topic deletion complete", trace.WithAttributes(attribute.String("replicad.topic", d.Name),
				attribute.String("replicad.topic_id", topicID)))
		} else {
			c.deleted[topicID] = d
		}
	}
}

// deletedSnapshotLocked copies the pending deletions, sorted by name then ID.
func (c *Controller) deletedSnapshotLocked() []store.DeletedTopic {
	out := make([]store.DeletedTopic, 0, len(c.deleted))
	for _, id := range c.sortedDeletedIDsLocked() {
		d := c.deleted[id]
		cp := store.DeletedTopic{Name: d.Name, ID: d.ID}
		for _, pr := range d.Pending {
			cp.Pending = append(cp.Pending, store.PendingReplicas{Partition: pr.Partition, Brokers: slices.Clone(pr.Brokers)})
		}
		out = append(out, cp)
	}
	slices.SortFunc(out, func(a, b store.DeletedTopic) int { return strings.Compare(a.Name+"\x00"+a.ID, b.Name+"\x00"+b.ID) })
	return out
}
