package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/replicad/replicad/core/record"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Produce batching. A batch is sent when it holds --batch-records records,
// when the next record would take it past --batch-bytes, or --linger-ms after
// its first record (Kafka's linger.ms, so lines typed by hand go out at once).
const (
	defaultBatchRecords = 500
	defaultBatchBytes   = 1000000 // under the broker's default --max-batch-bytes (1048576)
	defaultLingerMs     = 50
	// recordOverhead bounds a record's encoding beyond its key and value:
	// length, timestamp and offset deltas, key and value lengths, header count.
	recordOverhead = 5 + 10 + 5 + 5 + 5 + 5
)

func produceCommand() *command {
	return &command{
		name:    "produce",
		summary: "append records to a partition's leader (--broker, or found via --bootstrap or --controller)",
		usage:   "--topic T --partition P [--acks all|1|0] [--timeout-ms N] [--key K] [--value V ...]",
		details: `Each --value is one record. Without --value, each stdin line is one record,
sent in batches (up to --batch-records records and --batch-bytes bytes, or
what arrived within --linger-ms). Prints the base offset of each batch. Exits 1 at
the first batch answered with an error code (NOT_LEADER_OR_FOLLOWER, ...).

With --bootstrap the partition's leader is found in a broker's Metadata
(any live broker listed, the controller may be down), with --controller
from the controller (describe-cluster), rather than --broker; a batch answered
NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH or
UNKNOWN_TOPIC_OR_PARTITION (a topic just created), or whose leader cannot be
reached, is sent again to the leader a fresh lookup names, with a backoff of
100ms doubling to 1s, for up to --timeout (and 20 attempts). Only the answer that ends the
retries is printed. A batch is sent at least once: one whose answer was lost
with its leader may be appended twice.`,
		example: "ctlclient produce --topic orders --partition 0 --value hello --value world\nseq 1 1000 | ctlclient produce --topic orders --partition 0 --acks 1\nseq 1 1000 | ctlclient --controller 127.0.0.1:9090,127.0.0.1:9190 produce --topic orders --partition 2\nctlclient --bootstrap 127.0.0.1:9091,127.0.0.1:9092 produce --topic orders --partition 1 --value x",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition")
			acksFlag := fs.String("acks", "all", "all (= -1: after the ISR has it), 1 (after the leader's append) or 0 (no wait)")
			timeoutMs := int32Var(fs, "timeout-ms", 30000, "how long the broker waits for the ISR with --acks all")
			key := fs.String("key", "", "key of every record (default: no key)")
			var values stringList
			fs.Var(&values, "value", "a record's value (repeatable); none: read stdin lines")
			batchRecords := fs.Int("batch-records", defaultBatchRecords, "most records in one request")
			batchBytes := fs.Int("batch-bytes", defaultBatchBytes, "most encoded bytes in one request")
			lingerMs := fs.Int("linger-ms", defaultLingerMs, "longest a stdin record waits for its batch to fill")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic", "partition"); err != nil {
					return err
				}
				acks, err := parseAcks(*acksFlag)
				if err != nil {
					return err
				}
				if *lingerMs < 0 {
					return usagef("--linger-ms must not be negative")
				}
				if *batchRecords < 1 || *batchBytes < record.HeaderSize+recordOverhead {
					return usagef("--batch-records must be >= 1 and --batch-bytes >= %d", record.HeaderSize+recordOverhead)
				}
				router, err := e.newLeaderRouter()
				if err != nil {
					return err
				}
				defer router.close()
				p := &producer{
					e: e, router: router,
					template: &replicadv1.ProduceRequest{Topic: *topic, Partition: *partition, Acks: acks, TimeoutMs: *timeoutMs},
					batch:    batch{maxRecords: *batchRecords, maxBytes: *batchBytes},
					linger:   time.Duration(*lingerMs) * time.Millisecond,
				}
				if setFlags(fs)["key"] {
					p.key = []byte(*key)
				}
				if len(values) > 0 {
					for _, v := range values {
						if err := p.add(ctx, []byte(v)); err != nil {
							return err
						}
					}
					return p.flush(ctx)
				}
				return p.fromLines(ctx, e.stdin)
			}
		},
	}
}

