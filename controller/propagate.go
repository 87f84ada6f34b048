package controller

import (
	"context"
	"iter"
	"net"
	"slices"
	"strconv"

	"github.com/replicad/replicad/controller/brokerqueue"
	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// openQueueLocked connects to a broker incarnation and starts its queue. A
// dial failure (a malformed address) leaves the broker without a queue: it
// cannot be told anything, which the log says.
func (c *Controller) openQueueLocked(bs *brokerState) {
	c.closeQueueLocked(bs)
	addr := net.JoinHostPort(bs.info.Host, strconv.Itoa(int(bs.info.Port)))
	client, conn, err := c.cfg.DialBroker(addr)
	if err != nil {
		c.log.Error().Err(err).Int32("broker", bs.info.ID).Str("addr", addr).Msg("cannot dial broker")
		return
	}
	id, epoch := bs.info.ID, bs.info.Epoch
	bs.client, bs.conn = client, conn
	bs.queue = brokerqueue.New(brokerqueue.Config{
		BrokerID:        id,
		BrokerEpoch:     bs.info.Epoch,
		ControllerID:    c.cfg.ID,
		ControllerEpoch: c.epoch,
		Client:          client,
		ACLs:            c.currentWireACLs,
		Throttle:        c.currentWireThrottle,
		Backoff:         c.cfg.QueueBackoff,
		MaxBackoff:      c.cfg.QueueMaxBackoff,
		Int64N:          c.cfg.QueueInt64N,
		Gate:            c.queueGate(id),
		// Off the queue's goroutine: the answer is handled under the
		// controller's lock, which a decision closing this queue may hold.
		OnLeaderAndIsrResponse: func(_ int32, resp *replicadv1.LeaderAndIsrResponse) {
			if failed, healthy := storageOutcomes(resp); len(failed) > 0 || (len(healthy) > 0 && bs.refusing.Load()) {
				go c.noteStorageOutcomes(id, epoch, failed, healthy)
			}
		},
		OnStopReplicaResponse: func(_ int32, req *replicadv1.StopReplicaRequest, resp *replicadv1.StopReplicaResponse) {
			if slices.ContainsFunc(req.GetPartitions(), (*replicadv1.StopReplicaPartition).GetDeletePartition) {
				go c.completeDeletions(id, epoch, req, resp)
			}
		},
		OnStaleControllerEpoch: func(brokerEpoch int32) {
			c.log.Warn().Int32("broker", id).Int32("broker_controller_epoch", brokerEpoch).Msg("broker knows a newer controller epoch")
			c.notePastEpoch(brokerEpoch)
			c.signalLost()
		},
		Logger: c.log,
		Tracer: c.queueTracer,
	})
}

func (c *Controller) closeQueueLocked(bs *brokerState) {
	if bs.queue != nil {
		bs.queue.Close()
		bs.queue = nil
	}
	if bs.conn != nil {
		_ = bs.conn.Close()
		bs.conn = nil
	}
	bs.client = nil
}

// stateProto is p as a LeaderAndIsr / UpdateMetadata partition state.
func (c *Controller) stateProto(p store.Partition, isNew bool) *replicadv1.PartitionState {
	return &replicadv1.PartitionState{
		Topic:           p.Topic,
		Partition:       p.Partition,
		ControllerEpoch: c.epoch,
		Leader:          p.Leader,
		LeaderEpoch:     p.LeaderEpoch,
		Isr:             slices.Clone(p.ISR),
		PartitionEpoch:  p.PartitionEpoch,
		Replicas:        slices.Clone(p.Replicas),
		AddingReplicas:  slices.Clone(p.AddingReplicas),
		IsNew:           isNew,
		TopicId:         p.TopicID,
		// Shared, not cloned: the controller replaces a topic's map at
		// every change and never writes to one it has sent.
		TopicConfigs:       c.configs[p.Topic].Configs,
		TopicConfigVersion: c.configs[p.Topic].Version,
	}
}

func (c *Controller) brokerProto(b store.Broker) *replicadv1.Broker {
	// The epoch lets a leader fence fetches of the broker's previous life.
	return &replicadv1.Broker{Id: b.ID, Host: b.Host, Port: b.Port, BrokerEpoch: b.Epoch}
}

// liveBrokersLocked are the endpoints of every unfenced broker, by id.
func (c *Controller) liveBrokersLocked() []*replicadv1.Broker {
	out := make([]*replicadv1.Broker, 0, len(c.brokers))
	for _, id := range c.sortedBrokerIDsLocked() {
		if bs := c.brokers[id]; !bs.info.Fenced {
			out = append(out, c.brokerProto(bs.info))
		}
	}
	return out
}

func (c *Controller) sortedBrokerIDsLocked() []int32 {
	ids := make([]int32, 0, len(c.brokers))
	for id := range c.brokers {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// leadersOfLocked are the endpoints of the leaders named by states.
func (c *Controller) leadersOfLocked(states []*replicadv1.PartitionState) []*replicadv1.Broker {
	seen := make(map[int32]bool)
	var out []*replicadv1.Broker
	for _, s := range states {
		if s.Leader < 0 || seen[s.Leader] {
			continue
		}
		seen[s.Leader] = true
		if bs, ok := c.brokers[s.Leader]; ok {
			out = append(out, c.brokerProto(bs.info))
		}
	}
	return out
}

// reachable reports whether requests can be queued for the broker: it is
// registered, not fenced, and has a queue. A stopping broker still hears
// about its partitions, so it stops leading the ones that moved.
func (bs *brokerState) reachable() bool {
	return bs != nil && !bs.info.Fenced && bs.queue != nil
}

// commitLocked persists updates in one transaction and then, only then,
// queues a LeaderAndIsr for every reachable replica of every changed
// partition and an UpdateMetadata for every live broker. newReplicas names,
// per partition, the replicas whose logs may be created empty (is_new): only
// replicas that never had the log, never one that may hold records. It
// returns the brokers that were sent something, for callers that wait for
// delivery.
func (c *Controller) commitLocked(ctx context.Context, updates []store.PartitionUpdate, newReplicas map[partitionKey][]int32) ([]int32, error) {
	if len(updates) == 0 {
		return nil, nil
	}
	updates = c.withoutStaleElrLocked(updates) // issue 19, path 1: see min_isr.go
	sctx, cancel := c.storeCtx(ctx)
	err := c.cfg.Store.UpdatePartitions(sctx, updates)
	cancel()
	if err != nil {
		return nil, c.writeFailedLocked(ctx, "partition state change not stored", err)
	}
	return c.announceLocked(ctx, c.takeStoredLocked(ctx, updates), newReplicas), nil
}

// takeStoredLocked takes partition updates that a store write has just
// stored into memory, traces and counts them, and returns the new states
// for announceLocked.
func (c *Controller) takeStoredLocked(ctx context.Context, updates []store.PartitionUpdate) []store.Partition {
	changed := make([]store.Partition, len(updates))
	changes := make([]partitionChange, len(updates))
	for i, u := range updates {
		old, hadOld := c.parts[keyOf(u.New)]
		changes[i] = partitionChange{old: old, hadOld: hadOld, new: u.New}
		c.setPartLocked(u.New.Clone())
		changed[i] = u.New
	}
	tracePartitionChanges(ctx, "partition state change", changes)
	c.counters.countCommitted(changes)
	return changed
}

// announceLocked queues the LeaderAndIsr and UpdateMetadata requests that
// tell the brokers about changed partitions, in ctx's trace: the requests
// carry the span of the decision to the brokers (see brokerqueue).
func (c *Controller) announceLocked(ctx context.Context, changed []store.Partition, newReplicas map[partitionKey][]int32) []int32 {
	touched := c.announceKindLocked(ctx, changed, newReplicas, true)
	c.announceKindLocked(ctx, changed, nil, false)
	return touched
}

// announceKindLocked queues announceLocked's LeaderAndIsr requests
// (leaderAndIsr) or its UpdateMetadata requests, and returns the brokers
// sent a LeaderAndIsr.
func (c *Controller) announceKindLocked(ctx context.Context, changed []store.Partition, newReplicas map[partitionKey][]int32, leaderAndIsr bool) []int32 {
	if !leaderAndIsr {
		all := make([]*replicadv1.PartitionState, 0, len(changed))
		for _, p := range changed {
			all = append(all, c.stateProto(p, false))
		}
		live := c.liveBrokersLocked()
		for _, bs := range c.brokers {
			if bs.reachable() {
				bs.queue.UpdateMetadataContext(ctx, live, all)
			}
		}
		return nil
	}
	byBroker := make(map[int32][]*replicadv1.PartitionState)
	for _, p := range changed {
		st := c.stateProto(p, false)
		var stNew *replicadv1.PartitionState // st with is_new, for the new replicas
		for _, r := range p.Replicas {
			if !c.brokers[r].reachable() {
				continue
			}
			s := st
			if slices.Contains(newReplicas[keyOf(p)], r) {
				if stNew == nil {
					stNew = c.stateProto(p, true)
				}
				s = stNew
			}
			byBroker[r] = append(byBroker[r], s)
		}
	}
	var touched []int32
	for id, states := range byBroker {
		c.brokers[id].queue.LeaderAndIsrContext(ctx, states, c.leadersOfLocked(states))
		touched = append(touched, id)
	}
	return touched
}

// sendFullStatesLocked tells brokers everything: the live brokers and
// every partition's state, and a LeaderAndIsr for each partition they host.
// That is how a broker that returns, or a new controller, catches up. The
// requests go in ctx's trace.
//
// The states go in chunks of Config.SendBatch partitions (the
// UpdateMetadata of every chunk, then the LeaderAndIsr of every chunk, so
// that the broker queues merge them as before); with yield, the lock is
// released between two chunks: telling 5 brokers of 100,000 partitions
// takes most of a second. Every chunk is built from the partitions' state
// when it is queued, and a change made between two chunks is queued by its
// own decision, after the chunks before it, so a broker never receives a
// state older than one it already has. A broker that registered again or
// was fenced meanwhile is left out: its new incarnation gets its own.
func (c *Controller) sendFullStatesLocked(ctx context.Context, brokers []*brokerState, yield bool) {
	type target struct {
		bs    *brokerState
		epoch int64
	}
	var targets []target
	for _, bs := range brokers {
		if bs.reachable() {
			targets = append(targets, target{bs, bs.info.Epoch})
		}
	}
	chunk := c.sendBatch()
	keys := c.sortedKeysLocked()
	for _, metadata := range []bool{true, false} {
		for start := 0; start < len(keys) && len(targets) > 0; start += chunk {
			if (start > 0 || !metadata) && yield {
				if !c.yieldLocked() {
					return
				}
				targets = slices.DeleteFunc(targets, func(t target) bool {
					return !t.bs.reachable() || t.bs.info.Epoch != t.epoch || c.brokers[t.bs.info.ID] != t.bs
				})
			}
			states := make([]*replicadv1.PartitionState, 0, min(chunk, len(keys)-start))
			for _, k := range keys[start:min(start+chunk, len(keys))] {
				if p, ok := c.parts[k]; ok {
					states = append(states, c.stateProto(p, false))
				}
			}
			if metadata {
				live := c.liveBrokersLocked()
				for _, t := range targets {
					t.bs.queue.UpdateMetadataContext(ctx, live, states)
				}
				continue
			}
			for _, t := range targets {
				var mine []*replicadv1.PartitionState
				for _, st := range states {
					if slices.Contains(st.Replicas, t.bs.info.ID) {
						mine = append(mine, st)
					}
				}
				if len(mine) > 0 {
					t.bs.queue.LeaderAndIsrContext(ctx, mine, c.leadersOfLocked(mine))
				}
			}
		}
		if metadata && len(keys) == 0 {
			live := c.liveBrokersLocked()
			for _, t := range targets {
				t.bs.queue.UpdateMetadataContext(ctx, live, nil)
			}
		}
	}
}

// sortedPartitionsLocked is every partition, sorted by topic and
// partition: the order every decision goes in.
func (c *Controller) sortedPartitionsLocked() []store.Partition {
	keys := c.sortedKeysLocked()
	out := make([]store.Partition, len(keys))
	for i, k := range keys {
		out[i] = c.parts[k]
	}
	return out
}

// allPartitionsLocked iterates over every partition, sorted by topic and
// partition, as sortedPartitionsLocked lists them but without copying them
// all first. Each is read as the iteration reaches it; one deleted
// meanwhile is skipped.
func (c *Controller) allPartitionsLocked() iter.Seq[store.Partition] {
	return func(yield func(store.Partition) bool) {
		for _, k := range c.sortedKeysLocked() {
			if p, ok := c.parts[k]; ok && !yield(p) {
				return
			}
		}
	}
}

// sortedKeysLocked is the keys of c.parts, sorted. The order is kept
// between calls (sorting 100,000 keys takes tens of milliseconds, under the
// lock) and dropped when the set of keys changes (partsChangedLocked). The
// slice is never written to: a caller may keep it across a yield.
func (c *Controller) sortedKeysLocked() []partitionKey {
	if c.sortedKeys != nil && len(c.sortedKeys) == len(c.parts) {
		return c.sortedKeys
	}
	keys := make([]partitionKey, 0, len(c.parts))
	for k := range c.parts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, comparePartitionKeys)
	c.sortedKeys = keys
	return keys
}

// partsChangedLocked notes that partitions were added to or removed from
// c.parts.
func (c *Controller) partsChangedLocked() { c.sortedKeys = nil }

// setPartLocked holds p as its partition's state: every write of c.parts
// goes through it or deletePartLocked, which keep the indexes.
func (c *Controller) setPartLocked(p store.Partition) {
	k := keyOf(p)
	if _, had := c.parts[k]; !had {
		c.partsChangedLocked()
	}
	c.parts[k] = p
	if len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0 {
		if c.moving == nil {
			c.moving = make(map[partitionKey]struct{})
		}
		c.moving[k] = struct{}{}
	} else {
		delete(c.moving, k)
	}
}

// deletePartLocked forgets partition k.
func (c *Controller) deletePartLocked(k partitionKey) {
	delete(c.parts, k)
	delete(c.moving, k)
	c.partsChangedLocked()
}

// waitDelivered waits, without the lock, until everything queued so far for
// brokers has been delivered, or SendTimeout passes, or ctx is done. Admin
// calls use it so that "elect" returning means the brokers know. It
// reports whether every reachable one of brokers took everything.
func (c *Controller) waitDelivered(ctx context.Context, brokers []int32) bool {
	c.lock()
	queues := make([]*brokerqueue.Queue, 0, len(brokers))
	for _, id := range brokers {
		// A stopping broker may already be gone: waiting on it would hold
		// up the caller (another broker's controlled shutdown) for nothing.
		if bs := c.brokers[id]; bs.reachable() && !bs.shuttingDown {
			queues = append(queues, bs.queue)
		}
	}
	c.unlock()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.SendTimeout)
	defer cancel()
	done := make(chan error, len(queues))
	for _, q := range queues {
		go func() { done <- q.Flush(ctx) }()
	}
	all := true
	for range queues {
		if err := <-done; err != nil {
			all = false
		}
	}
	return all
}

// update is the compare-and-set that turns p into next.
func update(p, next store.Partition) store.PartitionUpdate {
	return store.PartitionUpdate{Expected: p.PartitionEpoch, New: next}
}

// queueGate is the Gate of broker id's queue (Config.QueueGate).
func (c *Controller) queueGate(id int32) func(context.Context) {
	if c.cfg.QueueGate == nil {
		return nil
	}
	return func(ctx context.Context) { c.cfg.QueueGate(ctx, id) }
}
