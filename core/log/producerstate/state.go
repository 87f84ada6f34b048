package producerstate

import (
	"errors"
	"fmt"
	"slices"

	"github.com/replicad/replicad/core/record"
)

// MaxBatches is how many of a producer's last batches are kept for
// duplicate detection: Kafka's, matching its producer's
// max.in.flight.requests.per.connection bound of 5.
const MaxBatches = 5

// Validation errors of a leader's append; nothing was appended.
var (
	ErrOutOfOrderSequence = errors.New("out of order sequence number")
	ErrInvalidEpoch       = errors.New("invalid producer epoch")
	ErrUnknownProducer    = errors.New("unknown producer id")
)

// Batch is the metadata of one appended batch of a producer.
type Batch struct {
	FirstSeq, LastSeq       int32
	FirstOffset, LastOffset int64
	MaxTimestamp            int64
}

// Entry is one producer's state. Its batches are oldest first.
type Entry struct {
	ID      int64
	Epoch   int16
	n       uint8
	batches [MaxBatches]Batch
}

// Batches returns the producer's kept batches, oldest first.
func (e *Entry) Batches() []Batch { return e.batches[:e.n] }

// Last is the producer's last batch.
func (e *Entry) Last() Batch { return e.batches[e.n-1] }

func (e *Entry) push(b Batch) {
	if int(e.n) == MaxBatches {
		copy(e.batches[:], e.batches[1:])
		e.n--
	}
	e.batches[e.n] = b
	e.n++
}

// duplicateOf returns the kept batch with these first and last sequences.
func (e *Entry) duplicateOf(first, last int32) (Batch, bool) {
	for _, b := range e.batches[:e.n] {
		if b.FirstSeq == first && b.LastSeq == last {
			return b, true
		}
	}
	return Batch{}, false
}

// Manager is a partition's producer state. It is not safe for concurrent
// use: the log changes it under its append lock.
type Manager struct {
	producers    map[int64]*Entry
	maxProducers int
}

// NewManager returns an empty state holding at most maxProducers producers
// (0: no bound).
func NewManager(maxProducers int) *Manager {
	return &Manager{producers: make(map[int64]*Entry), maxProducers: maxProducers}
}

// SetMaxProducers changes the bound; it applies from the next new producer.
func (m *Manager) SetMaxProducers(n int) { m.maxProducers = n }

// Len is the number of producers held.
func (m *Manager) Len() int { return len(m.producers) }

// Get returns the producer's state, nil when there is none.
func (m *Manager) Get(id int64) *Entry { return m.producers[id] }

// Clear forgets every producer.
func (m *Manager) Clear() { clear(m.producers) }

// CheckResult is what Check decided for an acceptable batch.
type CheckResult struct {
	// Duplicate: the batch repeats Original, one of the producer's last
	// batches; it must not be appended.
	Duplicate bool
	Original  Batch
	// Fenced: the batch starts a newer epoch of a producer the state held;
	// FencedEpoch is the epoch it fences.
	Fenced      bool
	FencedEpoch int16
}

// Check validates a client's batch of producer p whose last sequence is
// lastSeq (see the package comment). It changes nothing.
func (m *Manager) Check(p record.Producer, lastSeq int32) (CheckResult, error) {
	e := m.producers[p.ID]
	if e == nil {
		if p.BaseSequence != 0 {
			return CheckResult{}, fmt.Errorf("%w: producer %d has no state here, and its batch starts at sequence %d, not 0",
				ErrUnknownProducer, p.ID, p.BaseSequence)
		}
		return CheckResult{}, nil
	}
	switch {
	case p.Epoch < e.Epoch:
		return CheckResult{}, fmt.Errorf("%w: producer %d epoch %d is older than its epoch %d here",
			ErrInvalidEpoch, p.ID, p.Epoch, e.Epoch)
	case p.Epoch > e.Epoch:
		if p.BaseSequence != 0 {
			return CheckResult{}, fmt.Errorf("%w: producer %d's new epoch %d starts at sequence %d, not 0",
				ErrOutOfOrderSequence, p.ID, p.Epoch, p.BaseSequence)
		}
		return CheckResult{Fenced: true, FencedEpoch: e.Epoch}, nil
	}
	if b, ok := e.duplicateOf(p.BaseSequence, lastSeq); ok {
		return CheckResult{Duplicate: true, Original: b}, nil
	}
	if want := record.IncrementSequence(e.Last().LastSeq, 1); p.BaseSequence != want {
		return CheckResult{}, fmt.Errorf("%w: producer %d epoch %d: sequence %d, expected %d",
			ErrOutOfOrderSequence, p.ID, p.Epoch, p.BaseSequence, want)
	}
	return CheckResult{}, nil
}

// ApplyBatch records b, a v1 batch appended to the log (its offsets
// stamped). It reports how many producers the bound evicted.
func (m *Manager) ApplyBatch(b record.Batch) int {
	p := b.Producer()
	return m.Apply(p.ID, p.Epoch, Batch{FirstSeq: p.BaseSequence, LastSeq: b.LastSequence(),
		FirstOffset: b.BaseOffset(), LastOffset: b.LastOffset(), MaxTimestamp: b.MaxTimestamp()})
}