// batch accumulates records up to its limits.
type batch struct {
	maxRecords, maxBytes int
	records              []*replicadv1.Record
	bytes                int
}

func estimateSize(r *replicadv1.Record) int {
	return len(r.GetKey()) + len(r.GetValue()) + recordOverhead
}

// fits reports whether r can join without passing the limits; an empty batch takes anything.
func (b *batch) fits(r *replicadv1.Record) bool {
	return len(b.records) == 0 || (len(b.records) < b.maxRecords && b.bytes+estimateSize(r) <= b.maxBytes)
}

func (b *batch) add(r *replicadv1.Record) {
	if len(b.records) == 0 {
		b.bytes = record.HeaderSize
	}
	b.records = append(b.records, r)
	b.bytes += estimateSize(r)
}

func (b *batch) full() bool { return len(b.records) >= b.maxRecords }

func (b *batch) take() []*replicadv1.Record {
	r := b.records
	b.records, b.bytes = nil, 0
	return r
}

type producer struct {
	e        *env
	router   *leaderRouter
	template *replicadv1.ProduceRequest
	key      []byte
	batch    batch
	linger   time.Duration
}

func (p *producer) add(ctx context.Context, value []byte) error {
	r := &replicadv1.Record{Key: p.key, Value: value}
	if !p.batch.fits(r) {
		if err := p.flush(ctx); err != nil {
			return err
		}
	}
	p.batch.add(r)
	if p.batch.full() {
		return p.flush(ctx)
	}
	return nil
}

// flush sends the pending batch and prints its base offset.
func (p *producer) flush(ctx context.Context) error {
	records := p.batch.take()
	if len(records) == 0 {
		return nil
	}
	req := &replicadv1.ProduceRequest{
		Topic: p.template.Topic, Partition: p.template.Partition, Acks: p.template.Acks,
		TimeoutMs: p.template.TimeoutMs, Records: records,
	}
	var resp *replicadv1.ProduceResponse
	err := p.router.do(ctx, partitionKey{req.Topic, req.Partition}, func(ctx context.Context, c replicadv1.LogServiceClient) (replicadv1.ErrorCode, error) {
		rctx, cancel := p.e.rpcContextWithWait(ctx, time.Duration(req.TimeoutMs)*time.Millisecond)
		defer cancel()
		r, err := c.Produce(rctx, req)
		if err != nil {
			return 0, err
		}
		resp = r
		return r.GetErrorCode(), nil
	})
	if err != nil {
		return err
	}
	if p.e.jsonOutput() {
		err = p.e.printJSON(resp)
	} else {
		_, err = fmt.Fprintln(p.e.stdout, resp.GetBaseOffset())
	}
	if err != nil {
		return err
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		msg := fmt.Sprintf("produce %s-%d: %s", req.Topic, req.Partition, codeName(resp.GetErrorCode()))
		if resp.GetErrorMessage() != "" {
			msg += ": " + resp.GetErrorMessage()
		}
		return answerError{msg}
	}
	return nil
}

// fromLines sends one record per line of r, batching as lines arrive.
func (p *producer) fromLines(ctx context.Context, r io.Reader) error {
	lines := make(chan []byte, 1024)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), p.batch.maxBytes)
		for sc.Scan() {
			select {
			case lines <- bytes.Clone(sc.Bytes()):
			case <-done:
				return
			}
		}
		readErr <- sc.Err()
		close(lines)
	}()

	var lingerC <-chan time.Time
	var timer *time.Timer
	stopLinger := func() {
		if timer != nil {
			timer.Stop()
			timer, lingerC = nil, nil
		}
	}
	defer stopLinger()
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				if err := p.flush(ctx); err != nil {
					return err
				}
				if err := <-readErr; err != nil {
					if errors.Is(err, bufio.ErrTooLong) {
						return usagef("a stdin line is longer than --batch-bytes (%d)", p.batch.maxBytes)
					}
					return fmt.Errorf("read stdin: %w", err)
				}
				return nil
			}
			if err := p.add(ctx, line); err != nil {
				return err
			}
			switch {
			case len(p.batch.records) == 0:
				stopLinger()
			case timer == nil:
				timer = time.NewTimer(p.linger)
				lingerC = timer.C
			}
		case <-lingerC:
			timer, lingerC = nil, nil
			if err := p.flush(ctx); err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
