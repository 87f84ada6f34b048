package service

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var produceInfo = &grpc.UnaryServerInfo{FullMethod: "/replicad.v1.LogService/Produce"}

// logLines runs one call through unaryLogging at level and returns the
// lines written.
func logLines(t *testing.T, level zerolog.Level, handler grpc.UnaryHandler) []map[string]any {
	t.Helper()
	var buf bytes.Buffer
	zl := zerolog.New(&buf).Level(level)
	ic := unaryLogging(zl, InterceptorLogger(zl), serverLogOptions()...)
	_, _ = ic(context.Background(), "req", produceInfo, handler)
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		if strings.Count(l, `"grpc.time_ms"`) != 1 || strings.Count(l, `"grpc.start_time"`) != 1 {
			t.Fatalf("want one grpc.time_ms and one grpc.start_time: %s", l)
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		lines = append(lines, m)
	}
	return lines
}

// A successful call at info level writes nothing (its line is debug); a
// failing one writes the middleware's line, with the call's own duration.
func TestUnaryLoggingOnlyForWrittenLines(t *testing.T) {
	ok := func(context.Context, any) (any, error) { return "resp", nil }
	if lines := logLines(t, zerolog.InfoLevel, ok); len(lines) != 0 {
		t.Fatalf("a successful call at info level logged %v", lines)
	}
	slow := func(context.Context, any) (any, error) {
		time.Sleep(20 * time.Millisecond)
		return nil, status.Error(codes.InvalidArgument, "records: empty")
	}
	lines := logLines(t, zerolog.InfoLevel, slow)
	if len(lines) != 1 {
		t.Fatalf("a failing call logged %d lines: %v", len(lines), lines)
	}
	l := lines[0]
	if l["message"] != "finished call" || l["grpc.code"] != "InvalidArgument" || l["grpc.method"] != "Produce" ||
		l["grpc.service"] != "replicad.v1.LogService" || !strings.Contains(l["grpc.error"].(string), "records: empty") {
		t.Fatalf("failing call's line: %v", l)
	}
	ms, err := strconv.ParseFloat(l["grpc.time_ms"].(string), 64)
	if err != nil || ms < 20 {
		t.Fatalf("grpc.time_ms %v, want the call's 20 ms or more", l["grpc.time_ms"])
	}
	if _, err := time.Parse(time.RFC3339, l["grpc.start_time"].(string)); err != nil {
		t.Fatalf("grpc.start_time: %v", err)
	}
	if lines := logLines(t, zerolog.DebugLevel, ok); len(lines) != 1 || lines[0]["grpc.code"] != "OK" || lines[0]["level"] != "debug" {
		t.Fatalf("a successful call at debug level: %v", lines)
	}
}

// BenchmarkUnaryLogging is what the logging interceptor costs a successful
// call at info level: the middleware's, and unaryLogging's.
func BenchmarkUnaryLogging(b *testing.B) {
	zl := zerolog.New(&bytes.Buffer{}).Level(zerolog.InfoLevel)
	ok := func(context.Context, any) (any, error) { return "resp", nil }
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	for _, bc := range []struct {
		name string
		ic   grpc.UnaryServerInterceptor
	}{
		{"middleware", logging.UnaryServerInterceptor(InterceptorLogger(zl), serverLogOptions()...)},
		{"unaryLogging", unaryLogging(zl, InterceptorLogger(zl), serverLogOptions()...)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = bc.ic(ctx, "req", produceInfo, ok)
			}
		})
	}
}
