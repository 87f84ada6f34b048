package sim

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

const clientName = "cli"

// workload is the producers and what they were told. In the idempotent
// workload (producer.go, the default) each partition has Config.Producers
// idempotent producers; in the plain one (Config.Plain, the findings of
// issue 19) one producer per partition with one acks=all produce of a
// unique value in flight at a time, sent to the leader the controller's
// store names (a client that looked the leader up; a stale answer costs a
// NOT_LEADER_OR_FOLLOWER), never retried. The acknowledged writes are what
// the invariants hold the cluster to.
type workload struct {
	mu sync.Mutex
	// acks are the acknowledged records: offset -> value, per partition
	// incarnation (a topic deleted and created again is another one: the
	// deleted one's records are gone by the operator's will, not lost).
	// ackedAt is the other way round: a value acknowledged at two offsets
	// of one incarnation is a duplicate the leaders admitted to.
	acks    map[incarnation]map[int64]string
	ackedAt map[incarnation]map[string]int64
	// sorted holds acks in the checker's order (by offset), kept as they
	// come: the checker walks them every step.
	sorted map[incarnation][]ackedRecord
	// fresh are the records acknowledged since the checker's last step.
	fresh    []ackedRecord
	produced int
	errors   map[string]int
	// problems are double acknowledgements of one offset, and what a
	// producer was told that it must never be.
	problems []workloadProblem
	// handed is every (producer ID, epoch) InitProducerId handed out: none
	// twice.
	handed map[[2]int64]bool
	idem   IdempotenceStats
}

// IdempotenceStats counts what the idempotent producers did.
type IdempotenceStats struct {
	// Batches made; Retries of a batch (sent again with the same producer,
	// epoch and sequence), of which RetriesAfterLeaderChange went out
	// under another leader epoch than the attempt before and
	// RetriesAfterTruncation after a replica of the partition truncated
	// its log (or its log start moved) since.
	Batches, Retries, RetriesAfterLeaderChange, RetriesAfterTruncation int
	// DuplicateAnswers: retries answered NONE with duplicate set.
	DuplicateAnswers int
	// ReappendedAfterDelete: records of retried first batches appended
	// again because a DeleteRecords had taken their first copy and the
	// producer's state (the checker's, see committedOnce).
	ReappendedAfterDelete int
	// Abandoned batches (given up, ambiguous), Fenced instances, Resets
	// (a partition lost the producer's state: a new epoch from sequence 0),
	// Restarts; IDsIssued and EpochBumps are InitProducerId's answers.
	Abandoned, Fenced, Resets, Restarts, IDsIssued, EpochBumps int
}

func newWorkload() *workload {
	return &workload{acks: map[incarnation]map[int64]string{}, ackedAt: map[incarnation]map[string]int64{}, sorted: map[incarnation][]ackedRecord{},
		errors: map[string]int{}, handed: map[[2]int64]bool{}}
}

// acked records that leader answered NONE for value at offset (a duplicate
// answer too: the offset is the original append's).
func (w *workload) acked(t incarnation, offset int64, value string, leader int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.acks[t]
	if m == nil {
		m = map[int64]string{}
		w.acks[t] = m
		w.ackedAt[t] = map[string]int64{}
	}
	if old, ok := m[offset]; ok && old != value {
		w.problems = append(w.problems, workloadProblem{msg: fmt.Sprintf("%s offset %d acknowledged twice: %q, then %q by broker %d", t, offset, old, value, leader)})
	}
	if o, ok := w.ackedAt[t][value]; ok && o != offset {
		w.problems = append(w.problems, workloadProblem{t: t, dupOf: value,
			msg: fmt.Sprintf("%s %q acknowledged at offset %d, then at %d by broker %d (a duplicate)", t, value, o, offset, leader)})
	}
	if old, ok := m[offset]; !ok || old != value {
		w.fresh = append(w.fresh, ackedRecord{t, offset, value})
	}
	if _, ok := m[offset]; !ok {
		l := w.sorted[t]
		i, _ := slices.BinarySearchFunc(l, offset, func(a ackedRecord, o int64) int { return cmp.Compare(a.offset, o) })
		w.sorted[t] = slices.Insert(l, i, ackedRecord{t, offset, value})
	} else {
		i, _ := slices.BinarySearchFunc(w.sorted[t], offset, func(a ackedRecord, o int64) int { return cmp.Compare(a.offset, o) })
		w.sorted[t][i].value = value
	}
	m[offset] = value
	w.ackedAt[t][value] = offset
}

// issued records an InitProducerId answer: no producer ID is issued twice,
// and no epoch of one handed out twice (two instances would share it).
func (w *workload) issued(id int64, epoch int16, bumped bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	k := [2]int64{id, int64(epoch)}
	if w.handed[k] {
		what := "issued"
		if bumped {
			what = "bumped to"
		}
		w.problems = append(w.problems, workloadProblem{msg: fmt.Sprintf("InitProducerId: producer ID %d epoch %d %s twice", id, epoch, what)})
	}
	w.handed[k] = true
	if bumped {
		w.idem.EpochBumps++
	} else {
		w.idem.IDsIssued++
	}
}

func (w *workload) initOutcome(code string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errors["init:"+code]++
}

func (w *workload) add(f func(*IdempotenceStats)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.idem)
}

func (w *workload) madeBatch(records int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.produced += records
	w.idem.Batches++
}

