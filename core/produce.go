package core

import (
	"context"
	"strconv"
	"time"

	"github.com/replicad/replicad/core/record"
)

// DefaultProduceTimeout bounds an acks=-1 produce that gave no timeout.
const DefaultProduceTimeout = 30 * time.Second

// DefaultConsumeMaxBytes bounds a consume that gave no max bytes.
const DefaultConsumeMaxBytes = 1 << 20

// Server-side caps on what a request can ask for (issue 12): a larger ask is
// served as if it asked for the cap, as Kafka does with fetch.max.bytes.
const (
	// MaxConsumeBytes caps a consume's max bytes (Kafka's fetch.max.bytes
	// default): memory follows the cap, not what the client asks.
	MaxConsumeBytes = 50 << 20
	// MaxConsumeWait caps a consume's and a follower fetch's max wait
	// (a long poll parks a goroutine and its request).
	MaxConsumeWait = 30 * time.Second
	// MaxProduceTimeout caps an acks=-1 produce's wait for the ISR: the
	// delayed produce holds its batch until then.
	MaxProduceTimeout = 5 * time.Minute
)

// Produce appends records to a partition this broker leads (Kafka's
// appendRecords). acks=0 and acks=1 answer after the leader's append; acks=-1
// waits, as a delayed produce, until the HW passes the batch.
func (rm *ReplicaManager) Produce(ctx context.Context, req ProduceRequest) ProduceResult {
	fail := func(code ErrorCode, msg string) ProduceResult {
		return ProduceResult{Error: code, BaseOffset: -1, HighWatermark: -1, Message: msg}
	}
	if rm.shuttingDown.Load() {
		return fail(ErrNotLeaderOrFollower, "broker is shutting down")
	}
	p, code := rm.onlinePartition(req.TopicPartition)
	if code != ErrNone {
		return fail(code, "")
	}
	batch := req.Batch
	if batch == nil {
		// A zero producer ID is a plain produce (issued IDs start at 1).
		prod := req.Producer
		if prod.ID <= 0 {
			prod = record.NoProducer
		}
		batch = record.BuildProducer(req.Records, rm.cfg.Clock.Now().UnixMilli(), prod)
	}
	if msg := checkProducer(req, batch); msg != "" {
		return fail(ErrInvalidRequest, msg)
	}
	if len(batch) > rm.MaxBatchBytes() {
		return fail(ErrMessageTooLarge, "batch is larger than the broker's max batch bytes")
	}
	info, epoch, code, err := p.appendRecordsToLeader(batch, req.Acks)
	if err != nil {
		// A storage failure was reported by the log itself (its dir goes
		// offline); the client hears STORAGE_ERROR either way.
		return fail(code, err.Error())
	}
	if code != ErrNone {
		return fail(code, "")
	}
	// A duplicate waits for the HW to pass the original batch, which may
	// not be committed yet, as its first append would have: epoch is the
	// original batch's, so the same fencing applies.
	res := ProduceResult{BaseOffset: info.FirstOffset, Duplicate: info.Duplicate}
	if req.Acks == AcksAll {
		timeout := req.Timeout
		if timeout <= 0 {
			timeout = DefaultProduceTimeout
		}
		timeout = min(timeout, MaxProduceTimeout)
		res.Error = rm.waitForHighWatermark(ctx, p, info.FirstOffset, info.LastOffset+1, epoch, timeout)
	}
	if l := p.Log(); l != nil {
		res.HighWatermark = l.HighWatermark()
	}
	return res
}

// checkProducer says what is wrong with a produce's producer fields, ""
// when nothing: an idempotent producer's ID is positive (IDs are issued
// from 1), its epoch and base sequence not negative, and a pre-built batch
// carries the request's producer.
func checkProducer(req ProduceRequest, batch record.Batch) string {
	p := batch.Producer()
	switch {
	case !batch.HasProducer():
		if req.Producer.ID > 0 {
			return "batch: a plain (v0) batch, but the request names producer_id " + strconv.FormatInt(req.Producer.ID, 10)
		}
		return ""
	case p.ID <= 0:
		return "producer_id: must be positive, got " + strconv.FormatInt(p.ID, 10)
	case p.Epoch < 0:
		return "producer_epoch: must not be negative, got " + strconv.Itoa(int(p.Epoch))
	case p.BaseSequence < 0:
		return "base_sequence: must not be negative, got " + strconv.Itoa(int(p.BaseSequence))
	case req.Batch != nil && req.Producer.ID > 0 && req.Producer != p:
		return "batch: its producer fields differ from the request's producer"
	}
	return ""
}

// waitForHighWatermark is a delayed produce: it completes when the HW reaches
// requiredOffset, with NOT_LEADER_OR_FOLLOWER when leadership is lost, and
// with REQUEST_TIMED_OUT after timeout.
func (rm *ReplicaManager) waitForHighWatermark(ctx context.Context, p *Partition, baseOffset, requiredOffset int64, appendEpoch int32, timeout time.Duration) ErrorCode {
	expired := make(chan struct{})
	t := rm.cfg.Clock.AfterFunc(timeout, func() { close(expired) })
	defer t.Stop()
	for {
		// Take the wake-up channel before checking, so a change between the
		// check and the wait is not missed.
		changed := p.changed.wait()
		if done, code := p.checkEnoughReplicasReachOffset(baseOffset, requiredOffset, appendEpoch); done {
			return code
		}
		select {
		case <-changed:
		case <-expired:
			return ErrRequestTimedOut
		case <-ctx.Done():
			return ErrRequestTimedOut
		case <-rm.stopCh:
			return ErrNotLeaderOrFollower
		}
	}
}

// Consume reads committed records (below the HW) from a partition this broker
// leads. It waits up to MaxWait for MinBytes, woken as soon as the HW moves.
// Offset ConsumeLatest (-1) starts at the HW, ConsumeEarliest (-2) at the
// log start offset.
func (rm *ReplicaManager) Consume(ctx context.Context, req ConsumeRequest) ConsumeResult {
	p, code := rm.onlinePartition(req.TopicPartition)
	if code != ErrNone {
		return ConsumeResult{Error: code, HighWatermark: -1, LogStartOffset: -1, NextOffset: req.Offset}
	}
	if req.Offset < 0 {
		// -1 (latest) and -2 (earliest) are resolved once, at arrival: a
		// consumer from "latest" waits for what is committed after it.
		off, res, ok := p.resolveConsumeOffset(req.Offset)
		if !ok {
			return res
		}
		req.Offset = off
	}
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultConsumeMaxBytes
	}
	maxBytes = min(maxBytes, MaxConsumeBytes)
	var expired chan struct{}
	if req.MaxWait > 0 {
		expired = make(chan struct{})
		t := rm.cfg.Clock.AfterFunc(min(req.MaxWait, MaxConsumeWait), func() { close(expired) })
		defer t.Stop()
	}
	for {
		changed := p.changed.wait()
		res, n, err := p.readCommitted(req.Offset, maxBytes)
		if err != nil {
			rm.handleReadError(ctx, req.TopicPartition, err)
		}
		if res.Error != ErrNone || n >= req.MinBytes || expired == nil {
			return res
		}
		select {
		case <-changed:
		case <-expired:
			return res
		case <-ctx.Done():
			return res
		case <-rm.stopCh:
			return res
		}
	}
}
