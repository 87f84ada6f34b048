package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replicad/replicad/client"
)

func perfProduceCommand() *command {
	return &command{
		name:    "perf produce",
		summary: "produce load and report throughput and latency (like kafka-producer-perf-test)",
		usage:   "--topic T [--partitions N] [--records N] [--record-size B] [--batch N] [--acks all|1|0] [--idempotence=false] [--concurrency N] [--stream=false]",
		details: `Sends --records records of --record-size bytes in requests of --batch records
to partitions 0..N-1 of --topic on one broker (each must be led by it), or
with --bootstrap or --controller each to its leader as a broker's Metadata
or the controller names it (retrying
through leader changes as produce does; latency then includes the retries),
from --concurrency workers that each keep one request in flight. Prints a progress
line every second, then records/s, MB/s and request latency avg, p50, p99,
p99.9 and max (-o json: the same as one JSON object). Exits 1 if any request
failed.

The requests go through the client library's producer, idempotent by
default as produce's (--acks all; --idempotence=false, or --acks 1 or 0,
sends plain batches): each request is one batch with its producer ID and
sequence, and a request retried through a leader change is appended once.
With idempotence a partition's batches travel in order on one ProduceStream
to its leader, up to 5 in flight (the workers' requests pipelined); without,
on up to --concurrency streams per partition, one request each
(--stream, the default: no new HTTP/2 stream per request); --stream=false
sends each as a unary Produce (then with idempotence one at a time per
partition, as two unary calls may arrive in either order).`,
		example: "ctlclient perf produce --topic perf --partitions 4 --records 1000000 --record-size 100 --batch 500 --concurrency 4 --acks 1",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partitions := int32Var(fs, "partitions", 1, "produce to partitions 0..N-1")
			records := fs.Int64("records", 100000, "records to send")
			recordSize := fs.Int("record-size", 100, "value size of each record in bytes")
			batchSize := fs.Int("batch", 100, "records per request")
			acksFlag := fs.String("acks", "all", "all (-1), 1 or 0 (the default is produce's, and Kafka's producer's)")
			concurrency := fs.Int("concurrency", 1, "workers, each with one request in flight")
			timeoutMs := int32Var(fs, "timeout-ms", 30000, "broker-side wait for the ISR with --acks all")
			stream := fs.Bool("stream", true, "send on ProduceStreams; false: a unary Produce per request")
			idempotence := fs.Bool("idempotence", true, "idempotent produce (needs --acks all)")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic"); err != nil {
					return err
				}
				acks, err := parseAcks(*acksFlag)
				if err != nil {
					return err
				}
				if *partitions < 1 || *records < 1 || *recordSize < 0 || *batchSize < 1 || *concurrency < 1 {
					return usagef("--partitions, --records, --batch and --concurrency must be >= 1, --record-size >= 0")
				}
				idem, err := idempotenceFor(*idempotence, setFlags(fs)["idempotence"], acks)
				if err != nil {
					return err
				}
				cl, err := e.newClient()
				if err != nil {
					return err
				}
				defer cl.Close()
				ackTimeout := time.Duration(*timeoutMs) * time.Millisecond
				p, err := e.newProducer(ctx, cl, client.ProducerConfig{
					Acks: acksOf(acks), DisableIdempotence: !idem, Unary: !*stream, Lanes: *concurrency,
					BatchRecords: *batchSize, AckTimeout: ackTimeout, DeliveryTimeout: e.g.timeout + max(ackTimeout, 0),
				}, setFlags(fs)["idempotence"])
				if err != nil {
					return err
				}
				defer p.Close()
				pt := &perfTest{
					e: e, p: p, topic: *topic, partitions: *partitions,
					records: *records, batch: *batchSize, payload: randomPayload(*recordSize),
				}
				return pt.run(ctx, *concurrency)
			}
		},
	}
}

// randomPayload is one value reused by every record, of uppercase letters as
// kafka-producer-perf-test sends.
func randomPayload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('A' + rand.IntN(26))
	}
	return b
}

type perfTest struct {
	e          *env
	p          *client.Producer
	topic      string
	partitions int32
	records    int64
	batch      int
	payload    []byte

	nextBatch atomic.Int64 // batches handed out; batch i goes to partition i % partitions
	mu        sync.Mutex
	latencies []time.Duration // one per request
	window    perfWindow
	sent      int64
	failed    int64
	firstErr  error
}

// perfWindow accumulates one progress interval.
type perfWindow struct {
	records, requests int64
	latencySum, max   time.Duration
}

func (pt *perfTest) run(ctx context.Context, concurrency int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pt.worker(ctx, cancel)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	last := start
loop:
	for {
		select {
		case <-done:
			break loop
		case now := <-ticker.C:
			pt.printProgress(now.Sub(last))
			last = now
		}
	}
	elapsed := time.Since(start)
	if err := pt.printSummary(elapsed); err != nil {
		return err
	}
	if pt.firstErr != nil {
		return fmt.Errorf("%d of %d records failed, first: %w", pt.failed, pt.sent+pt.failed, pt.firstErr)
	}
	return ctx.Err()
}

