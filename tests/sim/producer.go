package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The idempotent workload (issue 21): each partition has Config.Producers
// idempotent producers, each with its own producer ID, writing acks=all
// batches that carry (producer ID, epoch, base sequence), as Kafka's
// idempotent producer does. A producer gets its ID from InitProducerId at
// a broker (the leader it looked up), which hands it out of a block the
// controller allocated (AllocateProducerIds, a store write, under the
// store faults); a restart, or a partition that lost the producer's state,
// bumps its epoch the same way (BumpProducerEpoch at the controller). A producer pipelines up to maxInFlight batches on one
// connection to the leader it looked up, sent in sequence order; every
// ambiguous outcome (a timeout, a reset connection, NOT_LEADER, any error
// that may hide an append) is retried with the same producer, epoch and
// sequence, to whichever broker leads by then, until it is answered NONE
// (a fresh append or a duplicate). Only what Kafka's client treats as the
// end of a sequence gives a batch up: UNKNOWN_PRODUCER_ID or an
// OUT_OF_ORDER_SEQUENCE_NUMBER on the oldest unacknowledged batch (the
// partition lost the producer's state: its records were deleted or
// truncated away) abandons every pending batch and starts a new epoch at
// sequence 0; INVALID_PRODUCER_EPOCH ends a producer instance that a
// restart replaced (fenced). A bump the controller refuses (a newer epoch
// was handed out: an earlier attempt whose answer was lost) makes the
// instance ask for a new ID, or, replaced by a restart, end. An abandoned batch is ambiguous: it may be in
// the log, at most once.
//
// The scheduler restarts a producer now and then (fault "restart
// producer"): a new instance takes the ID with a bumped epoch while the old
// one goes on until a partition fences it.
//
// A record's value names its partition, producer, instance generation and
// number ("sim-0/p3.1.17"): within a producer ID, (generation, number) is
// the order the producer wrote in, which the checker holds the committed
// log to (no duplicate, no reorder, no record of a fenced instance after
// one of its successor).

// maxInFlight is the most batches a producer has unacknowledged (Kafka's
// max.in.flight.requests.per.connection is 5; the sim's logs are small).
const maxInFlight = 3

// produceTimeout is a produce's deadline at the client (its request
// timeout) and produceAckTimeout the acks=all wait it asks the leader for.
const (
	produceTimeout    = 3 * time.Second
	produceAckTimeout = 2000
	// A retry waits retryBackoff, doubled with each round that acknowledged
	// nothing, up to maxRetryBackoff (Kafka's retry.backoff.ms and
	// retry.backoff.max.ms).
	retryBackoff    = 100 * time.Millisecond
	maxRetryBackoff = time.Second
)

// idemProducer is one producer of one partition, over its instances
// (which share its ID while their epoch bumps succeed).
type idemProducer struct {
	s *Sim
	t tp.TopicPartition
	// index is its place in Sim.producers (its rng stream).
	index int
	// gen counts the instances started (restarts); cur is the newest.
	gen int
	cur *producerInstance
	// running counts its instances whose goroutine has not returned.
	running atomic.Int32
}

// producerInstance is one run of a producer (a process): an epoch, and its
// own sequence, from 0.
type producerInstance struct {
	p   *idemProducer
	gen int
	rng *rand.Rand
	// superseded is set (by the scheduler, at a step) when a restart
	// replaced this instance: it is expected to be fenced from now on.
	superseded atomic.Bool
	// id and epoch are its producer identity (0 until InitProducerId
	// answered), written by its goroutine, read by a restart.
	id    atomic.Int64
	epoch atomic.Int32
	// bumpFrom is the identity a restarted instance bumps (id 0: none).
	bumpFrom struct {
		id    int64
		epoch int16
	}
	// Owned by the instance's goroutine.
	seq   int32
	n     int // records made
	conns map[int32]*conn
}

// pendingBatch is a batch sent at least once and not acknowledged yet.
type pendingBatch struct {
	seq    int32
	values []string
	id     int64
	epoch  int16
	// attempts so far, and the leader epoch and truncation count of the
	// partition at the last one: a retry after either changed is the
	// interleaving the issue asks the scheduler for.
	attempts       int
	lastEpoch      int32
	lastTruncation int64
}

// recordKey is what a record's value says of it: its producer ID and
// epoch, its sequence number, and its place in its producer's order (the
// instance generation, then the record's number within the instance).
type recordKey struct {
	id    int64
	epoch int16
	seq   int32
	gen   int
	n     int
}

func (a recordKey) before(b recordKey) bool {
	if a.gen != b.gen {
		return a.gen < b.gen
	}
	return a.n < b.n
}

// recordValue is the value of a record: its partition, then its key
// ("sim-0/p1001e0g1n17s17").
func recordValue(t tp.TopicPartition, k recordKey) string {
	return fmt.Sprintf("%s/p%de%dg%dn%ds%d", t, k.id, k.epoch, k.gen, k.n, k.seq)
}

