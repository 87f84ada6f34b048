package service

import (
	"context"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
)

// NewControllerServer builds the controller's gRPC server: the given
// ControllerService with the same interceptors, reflection and health
// service as a broker's server. Serve and Shutdown work as for a broker.
func NewControllerServer(ctl replicadv1.ControllerServiceServer, logger zerolog.Logger, extra ...grpc.ServerOption) *Server {
	opts := append(commonServerOptions(logger, false /* it serves no data plane */), grpcx.ServerOptions()...)
	// The controller takes the brokers' connection limits too (Serve wraps
	// its listener with them).
	lim := newLimiter(Limits{})
	opts = append(opts, lim.limits.serverOptions()...)
	opts = append(opts, extra...)
	s := &Server{grpc: grpc.NewServer(opts...), health: health.NewServer(),
		services: []string{replicadv1.ControllerService_ServiceDesc.ServiceName}, limits: lim}
	s.draining, s.stopDraining = context.WithCancel(context.Background())
	replicadv1.RegisterControllerServiceServer(s.grpc, ctl)
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.setServing(healthpb.HealthCheckResponse_NOT_SERVING)
	return s
}
