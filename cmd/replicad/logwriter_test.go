package main

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/internal/telemetry"
)

// syncBuffer is a bytes.Buffer safe for the writer goroutine and the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestLogWriterKeepsEveryLineInOrder ensures that lines written from many
// goroutines all come out, each goroutine's in its order, events and raw
// lines interleaved as written, once Close returns.
func TestLogWriterKeepsEveryLineInOrder(t *testing.T) {
	var out syncBuffer
	w := newLogWriter(&out, false, true)
	const writers, lines = 8, 2000
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lines {
				if i%2 == 0 {
					fmt.Fprintf(w.Events(), "{\"g\":%d,\"i\":%d}\n", g, i)
				} else {
					fmt.Fprintf(w.Raw(), "raw g=%d i=%d\n", g, i)
				}
			}
		}()
	}
	wg.Wait()
	w.Close()
	fmt.Fprintf(w.Raw(), "after close\n")
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != writers*lines+1 || got[len(got)-1] != "after close" {
		t.Fatalf("%d lines, last %q; want %d, then the line written after Close", len(got), got[len(got)-1], writers*lines+1)
	}
	next := make([]int, writers)
	for _, l := range got[:len(got)-1] {
		var g, i int
		if _, err := fmt.Sscanf(l, "{\"g\":%d,\"i\":%d}", &g, &i); err != nil {
			if _, err := fmt.Sscanf(l, "raw g=%d i=%d", &g, &i); err != nil {
				t.Fatalf("line %q: neither an event nor a raw line", l)
			}
		}
		if i != next[g] {
			t.Fatalf("goroutine %d: line %d came where %d was due", g, i, next[g])
		}
		next[g]++
	}
}

// TestLogWriterConsoleFormat ensures that an event queued in console format
// comes out as zerolog's ConsoleWriter writes it in place, and a raw line
// untouched.
func TestLogWriterConsoleFormat(t *testing.T) {
	var direct, queued syncBuffer
	cfg := config{logFormat: "console", logLevel: zerolog.InfoLevel, brokerID: 3}
	// A fixed timestamp: the hook would stamp the two events differently.
	ev := `{"level":"info","broker_id":3,"time":"2026-01-02T03:04:05.006Z","topic":"orders","message":"starting at new leader epoch"}` + "\n"
	cw := zerolog.ConsoleWriter{Out: &direct, TimeFormat: telemetry.LogTimeFormat, NoColor: true}
	if _, err := cw.Write([]byte(ev)); err != nil {
		t.Fatal(err)
	}
	w := newLogWriter(&queued, cfg.logFormat == "console", true)
	if _, err := w.Events().Write([]byte(ev)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(w.Raw(), "replicad listening on 127.0.0.1:1\n")
	w.Close()
	if want := direct.String() + "replicad listening on 127.0.0.1:1\n"; queued.String() != want {
		t.Fatalf("queued output\n%q\nwant\n%q", queued.String(), want)
	}
}

// blockingWriter blocks every Write until release is closed.
type blockingWriter struct {
	release chan struct{}
	syncBuffer
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	return b.syncBuffer.Write(p)
}

// TestLogWriterBoundsItsQueue ensures that while stderr does not drain, a
// writer waits once maxLogQueue bytes are queued instead of queueing more,
// and goes on once stderr drains: nothing is dropped.
func TestLogWriterBoundsItsQueue(t *testing.T) {
	out := &blockingWriter{release: make(chan struct{})}
	w := newLogWriter(out, false, true)
	line := []byte(strings.Repeat("x", 1023) + "\n")
	n := 2*maxLogQueue/len(line) + 10
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for range n {
			if _, err := w.Raw().Write(line); err != nil {
				t.Error(err)
			}
		}
	}()
	// The first batch is held in the blocked write(2), the next ones fill
	// the queue up to its bound, where the writer waits.
	deadline := time.Now().Add(5 * time.Second)
	for {
		w.mu.Lock()
		full := w.queued+len(line) > maxLogQueue
		w.mu.Unlock()
		if full {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the queue never filled")
		}
		time.Sleep(time.Millisecond)
	}
	w.mu.Lock()
	queued := w.queued
	w.mu.Unlock()
	if queued > maxLogQueue {
		t.Fatalf("%d bytes queued, above the bound %d", queued, maxLogQueue)
	}
	close(out.release)
	<-wrote
	w.Close()
	if got := strings.Count(out.String(), "\n"); got != n {
		t.Fatalf("%d lines written, want %d", got, n)
	}
}

// BenchmarkLogLine is the cost of one console log line as the caller sees
// it, written in place (zerolog's ConsoleWriter to the descriptor, as
// before logWriter) and queued (logWriter; its goroutine formats and
// writes), from 8 goroutines as makeLeaders logs. The line is a
// LeaderAndIsr's "starting at new leader epoch". out is /dev/null: the
// pipe's own cost comes on top in place, once per batch when queued.
func BenchmarkLogLine(b *testing.B) {
	devnull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer devnull.Close()
	cfg := config{logFormat: "console", logLevel: zerolog.InfoLevel, brokerID: 2}
	line := func(l zerolog.Logger) {
		l.Info().Str("topic", "failover-1").Int32("partition", 1234).Int32("leader_epoch", 3).Int32("previous_leader_epoch", 2).
			Int64("epoch_start_offset", 0).Int64("high_watermark", 0).Msg("starting at new leader epoch")
	}
	b.Run("in-place", func(b *testing.B) {
		l := newLogger(cfg, devnull)
		b.SetParallelism(4) // 8 goroutines on 2 cores
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				line(l)
			}
		})
	})
	b.Run("queued", func(b *testing.B) {
		w := newLogWriter(devnull, true, true)
		l := eventLogger(cfg, w.Events())
		b.SetParallelism(4)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				line(l)
			}
		})
		w.Close() // the writer's share: formatting and writing what is queued
	})
}
