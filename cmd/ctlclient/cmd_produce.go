package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/client"
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
		usage:   "--topic T (--partition P | --key K) [--acks all|1|0] [--idempotence=false] [--timeout-ms N] [--header K=V ...] [--value V ...]",
		details: `Each --value is one record. Without --value, each stdin line is one record,
sent in batches (up to --batch-records records and --batch-bytes bytes, or
what arrived within --linger-ms), one at a time (--max-in-flight: up to 5,
pipelined in order). Prints the base offset of each batch. Exits 1 at
the first batch that fails (answered with an error code such as
NOT_ENOUGH_REPLICAS, or out of retries).

The partition is --partition; without it, --key's: Kafka's default
partitioner (murmur2 of the key modulo the topic's partition count), so a
key lands where a Kafka producer would put it. --key alone sets every
record's key.

Idempotent by default (as Kafka's producer since 3.0), with --acks all: the
producer takes a producer ID from the cluster and numbers its records, and a
batch retried after a timeout, a lost connection or a leader change is
appended once: the leader answers a batch it already holds with its original
offsets. Every record is appended exactly once, in order. --idempotence=false
sends plain batches (a batch whose answer was lost with its leader may be
appended twice), and so do --acks 1 and 0 unless --idempotence is given.
Where the cluster gives no producer ID (brokers that predate idempotent
produce, brokers without a controller to issue IDs, a principal not
allowed one) produce sends plain batches with a warning on stderr; with
--idempotence given explicitly that is an error.

With --bootstrap the partition's leader is found in a broker's Metadata
(any live broker listed, the controller may be down), with --controller
from the controller (describe-cluster), rather than --broker; a batch answered
NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH or
UNKNOWN_TOPIC_OR_PARTITION (a topic just created), or whose leader cannot be
reached, is sent again to the leader a fresh lookup names, with a backoff of
100ms doubling to 1s, for up to --timeout (and 20 attempts). Only the answer that ends the
retries is printed. With --broker, a batch is sent once.`,
		example: "ctlclient produce --topic orders --partition 0 --value hello --value world\nseq 1 1000 | ctlclient produce --topic orders --partition 0 --acks 1\nseq 1 1000 | ctlclient --controller 127.0.0.1:9090,127.0.0.1:9190 produce --topic orders --partition 2\nctlclient --bootstrap 127.0.0.1:9091,127.0.0.1:9092 produce --topic orders --key customer-7 --header source=web --value x",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition (default: --key's, by Kafka's murmur2 partitioner)")
			acksFlag := fs.String("acks", "all", "all (= -1: after the ISR has it), 1 (after the leader's append) or 0 (no wait)")
			idempotence := fs.Bool("idempotence", true, "idempotent produce (producer ID and sequence numbers; needs --acks all): retries append once")
			timeoutMs := int32Var(fs, "timeout-ms", 30000, "how long the broker waits for the ISR with --acks all")
			key := fs.String("key", "", "key of every record (default: no key); picks the partition without --partition")
			var values, headers stringList
			fs.Var(&values, "value", "a record's value (repeatable); none: read stdin lines")
			fs.Var(&headers, "header", "a header `KEY=VALUE` of every record (repeatable)")
			batchRecords := fs.Int("batch-records", defaultBatchRecords, "most records in one request")
			batchBytes := fs.Int("batch-bytes", defaultBatchBytes, "most encoded bytes in one request")
			lingerMs := fs.Int("linger-ms", defaultLingerMs, "longest a stdin record waits for its batch to fill")
			maxInFlight := fs.Int("max-in-flight", 1, "batches in flight at once, pipelined in order (at most 5)")
			return func(ctx context.Context, e *env) error {
				set := setFlags(fs)
				if err := requireFlags(fs, "topic"); err != nil {
					return err
				}
				if !set["partition"] && !set["key"] {
					return usagef("missing --partition (or --key, whose hash picks the partition)")
				}
				if set["partition"] && *partition < 0 {
					return usagef("--partition must not be negative (got %d)", *partition)
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
				if *maxInFlight < 1 || *maxInFlight > 5 {
					return usagef("--max-in-flight must be in [1, 5] (got %d)", *maxInFlight)
				}
				if *timeoutMs < 0 {
					return usagef("--timeout-ms must not be negative (got %d)", *timeoutMs)
				}
				hdrs, err := parseHeaders(headers)
				if err != nil {
					return err
				}
				idem, err := idempotenceFor(*idempotence, set["idempotence"], acks)
				if err != nil {
					return err
				}
				cl, err := e.newClient()
				if err != nil {
					return err
				}
				defer cl.Close()
				linger := time.Duration(*lingerMs) * time.Millisecond
				pr := &producer{e: e}
				cfg := client.ProducerConfig{
					Acks: acksOf(acks), DisableIdempotence: !idem, Linger: linger,
					BatchRecords: *batchRecords, BatchBytes: *batchBytes, MaxInFlight: *maxInFlight,
					AckTimeout:      time.Duration(*timeoutMs) * time.Millisecond,
					DeliveryTimeout: e.g.timeout + linger,
					OnBatch:         pr.batchDone,
				}
				p, err := e.newProducer(ctx, cl, cfg, set["idempotence"])
				if err != nil {
					return err
				}
				defer p.Close()
				pr.p = p
				pr.template = client.Record{Topic: *topic, Partition: *partition, ManualPartition: set["partition"], Headers: hdrs}
				if set["key"] {
					pr.template.Key = []byte(*key)
				}
				if len(values) > 0 {
					for _, v := range values {
						pr.add(ctx, []byte(v))
					}
					return pr.finish(ctx)
				}
				return pr.fromLines(ctx, e.stdin, *batchBytes)
			}
		},
	}
}

