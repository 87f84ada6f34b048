package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core/record"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Acks is how much replication a produce waits for.
type Acks int8

const (
	// AcksAll waits until every in-sync replica has the batch (the high
	// watermark passed it): Kafka's acks=all, the default.
	AcksAll Acks = iota
	// AcksLeader waits for the leader's append only (acks=1).
	AcksLeader
	// AcksNone does not wait (acks=0).
	AcksNone
)

func (a Acks) wire() int32 {
	switch a {
	case AcksLeader:
		return 1
	case AcksNone:
		return 0
	}
	return -1
}

// ProducerConfig configures a Producer. The zero value is Kafka's default
// producer: idempotent, acks=all, no linger.
type ProducerConfig struct {
	Acks Acks
	// DisableIdempotence sends plain batches: a retry after an ambiguous
	// failure (a timeout, a lost connection) may append a batch twice, and
	// only leader changes and lost connections are retried. Idempotence
	// needs AcksAll (as Kafka's enable.idempotence).
	DisableIdempotence bool
	// ResumeID and ResumeEpoch restart a producer with the identity an
	// earlier instance held (its Producer.ProducerID): the first Init
	// bumps that ID's epoch instead of taking a new ID, so the cluster
	// fences the earlier instance (INVALID_PRODUCER_EPOCH) on every
	// partition the new one writes to. 0: a new ID.
	ResumeID    int64
	ResumeEpoch int16
	// Linger is how long a partition's batch waits for more records
	// before it is sent (Kafka's linger.ms); 0: it is sent as soon as the
	// partition may send, so records batch up only while earlier batches
	// are in flight.
	Linger time.Duration
	// BatchRecords and BatchBytes close a batch (0: 500 records and
	// 1,000,000 bytes, under the broker's default --max-batch-bytes).
	BatchRecords, BatchBytes int
	// MaxInFlight is how many batches of one partition may be unanswered
	// at once (Kafka's max.in.flight.requests.per.connection); 0: 5, and
	// at most 5 with idempotence (the leader remembers a producer's last
	// five batches per partition). They travel pipelined, in order, on one
	// ProduceStream per partition.
	MaxInFlight int
	// Lanes, without idempotence, spreads a partition's in-flight batches
	// over that many ProduceStreams (or unary calls) that the leader
	// handles concurrently: more throughput, no order between concurrent
	// batches. 0: 1. Ignored with idempotence.
	Lanes int
	// Unary sends each batch as a unary Produce instead of on a stream;
	// one batch per lane is in flight then.
	Unary bool
	// AckTimeout is how long the leader waits for the ISR with AcksAll
	// (ProduceRequest.timeout_ms); 0: 30s; a negative one is sent as it is
	// (the broker refuses it). A batch unanswered for AckTimeout plus the
	// Client's RequestTimeout is retried.
	AckTimeout time.Duration
	// DeliveryTimeout bounds a record's time from Produce to its outcome,
	// retries included (Kafka's delivery.timeout.ms); 0: 2 minutes.
	DeliveryTimeout time.Duration
	// MaxBufferedRecords makes Produce block while that many records are
	// unanswered; 0: 100,000.
	MaxBufferedRecords int
	// OnBatch, when set, is called once per batch with its outcome, on
	// the partition's goroutine, before its records' callbacks.
	OnBatch func(BatchResult)
}

// BatchResult is the outcome of one batch.
type BatchResult struct {
	TopicPartition
	// BaseOffset is the first record's offset (-1 on failure, and with
	// AcksNone).
	BaseOffset int64
	Records    int
	// Duplicate: the leader already held the batch (an earlier attempt was
	// appended and its answer lost); BaseOffset is the original one.
	Duplicate bool
	// HighWatermark is the partition's as the leader answered (-1 on
	// failure).
	HighWatermark int64
	// Attempts is how many times the batch was sent.
	Attempts int
	Err      error
}

// Errors a produce fails with, besides *Error (an answer's error code) and
// gRPC status errors (a broker refused the request).
var (
	// ErrProducerFenced: a newer instance of this producer ID bumped the
	// epoch (INVALID_PRODUCER_EPOCH). Fatal: the Producer fails every
	// record from then on.
	ErrProducerFenced = errors.New("client: producer fenced by a newer epoch (INVALID_PRODUCER_EPOCH)")
	// ErrDeliveryTimeout: the record was not delivered within
	// DeliveryTimeout; it wraps the last attempt's error.
	ErrDeliveryTimeout = errors.New("client: delivery timeout")
)

// ProduceCallback receives a record's outcome: err nil and r.Offset set
// when it was delivered. Callbacks of one partition run in order, one at a
// time, on the goroutine that took the answer: a slow one holds the
// partition up, and one that waits for other records' outcomes
// (ProduceSync, Flush, ProduceBatch) may wait forever.
type ProduceCallback func(r *Record, err error)

