package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Topic is the workload's topic.
const Topic = "chaos"

// ack is an acknowledged write: the leader answered NONE with its offset.
type ack struct {
	partition int32
	offset    int64
	value     string
	at        time.Time
}

// zombieFor is how long a restarted producer's old instance goes on
// sending new records beside the new one, as a process that a restart
// did not stop yet does: once the new instance wrote to a partition, the
// old one's batches there must be refused (INVALID_PRODUCER_EPOCH).
const zombieFor = 1500 * time.Millisecond

// Workload is the producers and consumers, and what they saw.
type Workload struct {
	c     *Cluster
	h     *History
	parts int32
	// idempotent: producers with a producer ID and sequence numbers (issue
	// 21); false: plain produce, every retry appended again (the checker
	// must then find duplicates: TestChaosFindsDuplicatesWithoutIdempotence).
	idempotent bool
	prods      []*wproducer

	mu      sync.Mutex
	acks    []ack
	attempt int // records sent
	failed  int // not acknowledged: failed, fenced, or unknown at the stop
	fenced  int // refused with INVALID_PRODUCER_EPOCH
	retries int // produce requests after a record's first
	// restarts counts producer restarts with their ID (epoch bumps).
	restarts int
	// reads: what consumers read below the HW, offset -> value, per
	// partition; a second read of an offset that differs is a changed read
	// at once.
	reads   []map[int64]string
	changed []string
	nread   int

	leaders leaderCache
	stop    chan struct{}
	// ctx ends when the workload stops: a produce in flight then ends
	// unknown.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// wproducer is one of the workload's producers: it keeps its number and
// its producer ID across restarts; each restart is a new instance (an
// incarnation) with the epoch bumped.
type wproducer struct {
	k    int
	mu   sync.Mutex
	cur  *instance
	next int64 // the next record's index
	// restarting: a restart is under way (InitProducerId may wait for
	// a controller); a second one is not started meanwhile.
	restarting bool
}

// instance is one incarnation of a producer.
type instance struct {
	inc  int
	s    sender
	done chan struct{} // closed when the instance is retired
}

// leaderCache is the leaders the controller last named.
type leaderCache struct {
	mu      sync.Mutex
	leaders map[int32]int32
	fetched time.Time
}

func newWorkload(c *Cluster, h *History, parts int32, producers int, idempotent bool) *Workload {
	w := &Workload{c: c, h: h, parts: parts, idempotent: idempotent, stop: make(chan struct{}),
		leaders: leaderCache{leaders: map[int32]int32{}}}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	for range parts {
		w.reads = append(w.reads, map[int64]string{})
	}
	for k := range producers {
		w.prods = append(w.prods, &wproducer{k: k + 1})
	}
	return w
}

// leader is partition p's leader, asking the controller when refresh is
// set (after an error) at most every 100 ms. The ask is made outside the
// lock: a paused controller must not hold every producer behind one call.
func (w *Workload) leader(ctx context.Context, p int32, refresh bool) int32 {
	lc := &w.leaders
	lc.mu.Lock()
	l, ok := lc.leaders[p]
	if (ok && !refresh && l > 0) || time.Since(lc.fetched) < 100*time.Millisecond {
		lc.mu.Unlock()
		return l
	}
	lc.fetched = time.Now() // others take the cached answer meanwhile
	lc.mu.Unlock()
	_, resp, err := w.c.Controller(ctx)
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if err == nil {
		for _, cp := range resp.GetPartitions() {
			if cp.GetTopic() == Topic {
				lc.leaders[cp.GetPartition()] = cp.GetLeader()
			}
		}
	}
	return lc.leaders[p]
}

// Start initializes the producers (each gets its producer ID) and runs,
// per producer, one sender per partition, and one consumer per partition.
func (w *Workload) Start() error {
	for _, pr := range w.prods {
		s, err := w.newSender(pr, nil)
		if err != nil {
			return fmt.Errorf("producer w%d: %w", pr.k, err)
		}
		pr.cur = &instance{s: s, done: make(chan struct{})}
	}
	for p := range w.parts {
		for _, pr := range w.prods {
			w.wg.Add(1)
			go w.produce(pr, p)
		}
		w.wg.Add(1)
		go w.consume(p)
	}
	return nil
}

// Stop ends the workload and waits for it; records in flight end unknown.
func (w *Workload) Stop() {
	close(w.stop)
	w.cancel()
	w.wg.Wait()
	for _, pr := range w.prods {
		pr.mu.Lock()
		if pr.cur != nil {
			pr.cur.s.close()
		}
		pr.mu.Unlock()
	}
}

func (w *Workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// newSender makes a producer instance: a new producer ID when old is
// nil, else old's ID with its epoch bumped (InitProducerId with the ID),
// retried until the workload stops.
func (w *Workload) newSender(pr *wproducer, old sender) (sender, error) {
	if !w.idempotent {
		return &rawSender{w: w, plain: true, seq: map[int32]int32{}, locks: map[int32]*sync.Mutex{}}, nil
	}
	var pid int64
	var epoch int32
	if old != nil {
		pid, epoch = old.ids()
	}
	for attempt := 0; ; attempt++ {
		b := w.anyBroker(attempt)
		cctx, cancel := context.WithTimeout(w.ctx, 10*time.Second)
		resp, err := w.c.log(b).InitProducerId(cctx, &replicadv1.InitProducerIdRequest{ProducerId: pid, ProducerEpoch: epoch, TimeoutMs: 8000})
		cancel()
		if err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
			s := &rawSender{w: w, pid: resp.GetProducerId(), epoch: resp.GetProducerEpoch(), seq: map[int32]int32{}, locks: map[int32]*sync.Mutex{}}
			kind := "producer-init"
			if old != nil {
				kind = "producer-restart"
			}
			w.h.add(Event{Kind: kind, PID: s.pid, Epoch: s.epoch, Detail: fmt.Sprintf("w%d via broker %d", pr.k, b)})
			return s, nil
		}
		if err == nil {
			err = fmt.Errorf("%v: %s", resp.GetErrorCode(), resp.GetErrorMessage())
		}
		if w.stopped() {
			return nil, err
		}
		w.h.add(Event{Kind: "producer-init-fail", PID: pid, Epoch: epoch, Error: err.Error(), Detail: fmt.Sprintf("w%d via broker %d", pr.k, b)})
		w.pause(200 * time.Millisecond)
	}
}

// anyBroker picks the broker for the attempt-th try, in turn.
func (w *Workload) anyBroker(attempt int) int32 {
	return int32(attempt%len(w.c.brokers)) + 1
}

// restart restarts producer k with its producer ID: a new instance with
// the epoch bumped and the next incarnation takes over every partition;
// the old one goes on sending beside it for zombieFor, then is retired
// (what it still has in flight ends unknown). False: a restart of k is
// already under way.
func (w *Workload) restart(k int) bool {
	pr := w.prods[(k-1)%len(w.prods)]
	pr.mu.Lock()
	if pr.restarting || pr.cur == nil {
		pr.mu.Unlock()
		return false
	}
	pr.restarting = true
	old := pr.cur
	pr.mu.Unlock()
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		s, err := w.newSender(pr, old.s)
		pr.mu.Lock()
		pr.restarting = false
		if err != nil {
			pr.mu.Unlock()
			return
		}
		pr.cur = &instance{inc: old.inc + 1, s: s, done: make(chan struct{})}
		pr.mu.Unlock()
		w.mu.Lock()
		w.restarts++
		w.mu.Unlock()
		pid, epoch := s.ids()
		w.h.note("producer", "w%d restarted: producer ID %d epoch %d, incarnation %d; the old instance sends for %v more", pr.k, pid, epoch, old.inc+1, zombieFor)
		var zombies sync.WaitGroup
		for p := range w.parts {
			zombies.Add(1)
			go func() {
				defer zombies.Done()
				w.zombie(pr, old, p)
			}()
		}
		w.pause(zombieFor)
		close(old.done)
		zombies.Wait()
		old.s.close()
	}()
	return true
}