// parseRecordValue reads recordValue back; false for a plain producer's
// value.
func parseRecordValue(v string) (recordKey, bool) {
	i := strings.LastIndexByte(v, '/')
	if i < 0 || i+1 >= len(v) || v[i+1] != 'p' {
		return recordKey{}, false
	}
	var fields [5]int64
	rest := v[i+2:]
	for j, sep := range []byte{'e', 'g', 'n', 's', 0} {
		end := len(rest)
		if sep != 0 {
			end = strings.IndexByte(rest, sep)
			if end < 0 {
				return recordKey{}, false
			}
		}
		n, err := strconv.ParseInt(rest[:end], 10, 64)
		if err != nil {
			return recordKey{}, false
		}
		fields[j] = n
		if sep != 0 {
			rest = rest[end+1:]
		}
	}
	return recordKey{id: fields[0], epoch: int16(fields[1]), gen: int(fields[2]), n: int(fields[3]), seq: int32(fields[4])}, true
}

// startProducers makes the idempotent producers and starts their first
// instances.
func (s *Sim) startProducers() {
	for p := range s.cfg.Partitions {
		s.startPartitionProducers(int32(p))
	}
}

// startInstance starts a new instance of p (its first, or a restart's,
// which bumps the epoch of the identity the previous instance holds now and
// marks that one superseded).
func (p *idemProducer) startInstance() {
	s := p.s
	p.gen++
	in := &producerInstance{p: p, gen: p.gen, conns: map[int32]*conn{},
		rng: rand.New(rand.NewPCG(s.seed, uint64(2000+p.index)<<16|uint64(p.gen)))}
	if old := p.cur; old != nil {
		old.superseded.Store(true)
		in.bumpFrom.id, in.bumpFrom.epoch = old.id.Load(), int16(old.epoch.Load())
	}
	p.cur = in
	p.running.Add(1)
	s.producerWG.Add(1)
	go func() {
		defer s.producerWG.Done()
		defer p.running.Add(-1)
		in.run(s.prodCtx)
	}()
}

// restartProducer is the scheduler's fault: a producer whose previous
// restart's old instance has ended restarts with a bumped epoch.
func (s *Sim) restartableProducers() []*idemProducer {
	var out []*idemProducer
	for _, p := range s.producers {
		if p.running.Load() == 1 {
			out = append(out, p)
		}
	}
	return out
}

// sleepCtx waits d, false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// outcome is one attempt's answer.
type outcome struct {
	code replicadv1.ErrorCode
	dup  bool
	err  error
}

func (o outcome) String() string {
	if o.err != nil {
		return "transport"
	}
	return o.code.String()
}

// conn is the instance's connection to broker b (its produce requests
// and its InitProducerId, in order).
func (in *producerInstance) conn(b int32) *conn {
	c := in.conns[b]
	if c == nil {
		c = &conn{net: in.p.s.net, client: clientName, clientLife: 1, server: brokerName(b),
			kind: fmt.Sprintf("produce-%s-%d.%d", in.p.t, in.p.index, in.gen), ordered: true}
		in.conns[b] = c
	}
	return c
}

// initProducer gets the instance its identity: a new producer ID (id 0),
// or the epoch after (id, epoch), from InitProducerId at the partition's
// leader, retried until answered. A refused bump (a newer epoch was handed
// out) ends a superseded instance (false: fenced) and makes the current
// one ask for a new ID. False also when ctx ends.
func (in *producerInstance) initProducer(ctx context.Context, id int64, epoch int16) bool {
	p, s, w := in.p, in.p.s, in.p.s.workload
	backoff := retryBackoff
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			if !sleepCtx(ctx, backoff) {
				return false
			}
			backoff = min(2*backoff, maxRetryBackoff)
		}
		leader, _, ok := s.lookupLeader(ctx, p.t)
		if !ok {
			if ctx.Err() != nil {
				return false
			}
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, produceTimeout)
		resp, err := invoke[*replicadv1.InitProducerIdResponse](cctx, in.conn(leader), "InitProducerId",
			&replicadv1.InitProducerIdRequest{ProducerId: id, ProducerEpoch: int32(epoch), TimeoutMs: produceAckTimeout})
		cancel()
		code := "transport"
		if err == nil {
			code = resp.GetErrorCode().String()
		}
		w.initOutcome(code)
		switch {
		case err != nil:
		case resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE:
			w.issued(resp.GetProducerId(), int16(resp.GetProducerEpoch()), id != 0)
			in.id.Store(resp.GetProducerId())
			in.epoch.Store(resp.GetProducerEpoch())
			return true
		case resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH:
			if in.superseded.Load() {
				w.fenced()
				return false
			}
			id, epoch = 0, 0
		case resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID:
			w.problem(fmt.Sprintf("InitProducerId: producer ID %d, issued by the cluster, is unknown to it: %s", id, resp.GetErrorMessage()))
			id, epoch = 0, 0
		}
	}
}

