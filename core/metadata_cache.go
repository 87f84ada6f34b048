package core

import (
	"slices"
	"sort"
	"sync"

	"github.com/replicad/replicad/core/tp"
)

// metadataCache is the broker's view of the cluster (Kafka's MetadataCache):
// the live brokers, which the replica manager needs to find a partition's
// leader, and every partition's state as the controller last told it, which
// the Metadata RPC answers clients with so that they find leaders without
// the controller.
type metadataCache struct {
	mu      sync.RWMutex
	brokers map[int32]Broker
	// partitions holds each partition's newest state (see newerState),
	// of UpdateMetadata (every partition) and LeaderAndIsr (this broker's).
	// A deleted topic stays: the controller tells only its replicas
	// (StopReplica, which a reassignment sends too, so it cannot tell a
	// deletion here), and a client asking for it is answered by its old
	// leader with UNKNOWN_TOPIC_OR_PARTITION. Kafka's controller marks a
	// deletion in UpdateMetadata (leader -2); ours does not yet.
	partitions map[tp.TopicPartition]PartitionState
	// incarnations is each topic's topic ID as last taken (a state naming
	// another ID than the one held is the topic deleted and created again:
	// it wins, see newerState). The view shows a topic's partitions of
	// that incarnation only: a topic created again with fewer partitions
	// (or grown, then deleted and created again) would otherwise keep the
	// deleted one's extra partitions, whose state no controller sends
	// again, and clients would send records to partitions that do not
	// exist.
	incarnations map[string]string
	// controllerID is the controller of the last request taken, -1 before.
	controllerID int32
}

func newMetadataCache() *metadataCache {
	return &metadataCache{brokers: make(map[int32]Broker), partitions: make(map[tp.TopicPartition]PartitionState),
		incarnations: make(map[string]string), controllerID: -1}
}

// replace installs a new live broker list (UpdateMetadata).
func (c *metadataCache) replace(brokers []Broker) {
	m := make(map[int32]Broker, len(brokers))
	for _, b := range brokers {
		m[b.ID] = b
	}
	c.mu.Lock()
	c.brokers = m
	c.mu.Unlock()
}

// addLive records brokers the controller named live (LeaderAndIsr's live_leaders).
func (c *metadataCache) addLive(brokers []Broker) {
	if len(brokers) == 0 {
		return
	}
	c.mu.Lock()
	for _, b := range brokers {
		c.brokers[b.ID] = b
	}
	c.mu.Unlock()
}

func (c *metadataCache) setController(id int32) {
	c.mu.Lock()
	c.controllerID = id
	c.mu.Unlock()
}

// updatePartitions records states that are newer than the ones held.
// UpdateMetadata carries only the partitions that changed (or all of them,
// to a broker catching up), so a partition it leaves out keeps its state.
func (c *metadataCache) updatePartitions(states []PartitionState) {
	if len(states) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range states {
		old, ok := c.partitions[st.TopicPartition]
		if ok && !newerState(st, old) {
			continue
		}
		// The leadership may be newer and the configs older (an alter's
		// UpdateMetadata overtaken by a later one): keep the newer configs.
		if ok && st.TopicID == old.TopicID && st.TopicConfigVersion < old.TopicConfigVersion {
			st.TopicConfigs, st.TopicConfigVersion = old.TopicConfigs, old.TopicConfigVersion
		}
		st.ISR, st.Replicas, st.IsNew = slices.Clone(st.ISR), slices.Clone(st.Replicas), false
		c.partitions[st.TopicPartition] = st
		if st.TopicID != "" {
			c.incarnations[st.TopicPartition.Topic] = st.TopicID
		}
	}
}

// incarnation is the topic's ID as last taken ("" when none named one).
func (c *metadataCache) incarnation(topic string) string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.incarnations[topic]
}

// currentLocked reports whether st is of its topic's incarnation (a state
// without an ID, from before topic IDs, counts as current).
func (c *metadataCache) currentLocked(st PartitionState) bool {
	id := c.incarnations[st.TopicPartition.Topic]
	return st.TopicID == "" || id == "" || st.TopicID == id
}

// newerState reports whether st should replace old. UpdateMetadata and
// LeaderAndIsr come from one queue per broker, but several requests of one
// controller (and a new controller's) may be handled concurrently: order
// by (leader epoch, partition epoch), which only grow for one topic. A
// topic ID other than the held one is another topic of that name (deleted
// and created again): its epochs start over, so it wins.
func newerState(st, old PartitionState) bool {
	if st.TopicID != "" && old.TopicID != "" && st.TopicID != old.TopicID {
		return true
	}
	if st.LeaderEpoch != old.LeaderEpoch {
		return st.LeaderEpoch > old.LeaderEpoch
	}
	return st.PartitionEpoch >= old.PartitionEpoch
}

func (c *metadataCache) aliveBroker(id int32) (Broker, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	b, ok := c.brokers[id]
	return b, ok
}

func (c *metadataCache) aliveBrokers() []Broker {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Broker, 0, len(c.brokers))
	for _, b := range c.brokers {
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// snapshot copies the view: the live brokers by id, the controller id, and
// the states of the topics named (every topic when topics is nil).
func (c *metadataCache) snapshot(topics map[string]bool) (map[int32]Broker, int32, []PartitionState) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	brokers := make(map[int32]Broker, len(c.brokers))
	for id, b := range c.brokers {
		brokers[id] = b
	}
	var states []PartitionState
	for t, st := range c.partitions {
		if (topics == nil || topics[t.Topic]) && c.currentLocked(st) {
			states = append(states, st) // the slices are never changed in place
		}
	}
	return brokers, c.controllerID, states
}
