package metrics

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// requestKey is one series of replicad_request_duration_seconds.
type requestKey struct {
	method string
	code   codes.Code
}

// UnaryServerInterceptor times every unary call into
// replicad_request_duration_seconds{method, code}. After a (method, code)
// pair's first call it costs two clock reads, a read-locked map lookup and
// the histogram's own update; it allocates nothing. A nil *Metrics gives an
// interceptor that only calls the handler.
func (m *Metrics) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	if m == nil {
		return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
			return handler(ctx, req)
		}
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		start := time.Now()
		panicked := true
		defer func() {
			code := status.Code(err)
			if panicked {
				// The recovery interceptor outside turns the panic into
				// Internal; the call is counted as that.
				code = codes.Internal
			}
			m.requests.Record(ctx, time.Since(start).Seconds(), m.requestAttributes(info.FullMethod, code))
		}()
		resp, err = handler(ctx, req)
		panicked = false
		if err == nil {
			m.traffic.unary(ctx, req, resp)
		}
		return resp, err
	}
}

func (m *Metrics) requestAttributes(method string, code codes.Code) metric.RecordOption {
	key := requestKey{method: method, code: code}
	m.requestMu.RLock()
	opt, ok := m.requestAttrs[key]
	m.requestMu.RUnlock()
	if ok {
		return opt
	}
	opt = metric.WithAttributeSet(attribute.NewSet(attribute.String("method", method), attribute.String("code", code.String())))
	m.requestMu.Lock()
	m.requestAttrs[key] = opt
	m.requestMu.Unlock()
	return opt
}
