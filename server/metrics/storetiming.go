package metrics

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/replicad/replicad/controller/store"
)

// storeWriteOps are the op label values of the store write series: one per
// writing method of store.Store. Reads are not timed: the controller reads
// the store only when it activates.
var storeWriteOps = []string{
	"bump_controller_epoch", "register_broker", "update_broker", "create_topic", "create_partitions", "set_topic_config", "alter_topic_config",
	"delete_topic", "complete_deletions", "update_partitions", "create_acls", "delete_acls",
	"set_replication_throttle", "allocate_producer_ids", "bump_producer_epoch",
}

func opAttr(op string) attribute.KeyValue { return attribute.String("op", op) }

// Store wraps s so that each write is timed into
// replicad_controller_store_write_duration_seconds{op} (and counted in
// replicad_controller_store_write_errors_total{op} when it fails). With a
// nil m it returns s itself. The wrapper is only a store.Store: a store
// that is also the election (etcd) is still passed as the Elector itself.
func (m *ControllerMetrics) Store(s store.Store) store.Store {
	if m == nil {
		return s
	}
	return &timedStore{Store: s, m: m}
}

// timedStore times the writes of the Store it embeds; reads pass through.
type timedStore struct {
	store.Store
	m *ControllerMetrics
}

// done records one write of op that started at start.
func (t *timedStore) done(op string, start time.Time, err error) {
	ctx := context.Background()
	attrs := t.m.opAttrs[op]
	t.m.storeWrites.Record(ctx, time.Since(start).Seconds(), attrs)
	if err != nil {
		t.m.storeWriteErrors.Add(ctx, 1, attrs)
	}
}

func (t *timedStore) BumpControllerEpoch(ctx context.Context, past int32) (int32, error) {
	start := time.Now()
	e, err := t.Store.BumpControllerEpoch(ctx, past)
	t.done("bump_controller_epoch", start, err)
	return e, err
}

func (t *timedStore) RegisterBroker(ctx context.Context, b store.Broker) (store.Broker, error) {
	start := time.Now()
	out, err := t.Store.RegisterBroker(ctx, b)
	t.done("register_broker", start, err)
	return out, err
}

func (t *timedStore) UpdateBroker(ctx context.Context, b store.Broker) error {
	start := time.Now()
	err := t.Store.UpdateBroker(ctx, b)
	t.done("update_broker", start, err)
	return err
}

func (t *timedStore) CreateTopic(ctx context.Context, name string, parts []store.Partition, configs map[string]string) error {
	start := time.Now()
	err := t.Store.CreateTopic(ctx, name, parts, configs)
	t.done("create_topic", start, err)
	return err
}

func (t *timedStore) CreatePartitions(ctx context.Context, name string, existing int32, parts []store.Partition) error {
	start := time.Now()
	err := t.Store.CreatePartitions(ctx, name, existing, parts)
	t.done("create_partitions", start, err)
	return err
}

func (t *timedStore) SetTopicConfig(ctx context.Context, name string, expected int64, configs map[string]string) (store.TopicConfig, error) {
	start := time.Now()
	out, err := t.Store.SetTopicConfig(ctx, name, expected, configs)
	t.done("set_topic_config", start, err)
	return out, err
}

func (t *timedStore) DeleteTopic(ctx context.Context, name string) error {
	start := time.Now()
	err := t.Store.DeleteTopic(ctx, name)
	t.done("delete_topic", start, err)
	return err
}

func (t *timedStore) CompleteDeletions(ctx context.Context, topicID string, done []store.Replica) error {
	start := time.Now()
	err := t.Store.CompleteDeletions(ctx, topicID, done)
	t.done("complete_deletions", start, err)
	return err
}

func (t *timedStore) UpdatePartitions(ctx context.Context, updates []store.PartitionUpdate) error {
	start := time.Now()
	err := t.Store.UpdatePartitions(ctx, updates)
	t.done("update_partitions", start, err)
	return err
}

func (t *timedStore) CreateAcls(ctx context.Context, acls []store.ACL) ([]store.ACL, error) {
	start := time.Now()
	out, err := t.Store.CreateAcls(ctx, acls)
	t.done("create_acls", start, err)
	return out, err
}

func (t *timedStore) DeleteAcls(ctx context.Context, filters []store.ACLFilter) ([]store.ACL, error) {
	start := time.Now()
	out, err := t.Store.DeleteAcls(ctx, filters)
	t.done("delete_acls", start, err)
	return out, err
}

func (t *timedStore) SetReplicationThrottle(ctx context.Context, bytesPerSec int64) error {
	start := time.Now()
	err := t.Store.SetReplicationThrottle(ctx, bytesPerSec)
	t.done("set_replication_throttle", start, err)
	return err
}

func (t *timedStore) AlterTopicConfig(ctx context.Context, name string, expected int64, next store.TopicConfig, updates []store.PartitionUpdate) error {
	start := time.Now()
	err := t.Store.AlterTopicConfig(ctx, name, expected, next, updates)
	t.done("alter_topic_config", start, err)
	return err
}

func (t *timedStore) AllocateProducerIDs(ctx context.Context, count int32) (int64, error) {
	start := time.Now()
	first, err := t.Store.AllocateProducerIDs(ctx, count)
	t.done("allocate_producer_ids", start, err)
	return first, err
}

func (t *timedStore) BumpProducerEpoch(ctx context.Context, id int64, from int16) (int16, error) {
	start := time.Now()
	next, err := t.Store.BumpProducerEpoch(ctx, id, from)
	t.done("bump_producer_epoch", start, err)
	return next, err
}
