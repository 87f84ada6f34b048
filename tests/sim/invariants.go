package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
)

// checker holds what the invariants compare each step against: everything
// seen so far that must never be contradicted. It runs on the scheduler's
// goroutine while every other goroutine is blocked, so what it reads is one
// consistent cut of the cluster.
type checker struct {
	// committed is every record seen below some replica's HW, by offset,
	// and committedHW the highest HW seen: the committed log.
	// Everything is per topic incarnation (topic ID): a topic deleted and
	// created again starts a new log, at leader epoch 0 again.
	committed   map[incarnation]map[int64]string
	committedHW map[incarnation]int64
	// leaderHW is the last HW of a leader, per (broker life, partition,
	// leader epoch).
	leaderHW map[leaderKey]int64
	// epochLeader is the broker that led each (partition, leader epoch),
	// as the brokers say and as the store says.
	epochLeader      map[epochKey]int32
	storeEpochLeader map[epochKey]int32
	controllerEpoch  int32
	brokerEpochs     map[int32]int64
	maxBrokerEpoch   int64
	// logs caches each replica's records, re-read when its LEO moves.
	logs map[replicaKey]*cachedLog
	// committedAt is committed the other way round (value -> offset): a
	// value committed at two offsets is a duplicate.
	committedAt map[incarnation]map[string]committedRecord
	// order is the producers' order check over the committed log:
	// orderedTo is where the incremental scan stopped, last the last
	// record seen per producer ID (and its offset).
	orderedTo map[incarnation]int64
	last      map[incarnation]map[int64]orderedRecord
	// reappended are the second copies of retried first batches whose
	// first copy, and with it the producer's state, a DeleteRecords took
	// before the retry came (see committedOnce), by offset; reappendedValues
	// the same by value. strict holds them as duplicates all the same.
	reappended       map[incarnation]map[int64]bool
	reappendedValues map[incarnation]map[string]bool
	// reappendedProducers are their (producer ID, epoch)s.
	reappendedProducers map[incarnation]map[[2]int64]bool
	strict              bool
	reappendedCount     int
	// partitionCounts is the most partitions seen stored per topic ID
	// (checkPartitionCounts).
	partitionCounts map[string]int

	violations []string
}

type leaderKey struct {
	broker int32
	life   int
	t      incarnation
	epoch  int32
}

type epochKey struct {
	t     incarnation
	epoch int32
}

type replicaKey struct {
	broker int32
	life   int
	t      incarnation
}

type cachedLog struct {
	leo, start int64
	readAt     int // step of the last full read
	values     map[int64]string
	// epochs are the records' leader epochs (for the duplicate message),
	// producers the producer fields of those in v1 batches.
	epochs    map[int64]int32
	producers map[int64]recordKey
	// baseSeqs are the base sequences of those records' batches.
	baseSeqs map[int64]int32
	// A cachedLog only grows (an append read since) until it is read
	// again whole (a new cachedLog): what was checked against it stays
	// checked. matchedTo and completeTo are where log matching and leader
	// completeness stopped; acksChecked says every acknowledged record was
	// checked against it, while its replica stayed in the ISR (only new
	// acknowledgements remain).
	matchedTo, completeTo int64
	acksChecked           bool
}

func newChecker(strictDelete bool) *checker {
	return &checker{strict: strictDelete,
		committed: map[incarnation]map[int64]string{}, committedHW: map[incarnation]int64{},
		leaderHW: map[leaderKey]int64{}, epochLeader: map[epochKey]int32{}, storeEpochLeader: map[epochKey]int32{},
		brokerEpochs: map[int32]int64{}, logs: map[replicaKey]*cachedLog{},
		committedAt: map[incarnation]map[string]committedRecord{}, orderedTo: map[incarnation]int64{},
		last: map[incarnation]map[int64]orderedRecord{}, reappended: map[incarnation]map[int64]bool{},
		reappendedValues: map[incarnation]map[string]bool{}, reappendedProducers: map[incarnation]map[[2]int64]bool{},
	}
}