// Producer sends records to partitions' leaders, batching per partition.
//
// Idempotent by default, as Kafka's producer since 3.0: it takes a
// producer ID and epoch (InitProducerId) at first use and numbers each
// partition's records from 0; each batch carries its first record's
// sequence number. A batch whose outcome is unknown (a timeout, a lost
// connection, a leader change) is sent again with the same sequence to the
// partition's new leader, which appends it only if it does not hold it
// (a batch it holds is answered with its original offsets): every record
// is appended once per partition, in order.
//
// The order is kept through retries: a partition's batches are in flight
// in sequence order on one stream, at most MaxInFlight at a time; when one
// must be retried, the ones after it are retried after it, in order (an
// OUT_OF_ORDER_SEQUENCE_NUMBER answer to a later batch is expected then,
// and retried too).
//
// UNKNOWN_PRODUCER_ID (the partition lost the producer's state: it
// expired, or the log holding it was truncated or deleted) makes the
// Producer bump its epoch and number the partition's records from 0 again.
// A batch whose earlier attempt may have been appended and that is sent
// again under the new epoch would then be appended twice: the small
// duplicate risk Kafka's producer carries too (KIP-360). The same holds
// for a batch that exhausted its retries without a known outcome: the
// epoch is bumped so the partition's later batches are not stuck behind
// the gap.
//
// A Producer is safe for concurrent use.
type Producer struct {
	c    *Client
	cfg  ProducerConfig
	idem bool

	ctx    context.Context // ends the partitions' goroutines (Close)
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	parts  map[TopicPartition]*partition
	closed bool

	stickyMu sync.Mutex
	sticky   map[string]int32 // topic -> partition keyless records go to

	// The producer ID and epoch; initMu serializes InitProducerId calls.
	initMu sync.Mutex
	// bumpInDoubt (under initMu): an epoch bump of this producer ended
	// without an answer that says what happened; it may have landed.
	bumpInDoubt bool
	idMu        sync.Mutex
	pid         int64
	epoch       int16
	inited      bool
	// ident counts the identities (ID, epoch) the producer has held: it
	// moves at every epoch bump and every new ID, and batches and
	// partitions compare it rather than the epoch (a new ID starts at
	// epoch 0 again).
	ident uint32
	fatal error // ErrProducerFenced, or the reason idempotence cannot work

	// buffered counts records produced and not yet answered; changed is
	// closed and replaced when it drops.
	bufMu    sync.Mutex
	buffered int
	changed  chan struct{}
}