// idempotenceFor decides idempotence: on by default with --acks all; with
// acks 1 or 0 off unless asked for, which is then a usage error (Kafka's
// enable.idempotence needs acks=all too).
func idempotenceFor(flagValue, explicit bool, acks int32) (bool, error) {
	if acks == -1 {
		return flagValue, nil
	}
	if explicit && flagValue {
		return false, usagef("--idempotence needs --acks all (got --acks %d)", acks)
	}
	return false, nil
}

func acksOf(acks int32) client.Acks {
	switch acks {
	case 1:
		return client.AcksLeader
	case 0:
		return client.AcksNone
	}
	return client.AcksAll
}

// newProducer makes the command's producer and, when idempotent, takes its
// producer ID at once. A cluster that predates idempotent produce gets plain
// batches with a warning, unless --idempotence was given (then it is the
// error).
func (e *env) newProducer(ctx context.Context, cl *client.Client, cfg client.ProducerConfig, explicit bool) (*client.Producer, error) {
	p, err := client.NewProducer(cl, cfg)
	if err != nil {
		return nil, usagef("%v", err)
	}
	err = p.Init(ctx)
	switch {
	case err == nil:
		return p, nil
	case !explicit && noProducerID(err):
		// A cluster that predates idempotent produce, that has no
		// controller to issue producer IDs (brokers set up by hand), or
		// that does not let this principal take one: the default gives
		// way, loudly.
		_ = p.Close()
		fmt.Fprintf(e.stderr, "ctlclient: warning: %v; sending plain batches (a retried batch may be appended twice; --idempotence=false silences this)\n", err)
		cfg.DisableIdempotence = true
		return client.NewProducer(cl, cfg)
	}
	_ = p.Close()
	return nil, err
}

// noProducerID reports whether err says the cluster gives this client no
// producer ID at all: brokers that predate idempotent produce, a broker
// without a controller (which issues the IDs), a principal not allowed
// one. A passing failure (a timeout, a controller failing over) is not
// one: then the produce fails rather than quietly drop idempotence just
// when a retry may need it.
func noProducerID(err error) bool {
	var cerr *client.Error
	if errors.As(err, &cerr) {
		return cerr.Code == replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE && strings.Contains(cerr.Message, "without a controller") ||
			cerr.Code == replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED
	}
	return errors.Is(err, client.ErrIdempotenceUnsupported) || status.Code(err) == codes.PermissionDenied
}

