package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/rs/zerolog"
)

// Server serves one /metrics handler over HTTP (HTTPS with a TLS config),
// as the controller daemon's --metrics-listen does.
type Server struct {
	srv *http.Server
	lis net.Listener
}

// Serve listens on addr and serves h at GET /metrics until Close. A failure
// of the server after it started is logged, not fatal: the daemon it
// measures keeps running.
func Serve(addr string, h http.Handler, logger zerolog.Logger, tlsConfig *tls.Config) (*Server, error) {
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	if tlsConfig != nil {
		lis = tls.NewListener(lis, tlsConfig)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error().Err(err).Msg("metrics server failed")
		}
	}()
	logger.Info().Str("metrics_listen", lis.Addr().String()).Bool("tls", tlsConfig != nil).Msg("serving /metrics")
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
