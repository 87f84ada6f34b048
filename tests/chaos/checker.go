package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// healthy says whether the controller shows every partition of the topic
// with a leader, a full ISR and no offline replica, and every broker alive.
func healthy(resp *replicadv1.DescribeClusterResponse, parts int32) error {
	for _, b := range resp.GetBrokers() {
		if !b.GetAlive() {
			return fmt.Errorf("broker %d not alive", b.GetId())
		}
	}
	seen := int32(0)
	for _, p := range resp.GetPartitions() {
		if p.GetTopic() != Topic {
			continue
		}
		seen++
		isr, replicas := slices.Clone(p.GetIsr()), slices.Clone(p.GetReplicas())
		slices.Sort(isr)
		slices.Sort(replicas)
		switch {
		case p.GetLeader() <= 0:
			return fmt.Errorf("partition %d has no leader", p.GetPartition())
		case !slices.Equal(isr, replicas):
			return fmt.Errorf("partition %d: ISR %v of replicas %v", p.GetPartition(), p.GetIsr(), p.GetReplicas())
		case len(p.GetOfflineReplicas()) > 0:
			return fmt.Errorf("partition %d: offline replicas %v", p.GetPartition(), p.GetOfflineReplicas())
		}
	}
	if seen != parts {
		return fmt.Errorf("%d of %d partitions described", seen, parts)
	}
	return nil
}

// settle waits until the cluster is healthy, at most timeout.
func (c *Cluster) settle(ctx context.Context, parts int32, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		_, resp, err := c.ActiveController(ctx)
		if err == nil {
			if err = healthy(resp, parts); err == nil {
				if err = c.brokersAgree(ctx, resp); err == nil {
					return nil
				}
			}
		}
		last = err
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("not healthy within %v: %v", timeout, last)
}

// brokersAgree checks that every broker has every log dir online and has
// taken the controller's latest decision for each of its replicas (same
// leader and leader epoch): a restarted broker that the controller has not
// yet noticed is not healthy, though the controller still shows it so.
func (c *Cluster) brokersAgree(ctx context.Context, resp *replicadv1.DescribeClusterResponse) error {
	for _, n := range c.brokers {
		id, _ := strconv.Atoi(strings.TrimPrefix(n.name, "broker-"))
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		d, err := c.replicaManager(int32(id)).DescribePartitions(cctx, &replicadv1.DescribePartitionsRequest{Topic: Topic})
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		for _, ld := range d.GetLogDirs() {
			if !ld.GetOnline() {
				return fmt.Errorf("%s: log dir %s offline", n.name, ld.GetPath())
			}
		}
		hosted := map[int32]*replicadv1.PartitionDescription{}
		for _, pd := range d.GetPartitions() {
			hosted[pd.GetPartition()] = pd
		}
		for _, cp := range resp.GetPartitions() {
			if cp.GetTopic() != Topic || !slices.Contains(cp.GetReplicas(), int32(id)) {
				continue
			}
			pd := hosted[cp.GetPartition()]
			if pd == nil || pd.GetLeader() != cp.GetLeader() || pd.GetLeaderEpoch() != cp.GetLeaderEpoch() {
				return fmt.Errorf("%s: partition %d not at the controller's leader %d epoch %d (%v)", n.name, cp.GetPartition(), cp.GetLeader(), cp.GetLeaderEpoch(), pd)
			}
		}
	}
	return nil
}

// logRec is one record of a replica's log as the checker reads it: the
// value, and the producer fields of its batch (0, 0, -1 for a plain one).
type logRec struct {
	Value    string
	PID      int64
	Epoch    int32
	Sequence int32
}

