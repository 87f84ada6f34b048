package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

const clientName = "cli"

// workload is the producers: one per partition, each with one acks=all
// produce of a unique value in flight at a time, sent to the leader the
// controller's store names (a client that looked the leader up; a stale
// answer costs a NOT_LEADER_OR_FOLLOWER). The acknowledged writes are what
// the invariants hold the cluster to.
type workload struct {
	mu sync.Mutex
	// acks are the acknowledged records: offset -> value, per partition
	// incarnation (a topic deleted and created again is another one: the
	// deleted one's records are gone by the operator's will, not lost).
	acks     map[incarnation]map[int64]string
	produced int
	errors   map[string]int
	// problems are double acknowledgements of one offset.
	problems []string
}

func newWorkload() *workload {
	return &workload{acks: map[incarnation]map[int64]string{}, errors: map[string]int{}}
}

// acked records that leader answered NONE for value at offset.
func (w *workload) acked(t incarnation, offset int64, value string, leader int32) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.acks[t]
	if m == nil {
		m = map[int64]string{}
		w.acks[t] = m
	}
	if old, ok := m[offset]; ok && old != value {
		w.problems = append(w.problems, fmt.Sprintf("%s offset %d acknowledged twice: %q, then %q by broker %d", t, offset, old, value, leader))
	}
	m[offset] = value
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

// snapshot lists the acknowledged records in a stable order.
func (w *workload) snapshot() []ackedRecord {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []ackedRecord
	for t, m := range w.acks {
		for o, v := range m {
			out = append(out, ackedRecord{t, o, v})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].t != out[j].t {
			if out[i].t.TopicPartition != out[j].t.TopicPartition {
				return tp.Less(out[i].t.TopicPartition, out[j].t.TopicPartition)
			}
			return out[i].t.id < out[j].t.id
		}
		return out[i].offset < out[j].offset
	})
	return out
}

func (w *workload) count() (produced, acked int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range w.acks {
		acked += len(m)
	}
	return w.produced, acked
}

// produce runs one partition's producer until ctx is done. Its randomness
// is its own (seeded), so the producers' draws do not depend on how the
// goroutines interleave.
func (s *Sim) produce(ctx context.Context, t tp.TopicPartition, rng *rand.Rand, done func()) {
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
		leader, ok := s.lookupLeader(ctx, t)
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
func (w *workload) drainProblems() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.problems
	w.problems = nil
	return p
}

// leaderLookup is a producer's question to the scheduler: who leads t?
type leaderLookup struct {
	t      tp.TopicPartition
	answer chan int32 // buffered; -1: no leader (or no answer)
}

// lookupLeader asks the scheduler who leads t, and waits for the answer
// (false: none, or ctx ended). The scheduler reads the store at its next
// step, with the cluster idle (serveLookups): a producer reading it
// itself, when its timer fires at the very instant a controller timer
// moves leadership, would see either leader depending on which goroutine
// runs first, and send its produce to one broker or the other from one
// run of a seed to the next.
func (s *Sim) lookupLeader(ctx context.Context, t tp.TopicPartition) (int32, bool) {
	q := leaderLookup{t: t, answer: make(chan int32, 1)}
	s.lookupsMu.Lock()
	s.lookups = append(s.lookups, q)
	s.lookupsMu.Unlock()
	select {
	case l := <-q.answer:
		return l, l >= 0
	case <-ctx.Done():
		return -1, false
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
		leader := int32(-1)
		if p, err := s.ctl.store.Partition(context.Background(), q.t.Topic, q.t.Partition); err == nil && p.Leader >= 0 {
			leader = p.Leader
		}
		q.answer <- leader
	}
	s.cfg.Wait()
}