func (c *checker) fail(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

// replicaView is one live replica as the checker reads it.
type replicaView struct {
	broker int32
	info   core.PartitionInfo
	log    *cachedLog
}

// check runs every invariant on the cluster as it is now.
func (c *checker) check(s *Sim, step int) {
	ctx := context.Background()
	parts, err := s.ctl.store.Partitions(ctx)
	if err != nil {
		c.fail("store: %v", err)
		return
	}
	c.checkStore(s, parts)

	current := map[tp.TopicPartition]store.Partition{}
	for _, p := range parts {
		current[tp.TopicPartition{Topic: p.Topic, Partition: p.Partition}] = p
	}
	views := map[incarnation][]replicaView{}
	for _, b := range s.brokers {
		l := b.cur
		if l == nil {
			continue
		}
		for _, in := range l.rm.Describe("", nil).Partitions {
			if in.Role == core.RoleOffline {
				continue
			}
			lg, ok := l.rm.LocalLog(in.TopicPartition)
			if !ok {
				continue
			}
			inc := incarnation{in.TopicPartition, in.TopicID}
			cl := c.readLog(s, replicaKey{b.id, l.life, inc}, lg, step)
			views[inc] = append(views[inc], replicaView{broker: b.id, info: in, log: cl})
			if in.Role == core.RoleLeader {
				c.checkLeader(b.id, l.life, in)
			}
		}
	}
	// In a fixed order, so one seed's violations read the same every run.
	keys := make([]incarnation, 0, len(views))
	for t := range views {
		keys = append(keys, t)
	}
	slices.SortFunc(keys, func(a, b incarnation) int {
		switch {
		case tp.Less(a.TopicPartition, b.TopicPartition):
			return -1
		case tp.Less(b.TopicPartition, a.TopicPartition):
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	for _, t := range keys {
		vs := views[t]
		// Leader completeness first, against the committed log as it
		// stood before this step's HWs extend it. It binds the leader the
		// controller elected, once it knows: a deposed leader that has not
		// heard yet (partitioned away) still calls itself leader at its old
		// epoch, and can commit nothing more.
		cur, ok := current[t.TopicPartition]
		for _, v := range vs {
			if !ok || cur.TopicID != t.id || v.info.Role != core.RoleLeader || cur.Leader != v.broker || cur.LeaderEpoch != v.info.LeaderEpoch {
				continue
			}
			from := max(v.log.start, v.log.completeTo)
			v.log.completeTo = max(v.log.completeTo, c.committedHW[t])
			for o := from; o < c.committedHW[t]; o++ {
				want, ok := c.committed[t][o]
				if got, has := v.log.values[o]; ok && (!has || got != want) {
					c.fail("leader completeness: broker %d leads %s at epoch %d without committed offset %d %q (has %q, LEO %d, committed HW %d)",
						v.broker, t, v.info.LeaderEpoch, o, want, got, v.log.leo, c.committedHW[t])
					break
				}
			}
		}
		// Log matching below the HW: every replica's records below its HW
		// are the committed log.
		for _, v := range vs {
			hw := min(v.info.HighWatermark, v.log.leo)
			m := c.committed[t]
			if m == nil {
				m = map[int64]string{}
				c.committed[t] = m
			}
			from := max(v.log.start, v.log.matchedTo)
			v.log.matchedTo = max(v.log.matchedTo, hw)
			for o := from; o < hw; o++ {
				got, has := v.log.values[o]
				if !has {
					continue
				}
				want, ok := m[o]
				if ok && want != got {
					c.fail("log matching: broker %d has %q at %s offset %d below its HW %d; committed is %q", v.broker, got, t, o, hw, want)
					continue
				}
				if !ok {
					m[o] = got
					c.committedOnce(t, o, got, v.log)
					c.checkFields(t, v.broker, o, got, v.log)
					// The committed log has an acknowledged record at its
					// offset: a duplicate answer's offset must hold the
					// retried record.
					if a, ok := s.workload.ackedValue(t, o); ok && a != got {
						c.fail("acked record lost: %s offset %d %q acknowledged, but the committed log has %q there", t, o, a, got)
					}
				}
			}
			c.committedHW[t] = max(c.committedHW[t], hw)
		}
		c.checkOrder(t, false)
	}
	c.checkAcked(s, parts, views)
	c.checkRetention(s)
	for _, p := range s.workload.drainProblems() {
		if p.dupOf != "" && c.reappendedValues[p.t][p.dupOf] {
			continue // the second answer of a reappended batch (committedOnce)
		}
		c.fail("produce: %s", p.msg)
	}
}

// checkStore: the ISR is a subset of the replicas and holds the leader;
// one leader per leader epoch; controller and broker epochs only grow.
func (c *checker) checkStore(s *Sim, parts []store.Partition) {
	ctx := context.Background()
	s.op.mu.Lock()
	for _, b := range s.op.broken {
		c.fail("operator: %s", b)
	}
	s.op.broken = nil
	s.op.mu.Unlock()
	// Partition budgets (--max-partitions): no broker is assigned more
	// replicas than it may host, and a refused create leaves nothing.
	hosted := map[int32]int{}
	overBudget := 0
	for _, p := range parts {
		if p.Topic == overBudgetTopic {
			overBudget++
		}
		for _, r := range p.Replicas {
			hosted[r]++
		}
	}
	if overBudget > 0 {
		c.fail("store: %d partitions of the refused over-budget create %q exist", overBudget, overBudgetTopic)
	}
	for _, b := range slices.Sorted(maps.Keys(hosted)) {
		if n := hosted[b]; n > s.maxPartitions() {
			c.fail("store: broker %d is assigned %d replicas, over its --max-partitions %d", b, n, s.maxPartitions())
		}
	}
	c.checkPartitionCounts(parts)
	for _, p := range parts {
		t := incarnation{tp.TopicPartition{Topic: p.Topic, Partition: p.Partition}, p.TopicID}
		for _, r := range p.ISR {
			if !slices.Contains(p.Replicas, r) {
				c.fail("store: %s ISR %v not within replicas %v", t, p.ISR, p.Replicas)
			}
		}
		if p.Leader != store.NoLeader {
			if !slices.Contains(p.ISR, p.Leader) {
				c.fail("store: %s leader %d not in ISR %v", t, p.Leader, p.ISR)
			}
			k := epochKey{t, p.LeaderEpoch}
			if prev, ok := c.storeEpochLeader[k]; ok && prev != p.Leader {
				c.fail("store: %s leader epoch %d names leader %d, earlier %d", t, p.LeaderEpoch, p.Leader, prev)
			}
			c.storeEpochLeader[k] = p.Leader
		}
	}
	if e, err := s.ctl.store.ControllerEpoch(ctx); err == nil {
		if e < c.controllerEpoch {
			c.fail("store: controller epoch went back from %d to %d", c.controllerEpoch, e)
		}
		c.controllerEpoch = max(c.controllerEpoch, e)
	}
	brokers, err := s.ctl.store.Brokers(ctx)
	if err != nil {
		return
	}
	for _, b := range brokers {
		prev, seen := c.brokerEpochs[b.ID]
		switch {
		case b.Epoch < prev:
			c.fail("store: broker %d epoch went back from %d to %d", b.ID, prev, b.Epoch)
		case b.Epoch > prev && seen && b.Epoch <= c.maxBrokerEpoch:
			c.fail("store: broker %d registered at epoch %d, not above every earlier epoch (%d)", b.ID, b.Epoch, c.maxBrokerEpoch)
		}
		c.brokerEpochs[b.ID] = max(prev, b.Epoch)
	}
	for _, b := range brokers {
		c.maxBrokerEpoch = max(c.maxBrokerEpoch, b.Epoch)
	}
}

// checkLeader: one leader per (partition, leader epoch), and a leader's HW
// never moves back within its epoch.
func (c *checker) checkLeader(broker int32, life int, in core.PartitionInfo) {
	inc := incarnation{in.TopicPartition, in.TopicID}
	k := epochKey{inc, in.LeaderEpoch}
	if prev, ok := c.epochLeader[k]; ok && prev != broker {
		c.fail("two leaders: brokers %d and %d both lead %s at leader epoch %d", prev, broker, in.TopicPartition, in.LeaderEpoch)
	}
	c.epochLeader[k] = broker
	lk := leaderKey{broker, life, inc, in.LeaderEpoch}
	if prev, ok := c.leaderHW[lk]; ok && in.HighWatermark < prev {
		c.fail("HW moved back: broker %d leading %s at epoch %d from %d to %d", broker, in.TopicPartition, in.LeaderEpoch, prev, in.HighWatermark)
	}
	c.leaderHW[lk] = max(c.leaderHW[lk], in.HighWatermark)
}

// checkAcked: an acknowledged acks=all record at offset o is on every
// member of the ISR the controller records, as far as that member's log is
// open (a live broker hosting the partition): its LEO is past o and the
// record at o is the acknowledged one. Members down or not hosting the
// partition yet are checked when they are back; replicas join the ISR only
// through AlterPartition, after they caught up past the HW.
func (c *checker) checkAcked(s *Sim, parts []store.Partition, views map[incarnation][]replicaView) {
	// The ISR of the incarnation the store holds: a deleted incarnation's
	// records are not held against anyone.
	isr := map[incarnation][]int32{}
	for _, p := range parts {
		isr[incarnation{tp.TopicPartition{Topic: p.Topic, Partition: p.Partition}, p.TopicID}] = p.ISR
	}
	check := func(a ackedRecord, v replicaView) {
		if a.offset < v.log.start {
			return
		}
		got, has := v.log.values[a.offset]
		if v.log.leo <= a.offset || !has || got != a.value {
			c.fail("acked record lost: %s offset %d %q acknowledged, but ISR member %d (ISR %v) has LEO %d and %q there",
				a.t, a.offset, a.value, v.broker, isr[a.t], v.log.leo, got)
		}
	}
	// Every acknowledged record against a member not checked whole since
	// its log was read whole (or since it joined the ISR); the new ones
	// against every member.
	fresh := s.workload.drainFresh()
	for _, t := range sortedIncarnations(views) {
		for _, v := range views[t] {
			if !slices.Contains(isr[t], v.broker) {
				v.log.acksChecked = false
				continue
			}
			if v.log.acksChecked {
				for _, a := range fresh {
					if a.t == t {
						check(a, v)
					}
				}
				continue
			}
			s.workload.eachAckedOf(t, func(a ackedRecord) { check(a, v) })
			v.log.acksChecked = true
		}
	}
	// An acknowledged record already committed: the committed log has it
	// at its offset (those committed later are checked as they are).
	for _, a := range fresh {
		if got, ok := c.committed[a.t][a.offset]; ok && got != a.value {
			c.fail("acked record lost: %s offset %d %q acknowledged, but the committed log has %q there", a.t, a.offset, a.value, got)
		}
	}
}

// sortedIncarnations lists views' incarnations in a stable order.
func sortedIncarnations[V any](m map[incarnation]V) []incarnation {
	keys := slices.Collect(maps.Keys(m))
	slices.SortFunc(keys, func(a, b incarnation) int {
		switch {
		case tp.Less(a.TopicPartition, b.TopicPartition):
			return -1
		case tp.Less(b.TopicPartition, a.TopicPartition):
			return 1
		}
		return strings.Compare(a.id, b.id)
	})
	return keys
}

// checkFields: a committed record of an idempotent producer is stored in a
// v1 batch carrying the producer ID, epoch and sequence it was sent with.
func (c *checker) checkFields(t incarnation, broker int32, o int64, value string, l *cachedLog) {
	k, ok := parseRecordValue(value)
	if !ok {
		return
	}
	got, has := l.producers[o]
	if !has {
		c.fail("batch fields: %s offset %d %q on broker %d is in a batch without producer fields", t, o, value, broker)
		return
	}
	if got.id != k.id || got.epoch != k.epoch || got.seq != k.seq {
		c.fail("batch fields: %s offset %d %q on broker %d has producer %d epoch %d sequence %d", t, o, value, broker, got.id, got.epoch, got.seq)
	}
}

// orderedRecord is the last record of a producer in the committed log.
type orderedRecord struct {
	key    recordKey
	offset int64
}

// committedOnce: no value is committed at two offsets of one incarnation
// (every record is written once; a retried one must be deduplicated,
// an abandoned one may be there once).
//
// Save one case, which the contract leaves open: a retry of a producer's
// first batch (base sequence 0) whose first copy a DeleteRecords deleted,
// with the producer's state (TruncateHead: no batch of it is left), before
// the retry came. The partition holds nothing to tell it from a new
// producer's first batch and appends it again (Kafka before KIP-360 alike;
// since, Kafka keeps producer state past the log start until it expires).
// It is counted (Idempotence.ReappendedAfterDelete), and held as a
// duplicate with Config.StrictDelete.
func (c *checker) committedOnce(t incarnation, o int64, value string, l *cachedLog) {
	m := c.committedAt[t]
	if m == nil {
		m = map[string]committedRecord{}
		c.committedAt[t] = m
	}
	epoch := l.epochs[o]
	if prev, ok := m[value]; ok && prev.offset != o {
		// The batch starts the producer's sequence, or follows such a
		// reappended batch of the same producer and epoch (the retries
		// after it continue the sequence the partition now holds).
		pk, _ := parseRecordValue(value)
		pe := [2]int64{pk.id, int64(pk.epoch)}
		base, has := l.baseSeqs[o]
		if !c.strict && has && (base == 0 || c.reappendedProducers[t][pe]) && prev.offset < o && prev.offset < l.start {
			if c.reappended[t] == nil {
				c.reappended[t], c.reappendedValues[t] = map[int64]bool{}, map[string]bool{}
				c.reappendedProducers[t] = map[[2]int64]bool{}
			}
			c.reappended[t][o], c.reappendedValues[t][value] = true, true
			c.reappendedProducers[t][pe] = true
			c.reappendedCount++
			return
		}
		a, b := prev, committedRecord{o, epoch}
		if b.offset < a.offset {
			a, b = b, a
		}
		c.fail("duplicate: %s has %q committed at offsets %d (leader epoch %d) and %d (leader epoch %d)", t, value, a.offset, a.epoch, b.offset, b.epoch)
		return
	}
	m[value] = committedRecord{o, epoch}
}

type committedRecord struct {
	offset int64
	epoch  int32
}

// checkOrder: within each producer ID, the committed log holds its records
// in the order it wrote them (no reorder, and no record of a fenced
// instance after one of the instance that replaced it). Each step scans
// what was committed since (full: from the start, at the end of a run, in
// case a record below the committed HW was seen late).
func (c *checker) checkOrder(t incarnation, full bool) {
	m := c.committed[t]
	from := c.orderedTo[t]
	if full {
		from = 0
		delete(c.last, t)
		if len(m) > 0 {
			from = slices.Min(slices.Collect(maps.Keys(m)))
		}
	}
	last := c.last[t]
	if last == nil {
		last = map[int64]orderedRecord{}
		c.last[t] = last
	}
	hw := c.committedHW[t]
	for o := from; o < hw; o++ {
		v, ok := m[o]
		if !ok || c.reappended[t][o] {
			continue
		}
		k, ok := parseRecordValue(v)
		if !ok {
			continue
		}
		prev, seen := last[k.id]
		switch {
		case seen && !prev.key.before(k):
			c.fail("reorder: %s has producer %d's record %q at offset %d after its record %q at offset %d",
				t, k.id, v, o, m[prev.offset], prev.offset)
		case seen && prev.key.epoch == k.epoch && k.seq != prev.key.seq+1:
			// Within an epoch the producer gives nothing up: a record
			// is committed only after every earlier one of the epoch.
			c.fail("gap: %s has producer %d epoch %d's sequence %d (%q) at offset %d right after its sequence %d at offset %d",
				t, k.id, k.epoch, k.seq, v, o, prev.key.seq, prev.offset)
		case (!seen || prev.key.epoch != k.epoch) && k.seq != 0:
			// A partition takes a producer's new epoch (or a producer it
			// holds no state for) only from sequence 0.
			c.fail("gap: %s has producer %d epoch %d's first record at sequence %d (%q, offset %d)", t, k.id, k.epoch, k.seq, v, o)
		}
		last[k.id] = orderedRecord{k, o}
	}
	c.orderedTo[t] = max(c.orderedTo[t], hw)
}

// finalOrder runs checkOrder over every incarnation's whole committed log.
func (c *checker) finalOrder() {
	for _, t := range sortedIncarnations(c.committed) {
		c.checkOrder(t, true)
	}
}

// readLog returns a replica's records, read again when its LEO or log
// start moved since the last read (a truncation and an append of as many
// records between two steps would go unseen; every 64 steps it reads
// again anyway).
func (c *checker) readLog(s *Sim, k replicaKey, l *log.Log, step int) *cachedLog {
	leo, start := l.LogEndOffset(), l.LogStartOffset()
	cl := c.logs[k]
	if cl != nil && cl.leo == leo && cl.start == start && step-cl.readAt < 64 {
		return cl
	}
	if cl != nil && (leo < cl.leo || start > cl.start) {
		s.truncated(k.t.TopicPartition)
	}
	if cl != nil && start > cl.start {
		c.checkLogStartRaise(k, cl.start, start)
	}
	from := start
	if cl != nil && leo > cl.leo && start == cl.start && step-cl.readAt < 64 {
		// Appended to since: read what is new (the log below is as read).
		from, cl.leo = cl.leo, leo
	} else {
		cl = &cachedLog{leo: leo, start: start, readAt: step, values: map[int64]string{}, epochs: map[int64]int32{},
			producers: map[int64]recordKey{}, baseSeqs: map[int64]int32{}}
	}
	for off := from; off < leo; {
		info, err := l.Read(off, 1<<20, leo)
		if err != nil || len(info.Data) == 0 {
			break
		}
		next := off
		for buf := info.Data; len(buf) > 0; {
			b, rest, err := record.Next(buf)
			if err != nil {
				break
			}
			recs, err := b.Records()
			if err != nil {
				break
			}
			for _, r := range recs {
				cl.values[r.Offset] = string(r.Value)
				cl.epochs[r.Offset] = r.LeaderEpoch
				if b.HasProducer() {
					cl.producers[r.Offset] = recordKey{id: r.ProducerID, epoch: r.ProducerEpoch, seq: r.Sequence}
					cl.baseSeqs[r.Offset] = b.Producer().BaseSequence
				}
			}
			next = b.NextOffset()
			buf = rest
		}
		if next <= off {
			break
		}
		off = next
	}
	c.logs[k] = cl
	return cl
}