// NewProducer makes a Producer sending through c. It asks for a producer
// ID at first use (or at Init).
func NewProducer(c *Client, cfg ProducerConfig) (*Producer, error) {
	if cfg.BatchRecords <= 0 {
		cfg.BatchRecords = 500
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 1000000
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 5
	}
	if cfg.Lanes <= 0 {
		cfg.Lanes = 1
	}
	if cfg.AckTimeout == 0 {
		cfg.AckTimeout = 30 * time.Second
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = 2 * time.Minute
	}
	if cfg.MaxBufferedRecords <= 0 {
		cfg.MaxBufferedRecords = 100000
	}
	idem := !cfg.DisableIdempotence
	if idem {
		if cfg.Acks != AcksAll {
			return nil, errors.New("client: idempotence needs AcksAll (set DisableIdempotence for acks 1 or 0)")
		}
		if cfg.MaxInFlight > 5 {
			return nil, fmt.Errorf("client: MaxInFlight %d: at most 5 with idempotence", cfg.MaxInFlight)
		}
		cfg.Lanes = 1
	}
	if cfg.Unary {
		// One unary call per lane: two in flight on separate HTTP/2
		// streams may reach the leader in either order.
		cfg.MaxInFlight = 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Producer{c: c, cfg: cfg, idem: idem, ctx: ctx, cancel: cancel,
		parts: map[TopicPartition]*partition{}, sticky: map[string]int32{}, changed: make(chan struct{})}, nil
}

// Idempotent reports whether the Producer numbers its batches.
func (p *Producer) Idempotent() bool { return p.idem }

// ProducerID is the producer ID and epoch (0, 0 before Init or without
// idempotence).
func (p *Producer) ProducerID() (int64, int16) {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.pid, p.epoch
}

// Init takes the producer ID now (it is otherwise taken at the first
// send), so a cluster that cannot hand one out fails here: with
// ErrIdempotenceUnsupported when its brokers predate idempotent produce.
// Without idempotence it does nothing.
func (p *Producer) Init(ctx context.Context) error {
	if !p.idem {
		return nil
	}
	_, _, err := p.ensureInit(ctx)
	return err
}

func (p *Producer) ensureInit(ctx context.Context) (int64, int16, error) {
	p.idMu.Lock()
	if p.fatal != nil {
		defer p.idMu.Unlock()
		return 0, 0, p.fatal
	}
	if p.inited {
		defer p.idMu.Unlock()
		return p.pid, p.epoch, nil
	}
	p.idMu.Unlock()
	p.initMu.Lock()
	defer p.initMu.Unlock()
	p.idMu.Lock()
	done := p.inited
	p.idMu.Unlock()
	if done {
		return p.ensureInit(ctx)
	}
	pid, epoch, err := p.c.InitProducerID(ctx, p.cfg.ResumeID, p.cfg.ResumeEpoch)
	if err != nil {
		var cerr *Error
		if p.cfg.ResumeID != 0 && errors.As(err, &cerr) && cerr.Code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH {
			// A newer instance resumed the ID first: this one is fenced.
			p.setFatal(fmt.Errorf("%w: resuming producer %d from epoch %d: %v", ErrProducerFenced, p.cfg.ResumeID, p.cfg.ResumeEpoch, err))
			return 0, 0, p.fatal
		}
		if errors.Is(err, ErrIdempotenceUnsupported) {
			p.setFatal(err)
		}
		return 0, 0, err
	}
	p.idMu.Lock()
	p.pid, p.epoch, p.inited = pid, epoch, true
	p.ident++
	p.idMu.Unlock()
	return pid, epoch, nil
}

// lostBumpNote is what a broker adds to INVALID_PRODUCER_EPOCH when its own
// resent BumpProducerEpoch found the epoch bumped, most likely by its
// earlier attempt whose answer was lost (producerid.Manager.BumpEpoch).
const lostBumpNote = "an earlier attempt whose answer was lost may have bumped it"

// bumpEpoch asks for a new epoch of the producer ID unless the identity
// moved on since seen. The bump is refused INVALID_PRODUCER_EPOCH when the
// stored epoch is not the one held: another instance resumed the ID (this
// one is fenced), or an earlier bump of this one landed and its answer was
// lost (a timeout, a controller failover). Only the second takes a new ID
// instead of failing every record from then on, as Kafka's idempotent
// producer resets its ID when its epoch cannot go on; it is told apart by
// an earlier bump of this producer that ended without an answer
// (bumpInDoubt), or by the broker's note that its own resent bump found the
// epoch already bumped (lostBumpNote). Anything else is a fence: a zombie
// instance that took a new ID would write on beside the instance that
// fenced it. A producer resumed from an earlier instance (ResumeID) takes
// every refusal as fenced.
func (p *Producer) bumpEpoch(ctx context.Context, seen uint32) error {
	p.initMu.Lock()
	defer p.initMu.Unlock()
	p.idMu.Lock()
	pid, epoch, ident := p.pid, p.epoch, p.ident
	p.idMu.Unlock()
	if ident != seen {
		return nil
	}
	newID, newEpoch, err := p.c.InitProducerID(ctx, pid, epoch)
	var cerr *Error
	refused := errors.As(err, &cerr) && (cerr.Code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH ||
		cerr.Code == replicadv1.ErrorCode_ERROR_CODE_INVALID_REQUEST)
	if refused {
		ownLost := p.bumpInDoubt || strings.Contains(cerr.Message, lostBumpNote)
		fenced := cerr.Code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH && !ownLost
		if p.cfg.ResumeID != 0 || fenced {
			p.setFatal(fmt.Errorf("%w: bumping epoch %d of producer %d: %v", ErrProducerFenced, epoch, pid, err))
			return p.fatalErr()
		}
		// Its own bump landed unanswered, or INVALID_REQUEST: the epoch
		// is at its end. Either way, a new ID.
		newID, newEpoch, err = p.c.InitProducerID(ctx, 0, 0)
	}
	if err != nil {
		if !refused {
			// No answer, or not one that says what happened: the bump
			// may have landed.
			p.bumpInDoubt = true
		}
		return err
	}
	p.bumpInDoubt = false
	p.idMu.Lock()
	p.pid, p.epoch = newID, newEpoch
	p.ident++
	p.idMu.Unlock()
	return nil
}

func (p *Producer) setFatal(err error) {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	if p.fatal == nil {
		p.fatal = err
	}
}

func (p *Producer) fatalErr() error {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.fatal
}

// identity is the producer ID, epoch and identity count, read together.
func (p *Producer) identity() (int64, int16, uint32) {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.pid, p.epoch, p.ident
}

func (p *Producer) currentIdent() uint32 {
	p.idMu.Lock()
	defer p.idMu.Unlock()
	return p.ident
}

// Produce hands r to the producer and returns; cb (may be nil) gets the
// outcome. It blocks only while MaxBufferedRecords records are unanswered,
// or to learn the topic's partition count for a record it partitions, up
// to ctx. The producer owns r until cb is called.
func (p *Producer) Produce(ctx context.Context, r *Record, cb ProduceCallback) {
	q, err := p.route(ctx, r)
	if err == nil {
		err = p.reserve(ctx, 1)
	}
	if err != nil {
		if cb != nil {
			cb(r, err)
		}
		return
	}
	q.add(r, cb)
}

// route picks r's partition and returns its queue.
func (p *Producer) route(ctx context.Context, r *Record) (*partition, error) {
	if err := p.fatalErr(); err != nil {
		return nil, err
	}
	if r.Topic == "" {
		return nil, errors.New("client: record without a Topic")
	}
	if !r.ManualPartition {
		n, err := p.c.Partitions(ctx, r.Topic)
		if err != nil {
			return nil, fmt.Errorf("partition a record of %s: %w", r.Topic, err)
		}
		if r.Key != nil {
			r.Partition = KeyPartition(r.Key, n)
		} else {
			r.Partition = p.stickyPartition(r.Topic, n)
		}
	} else if r.Partition < 0 {
		return nil, fmt.Errorf("client: partition %d of %s", r.Partition, r.Topic)
	}
	return p.partition(TopicPartition{r.Topic, r.Partition})
}

// stickyPartition is where keyless records of topic go: one partition
// until its batch closes, then the next (KIP-480's sticky partitioner,
// moving round-robin).
func (p *Producer) stickyPartition(topic string, n int32) int32 {
	p.stickyMu.Lock()
	defer p.stickyMu.Unlock()
	s, ok := p.sticky[topic]
	if !ok || s >= n {
		s = rand.Int32N(n)
		p.sticky[topic] = s
	}
	return s
}

// batchClosed moves topic's sticky partition on when its batch closed.
func (p *Producer) batchClosed(k TopicPartition) {
	p.stickyMu.Lock()
	defer p.stickyMu.Unlock()
	if s, ok := p.sticky[k.Topic]; ok && s == k.Partition {
		n := p.c.cachedPartitions(k.Topic)
		if n > 0 {
			p.sticky[k.Topic] = (s + 1) % n
		}
	}
}

func (p *Producer) partition(k TopicPartition) (*partition, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, ErrClosed
	}
	q, ok := p.parts[k]
	if !ok {
		q = newPartition(p, k)
		p.parts[k] = q
	}
	return q, nil
}

func (p *Producer) reserve(ctx context.Context, n int) error {
	for {
		p.bufMu.Lock()
		if p.buffered == 0 || p.buffered+n <= p.cfg.MaxBufferedRecords {
			p.buffered += n
			p.bufMu.Unlock()
			return nil
		}
		ch := p.changed
		p.bufMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-p.ctx.Done():
			return ErrClosed
		}
	}
}

func (p *Producer) release(n int) {
	p.bufMu.Lock()
	p.buffered -= n
	close(p.changed)
	p.changed = make(chan struct{})
	p.bufMu.Unlock()
}