// run produces until ctx ends or the instance is fenced.
func (in *producerInstance) run(ctx context.Context) {
	p, s, w := in.p, in.p.s, in.p.s.workload
	if !in.initProducer(ctx, in.bumpFrom.id, in.bumpFrom.epoch) {
		return
	}
	var pending []*pendingBatch
	backoff := retryBackoff
	for {
		wait := time.Duration(40+in.rng.IntN(360)) * time.Millisecond
		if len(pending) > 0 {
			wait = backoff
			backoff = min(2*backoff, maxRetryBackoff)
		}
		if !sleepCtx(ctx, wait) {
			return
		}
		if len(pending) == 0 {
			for range 1 + in.rng.IntN(maxInFlight) {
				b := &pendingBatch{seq: in.seq, id: in.id.Load(), epoch: int16(in.epoch.Load())}
				for range 1 + in.rng.IntN(2) {
					b.values = append(b.values, recordValue(p.t, recordKey{id: b.id, epoch: b.epoch, seq: b.seq + int32(len(b.values)), gen: in.gen, n: in.n}))
					in.n++
				}
				in.seq += int32(len(b.values))
				pending = append(pending, b)
				w.madeBatch(len(b.values))
			}
		}
		leader, leaderEpoch, ok := s.lookupLeader(ctx, p.t)
		if !ok {
			continue
		}
		c := in.conn(leader)
		truncations := s.truncationCount(p.t)
		waits := make([]func() (any, error), len(pending))
		cancels := make([]context.CancelFunc, len(pending))
		for i, b := range pending {
			if b.attempts > 0 {
				w.retried(b.lastEpoch != leaderEpoch, b.lastTruncation != truncations)
			}
			b.attempts++
			b.lastEpoch, b.lastTruncation = leaderEpoch, truncations
			req := &replicadv1.ProduceRequest{Topic: p.t.Topic, Partition: p.t.Partition, Acks: -1, TimeoutMs: produceAckTimeout,
				ProducerId: b.id, ProducerEpoch: int32(b.epoch), BaseSequence: b.seq}
			for _, v := range b.values {
				req.Records = append(req.Records, &replicadv1.Record{Value: []byte(v)})
			}
			var cctx context.Context
			cctx, cancels[i] = context.WithTimeout(ctx, produceTimeout)
			waits[i] = c.send(cctx, "Produce", req)
		}
		outs := make([]outcome, len(pending))
		for i, wait := range waits {
			resp, err := wait()
			cancels[i]()
			if err != nil {
				outs[i] = outcome{err: err}
				continue
			}
			r := resp.(*replicadv1.ProduceResponse)
			outs[i] = outcome{code: r.GetErrorCode(), dup: r.GetDuplicate()}
		}
		// The answers, in sequence order: an acknowledged batch is done; an
		// earlier failure makes a later OUT_OF_ORDER a retry (the earlier
		// one is retried first); the rest are retried as they are.
		var keep []*pendingBatch
		end := ""
		// refused counts the refused batches sent before: an earlier
		// attempt may have been appended, so they are ambiguous too.
		refused := 0
		for i, b := range pending {
			o := outs[i]
			w.outcome(o)
			switch {
			case o.err != nil:
				keep = append(keep, b)
			case o.code == replicadv1.ErrorCode_ERROR_CODE_NONE:
				backoff = retryBackoff
				if o.dup {
					w.duplicateAnswer()
				}
			case o.code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH:
				if !in.superseded.Load() {
					w.problem(fmt.Sprintf("producer %d epoch %d (the newest) refused on %s with INVALID_PRODUCER_EPOCH (batch at sequence %d)",
						b.id, b.epoch, p.t, b.seq))
				}
				end = "fenced"
				if b.attempts > 1 {
					refused++
				}
			case o.code == replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID,
				o.code == replicadv1.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER && len(keep) == 0:
				if end == "" {
					end = "reset"
				}
				if b.attempts > 1 {
					refused++
				}
			default:
				keep = append(keep, b)
			}
		}
		pending = keep
		switch {
		case end == "fenced":
			w.fenced()
			w.abandon(len(pending) + refused)
			return
		case end == "reset" && in.superseded.Load():
			// An old instance does not start a new epoch: its successor
			// holds the ID.
			w.abandon(len(pending) + refused)
			return
		case end == "reset":
			// The partition lost this producer's state: what is pending
			// can no longer be told from a new write. Give it up (it may
			// be in the log once) and go on in a new epoch from sequence 0.
			w.abandon(len(pending) + refused)
			pending = nil
			w.epochBumped()
			if !in.initProducer(ctx, in.id.Load(), int16(in.epoch.Load())) {
				return
			}
			in.seq = 0
		}
	}
}

// restartProducer restarts one producer (the scheduler's fault).
func (s *Sim) restartProducer() bool {
	ps := s.restartableProducers()
	if len(ps) == 0 {
		return false
	}
	p := ps[s.rng.IntN(len(ps))]
	s.noteFault(fmt.Sprintf("restart producer %d of %s (instance %d)", p.index, p.t, p.gen+1))
	p.startInstance()
	s.workload.restarted()
	return true
}