func (w *workload) retried(leaderChanged, truncated bool) {
	w.add(func(st *IdempotenceStats) {
		st.Retries++
		if leaderChanged {
			st.RetriesAfterLeaderChange++
		}
		if truncated {
			st.RetriesAfterTruncation++
		}
	})
}

func (w *workload) outcome(o outcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.errors[o.String()]++
}

func (w *workload) duplicateAnswer() { w.add(func(st *IdempotenceStats) { st.DuplicateAnswers++ }) }
func (w *workload) abandon(n int)    { w.add(func(st *IdempotenceStats) { st.Abandoned += n }) }
func (w *workload) fenced()          { w.add(func(st *IdempotenceStats) { st.Fenced++ }) }
func (w *workload) epochBumped()     { w.add(func(st *IdempotenceStats) { st.Resets++ }) }
func (w *workload) restarted()       { w.add(func(st *IdempotenceStats) { st.Restarts++ }) }

func (w *workload) problem(p string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.problems = append(w.problems, workloadProblem{msg: p})
}

// workloadProblem is what a client was told that it must never be; dupOf
// names the value of a record acknowledged at a second offset of t.
type workloadProblem struct {
	msg   string
	t     incarnation
	dupOf string
}

// incarnation is one partition of one topic incarnation (its topic ID).
type incarnation struct {
	tp.TopicPartition
	id string
}

type ackedRecord struct {
	t      incarnation
	offset int64
	value  string
}

// eachAckedOf calls f with every acknowledged record of t, by offset. The
// checker calls it with every other goroutine blocked, so holding the lock
// throughout costs nothing.
func (w *workload) eachAckedOf(t incarnation, f func(ackedRecord)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.sorted[t] {
		f(a)
	}
}

// drainFresh returns the records acknowledged since the last call, in the
// order they were.
func (w *workload) drainFresh() []ackedRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	f := w.fresh
	w.fresh = nil
	return f
}

// ackedValue is the record acknowledged at offset o of t, if any.
func (w *workload) ackedValue(t incarnation, o int64) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	v, ok := w.acks[t][o]
	return v, ok
}

func (w *workload) count() (produced, acked int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.acks {
		acked += len(m)
	}
	return w.produced, acked
}

// producePlain runs one partition's plain producer until ctx is done. Its randomness
// is its own (seeded), so the producers' draws do not depend on how the
// goroutines interleave.
func (s *Sim) producePlain(ctx context.Context, t tp.TopicPartition, rng *rand.Rand, done func()) {
	defer done()
	conns := map[int32]*conn{}
	for n := 0; ; n++ {
		d := time.Duration(20+rng.IntN(180)) * time.Millisecond
		timer := time.NewTimer(d)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		leader, _, ok := s.lookupLeader(ctx, t)
		if !ok {
			continue
		}
		c := conns[leader]
		if c == nil {
			c = &conn{net: s.net, client: clientName, clientLife: 1, server: brokerName(leader), kind: "produce-" + t.String()}
			conns[leader] = c
		}
		value := fmt.Sprintf("%s/v%d", t, n)
		s.workload.mu.Lock()
		s.workload.produced++
		s.workload.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := invoke[*replicadv1.ProduceResponse](cctx, c, "Produce", &replicadv1.ProduceRequest{
			Topic: t.Topic, Partition: t.Partition, Acks: -1, TimeoutMs: 2000,
			Records: []*replicadv1.Record{{Value: []byte(value)}},
		})
		cancel()
		code := "transport"
		if err == nil {
			code = resp.GetErrorCode().String()
		}
		s.workload.mu.Lock()
		s.workload.errors[code]++
		s.workload.mu.Unlock()
	}
}

// drainProblems returns the problems found since the last call.
func (w *workload) drainProblems() []workloadProblem {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.problems
	w.problems = nil
	return p
}

// leaderLookup is a producer's question to the scheduler: who leads t?
type leaderLookup struct {
	t      tp.TopicPartition
	answer chan leaderAnswer // buffered; leader -1: none
}

type leaderAnswer struct {
	leader, epoch int32
}

// lookupLeader asks the scheduler who leads t, and waits for the answer
// (false: none, or ctx ended). The scheduler reads the store at its next
// step, with the cluster idle (serveLookups): a producer reading it
// itself, when its timer fires at the very instant a controller timer
// moves leadership, would see either leader depending on which goroutine
// runs first, and send its produce to one broker or the other from one
// run of a seed to the next.
func (s *Sim) lookupLeader(ctx context.Context, t tp.TopicPartition) (leader, epoch int32, ok bool) {
	q := leaderLookup{t: t, answer: make(chan leaderAnswer, 1)}
	s.lookupsMu.Lock()
	s.lookups = append(s.lookups, q)
	s.lookupsMu.Unlock()
	select {
	case a := <-q.answer:
		return a.leader, a.epoch, a.leader >= 0
	case <-ctx.Done():
		return -1, -1, false
	}
}

// serveLookups answers the producers' leader lookups from the store, then
// lets the producers send before the scheduler chooses.
func (s *Sim) serveLookups() {
	s.lookupsMu.Lock()
	qs := s.lookups
	s.lookups = nil
	s.lookupsMu.Unlock()
	if len(qs) == 0 {
		return
	}
	for _, q := range qs {
		a := leaderAnswer{leader: -1, epoch: -1}
		if p, err := s.ctl.store.Partition(context.Background(), q.t.Topic, q.t.Partition); err == nil && p.Leader >= 0 {
			a = leaderAnswer{leader: p.Leader, epoch: p.LeaderEpoch}
		}
		q.answer <- a
	}
	s.cfg.Wait()
}
