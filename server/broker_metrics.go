package server

import (
	"context"
	"crypto/tls"
	"errors"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/fetcher"
	"github.com/replicad/replicad/server/metrics"
)

// metricsListeningPrefix starts the fixed stderr line naming the metrics
// address, so scripts and tests using port 0 learn it (as with the gRPC one).
const metricsListeningPrefix = "replicad metrics listening on "

// newMetrics builds the broker's metrics when --metrics-listen is set, and
// returns nil otherwise: nothing is then measured at all (core records to a
// no-op, and no interceptor is installed).
func newMetrics(cfg BrokerConfig) (*metrics.Metrics, error) {
	if cfg.MetricsListen == "" {
		return nil, nil
	}
	return metrics.New()
}

// metricsRecorder is m as core's recorder: a nil interface when m is nil,
// never an interface holding a nil pointer.
func metricsRecorder(m *metrics.Metrics) core.MetricsRecorder {
	if m == nil {
		return nil
	}
	return m
}

// followerLags adapts the fetchers' lags to the metrics package's.
func followerLags(m *fetcher.Manager) func() []metrics.FollowerLag {
	return func() []metrics.FollowerLag {
		lags := m.Lags()
		out := make([]metrics.FollowerLag, len(lags))
		for i, l := range lags {
			out[i] = metrics.FollowerLag{Topic: l.TopicPartition.Topic, Partition: l.TopicPartition.Partition,
				Records: l.Records, Seconds: l.Behind.Seconds()}
		}
		return out
	}
}

// metricsServerOptions times the gRPC calls served when metrics are on.
func metricsServerOptions(m *metrics.Metrics) []grpc.ServerOption {
	if m == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.UnaryServerInterceptor()), grpc.ChainStreamInterceptor(m.StreamServerInterceptor())}
}

type metricsServer struct {
	srv     *metrics.Server // nil when off
	metrics *metrics.Metrics
}

// addr is the address served, "" when off.
func (m *metricsServer) addr() string {
	if m.srv == nil {
		return ""
	}
	return m.srv.Addr()
}

// startMetrics serves m at /metrics, and with withPprof /debug/pprof, on
// addr, over HTTPS with tlsConfig if not nil; an empty addr serves nothing.
func startMetrics(addr string, m *metrics.Metrics, logger zerolog.Logger, tlsConfig *tls.Config, withPprof bool) (*metricsServer, error) {
	if addr == "" {
		return &metricsServer{metrics: m}, nil
	}
	if m == nil {
		return nil, errors.New("metrics server without metrics")
	}
	srv, err := metrics.Serve(addr, m.Handler(), logger, tlsConfig, withPprof)
	if err != nil {
		return nil, err
	}
	return &metricsServer{srv: srv, metrics: m}, nil
}

// close stops serving, then stops the meter provider.
func (m *metricsServer) close() {
	if m.srv != nil {
		m.srv.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = m.metrics.Shutdown(ctx)
}