// produce sends producer pr's records to partition p one at a time, each
// with its own value, retried as is until it is acknowledged or refused,
// by whichever instance of pr is current.
func (w *Workload) produce(pr *wproducer, p int32) {
	defer w.wg.Done()
	for !w.stopped() {
		pr.mu.Lock()
		inst := pr.cur
		id := recordID{Producer: pr.k, Incarnation: inst.inc, Index: pr.next}
		pr.next++
		pr.mu.Unlock()
		w.send(pr, inst, p, id)
	}
}

// zombie sends new records of the retired instance old to p until it is
// retired.
func (w *Workload) zombie(pr *wproducer, old *instance, p int32) {
	for !w.stopped() {
		select {
		case <-old.done:
			return
		default:
		}
		pr.mu.Lock()
		id := recordID{Producer: pr.k, Incarnation: old.inc, Index: pr.next}
		pr.next++
		pr.mu.Unlock()
		w.send(pr, old, p, id)
	}
}

// send produces one record with inst, an instance of pr, and records the
// outcome. A sequence the partition refuses restarts pr (the epoch bump
// resets its sequences), as a client does.
func (w *Workload) send(pr *wproducer, inst *instance, p int32, id recordID) {
	v := id.String()
	w.mu.Lock()
	w.attempt++
	w.mu.Unlock()
	off, broker, tries, err := inst.s.send(w.ctx, inst.done, p, v)
	now := time.Now()
	pid, epoch := inst.s.ids()
	w.mu.Lock()
	w.retries += max(tries-1, 0)
	if err != nil {
		w.failed++
		if errors.Is(err, errFenced) {
			w.fenced++
		}
		w.mu.Unlock()
		kind := "produce-unknown"
		if errors.Is(err, errRefused) {
			kind = "produce-fail"
		}
		if errors.Is(err, errSequence) {
			w.h.note("producer", "w%d: %v: restart it", pr.k, err)
			w.restart(pr.k)
		}
		w.h.add(Event{T: w.h.since(now), Kind: kind, Partition: p, Value: v, Error: err.Error(), PID: pid, Epoch: epoch,
			Detail: fmt.Sprintf("broker %d, %d tries", broker, tries)})
		w.pause(20 * time.Millisecond)
		return
	}
	w.acks = append(w.acks, ack{partition: p, offset: off, value: v, at: now})
	w.mu.Unlock()
	w.h.add(Event{T: w.h.since(now), Kind: "produce-ok", Partition: p, Offset: off, Value: v, PID: pid, Epoch: epoch,
		Detail: fmt.Sprintf("broker %d, %d tries", broker, tries)})
}

