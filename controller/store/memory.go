package store

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Memory is a Store that keeps everything in memory, for tests. It is lost
// when the process ends.
type Memory struct {
	mu sync.Mutex
	// Everything below is guarded by mu. Stored values share no slice with
	// any caller: they are cloned on the way in and on the way out.
	closed          bool
	controllerEpoch int32
	lastBrokerEpoch int64
	brokers         map[int32]Broker
	topics          map[string][]Partition  // sorted by partition, index == partition
	deleted         map[string]DeletedTopic // by ID
	acls            []ACL                   // sorted, no duplicates
	configs         map[string]TopicConfig  // by topic name, every stored topic
	throttle        int64                   // replication throttle, bytes/s
	lastProducerID  int64                   // end of the last producer ID block
	producerEpochs  map[int64]int16         // newest epoch per bumped producer ID
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	return &Memory{brokers: map[int32]Broker{}, topics: map[string][]Partition{}, deleted: map[string]DeletedTopic{}, configs: map[string]TopicConfig{}}
}

// lock checks ctx and takes m.mu; on success the caller must unlock.
func (m *Memory) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return ErrClosed
	}
	return nil
}

func (m *Memory) BumpControllerEpoch(ctx context.Context, past int32) (int32, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	next, err := nextControllerEpoch(int64(m.controllerEpoch), past)
	if err != nil {
		return 0, err
	}
	m.controllerEpoch = next
	return m.controllerEpoch, nil
}

func (m *Memory) ControllerEpoch(ctx context.Context) (int32, error) {
	if err := m.lock(ctx); err != nil {
		return 0, err
	}
	defer m.mu.Unlock()
	return m.controllerEpoch, nil
}

func (m *Memory) RegisterBroker(ctx context.Context, b Broker) (Broker, error) {
	if err := checkBroker(b); err != nil {
		return Broker{}, err
	}
	if err := m.lock(ctx); err != nil {
		return Broker{}, err
	}
	defer m.mu.Unlock()
	m.lastBrokerEpoch++
	b.Epoch = m.lastBrokerEpoch
	b.Fenced = false
	m.brokers[b.ID] = b
	return b, nil
}

func (m *Memory) Brokers(ctx context.Context) ([]Broker, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]Broker, 0, len(m.brokers))
	for _, b := range m.brokers {
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (m *Memory) UpdateBroker(ctx context.Context, b Broker) error {
	if err := checkBroker(b); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	old, ok := m.brokers[b.ID]
	if !ok {
		return fmt.Errorf("broker %d: %w", b.ID, ErrNotFound)
	}
	if old.Epoch != b.Epoch {
		return fmt.Errorf("update broker %d: expected broker epoch %d, stored %d: %w", b.ID, b.Epoch, old.Epoch, ErrConflict)
	}
	m.brokers[b.ID] = b
	return nil
}

func (m *Memory) CreateTopic(ctx context.Context, name string, parts []Partition, configs map[string]string) error {
	t, err := newTopic(name, parts)
	if err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.topics[name]; ok {
		return fmt.Errorf("create topic %s: %w", name, ErrExists)
	}
	m.topics[name] = t.Partitions // newTopic cloned them
	m.configs[name] = TopicConfig{Version: 1, Configs: maps.Clone(configs)}
	return nil
}

func (m *Memory) CreatePartitions(ctx context.Context, name string, existing int32, parts []Partition) error {
	add, err := newPartitions(name, existing, parts)
	if err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	stored, ok := m.topics[name]
	if !ok {
		return fmt.Errorf("create partitions of %s: %w", name, ErrNotFound)
	}
	if err := checkNewPartitions(name, stored, existing, add); err != nil {
		return err
	}
	m.topics[name] = append(slices.Clip(stored), add...) // newPartitions cloned them
	return nil
}

func (m *Memory) TopicConfigs(ctx context.Context) (map[string]TopicConfig, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make(map[string]TopicConfig, len(m.configs))
	for name, c := range m.configs {
		out[name] = c.Clone()
	}
	return out, nil
}

func (m *Memory) SetTopicConfig(ctx context.Context, name string, expected int64, configs map[string]string) (TopicConfig, error) {
	if err := m.lock(ctx); err != nil {
		return TopicConfig{}, err
	}
	defer m.mu.Unlock()
	if _, ok := m.topics[name]; !ok {
		return TopicConfig{}, fmt.Errorf("set topic config %s: %w", name, ErrNotFound)
	}
	if got := m.configs[name].Version; got != expected {
		return TopicConfig{}, fmt.Errorf("set topic config %s: version %d, expected %d: %w", name, got, expected, ErrConflict)
	}
	c := TopicConfig{Version: expected + 1, Configs: maps.Clone(configs), MinIsrFloor: m.configs[name].MinIsrFloor}
	m.configs[name] = c
	return c.Clone(), nil
}

func (m *Memory) AlterTopicConfig(ctx context.Context, name string, expected int64, next TopicConfig, updates []PartitionUpdate) error {
	if err := checkAlterTopicConfig(name, expected, next, updates); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if _, ok := m.topics[name]; !ok {
		return fmt.Errorf("alter topic config %s: %w", name, ErrNotFound)
	}
	if err := checkConfigVersion(name, m.configs[name], expected, next); err != nil {
		return err
	}
	// Check everything before writing anything: all or nothing.
	if err := m.checkUpdatesLocked(updates); err != nil {
		return err
	}
	m.configs[name] = next.Clone()
	for _, u := range updates {
		m.topics[u.New.Topic][u.New.Partition] = u.New.Clone()
	}
	return nil
}

func (m *Memory) DeleteTopic(ctx context.Context, name string) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	parts, ok := m.topics[name]
	if !ok {
		return fmt.Errorf("delete topic %s: %w", name, ErrNotFound)
	}
	if d, ok := NewDeletedTopic(Topic{Name: name, Partitions: parts}); ok {
		m.deleted[d.ID] = d
	}
	delete(m.topics, name)
	delete(m.configs, name)
	return nil
}