// ProduceSync produces records and waits for every outcome; it returns
// the first error. Their batches are sent without waiting for Linger.
func (p *Producer) ProduceSync(ctx context.Context, records ...*Record) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	touched := map[*partition]bool{}
	for _, r := range records {
		wg.Add(1)
		q, err := p.route(ctx, r)
		if err == nil {
			err = p.reserve(ctx, 1)
		}
		if err != nil {
			wg.Done()
			mu.Lock()
			first = cmpErr(first, err)
			mu.Unlock()
			continue
		}
		touched[q] = true
		q.add(r, func(_ *Record, err error) {
			if err != nil {
				mu.Lock()
				first = cmpErr(first, err)
				mu.Unlock()
			}
			wg.Done()
		})
	}
	for q := range touched {
		q.flushNow()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return first
}

func cmpErr(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// ProduceBatch sends records as one batch of its own to partition of
// topic, after the partition's earlier records, and waits for its outcome
// (perf produce sends so: one request of --batch records).
func (p *Producer) ProduceBatch(ctx context.Context, topic string, partition int32, records []*Record) (BatchResult, error) {
	res := BatchResult{TopicPartition: TopicPartition{topic, partition}, BaseOffset: -1, Records: len(records)}
	if len(records) == 0 {
		return res, nil
	}
	q, err := p.partition(res.TopicPartition)
	if err == nil {
		err = p.fatalErr()
	}
	if err == nil {
		err = p.reserve(ctx, len(records))
	}
	if err != nil {
		res.Err = err
		return res, err
	}
	done := make(chan BatchResult, 1)
	q.addBatch(records, func(r BatchResult) { done <- r })
	select {
	case r := <-done:
		return r, r.Err
	case <-ctx.Done():
		res.Err = ctx.Err()
		return res, ctx.Err()
	}
}

// Flush sends every batch without waiting for Linger and waits until every
// record produced so far has its outcome (or ctx ends).
func (p *Producer) Flush(ctx context.Context) error {
	p.mu.Lock()
	parts := make([]*partition, 0, len(p.parts))
	for _, q := range p.parts {
		parts = append(parts, q)
	}
	p.mu.Unlock()
	for _, q := range parts {
		q.flushNow()
	}
	for {
		p.bufMu.Lock()
		n, ch := p.buffered, p.changed
		p.bufMu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close flushes (for up to DeliveryTimeout), then fails what is left with
// ErrClosed and stops the Producer. The Client stays open.
func (p *Producer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.DeliveryTimeout)
	defer cancel()
	err := p.Flush(ctx)
	p.mu.Lock()
	p.closed = true
	parts := make([]*partition, 0, len(p.parts))
	for _, q := range p.parts {
		parts = append(parts, q)
	}
	p.mu.Unlock()
	p.cancel()
	for _, q := range parts {
		q.shutdown()
	}
	p.wg.Wait() // the streams' receivers and the unary calls
	return err
}

// batch is one partition's records sent together.
type batch struct {
	id      uint64 // order within the partition
	records []*Record
	cbs     []ProduceCallback
	done    func(BatchResult) // ProduceBatch's waiter
	wire    []*replicadv1.Record
	bytes   int
	ready   bool // linger over or flush asked: send when the partition may
	created time.Time

	// Idempotence: the sequence of the first record, under epoch.
	seqSet bool
	pid    int64
	epoch  int16
	seq    int32
	ident  uint32 // the producer's identity it was numbered under

	attempts int
	// renumber: the partition answered UNKNOWN_PRODUCER_ID (it holds no
	// state of the producer, so no attempt of this batch is there): it
	// takes a sequence under the new epoch instead of its old one.
	renumber bool
	hw       int64 // from the answer that succeeded
	// ambiguous: an attempt ended without a known outcome, so the batch
	// may be in the log.
	ambiguous bool
	oooCount  int
	lastErr   error

	// While in flight.
	lane    *lane
	sentGen uint64
	sentAt  time.Time
}

func (b *batch) fits(r *Record, cfg *ProducerConfig) bool {
	return len(b.records) == 0 || (len(b.records) < cfg.BatchRecords && b.bytes+r.size() <= cfg.BatchBytes)
}

func (b *batch) full(cfg *ProducerConfig) bool { return len(b.records) >= cfg.BatchRecords }

// ProduceRequest is the request carrying b.
func (q *partition) request(b *batch) *replicadv1.ProduceRequest {
	req := &replicadv1.ProduceRequest{Topic: q.tp.Topic, Partition: q.tp.Partition, Acks: q.p.cfg.Acks.wire(),
		TimeoutMs: int32(q.p.cfg.AckTimeout.Milliseconds()), Records: b.wire}
	if b.seqSet {
		req.ProducerId, req.ProducerEpoch, req.BaseSequence = b.pid, int32(b.epoch), b.seq
	}
	return req
}

// partition is one partition's queue and its sending state. No goroutine
// of its own sends: whoever finds work to do (a caller adding a batch, a
// stream's receiver taking an answer, a timer) takes sendMu and does it,
// so a synchronous producer's batch leaves on the caller's goroutine and
// its answer is handled on the receiver's, without a hop in between.
type partition struct {
	p  *Producer
	tp TopicPartition

	mu     sync.Mutex
	cur    *batch   // filling
	queue  []*batch // closed, to send in order (retries first)
	nextID uint64
	linger *time.Timer

	// sendMu guards the sending state below. dirty: work arrived while
	// another held it, which does it before it leaves (kick).
	sendMu sync.Mutex
	dirty  atomic.Bool
	// timer fires at nextWake: an answer overdue, a backoff over, a
	// queued batch expiring.
	timer *time.Timer

	inflight []*batch // in send order
	lanes    []*lane
	leader   Leader
	// Sequences: the next one to give, and the epoch they count under.
	nextSeq  int32
	seqIdent uint32
	// down: shut down (Close); a record added after it fails at once
	// with ErrClosed rather than wait in a batch nobody sends.
	down   bool
	seqSet bool
	// gen counts the retries and failures that leave a gap in the
	// sequences in flight: an OUT_OF_ORDER answer to a batch sent before
	// the latest is expected.
	gen          uint64
	retrying     bool // a batch is queued for retry: drain, look up, resend
	backoff      time.Duration
	backoffUntil time.Time
}

type result struct {
	lane *lane
	b    *batch // unary lanes: the batch answered
	resp *replicadv1.ProduceResponse
	err  error
}

func newPartition(p *Producer, k TopicPartition) *partition {
	q := &partition{p: p, tp: k}
	q.timer = time.AfterFunc(time.Hour, func() { q.locked(q.checkTimeouts) })
	q.timer.Stop()
	return q
}

// kick does the partition's pending work unless another goroutine is
// doing it, which then does it too (dirty) before it lets go.
func (q *partition) kick() {
	q.dirty.Store(true)
	for q.dirty.Load() && q.sendMu.TryLock() {
		q.dirty.Store(false)
		q.step()
		q.arm()
		q.sendMu.Unlock()
	}
}

// locked runs f with the sending state, then what f made possible.
func (q *partition) locked(f func()) {
	q.sendMu.Lock()
	f()
	q.step()
	q.arm()
	q.sendMu.Unlock()
	if q.dirty.Load() {
		q.kick()
	}
}

// arm sets the timer to the next moment something is due.
func (q *partition) arm() {
	if q.p.ctx.Err() != nil {
		q.timer.Stop() // closed: nothing is due any more
		return
	}
	if d, ok := q.nextWake(); ok {
		q.timer.Reset(d)
	} else {
		q.timer.Stop()
	}
}

// onResult takes an answer (or a broken stream) from a lane.
func (q *partition) onResult(r result) {
	q.locked(func() { q.handle(r) })
}

// add appends r to the filling batch.
func (q *partition) add(r *Record, cb ProduceCallback) {
	cfg := &q.p.cfg
	q.mu.Lock()
	if q.down {
		q.mu.Unlock()
		q.p.release(1)
		if cb != nil {
			cb(r, ErrClosed)
		}
		return
	}
	closed := false
	if q.cur != nil && !q.cur.fits(r, cfg) {
		q.closeCurLocked()
		closed = true
	}
	if q.cur == nil {
		q.cur = q.newBatchLocked()
		if cfg.Linger > 0 {
			b := q.cur
			q.linger = time.AfterFunc(cfg.Linger, func() {
				q.mu.Lock()
				b.ready = true
				q.mu.Unlock()
				q.kick()
			})
		} else {
			q.cur.ready = true
		}
	}
	b := q.cur
	b.records = append(b.records, r)
	b.cbs = append(b.cbs, cb)
	b.wire = append(b.wire, r.wire())
	b.bytes += r.size()
	if b.full(cfg) {
		q.closeCurLocked()
		closed = true
	}
	wake := closed || b.ready
	q.mu.Unlock()
	if closed {
		q.p.batchClosed(q.tp)
	}
	if wake {
		q.kick()
	}
}

// addBatch queues records as a batch of their own.
func (q *partition) addBatch(records []*Record, done func(BatchResult)) {
	q.mu.Lock()
	if q.down {
		q.mu.Unlock()
		q.p.release(len(records))
		done(BatchResult{TopicPartition: q.tp, BaseOffset: -1, Records: len(records), HighWatermark: -1, Err: ErrClosed})
		return
	}
	if q.cur != nil {
		q.closeCurLocked()
	}
	b := q.newBatchLocked()
	b.records = records
	b.cbs = make([]ProduceCallback, len(records))
	b.done = done
	for _, r := range records {
		r.Topic, r.Partition = q.tp.Topic, q.tp.Partition
		b.wire = append(b.wire, r.wire())
		b.bytes += r.size()
	}
	b.ready = true
	q.queue = append(q.queue, b)
	q.mu.Unlock()
	q.kick()
}

func (q *partition) newBatchLocked() *batch {
	q.nextID++
	return &batch{id: q.nextID, created: time.Now(), bytes: batchHeaderSize}
}

func (q *partition) closeCurLocked() {
	if q.linger != nil {
		q.linger.Stop()
		q.linger = nil
	}
	q.cur.ready = true
	q.queue = append(q.queue, q.cur)
	q.cur = nil
}

// flushNow makes the filling batch sendable at once.
func (q *partition) flushNow() {
	q.mu.Lock()
	if q.cur != nil {
		q.cur.ready = true
	}
	q.mu.Unlock()
	q.kick()
}

func (q *partition) maxInFlight() int { return q.p.cfg.MaxInFlight * q.p.cfg.Lanes }

// nextWake is how long until something is due without news: a backoff
// ending, an answer overdue, a queued batch expiring; false: nothing is.
func (q *partition) nextWake() (time.Duration, bool) {
	next, ok := time.Duration(0), false
	at := func(d time.Duration) {
		if !ok || d < next {
			next, ok = d, true
		}
	}
	now := time.Now()
	if q.retrying {
		at(q.backoffUntil.Sub(now))
	}
	if len(q.inflight) > 0 {
		at(q.inflight[0].sentAt.Add(q.answerWait()).Sub(now))
	}
	q.mu.Lock()
	if len(q.queue) > 0 {
		at(q.queue[0].created.Add(q.p.cfg.DeliveryTimeout).Sub(now))
	}
	q.mu.Unlock()
	return max(next, time.Millisecond), ok
}

// answerWait is how long an answer may take: the RPC bound plus the
// leader's wait for acks.
func (q *partition) answerWait() time.Duration {
	return q.p.c.cfg.RequestTimeout + max(q.p.cfg.AckTimeout, 0)
}

// step fails expired queued batches and sends what the in-flight limit,
// the retry state and the sequence numbering allow.
func (q *partition) step() {
	if q.p.ctx.Err() != nil {
		return
	}
	now := time.Now()
	for {
		q.mu.Lock()
		var b *batch
		if len(q.queue) > 0 && now.After(q.queue[0].created.Add(q.p.cfg.DeliveryTimeout)) {
			b = q.queue[0]
			q.queue = q.queue[1:]
		}
		q.mu.Unlock()
		if b == nil {
			break
		}
		err := fmt.Errorf("%w after %s", ErrDeliveryTimeout, q.p.cfg.DeliveryTimeout)
		if b.lastErr != nil {
			err = fmt.Errorf("%w after %s: %w", ErrDeliveryTimeout, q.p.cfg.DeliveryTimeout, b.lastErr)
		}
		q.giveUp(b, err)
	}
	if q.retrying {
		if len(q.inflight) > 0 || now.Before(q.backoffUntil) {
			return
		}
		q.retrying = false
	}
	for len(q.inflight) < q.maxInFlight() {
		q.mu.Lock()
		if len(q.queue) == 0 && q.cur != nil && q.cur.ready {
			q.closeCurLocked()
			q.mu.Unlock()
			q.p.batchClosed(q.tp)
			q.mu.Lock()
		}
		var b *batch
		if len(q.queue) > 0 {
			b = q.queue[0]
		}
		q.mu.Unlock()
		if b == nil {
			return
		}
		if err := q.p.fatalErr(); err != nil {
			q.failAll(err)
			return
		}
		if q.p.idem && !q.number(b) {
			return
		}
		if len(q.inflight) == 0 {
			l, err := q.p.c.leader(q.p.ctx, q.tp)
			if err != nil {
				var lerr *LookupError
				if errors.As(err, &lerr) && !lerr.Retry || q.p.ctx.Err() != nil {
					q.failAll(err)
					return
				}
				q.stall(b, err)
				return
			}
			if l.Addr != q.leader.Addr {
				q.closeLanes()
			}
			q.leader = l
		}
		ln, err := q.lane()
		if err != nil {
			// The leader cannot be reached (it died, and the lookup still
			// names it): look it up again at the next attempt.
			q.forgetLeader(true)
			q.leader = Leader{}
			q.stall(b, err)
			return
		}
		if ln == nil {
			return
		}
		q.mu.Lock()
		q.queue = q.queue[1:]
		q.mu.Unlock()
		b.attempts++
		b.lane, b.sentGen, b.sentAt = ln, q.gen, time.Now()
		q.inflight = append(q.inflight, b)
		if err := ln.send(q, b); err != nil {
			q.laneBroken(ln, err)
			return
		}
	}
}

// number gives b its sequence under the current epoch; false: not now
// (the epoch changed and batches of the old one are still in flight, or
// no producer ID could be had: b waits for a retry).
func (q *partition) number(b *batch) bool {
	_, _, err := q.p.ensureInit(q.p.ctx)
	pid, epoch, ident := q.p.identity()
	if err != nil {
		if q.p.fatalErr() != nil {
			q.failAll(err)
			return false
		}
		q.stall(b, err)
		return false
	}
	if b.seqSet && b.ident == ident {
		return true
	}
	if b.seqSet && b.attempts > 0 && !b.renumber {
		// Sent before under its epoch and sequence, and maybe in the log:
		// it is sent again exactly so (the leader answers a duplicate if
		// it holds it), never renumbered. An epoch bumped for another
		// partition's sake must not make it a new batch: the chaos suite
		// found it appended twice that way.
		return true
	}
	if !q.seqSet || q.seqIdent != ident {
		if len(q.inflight) > 0 {
			return false // renumber once the old epoch's batches are answered
		}
		q.nextSeq, q.seqIdent, q.seqSet = 0, ident, true
		q.mu.Lock()
		for _, x := range q.queue {
			x.seqSet, x.renumber = false, false
		}
		q.mu.Unlock()
	}
	b.pid, b.epoch, b.ident, b.seq, b.seqSet = pid, epoch, ident, q.nextSeq, true
	q.nextSeq = record.IncrementSequence(q.nextSeq, int32(len(b.records)))
	return true
}

// lane returns a lane that may take another batch, opening one if none
// is open; nil when all are full.
func (q *partition) lane() (*lane, error) {
	var best *lane
	for _, l := range q.lanes {
		if l.n < q.p.cfg.MaxInFlight && (best == nil || l.n < best.n) {
			best = l
		}
	}
	if best != nil && (best.n == 0 || len(q.lanes) >= q.p.cfg.Lanes) {
		return best, nil
	}
	if len(q.lanes) >= q.p.cfg.Lanes {
		return nil, nil
	}
	l, err := openLane(q, q.leader.Addr)
	if err != nil {
		return nil, err
	}
	q.lanes = append(q.lanes, l)
	return l, nil
}

func (q *partition) closeLanes() {
	for _, l := range q.lanes {
		l.close()
	}
	q.lanes = nil
}

// handle takes one answer or broken lane.
func (q *partition) handle(r result) {
	if q.p.ctx.Err() != nil {
		return // closed: shutdown failed what was in flight
	}
	if r.lane.dead && r.b == nil {
		return // a stream given up: its batches were requeued
	}
	if r.err != nil && !r.lane.unary {
		q.laneBroken(r.lane, r.err)
		return
	}
	b := r.b
	if b == nil {
		for _, x := range q.inflight {
			if x.lane == r.lane {
				b = x
				break
			}
		}
	}
	if b == nil || !q.removeInflight(b) {
		return
	}
	r.lane.n--
	if r.err != nil {
		q.callFailed(b, r.err)
		return
	}
	q.answered(b, r.resp)
}

func (q *partition) removeInflight(b *batch) bool {
	for i, x := range q.inflight {
		if x == b {
			q.inflight = append(q.inflight[:i], q.inflight[i+1:]...)
			return true
		}
	}
	return false
}

// callFailed: a unary call for b ended with err.
func (q *partition) callFailed(b *batch, err error) {
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled, codes.Internal, codes.Unknown:
		// Internal: a panic in the leader's produce path, maybe after
		// the append.
		b.ambiguous = true
		if q.p.c.source == nil || q.p.ctx.Err() != nil {
			q.giveUp(b, err)
			return
		}
		q.forgetLeader(true)
		q.retryLater(b, err)
	default:
		q.failed(b, err)
	}
}

// laneBroken: a stream ended (or an answer is overdue): every batch in
// flight on it has an unknown outcome and is sent again.
func (q *partition) laneBroken(l *lane, err error) {
	l.close()
	for i, x := range q.lanes {
		if x == l {
			q.lanes = append(q.lanes[:i], q.lanes[i+1:]...)
			break
		}
	}
	var again []*batch
	rest := q.inflight[:0]
	for _, b := range q.inflight {
		if b.lane == l {
			again = append(again, b)
		} else {
			rest = append(rest, b)
		}
	}
	q.inflight = rest
	if q.p.c.source == nil || q.p.ctx.Err() != nil {
		for _, b := range again {
			b.ambiguous = true
			q.giveUp(b, err)
		}
		return
	}
	q.forgetLeader(true)
	for _, b := range again {
		b.ambiguous = true
		q.retryLater(b, err)
	}
}

func (q *partition) forgetLeader(reset bool) {
	if q.leader.Addr == "" {
		return
	}
	q.p.c.forget(q.tp, q.leader.Addr)
	if reset {
		if conn, err := q.p.c.conn(q.leader.Addr); err == nil {
			conn.ResetConnectBackoff()
		}
	}
}

// checkTimeouts breaks the lanes whose oldest answer is overdue.
func (q *partition) checkTimeouts() {
	now := time.Now()
	for _, b := range q.inflight {
		if now.Sub(b.sentAt) >= q.answerWait() && b.lane != nil && !b.lane.unary {
			q.laneBroken(b.lane, status.Errorf(codes.DeadlineExceeded, "no answer from %s within %s", b.lane.addr, q.answerWait()))
			q.checkTimeouts()
			return
		}
	}
}

// answered handles the leader's answer to b.
func (q *partition) answered(b *batch, resp *replicadv1.ProduceResponse) {
	if sc := codes.Code(resp.GetStatusCode()); sc != codes.OK {
		q.callFailed(b, status.Error(sc, resp.GetErrorMessage()))
		return
	}
	code := resp.GetErrorCode()
	cerr := &Error{Code: code, Message: resp.GetErrorMessage(), Op: "produce " + q.tp.String(), Partition: q.tp}
	direct := q.p.c.source == nil
	switch {
	case code == replicadv1.ErrorCode_ERROR_CODE_NONE:
		q.succeeded(b, resp)
	case code == replicadv1.ErrorCode_ERROR_CODE_INVALID_PRODUCER_EPOCH && q.p.idem:
		q.p.setFatal(fmt.Errorf("%w: %s", ErrProducerFenced, cerr))
		q.finish(b, -1, false, q.p.fatalErr())
		q.failAll(q.p.fatalErr())
	case code == replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_PRODUCER_ID && q.p.idem:
		if err := q.p.bumpEpoch(q.p.ctx, b.ident); err != nil && q.p.fatalErr() != nil {
			q.finish(b, -1, false, q.p.fatalErr())
			q.failAll(q.p.fatalErr())
			return
		}
		// This partition forgot the producer: b and the batches after it
		// under the same epoch start again under the new one (KIP-360's
		// window: an attempt of theirs deleted with the state is appended
		// again).
		q.markRenumber(b)
		q.retryLater(b, cerr)
	case code == replicadv1.ErrorCode_ERROR_CODE_OUT_OF_ORDER_SEQUENCE_NUMBER && q.p.idem:
		if b.sentGen < q.gen {
			// An earlier batch is being retried or failed: expected. The
			// leader's sequence ends before b, so b is not in the log: if
			// the epoch moved on meanwhile, b takes a sequence under it.
			if b.ident != q.p.currentIdent() {
				b.renumber = true
			}
			q.retryLater(b, cerr)
			return
		}
		b.oooCount++
		if b.oooCount < 3 && !direct {
			q.forgetLeader(false)
			q.retryLater(b, cerr)
			return
		}
		// The leader's view of the sequences differs from ours and retries
		// did not mend it: fail the batch and start over under a new epoch.
		b.ambiguous = true
		q.giveUp(b, cerr)
	case leaderMoved(code):
		if direct {
			q.finish(b, resp.GetBaseOffset(), false, cerr)
			return
		}
		q.forgetLeader(false)
		q.retryLater(b, cerr)
	case q.p.idem && (code == replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT ||
		code == replicadv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS_AFTER_APPEND ||
		code == replicadv1.ErrorCode_ERROR_CODE_STORAGE_ERROR ||
		code == replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_SERVER_ERROR):
		// Appended on the leader (or maybe: a failed fsync after the
		// write, an internal error), not known to be replicated: send
		// again, the leader (or the one after it) answers a duplicate.
		// Taken as nothing appended, the batch's sequence numbers would
		// pass to the next batch, which a leader holding this one would
		// answer as its duplicate: a record acknowledged and not stored.
		// Kafka retries its storage error too.
		b.ambiguous = true
		q.forgetLeader(false)
		q.retryLater(b, cerr)
	default:
		q.failed(b, cerr)
	}
}

func (q *partition) succeeded(b *batch, resp *replicadv1.ProduceResponse) {
	q.backoff = 0
	base := resp.GetBaseOffset()
	for i, r := range b.records {
		if base >= 0 {
			r.Offset = base + int64(i)
		} else {
			r.Offset = -1
		}
		if b.seqSet {
			r.ProducerID, r.ProducerEpoch = b.pid, b.epoch
			r.Sequence = record.IncrementSequence(b.seq, int32(i))
		}
	}
	b.hw = resp.GetHighWatermark()
	q.finish(b, base, resp.GetDuplicate(), nil)
}

// markRenumber marks b and the partition's later batches of b's epoch to
// take new sequences under the next epoch.
func (q *partition) markRenumber(b *batch) {
	mark := func(x *batch) {
		if x.seqSet && x.ident == b.ident && x.id >= b.id {
			x.renumber = true
		}
	}
	mark(b)
	for _, x := range q.inflight {
		mark(x)
	}
	q.mu.Lock()
	for _, x := range q.queue {
		mark(x)
	}
	q.mu.Unlock()
}

// retryLater queues b to be sent again after a backoff, in order; past
// its attempts it fails.
func (q *partition) retryLater(b *batch, err error) {
	b.lastErr = err
	if b.attempts >= q.p.c.cfg.MaxAttempts {
		q.giveUp(b, err)
		return
	}
	q.gen++
	q.mu.Lock()
	i := 0
	for i < len(q.queue) && q.queue[i].id < b.id {
		i++
	}
	q.queue = append(q.queue, nil)
	copy(q.queue[i+1:], q.queue[i:])
	q.queue[i] = b
	q.mu.Unlock()
	q.startBackoff()
}

// stall: b, the queue's head, could not be sent (no leader known, no
// producer ID, no connection): it waits a backoff, or fails past its
// attempts.
func (q *partition) stall(b *batch, err error) {
	b.lastErr = err
	b.attempts++
	if b.attempts >= q.p.c.cfg.MaxAttempts {
		q.mu.Lock()
		if len(q.queue) > 0 && q.queue[0] == b {
			q.queue = q.queue[1:]
		}
		q.mu.Unlock()
		q.giveUp(b, err)
		return
	}
	q.startBackoff()
}

func (q *partition) startBackoff() {
	if !q.retrying {
		if q.backoff == 0 {
			q.backoff = q.p.c.cfg.RetryBackoff
		} else {
			q.backoff = min(2*q.backoff, q.p.c.cfg.RetryBackoffMax)
		}
		q.backoffUntil = time.Now().Add(q.backoff)
		q.retrying = true
	}
}

// failed: the leader refused b on this attempt and appended nothing.
func (q *partition) failed(b *batch, err error) {
	if b.ambiguous {
		q.giveUp(b, err) // an earlier attempt may have appended it
		return
	}
	q.drop(b, err)
}

// drop fails b, of which nothing is in the log. Later batches move down
// into its sequence numbers (those in flight come back OUT_OF_ORDER and
// are sent again), as Kafka's producer adjusts them.
func (q *partition) drop(b *batch, err error) {
	if q.p.idem && b.seqSet && q.seqSet && b.ident == q.seqIdent {
		n := int32(len(b.records))
		adjust := func(x *batch) {
			if x.seqSet && x.ident == b.ident && x.id > b.id {
				x.seq -= n
			}
		}
		for _, x := range q.inflight {
			adjust(x)
		}
		q.mu.Lock()
		for _, x := range q.queue {
			adjust(x)
		}
		q.mu.Unlock()
		q.nextSeq -= n
		q.gen++
	}
	q.finish(b, -1, false, err)
}

// giveUp fails b, whose outcome may be unknown: its records may or may
// not be in the log, so the epoch is bumped and later batches number from
// 0 again rather than wait on a gap (or, under the old numbering, be taken
// for b's duplicates).
func (q *partition) giveUp(b *batch, err error) {
	if !(q.p.idem && b.seqSet && b.ambiguous) {
		q.drop(b, err)
		return
	}
	if q.p.ctx.Err() == nil {
		// On failure the next batch's numbering finds the epoch unchanged
		// and the partition's answers (UNKNOWN_PRODUCER_ID,
		// OUT_OF_ORDER) ask again.
		_ = q.p.bumpEpoch(q.p.ctx, b.ident)
	}
	q.gen++
	q.finish(b, -1, false, err)
}

func (q *partition) failAll(err error) {
	for _, b := range q.inflight {
		q.finish(b, -1, false, err)
	}
	q.inflight = nil
	q.closeLanes()
	q.mu.Lock()
	queue := q.queue
	q.queue = nil
	if q.cur != nil {
		queue = append(queue, q.cur)
		q.cur = nil
		if q.linger != nil {
			q.linger.Stop()
			q.linger = nil
		}
	}
	q.mu.Unlock()
	for _, b := range queue {
		q.finish(b, -1, false, err)
	}
}

func (q *partition) shutdown() {
	q.mu.Lock()
	q.down = true
	q.mu.Unlock()
	q.sendMu.Lock()
	defer q.sendMu.Unlock()
	q.timer.Stop()
	q.failAll(ErrClosed)
}

// finish reports b's outcome.
func (q *partition) finish(b *batch, base int64, dup bool, err error) {
	res := BatchResult{TopicPartition: q.tp, BaseOffset: base, Records: len(b.records), Duplicate: dup, Attempts: b.attempts,
		HighWatermark: -1, Err: err}
	if err == nil {
		res.HighWatermark = b.hw
	}
	if q.p.cfg.OnBatch != nil {
		q.p.cfg.OnBatch(res)
	}
	if b.done != nil {
		b.done(res)
	}
	for i, cb := range b.cbs {
		if cb != nil {
			cb(b.records[i], err)
		}
	}
	q.p.release(len(b.records))
}