// consume reads partition p from its leader from offset 0 on, recording
// what it reads (the leader serves only records below its HW).
func (w *Workload) consume(p int32) {
	defer w.wg.Done()
	ctx := context.Background()
	next := int64(0)
	refresh := false
	for !w.stopped() {
		leader := w.leader(ctx, p, refresh)
		refresh = false
		if leader <= 0 {
			refresh = true
			w.pause(50 * time.Millisecond)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := w.c.log(leader).Consume(cctx, &replicadv1.ConsumeRequest{Topic: Topic, Partition: p, Offset: next,
			MaxBytes: 256 << 10, MaxWaitMs: 500})
		cancel()
		if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			refresh = true
			w.pause(50 * time.Millisecond)
			continue
		}
		w.mu.Lock()
		for _, r := range resp.GetRecords() {
			v := string(r.GetValue())
			if old, ok := w.reads[p][r.GetOffset()]; ok && old != v {
				w.changed = append(w.changed, fmt.Sprintf("partition %d offset %d read as %q, later as %q", p, r.GetOffset(), old, v))
			}
			w.reads[p][r.GetOffset()] = v
			w.nread++
		}
		w.mu.Unlock()
		if n := resp.GetNextOffset(); n > next {
			next = n
		}
	}
}

// pause waits d or until the workload stops.
func (w *Workload) pause(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.stop:
	}
}

// workloadCounts is what the workload did, for the report.
type workloadCounts struct {
	attempts, failed, fenced, retries, restarts, reads int
}

// snapshot copies what the workload saw.
func (w *Workload) snapshot() (acks []ack, reads []map[int64]string, changed []string, n workloadCounts) {
	w.mu.Lock()
	defer w.mu.Unlock()
	acks = append([]ack(nil), w.acks...)
	for _, m := range w.reads {
		c := make(map[int64]string, len(m))
		for k, v := range m {
			c[k] = v
		}
		reads = append(reads, c)
	}
	n = workloadCounts{attempts: w.attempt, failed: w.failed, fenced: w.fenced, retries: w.retries, restarts: w.restarts, reads: w.nread}
	return acks, reads, append([]string(nil), w.changed...), n
}

// lastAck is the time of partition p's last acknowledgement (zero: none).
func (w *Workload) lastAck(p int32) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.acks) - 1; i >= 0; i-- {
		if w.acks[i].partition == p {
			return w.acks[i].at
		}
	}
	return time.Time{}
}
