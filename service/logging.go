package service

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
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

// unaryLogging is go-grpc-middleware's unary logging interceptor, paid for
// only by the calls whose line is written. The middleware builds its fields
// (method, peer, start time and deadline formatted, code, duration) for
// every call, and only then does the logger drop the line: a successful
// call logs at debug, so at the usual info level a produce paid that for
// nothing, about a tenth of an acks=-1 leader's CPU with one record per
// request. Here the call runs first; a call whose line would be written is
// then handed to the middleware as if it were the call, with its real start
// time and duration in the line (they override the ones the middleware
// measures around the finished call).
func unaryLogging(zl zerolog.Logger, logger logging.Logger, opts ...logging.Option) grpc.UnaryServerInterceptor {
	full := logging.UnaryServerInterceptor(logger, append(opts,
		logging.WithFieldsFromContext(func(ctx context.Context) logging.Fields {
			f := traceFields(ctx)
			if start, ok := ctx.Value(callStartKey{}).(time.Time); ok {
				f = append(f, "grpc.start_time", start.Format(time.RFC3339),
					"grpc.time_ms", fmt.Sprintf("%v", float32(time.Since(start).Nanoseconds()/1000)/1000))
			}
			return f
		}),
		logging.WithDurationField(func(time.Duration) logging.Fields { return nil }),
	)...)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		lvl := zerologLevel(serverCodeToLevel(status.Code(err)))
		if lvl < zl.GetLevel() || lvl < zerolog.GlobalLevel() {
			return resp, err
		}
		done := func(context.Context, any) (any, error) { return resp, err }
		return full(context.WithValue(ctx, callStartKey{}, start), req, info, done)
	}
}

// callStartKey holds, in a call's context, when unaryLogging started it.
type callStartKey struct{}
