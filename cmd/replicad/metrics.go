package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/fetcher"
	"github.com/replicad/replicad/internal/metrics"
)

// metricsListeningPrefix starts the fixed stderr line naming the metrics
// address, so scripts and tests using port 0 learn it (as with the gRPC one).
const metricsListeningPrefix = "replicad metrics listening on "

// newMetrics builds the broker's metrics when --metrics-listen is set, and
// returns nil otherwise: nothing is then measured at all (core records to a
// no-op, and no interceptor is installed).
func newMetrics(cfg config) (*metrics.Metrics, error) {
	if cfg.metricsListen == "" {
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
	srv     *http.Server
	lis     net.Listener
	metrics *metrics.Metrics
}

// addr is the address served, "" when off.
func (m *metricsServer) addr() string {
	if m.lis == nil {
		return ""
	}
	return m.lis.Addr().String()
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
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	// Profiles share the operator-facing listener, so a hot path is diagnosed
	// on the running broker, but only when asked for (--pprof): they show
	// the program's internals to whoever reaches the port, and taking one
	// costs CPU.
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error().Err(err).Msg("metrics server failed")
		}
	}()
	logger.Info().Str("metrics_listen", lis.Addr().String()).Bool("tls", tlsConfig != nil).Bool("pprof", withPprof).Msg("serving /metrics")
	return &metricsServer{srv: srv, lis: lis, metrics: m}, nil
}

// close stops serving, then stops the meter provider.
func (m *metricsServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if m.srv != nil {
		_ = m.srv.Shutdown(ctx)
	}
	_ = m.metrics.Shutdown(ctx)
}