// readLog reads partition p from broker b, which must lead it, from its
// log start offset (records below it were deleted: DeleteRecords) to its
// HW once that is at least atLeast (a new leader's HW catches up as its
// followers fetch).
func (c *Cluster) readLog(ctx context.Context, b, p int32, atLeast int64) (log map[int64]logRec, start, hw int64, err error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		log, start, hw, err := c.readOnce(ctx, b, p)
		if err == nil && hw >= atLeast {
			return log, start, hw, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("HW %d, want at least %d", hw, atLeast)
			}
			return nil, 0, 0, fmt.Errorf("read partition %d from broker %d: %w", p, b, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (c *Cluster) readOnce(ctx context.Context, b, p int32) (map[int64]logRec, int64, int64, error) {
	log := map[int64]logRec{}
	next, start, hw := int64(-2), int64(-1), int64(-1) // -2: from the log start
	for range 1 << 20 {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := c.log(b).Consume(cctx, &replicadv1.ConsumeRequest{Topic: Topic, Partition: p, Offset: next, MaxBytes: 1 << 20})
		cancel()
		if err != nil {
			return nil, 0, 0, err
		}
		if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			return nil, 0, 0, fmt.Errorf("consume at %d: %v", next, resp.GetErrorCode())
		}
		if hw < 0 {
			hw, start, next = resp.GetHighWatermark(), resp.GetLogStartOffset(), resp.GetLogStartOffset()
		}
		for _, r := range resp.GetRecords() {
			if r.GetOffset() < hw {
				log[r.GetOffset()] = logRec{Value: string(r.GetValue()), PID: r.GetProducerId(), Epoch: r.GetProducerEpoch(), Sequence: r.GetSequence()}
			}
		}
		if n := resp.GetNextOffset(); n > next {
			next = n
		}
		if next >= hw || len(resp.GetRecords()) == 0 {
			return log, start, hw, nil
		}
	}
	return nil, 0, 0, errors.New("read did not end")
}

// elect moves partition p's leadership to broker b and waits until the
// controller shows it with a full ISR.
func (c *Cluster) elect(ctx context.Context, p, b int32, parts int32) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		ctl, resp, err := c.Controller(ctx)
		if err == nil {
			for _, cp := range resp.GetPartitions() {
				if cp.GetTopic() == Topic && cp.GetPartition() == p && cp.GetLeader() == b && healthy(resp, parts) == nil {
					return nil
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			er, e := ctl.ElectLeader(cctx, &replicadv1.ElectLeaderRequest{Topic: Topic, Partition: p, Leader: &b})
			cancel()
			err = e
			if e == nil && er.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
				err = fmt.Errorf("%v: %s", er.GetErrorCode(), er.GetErrorMessage())
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("elect broker %d for partition %d: %v", b, p, last)
}

// Findings are what the checker found wrong; every list must be empty.
type Findings struct {
	Lost, Moved, Divergent, Changed, Duplicates, Problems []string
	// Reordered: a producer's records in a partition out of the order it
	// sent them (issue 21: idempotent retries keep the order). Fenced: a
	// record of an older producer epoch after one of a newer epoch of the
	// same producer ID in a partition, which fencing forbids.
	Reordered, Fenced []string
	// Reappended: a record acknowledged or read at an offset deleted since
	// (DeleteRecords) and found again above the log start: the window
	// exactly-once leaves open when every batch of a producer is deleted
	// with its state while it retries one ("What exactly once per
	// partition means here"). Reported, and counted, not failed, as the
	// simulation's ReappendedAfterDelete.
	Reappended []string
	// Operator: operator actions the cluster did not carry out (in time,
	// or correctly); MassFencing: decisions that fenced more than one
	// broker in the default mix (issue 19 path 11); SlowHeal: network
	// heals not followed by full ISRs within the heal bound (path 12).
	Operator, MassFencing, SlowHeal []string
	Heal                            error
}

const maxListed = 20

func addf(list *[]string, format string, args ...any) {
	if len(*list) < maxListed {
		*list = append(*list, fmt.Sprintf(format, args...))
	} else if len(*list) == maxListed {
		*list = append(*list, "...")
	}
}

// check reads every partition from every replica (moving leadership to
// each in turn) and compares with what the workload saw.
func check(ctx context.Context, c *Cluster, parts int32, acks []ack, reads []map[int64]string, f *Findings, h *History) (finalRecords int) {
	for p := range parts {
		_, resp, err := c.ActiveController(ctx)
		if err != nil {
			f.Heal = errors.Join(f.Heal, err)
			return
		}
		var cp *replicadv1.ClusterPartition
		for _, x := range resp.GetPartitions() {
			if x.GetTopic() == Topic && x.GetPartition() == p {
				cp = x
			}
		}
		if cp == nil {
			f.Heal = errors.Join(f.Heal, fmt.Errorf("partition %d not described", p))
			return
		}
		first := cp.GetLeader()
		// A leader elected just before the check (a preferred election
		// after the last heal) starts with its HW behind its log end, and
		// its HW catches up as its followers fetch: read once it covers
		// every acknowledged record, or, if it never does, read what is
		// there, so that the comparison names what is missing.
		final, start, hw, err := c.readLog(ctx, first, p, ackedEnd(acks, p))
		if err != nil {
			final, start, hw, err = c.readLog(ctx, first, p, 0)
		}
		if err != nil {
			f.Heal = errors.Join(f.Heal, err)
			continue
		}
		h.note("check", "partition %d: %d records from the log start %d to the HW %d on leader %d", p, len(final), start, hw, first)
		finalRecords += len(final)
		for _, r := range cp.GetReplicas() {
			if r == first {
				continue
			}
			if err := c.elect(ctx, p, r, parts); err != nil {
				f.Heal = errors.Join(f.Heal, err)
				continue
			}
			other, ostart, ohw, err := c.readLog(ctx, r, p, hw)
			if err != nil {
				f.Heal = errors.Join(f.Heal, err)
				continue
			}
			h.note("check", "partition %d: %d records from the log start %d to the HW %d on broker %d", p, len(other), ostart, ohw, r)
			// Replicas may have deleted up to different log starts:
			// what both hold must agree.
			for off := max(start, ostart); off < hw; off++ {
				if a, b := final[off], other[off]; a != b {
					addf(&f.Divergent, "partition %d offset %d: %+v on broker %d, %+v on broker %d", p, off, a, first, b, r)
				}
			}
		}
		compareLog(p, final, start, hw, acks, reads[p], f)
	}
	return finalRecords
}

// ackedEnd is the offset after partition p's last acknowledged record.
func ackedEnd(acks []ack, p int32) int64 {
	var end int64
	for _, a := range acks {
		if a.partition == p {
			end = max(end, a.offset+1)
		}
	}
	return end
}

// compareLog checks partition p's final log (offset -> record, from its
// log start to its hw: records below start were deleted, DeleteRecords)
// against the acknowledgements and the consumers' reads:
//
//   - no hole below the HW, and no value the workload never sent;
//   - no duplicate: a producer's record (its name and index, the value)
//     at most once, acknowledged or not: an ambiguous write the producer
//     retried must be in the log once, or not at all;
//   - no loss: every acknowledged record at the offset it was
//     acknowledged at; unacknowledged ones (ambiguous, failed, or sent by
//     an instance fenced since) may be absent;
//   - no reorder: a producer's records in the order it sent them, by
//     incarnation then index (a restarted producer's records after its
//     old instance's);
//   - fencing: per producer ID, no record of an older epoch after one of a
//     newer epoch;
//   - every consumer read below the HW is what the final log holds.
//
// A record acknowledged or read below start was deleted: nothing to check.
func compareLog(p int32, final map[int64]logRec, start, hw int64, acks []ack, reads map[int64]string, f *Findings) {
	at := make(map[string]int64, len(final))
	type last struct {
		id  recordID
		off int64
	}
	byProducer := map[int]last{}
	type epochAt struct {
		epoch int32
		off   int64
	}
	epochs := map[int64]epochAt{}
	for off := max(start, 0); off < hw; off++ {
		r, ok := final[off]
		if !ok {
			addf(&f.Divergent, "partition %d offset %d: missing below the HW %d", p, off, hw)
			continue
		}
		v := r.Value
		if prev, dup := at[v]; dup {
			// The producer fields say who appended it twice: the same
			// ones, the leader; a new epoch or sequence, the client.
			a := final[prev]
			addf(&f.Duplicates, "partition %d: %q at offsets %d and %d (producer %d epoch %d sequence %d, then %d, %d, %d)",
				p, v, prev, off, a.PID, a.Epoch, a.Sequence, r.PID, r.Epoch, r.Sequence)
			continue
		}
		at[v] = off
		id, ok := parseValue(v)
		if !ok {
			addf(&f.Divergent, "partition %d offset %d: %q is no value the workload sends", p, off, v)
			continue
		}
		if l, seen := byProducer[id.Producer]; seen && !l.id.before(id) {
			addf(&f.Reordered, "partition %d: %q at offset %d after %q at offset %d", p, v, off, l.id, l.off)
		}
		byProducer[id.Producer] = last{id, off}
		if r.PID > 0 {
			if e, seen := epochs[r.PID]; seen && r.Epoch < e.epoch {
				addf(&f.Fenced, "partition %d: producer ID %d epoch %d at offset %d (%q) after its epoch %d at offset %d", p, r.PID, r.Epoch, off, v, e.epoch, e.off)
			} else {
				epochs[r.PID] = epochAt{r.Epoch, off}
			}
		}
	}
	// Values known at offsets below the log start (deleted since) must not
	// be in the log again.
	below := map[string]int64{}
	for _, a := range acks {
		if a.partition == p && a.offset < start {
			below[a.value] = a.offset
		}
	}
	for off, v := range reads {
		if off < start {
			below[v] = off
		}
	}
	for v, boff := range below {
		if off, ok := at[v]; ok {
			r := final[off]
			addf(&f.Reappended, "partition %d: %q at offset %d, deleted since, again at %d (producer %d epoch %d sequence %d)",
				p, v, boff, off, r.PID, r.Epoch, r.Sequence)
		}
	}
	for _, a := range acks {
		if a.partition != p || a.offset < start {
			continue
		}
		switch off, ok := at[a.value]; {
		case !ok:
			addf(&f.Lost, "partition %d: %q acknowledged at offset %d is not in the log (HW %d)", p, a.value, a.offset, hw)
		case off != a.offset:
			addf(&f.Moved, "partition %d: %q acknowledged at offset %d is at %d", p, a.value, a.offset, off)
		}
	}
	offs := make([]int64, 0, len(reads))
	for off := range reads {
		if off >= start {
			offs = append(offs, off)
		}
	}
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	for _, off := range offs {
		if v := reads[off]; final[off].Value != v {
			addf(&f.Changed, "partition %d offset %d: a consumer read %q, the log holds %q (HW %d)", p, off, v, final[off].Value, hw)
		}
	}
}

// gaps is, per partition, the longest time without an acknowledgement
// between from and to, and the longest once the excused spans are taken
// out of each gap.
func gaps(acks []ack, parts int32, from, to time.Time, excused [][2]time.Time) (raw, unexcused []time.Duration) {
	raw, unexcused = make([]time.Duration, parts), make([]time.Duration, parts)
	times := make([][]time.Time, parts)
	for _, a := range acks {
		times[a.partition] = append(times[a.partition], a.at)
	}
	for p := range parts {
		ts := append([]time.Time{from}, times[p]...)
		ts = append(ts, to)
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for i := 1; i < len(ts); i++ {
			g := ts[i].Sub(ts[i-1])
			raw[p] = max(raw[p], g)
			for _, e := range excused {
				lo, hi := maxTime(e[0], ts[i-1]), minTime(e[1], ts[i])
				if hi.After(lo) {
					g -= hi.Sub(lo)
				}
			}
			unexcused[p] = max(unexcused[p], g)
		}
	}
	return raw, unexcused
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