func (m *Memory) DeletedTopics(ctx context.Context) ([]DeletedTopic, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	out := make([]DeletedTopic, 0, len(m.deleted))
	for _, d := range m.deleted {
		out = append(out, cloneDeleted(d))
	}
	sortDeleted(out)
	return out, nil
}

func (m *Memory) CompleteDeletions(ctx context.Context, topicID string, done []Replica) error {
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	d, ok := m.deleted[topicID]
	if !ok {
		return nil
	}
	if next, left := completeDeletions(d, done); left {
		m.deleted[topicID] = next
	} else {
		delete(m.deleted, topicID)
	}
	return nil
}

func (m *Memory) Topic(ctx context.Context, name string) (Topic, error) {
	if err := m.lock(ctx); err != nil {
		return Topic{}, err
	}
	defer m.mu.Unlock()
	parts, ok := m.topics[name]
	if !ok {
		return Topic{}, fmt.Errorf("topic %s: %w", name, ErrNotFound)
	}
	t := Topic{Name: name, Partitions: make([]Partition, len(parts))}
	for i, p := range parts {
		t.Partitions[i] = p.Clone()
	}
	return t, nil
}

func (m *Memory) Partitions(ctx context.Context) ([]Partition, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []Partition
	for _, parts := range m.topics {
		for _, p := range parts {
			out = append(out, p.Clone())
		}
	}
	slices.SortFunc(out, comparePartitions)
	return out, nil
}

func (m *Memory) Partition(ctx context.Context, topic string, partition int32) (Partition, error) {
	if err := m.lock(ctx); err != nil {
		return Partition{}, err
	}
	defer m.mu.Unlock()
	p, ok := m.partitionLocked(topic, partition)
	if !ok {
		return Partition{}, partitionNotFound(topic, partition)
	}
	return p.Clone(), nil
}

// partitionLocked returns the stored partition, not a copy. m.mu must be held.
func (m *Memory) partitionLocked(topic string, partition int32) (Partition, bool) {
	parts := m.topics[topic]
	if partition < 0 || int(partition) >= len(parts) {
		return Partition{}, false
	}
	return parts[partition], true
}

func (m *Memory) UpdatePartitions(ctx context.Context, updates []PartitionUpdate) error {
	if err := checkUpdates(updates); err != nil {
		return err
	}
	if err := m.lock(ctx); err != nil {
		return err
	}
	defer m.mu.Unlock()
	// Check everything before writing anything: all or nothing.
	if err := m.checkUpdatesLocked(updates); err != nil {
		return err
	}
	for _, u := range updates {
		m.topics[u.New.Topic][u.New.Partition] = u.New.Clone()
	}
	return nil
}

// Close empties the store; later calls fail with ErrClosed.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.brokers, m.topics = nil, nil
	return nil
}

func (m *Memory) Acls(ctx context.Context) ([]ACL, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	return slices.Clone(m.acls), nil
}

func (m *Memory) CreateAcls(ctx context.Context, acls []ACL) ([]ACL, error) {
	if err := checkACLs(acls); err != nil {
		return nil, err
	}
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var created []ACL
	m.acls, created = mergeACLs(m.acls, acls)
	return created, nil
}

func (m *Memory) DeleteAcls(ctx context.Context, filters []ACLFilter) ([]ACL, error) {
	if err := m.lock(ctx); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var deleted []ACL
	m.acls, deleted = removeACLs(m.acls, filters)
	return deleted, nil
}

// checkUpdatesLocked checks every update's compare-and-set against the
// stored partition epoch, writing nothing. m.mu must be held.
func (m *Memory) checkUpdatesLocked(updates []PartitionUpdate) error {
	for _, u := range updates {
		old, ok := m.partitionLocked(u.New.Topic, u.New.Partition)
		if !ok {
			return partitionNotFound(u.New.Topic, u.New.Partition)
		}
		if old.PartitionEpoch != u.Expected {
			return conflict(u.New, u.Expected, old.PartitionEpoch)
		}
	}
	return nil
}