// Apply records an appended batch of producer id at epoch. A different
// epoch than the state's (newer at a leader; at a follower whatever the
// log says) replaces the producer's batches.
func (m *Manager) Apply(id int64, epoch int16, b Batch) int {
	e := m.producers[id]
	if e == nil {
		e = &Entry{ID: id, Epoch: epoch}
		e.push(b)
		m.producers[id] = e
		// The new producer's batch is the log's last: never evicted.
		return m.evict()
	}
	if e.Epoch != epoch {
		e.Epoch, e.n = epoch, 0
	}
	e.push(b)
	return 0
}

// evict drops the producers whose last batch is oldest in the log, down to
// 90% of the bound, once the bound is passed.
func (m *Manager) evict() int {
	if m.maxProducers <= 0 || len(m.producers) <= m.maxProducers {
		return 0
	}
	keep := max(m.maxProducers-m.maxProducers/10, 1)
	all := m.sortedByLastOffset()
	for _, e := range all[keep:] {
		delete(m.producers, e.ID)
	}
	return len(all) - keep
}

// sortedByLastOffset returns every producer, the last appended first.
func (m *Manager) sortedByLastOffset() []*Entry {
	all := make([]*Entry, 0, len(m.producers))
	for _, e := range m.producers {
		all = append(all, e)
	}
	slices.SortFunc(all, func(a, b *Entry) int {
		switch x, y := a.Last().LastOffset, b.Last().LastOffset; {
		case x > y:
			return -1
		case x < y:
			return 1
		}
		return 0
	})
	return all
}

// Expire removes the producers whose last batch's max timestamp is
// expirationMs or more before nowMs (Kafka's isProducerExpired), and
// returns their IDs.
func (m *Manager) Expire(nowMs, expirationMs int64) []int64 {
	var gone []int64
	for id, e := range m.producers {
		if nowMs-e.Last().MaxTimestamp >= expirationMs {
			gone = append(gone, id)
			delete(m.producers, id)
		}
	}
	slices.Sort(gone)
	return gone
}

// TruncateHead forgets the batches wholly below logStart (deleted by
// retention or DeleteRecords), and the producers left with none; it
// returns how many producers went. The state is then the one a replay of
// the batches from logStart makes, however it was reached (incrementally,
// from a snapshot, from the log).
func (m *Manager) TruncateHead(logStart int64) int {
	n := 0
	for id, e := range m.producers {
		k := 0
		for k < int(e.n) && e.batches[k].LastOffset < logStart {
			k++
		}
		switch {
		case k == int(e.n):
			delete(m.producers, id)
			n++
		case k > 0:
			copy(e.batches[:], e.batches[k:e.n])
			e.n -= uint8(k)
		}
	}
	return n
}

// Info is one producer's state as described to operators.
type Info struct {
	ID              int64
	Epoch           int16
	LastSequence    int32
	LastOffset      int64
	LastTimestampMs int64
}

// Describe returns up to limit producers (limit <= 0: all), the last
// appended first.
func (m *Manager) Describe(limit int) []Info { return SortInfos(m.Infos(), limit) }

// Infos returns every producer, unsorted: what a caller holding a lock
// copies before sorting outside it (SortInfos).
func (m *Manager) Infos() []Info {
	out := make([]Info, 0, len(m.producers))
	for _, e := range m.producers {
		last := e.Last()
		out = append(out, Info{ID: e.ID, Epoch: e.Epoch, LastSequence: last.LastSeq, LastOffset: last.LastOffset, LastTimestampMs: last.MaxTimestamp})
	}
	return out
}

// SortInfos sorts infos, the last appended first, and keeps limit of them
// (limit <= 0: all).
func SortInfos(infos []Info, limit int) []Info {
	slices.SortFunc(infos, func(a, b Info) int {
		switch {
		case a.LastOffset > b.LastOffset:
			return -1
		case a.LastOffset < b.LastOffset:
			return 1
		}
		return 0
	})
	if limit > 0 && len(infos) > limit {
		infos = slices.Clone(infos[:limit])
	}
	return infos
}

// Equal reports whether m and o hold the same producers with the same
// batches (tests: a follower's state against its leader's).
func (m *Manager) Equal(o *Manager) bool {
	if len(m.producers) != len(o.producers) {
		return false
	}
	for id, e := range m.producers {
		f := o.producers[id]
		if f == nil || f.Epoch != e.Epoch || !slices.Equal(e.Batches(), f.Batches()) {
			return false
		}
	}
	return true
}

// Clone returns a copy of m.
func (m *Manager) Clone() *Manager {
	c := &Manager{producers: make(map[int64]*Entry, len(m.producers)), maxProducers: m.maxProducers}
	for id, e := range m.producers {
		cp := *e
		c.producers[id] = &cp
	}
	return c
}
