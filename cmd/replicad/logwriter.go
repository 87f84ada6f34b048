package main

import (
	"bytes"
	"io"
	"sync"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/internal/telemetry"
)

// logWriter takes the broker's stderr lines (log events, and the fixed lines
// tests and scripts read) off the goroutines that write them: a write copies
// the line into a queue and returns, and one goroutine formats what is
// queued (zerolog's ConsoleWriter, with --log-format console) and writes it
// with one write(2) per batch.
//
// Why: a LeaderAndIsr moving thousands of leaderships logs a line per
// partition (each new leader epoch; the fetch errors of the partitions whose
// leader moved), from 8 goroutines at once. Written in place, each line was
// a write(2) to a pipe under the stderr descriptor's lock, and the console
// format re-parsed the line's JSON on the caller's goroutine, under the
// partition's lock: in the failover benchmark's execution traces the
// makeLeaders goroutines of the new leader spent most of their time waiting
// for that descriptor (6.5 s of waits over one 18,000-partition
// LeaderAndIsr), not doing the transitions.
//
// Lines keep their order (one queue, one writer). The queue is bounded
// (maxLogQueue bytes): past it a write waits for the writer, so a flood of
// lines slows its writers down rather than growing memory or dropping any.
// The writer writes as soon as something is queued, so what a crash can
// lose (kill -9, or a panic no goroutine recovers) is what was queued during
// the last write(2). Close drains the queue; the broker calls it last before
// it exits, and later writes go straight out.
type logWriter struct {
	out     io.Writer
	console bool // format events with zerolog's ConsoleWriter
	noColor bool

	mu     sync.Mutex
	cond   *sync.Cond // the queue changed: lines added, space freed, or closed
	queue  []logLine
	queued int // bytes in queue
	closed bool
	// drained: closed, and the writer goroutine wrote the last batch.
	drained bool
	done    chan struct{}
}

// maxLogQueue bounds the bytes waiting to be written.
const maxLogQueue = 4 << 20

type logLine struct {
	data []byte
	raw  bool // a fixed line, written as is (not a log event to format)
}

// newLogWriter starts the writer goroutine; Close stops it.
func newLogWriter(out io.Writer, console, noColor bool) *logWriter {
	w := &logWriter{out: out, console: console, noColor: noColor, done: make(chan struct{})}
	w.cond = sync.NewCond(&w.mu)
	go w.run()
	return w
}

// Events is the writer for the logger: each Write is one zerolog event.
func (w *logWriter) Events() io.Writer { return eventWriter{w} }

// Raw is the writer for fixed lines (fmt.Fprintf(stderr, ...)): written as
// they are, in order with the events.
func (w *logWriter) Raw() io.Writer { return rawWriter{w} }

type eventWriter struct{ w *logWriter }

func (e eventWriter) Write(p []byte) (int, error) { return e.w.write(p, false) }

type rawWriter struct{ w *logWriter }

func (r rawWriter) Write(p []byte) (int, error) { return r.w.write(p, true) }

func (w *logWriter) write(p []byte, raw bool) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for (!w.closed && w.queued > 0 && w.queued+len(p) > maxLogQueue) || (w.closed && !w.drained) {
		w.cond.Wait()
	}
	if w.closed {
		// After Close: straight out, under mu so lines keep their order.
		var buf bytes.Buffer
		w.format(&buf, logLine{data: p, raw: raw})
		_, err := w.out.Write(buf.Bytes())
		return len(p), err
	}
	// zerolog reuses p once Write returns.
	w.queue = append(w.queue, logLine{data: bytes.Clone(p), raw: raw})
	w.queued += len(p)
	w.cond.Broadcast()
	return len(p), nil
}

// format appends l to buf as it is to be written.
func (w *logWriter) format(buf *bytes.Buffer, l logLine) {
	if l.raw || !w.console {
		buf.Write(l.data)
		return
	}
	cw := zerolog.ConsoleWriter{Out: buf, TimeFormat: telemetry.LogTimeFormat, NoColor: w.noColor}
	if _, err := cw.Write(l.data); err != nil {
		// Not JSON after all: keep the line rather than lose it.
		buf.Write(l.data)
	}
}

func (w *logWriter) run() {
	defer close(w.done)
	var buf bytes.Buffer
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.closed {
			w.cond.Wait()
		}
		if len(w.queue) == 0 { // closed, and all written
			w.drained = true
			w.cond.Broadcast()
			w.mu.Unlock()
			return
		}
		batch := w.queue
		w.queue, w.queued = nil, 0
		w.cond.Broadcast() // space for the waiting writers
		w.mu.Unlock()
		buf.Reset()
		for _, l := range batch {
			w.format(&buf, l)
		}
		// A failed write of stderr has nowhere to be reported.
		_, _ = w.out.Write(buf.Bytes())
	}
}

// Close writes what is queued and returns once it is written; later writes
// go straight out. Idempotent.
func (w *logWriter) Close() {
	w.mu.Lock()
	w.closed = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.done
}
