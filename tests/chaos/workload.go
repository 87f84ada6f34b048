package chaos

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/replicad/replicad/client"
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
	failed  int // failed: refused, fenced, or not delivered in time
	fenced  int // refused with INVALID_PRODUCER_EPOCH
	retries int // the client's produce attempts after a batch's first
	resent  int // plain mode: records sent again after an error
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
	cl   *client.Client
	p    *client.Producer
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
// per producer, one lane per partition, and one consumer per partition.
func (w *Workload) Start() error {
	for _, pr := range w.prods {
		inst, err := w.newInstance(pr, nil)
		if err != nil {
			return fmt.Errorf("producer w%d: %w", pr.k, err)
		}
		pr.cur = inst
	}
	for p := range w.parts {
		for _, pr := range w.prods {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				w.runLane(pr, p, nil, nil)
			}()
		}
		w.wg.Add(1)
		go w.consume(p)
	}
	return nil
}

// Stop ends the workload and waits for it. The producers are closed,
// which flushes them: their records in flight get their outcome (the
// cluster is whole again when Stop is called), up to deliveryTimeout;
// what is left then is failed.
func (w *Workload) Stop() {
	close(w.stop)
	w.wg.Wait()
	var closing sync.WaitGroup
	for _, pr := range w.prods {
		pr.mu.Lock()
		if inst := pr.cur; inst != nil {
			closing.Add(1)
			go func() {
				defer closing.Done()
				inst.close()
			}()
		}
		pr.mu.Unlock()
	}
	closing.Wait()
	w.cancel()
}

func (w *Workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// restart restarts producer k with its producer ID: a new instance with
// the epoch bumped and the next incarnation takes over every partition;
// the old one goes on sending new records beside it for zombieFor, then
// is closed (its records in flight get their outcome, or fail). False: a
// restart of k is already under way.
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
		inst, err := w.newInstance(pr, old)
		pr.mu.Lock()
		pr.restarting = false
		if err != nil {
			pr.mu.Unlock()
			w.h.note("producer", "w%d: restart given up: %v", pr.k, err)
			return
		}
		pr.cur = inst
		pr.mu.Unlock()
		w.mu.Lock()
		w.restarts++
		w.mu.Unlock()
		pid, epoch := inst.p.ProducerID()
		w.h.note("producer", "w%d restarted: producer ID %d epoch %d, incarnation %d; the old instance sends for %v more", pr.k, pid, epoch, inst.inc, zombieFor)
		var zombies sync.WaitGroup
		for p := range w.parts {
			zombies.Add(1)
			go func() {
				defer zombies.Done()
				w.runLane(pr, p, old, old.done)
			}()
		}
		w.pause(zombieFor)
		close(old.done)
		zombies.Wait()
		old.close()
	}()
	return true
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
		if err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_OFFSET_OUT_OF_RANGE && resp.GetLogStartOffset() > next {
			next = resp.GetLogStartOffset() // deleted (DeleteRecords) before it was read
			continue
		}
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
	attempts, failed, fenced, retries, resent, restarts, reads int
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
	n = workloadCounts{attempts: w.attempt, failed: w.failed, fenced: w.fenced, retries: w.retries, resent: w.resent, restarts: w.restarts, reads: w.nread}
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