// parseHeaders reads --header KEY=VALUE flags.
func parseHeaders(flags []string) ([]client.Header, error) {
	var out []client.Header
	for _, h := range flags {
		k, v, ok := strings.Cut(h, "=")
		if !ok || k == "" {
			return nil, usagef("--header: want KEY=VALUE (got %q)", h)
		}
		out = append(out, client.Header{Key: k, Value: []byte(v)})
	}
	return out, nil
}

// producer is produce's use of a client.Producer: it prints each batch's
// base offset as its answer arrives and stops at the first failure.
type producer struct {
	e        *env
	p        *client.Producer
	template client.Record

	mu       sync.Mutex
	firstErr error
	printErr error
}

func (pr *producer) add(ctx context.Context, value []byte) {
	r := pr.template
	r.Value = value
	pr.p.Produce(ctx, &r, nil)
}

// batchDone prints a delivered batch's base offset (-o json: the answer,
// a failed one's too) and keeps the first failure.
func (pr *producer) batchDone(res client.BatchResult) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.firstErr != nil {
		return // exiting with the failure: later answers stay unprinted
	}
	resp := &replicadv1.ProduceResponse{BaseOffset: res.BaseOffset, HighWatermark: res.HighWatermark, Duplicate: res.Duplicate}
	if res.Err != nil {
		pr.firstErr = res.Err
		var cerr *client.Error
		if !errors.As(res.Err, &cerr) {
			return
		}
		// The answer that ended the retries is printed, as a success's is.
		resp.ErrorCode, resp.ErrorMessage = cerr.Code, cerr.Message
	}
	var err error
	switch {
	case pr.e.jsonOutput():
		err = pr.e.printJSON(resp)
	case res.Err != nil:
		// No offset for a batch that has none: stdout lists what was
		// appended (a script reads it as offsets); the error goes to
		// stderr when the command exits.
	default:
		_, err = fmt.Fprintln(pr.e.stdout, res.BaseOffset)
	}
	if err != nil && pr.printErr == nil {
		pr.printErr = err
	}
}

func (pr *producer) failed() error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.printErr != nil {
		return pr.printErr
	}
	return produceError(pr.firstErr)
}

// produceError is how a failed batch is reported: an answer's error code
// as "produce T-P: CODE[: message]" (exit 1), anything else as it is.
func produceError(err error) error {
	var cerr *client.Error
	if errors.As(err, &cerr) {
		msg := fmt.Sprintf("produce %s: %s", cerr.Partition, codeName(cerr.Code))
		if cerr.Message != "" {
			msg += ": " + cerr.Message
		}
		return answerError{msg}
	}
	return err
}

// finish sends what is left and waits for every answer.
func (pr *producer) finish(ctx context.Context) error {
	if err := pr.p.Flush(ctx); err != nil {
		return err
	}
	return pr.failed()
}

// fromLines sends one record per line of r; the producer batches them as
// they arrive (--linger-ms, --batch-records, --batch-bytes).
func (pr *producer) fromLines(ctx context.Context, r io.Reader, maxLine int) error {
	lines := make(chan []byte, 1024)
	readErr := make(chan error, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxLine)
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
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				if err := pr.finish(ctx); err != nil {
					return err
				}
				if err := <-readErr; err != nil {
					if errors.Is(err, bufio.ErrTooLong) {
						return usagef("a stdin line is longer than --batch-bytes (%d)", maxLine)
					}
					return fmt.Errorf("read stdin: %w", err)
				}
				return nil
			}
			if err := pr.failed(); err != nil {
				return err
			}
			pr.add(ctx, line)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
