package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/rs/zerolog"
)

// Server serves one /metrics handler over HTTP (HTTPS with a TLS config),
// as the daemons' --metrics-listen does, and Go's profiles with pprof.
type Server struct {
	srv *http.Server
	lis net.Listener
}

// Serve listens on addr and serves h at GET /metrics until Close, and with
// withPprof /debug/pprof. A failure of the server after it started is
// logged, not fatal: the daemon it measures keeps running.
func Serve(addr string, h http.Handler, logger zerolog.Logger, tlsConfig *tls.Config, withPprof bool) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	// Profiles share the operator-facing listener, so a hot path is
	// diagnosed on the running process, but only when asked for (--pprof):
	// they show the program's internals to whoever reaches the port, and
	// taking one costs CPU.
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
	return &Server{srv: srv, lis: lis}, nil
}

// Addr is the address served (the port bound, for addr HOST:0).
func (s *Server) Addr() string { return s.lis.Addr().String() }

// Close stops serving, waiting up to a second for scrapes in flight.
func (s *Server) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}
