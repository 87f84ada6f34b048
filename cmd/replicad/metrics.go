package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/rs/zerolog"
)

// metricsPlaceholder is served until the observability work fills /metrics:
// the flag is part of the documented contract, so it answers rather than fails.
const metricsPlaceholder = "# replicad metrics arrive with the observability issue\n"

type metricsServer struct {
	srv *http.Server
	lis net.Listener
}

// addr is the address served, "" when off.
func (m *metricsServer) addr() string {
	if m.lis == nil {
		return ""
	}
	return m.lis.Addr().String()
}

// startMetrics serves /metrics and /debug/pprof on addr; an empty addr serves nothing.
func startMetrics(addr string, logger zerolog.Logger) (*metricsServer, error) {
	if addr == "" {
		return &metricsServer{}, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_, _ = w.Write([]byte(metricsPlaceholder))
	})
	// Profiles share the operator-facing listener: a hot path is diagnosed on
	// the running broker, not on a rebuilt one.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error().Err(err).Msg("metrics server failed")
		}
	}()
	logger.Info().Str("metrics_listen", lis.Addr().String()).Msg("serving /metrics")
	return &metricsServer{srv: srv, lis: lis}, nil
}

func (m *metricsServer) close() {
	if m.srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = m.srv.Shutdown(ctx)
}
