package core

import (
	"sort"
	"sync"
)

// metadataCache is the broker's view of live brokers (Kafka's MetadataCache,
// reduced to what the replica manager needs: where a partition's leader is).
type metadataCache struct {
	mu      sync.RWMutex
	brokers map[int32]Broker
}

func newMetadataCache() *metadataCache {
	return &metadataCache{brokers: make(map[int32]Broker)}
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