// worker sends batches until every record is handed out, one request at a
// time. A failure without an answer (the broker is likely gone, or refused
// the request outright) stops the whole test; an error code is counted.
func (pt *perfTest) worker(ctx context.Context, stop context.CancelFunc) {
	for ctx.Err() == nil {
		b := pt.nextBatch.Add(1) - 1
		first := b * int64(pt.batch)
		if first >= pt.records {
			return
		}
		n := min(int64(pt.batch), pt.records-first)
		recs := make([]client.Record, n)
		ptrs := make([]*client.Record, n)
		for i := range recs {
			recs[i].Value = pt.payload
			ptrs[i] = &recs[i]
		}
		partition := int32(b % int64(pt.partitions))
		t0 := time.Now()
		_, err := pt.p.ProduceBatch(ctx, pt.topic, partition, ptrs)
		lat := time.Since(t0)
		var cerr *client.Error
		if errors.As(err, &cerr) {
			err = answerError{fmt.Sprintf("partition %d: %s %s", partition, codeName(cerr.Code), cerr.Message)}
		}
		pt.record(n, lat, err)
		if _, isAnswer := err.(answerError); err != nil && !isAnswer {
			stop()
			return
		}
	}
}

func (pt *perfTest) record(n int64, lat time.Duration, err error) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if err != nil {
		pt.failed += n
		if pt.firstErr == nil {
			pt.firstErr = err
		}
		return
	}
	pt.sent += n
	pt.latencies = append(pt.latencies, lat)
	pt.window.records += n
	pt.window.requests++
	pt.window.latencySum += lat
	pt.window.max = max(pt.window.max, lat)
}

func (pt *perfTest) printProgress(interval time.Duration) {
	pt.mu.Lock()
	w := pt.window
	pt.window = perfWindow{}
	pt.mu.Unlock()
	if pt.e.jsonOutput() {
		return // json prints the summary only, so the output parses as one object
	}
	avg := time.Duration(0)
	if w.requests > 0 {
		avg = w.latencySum / time.Duration(w.requests)
	}
	rate := float64(w.records) / interval.Seconds()
	fmt.Fprintf(pt.e.stdout, "%d records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, %.1f ms max latency.\n",
		w.records, rate, rate*float64(len(pt.payload))/(1<<20), ms(avg), ms(w.max))
}

// perfSummary is the final report; field names are the JSON output's.
type perfSummary struct {
	Records       int64   `json:"records"`
	Failed        int64   `json:"failed"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"recordsPerSec"`
	MBPerSec      float64 `json:"mbPerSec"`
	AvgMs         float64 `json:"latencyAvgMs"`
	P50Ms         float64 `json:"latencyP50Ms"`
	P99Ms         float64 `json:"latencyP99Ms"`
	P999Ms        float64 `json:"latencyP999Ms"`
	MaxMs         float64 `json:"latencyMaxMs"`
}

func (pt *perfTest) summary(elapsed time.Duration) perfSummary {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	lats := slices.Clone(pt.latencies)
	slices.Sort(lats)
	var sum time.Duration
	for _, l := range lats {
		sum += l
	}
	s := perfSummary{Records: pt.sent, Failed: pt.failed, Seconds: elapsed.Seconds()}
	if elapsed > 0 {
		s.RecordsPerSec = float64(pt.sent) / elapsed.Seconds()
		s.MBPerSec = s.RecordsPerSec * float64(len(pt.payload)) / (1 << 20)
	}
	if len(lats) > 0 {
		s.AvgMs = ms(sum / time.Duration(len(lats)))
		s.P50Ms, s.P99Ms, s.P999Ms = ms(percentile(lats, 0.5)), ms(percentile(lats, 0.99)), ms(percentile(lats, 0.999))
		s.MaxMs = ms(lats[len(lats)-1])
	}
	return s
}

func (pt *perfTest) printSummary(elapsed time.Duration) error {
	s := pt.summary(elapsed)
	if pt.e.jsonOutput() {
		enc := json.NewEncoder(pt.e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(s)
	}
	return writeSummary(pt.e.stdout, s)
}

func writeSummary(w io.Writer, s perfSummary) error {
	_, err := fmt.Fprintf(w, "%d records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, %.2f ms max latency, "+
		"%.2f ms 50th, %.2f ms 99th, %.2f ms 99.9th (latency per request).\n",
		s.Records, s.RecordsPerSec, s.MBPerSec, s.AvgMs, s.MaxMs, s.P50Ms, s.P99Ms, s.P999Ms)
	return err
}

// percentile of sorted latencies by the nearest-rank method.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
