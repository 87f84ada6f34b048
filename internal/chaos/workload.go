package chaos

import (
	"context"
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

// Workload is the producers and consumers, and what they saw.
type Workload struct {
	c       *Cluster
	h       *History
	parts   int32
	workers int

	mu      sync.Mutex
	acks    []ack
	attempt int // produce attempts
	failed  int // answered with an error, or none
	// reads: what consumers read below the HW, offset -> value, per
	// partition; a second read of an offset that differs is a changed read
	// at once.
	reads   []map[int64]string
	changed []string
	nread   int

	leaders leaderCache
	stop    chan struct{}
	wg      sync.WaitGroup
}

// leaderCache is the leaders the controller last named.
type leaderCache struct {
	mu      sync.Mutex
	leaders map[int32]int32
	fetched time.Time
}

func newWorkload(c *Cluster, h *History, parts int32, workers int) *Workload {
	w := &Workload{c: c, h: h, parts: parts, workers: workers, stop: make(chan struct{}),
		leaders: leaderCache{leaders: map[int32]int32{}}}
	for range parts {
		w.reads = append(w.reads, map[int64]string{})
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

// Start runs workers producers and one consumer per partition.
func (w *Workload) Start() {
	for p := range w.parts {
		for k := range w.workers {
			w.wg.Add(1)
			go w.produce(p, k)
		}
		w.wg.Add(1)
		go w.consume(p)
	}
}

// Stop ends the workload and waits for it.
func (w *Workload) Stop() {
	close(w.stop)
	w.wg.Wait()
}

func (w *Workload) stopped() bool {
	select {
	case <-w.stop:
		return true
	default:
		return false
	}
}

// produce sends one acks=all record at a time, each attempt with a value
// of its own (a retry is a new value: a value twice in a log is then a
// duplicate the system made, not the client).
func (w *Workload) produce(p int32, worker int) {
	defer w.wg.Done()
	ctx := context.Background()
	refresh := false
	for n := 0; !w.stopped(); n++ {
		leader := w.leader(ctx, p, refresh)
		refresh = false
		if leader <= 0 {
			refresh = true
			w.pause(50 * time.Millisecond)
			continue
		}
		v := fmt.Sprintf("p%d-w%d-%d", p, worker, n)
		cctx, cancel := context.WithTimeout(ctx, 4*time.Second)
		resp, err := w.c.log(leader).Produce(cctx, &replicadv1.ProduceRequest{Topic: Topic, Partition: p, Acks: -1, TimeoutMs: 3000,
			Records: []*replicadv1.Record{{Value: []byte(v)}}})
		cancel()
		now := time.Now()
		w.mu.Lock()
		w.attempt++
		switch {
		case err != nil:
			w.failed++
			w.mu.Unlock()
			w.h.add(Event{T: w.h.since(now), Kind: "produce-unknown", Partition: p, Value: v, Error: err.Error(), Detail: fmt.Sprintf("broker %d", leader)})
			refresh = true
			w.pause(20 * time.Millisecond)
		case resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
			w.failed++
			w.mu.Unlock()
			w.h.add(Event{T: w.h.since(now), Kind: "produce-fail", Partition: p, Value: v, Error: resp.GetErrorCode().String(), Detail: fmt.Sprintf("broker %d", leader)})
			refresh = true
			w.pause(20 * time.Millisecond)
		default:
			w.acks = append(w.acks, ack{partition: p, offset: resp.GetBaseOffset(), value: v, at: now})
			w.mu.Unlock()
			w.h.add(Event{T: w.h.since(now), Kind: "produce-ok", Partition: p, Offset: resp.GetBaseOffset(), Value: v, Detail: fmt.Sprintf("broker %d", leader)})
		}
	}
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

// snapshot copies what the workload saw.
func (w *Workload) snapshot() (acks []ack, reads []map[int64]string, changed []string, attempts, failed, nread int) {
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
	return acks, reads, append([]string(nil), w.changed...), w.attempt, w.failed, w.nread
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
