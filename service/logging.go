package service

import (
	"context"
	"fmt"
	"runtime/debug"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// InterceptorLogger adapts a zerolog logger to go-grpc-middleware's logging
// interceptor. The interceptor hands fields as alternating key/value pairs,
// which is what zerolog's Event.Fields accepts.
func InterceptorLogger(l zerolog.Logger) logging.Logger {
	return logging.LoggerFunc(func(_ context.Context, lvl logging.Level, msg string, fields ...any) {
		l.WithLevel(zerologLevel(lvl)).Fields(fields).Msg(msg)
	})
}

func zerologLevel(lvl logging.Level) zerolog.Level {
	switch {
	case lvl >= logging.LevelError:
		return zerolog.ErrorLevel
	case lvl >= logging.LevelWarn:
		return zerolog.WarnLevel
	case lvl >= logging.LevelInfo:
		return zerolog.InfoLevel
	default:
		return zerolog.DebugLevel
	}
}

// serverCodeToLevel logs successful calls at debug: a broker serves
// thousands of produce and consume calls a second, and the interesting lines
// are the failures. Rejected requests stay at info so operators see them.
func serverCodeToLevel(code codes.Code) logging.Level {
	if code == codes.OK {
		return logging.LevelDebug
	}
	return logging.DefaultServerCodeToLevel(code)
}

// traceFields adds the trace id so a log line can be found in Jaeger.
func traceFields(ctx context.Context) logging.Fields {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return nil
	}
	return logging.Fields{"trace_id", sc.TraceID().String()}
}

// recoveryHandler turns a handler panic into codes.Internal and logs the
// stack: one bad request must not take the broker down.
func recoveryHandler(l zerolog.Logger) func(ctx context.Context, p any) error {
	return func(ctx context.Context, p any) error {
		ev := l.Error().Str("panic", fmt.Sprint(p)).Bytes("stack", debug.Stack())
		if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
			ev = ev.Str("trace_id", sc.TraceID().String())
		}
		ev.Msg("handler panicked")
		return status.Errorf(codes.Internal, "internal error: %v", p)
	}
}
