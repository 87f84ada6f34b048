package service

import (
	"github.com/replicad/replicad/internal/grpcx"

	"context"
	"net"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Options configure a Server.
type Options struct {
	ReplicaManager ReplicaManager
	// BrokerEpoch is the broker's controller registration epoch (0 until
	// registered); nil when the broker runs without a controller.
	BrokerEpoch func() int64
	// ControllerGuard, set on a broker with a controller, refuses control
	// requests that do not come from the controller the broker follows
	// (see ControllerGuard). Nil: every controller epoch not older than the
	// broker's is taken (standalone, driven by hand).
	ControllerGuard ControllerGuard
	Logger          zerolog.Logger
	// Now is the clock used to stamp records when measuring a batch; nil is time.Now.
	Now func() time.Time
	// ServerOptions are appended to the ones NewServer sets (tests add their own).
	ServerOptions []grpc.ServerOption
	// TraceDataPlane makes Produce, Consume and Fetch create server spans,
	// and every request on a Fetch stream a FetchRequestSpanName span
	// (replicad --trace-data-plane). Off, only the control plane is traced:
	// those RPCs are the hot path.
	TraceDataPlane bool
	// Limits bound what clients can make the server hold (connections,
	// streams, response and delayed-produce memory, parked requests); zero
	// fields take their defaults.
	Limits Limits
	// OnACLs, if set, is given the whole ACL set of every UpdateMetadata
	// that carries one (acls_present) and that the replica manager took,
	// after it did: the broker's authorizer holds exactly those from then
	// on. The ACLs stay wire messages here: the service layer does not
	// authorize, and core knows nothing of ACLs. Concurrent requests can
	// reach it out of order: it must keep the newest set by (ctrlEpoch,
	// version), the request's controller_epoch and acls_version.
	OnACLs func(ctrlEpoch int32, version int64, acls []*replicadv1.Acl)
	// DescribeFilter, if set, tells which topics a Metadata call's caller
	// may describe (the broker's authorizer, from the call's principal):
	// the others are left out of its answer. Nil: every topic.
	DescribeFilter DescribeFilter
	// ProducerIDs issues producer IDs for InitProducerId (the broker's
	// producerid.Manager). Nil (a broker without a controller):
	// InitProducerId answers BROKER_NOT_AVAILABLE.
	ProducerIDs ProducerIDs
}

// Server is a broker's gRPC server.
type Server struct {
	grpc   *grpc.Server
	health *health.Server
	// draining is cancelled when Shutdown starts: follower Fetch streams
	// never end on their own, so they end then, letting the graceful stop
	// finish the calls that do.
	draining     context.Context
	stopDraining context.CancelFunc
	// services are the names health reports on besides "".
	services []string
	// limits wraps the listener (MaxConnections).
	limits *limiter
}

// servedServices are the names the health service reports on, besides "" (the whole server).
var servedServices = []string{
	replicadv1.ReplicaManagerService_ServiceDesc.ServiceName,
	replicadv1.LogService_ServiceDesc.ServiceName,
	replicadv1.FetchService_ServiceDesc.ServiceName,
	replicadv1.ControllerService_ServiceDesc.ServiceName,
}

// NewServer builds the gRPC server with every service registered, server
// reflection, the health service (NOT_SERVING until Serve), logging and
// panic-recovery interceptors, and the OpenTelemetry stats handler (which
// uses the global tracer provider and propagator, see internal/telemetry).
func NewServer(opts Options) *Server {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	serverOpts := append(commonServerOptions(opts.Logger, opts.TraceDataPlane), grpc.MaxRecvMsgSize(maxRecvMsgSize(opts.ReplicaManager.MaxBatchBytes())))
	serverOpts = append(serverOpts, grpcx.ServerOptions()...)
	lim := newLimiter(opts.Limits)
	serverOpts = append(serverOpts, lim.limits.serverOptions()...)
	serverOpts = append(serverOpts, opts.ServerOptions...)

	s := &Server{grpc: grpc.NewServer(serverOpts...), health: health.NewServer(), services: servedServices, limits: lim}
	s.draining, s.stopDraining = context.WithCancel(context.Background())
	replicadv1.RegisterReplicaManagerServiceServer(s.grpc, NewReplicaManagerService(opts))
	replicadv1.RegisterLogServiceServer(s.grpc, &logService{rm: opts.ReplicaManager, now: now, limits: lim, describeFilter: opts.DescribeFilter,
		draining: s.draining, tracer: dataPlaneTracer(opts.TraceDataPlane), producerIDs: opts.ProducerIDs, logger: opts.Logger})
	replicadv1.RegisterFetchServiceServer(s.grpc, &fetchService{rm: opts.ReplicaManager, draining: s.draining, tracer: dataPlaneTracer(opts.TraceDataPlane), limits: lim})
	replicadv1.RegisterControllerServiceServer(s.grpc, &controllerService{})
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	s.setServing(healthpb.HealthCheckResponse_NOT_SERVING)
	return s
}

// dataPlaneTracer traces the data plane's own work (each fetch request)
// when traceDataPlane; nil otherwise.
func dataPlaneTracer(traceDataPlane bool) trace.Tracer {
	if !traceDataPlane {
		return nil
	}
	return otel.Tracer("github.com/replicad/replicad/service")
}

// commonServerOptions are the options of every replicad gRPC server: the
// OpenTelemetry stats handler (spans for the data-plane RPCs only with
// traceDataPlane, never for heartbeats and health checks, see
// grpcx.TraceFilter), and logging around panic recovery.
func commonServerOptions(l zerolog.Logger, traceDataPlane bool) []grpc.ServerOption {
	logOpts := serverLogOptions()
	logger := InterceptorLogger(l)
	recoveryOpt := recovery.WithRecoveryHandlerContext(recoveryHandler(l))
	return []grpc.ServerOption{
		grpc.StatsHandler(otelgrpc.NewServerHandler(grpcx.OtelOptions(traceDataPlane)...)),
		// Logging wraps recovery so a recovered panic is logged as the Internal it became.
		grpc.ChainUnaryInterceptor(
			unaryLogging(l, logger, logOpts...),
			recovery.UnaryServerInterceptor(recoveryOpt),
			requestSizeUnaryInterceptor,
		),
		grpc.ChainStreamInterceptor(
			logging.StreamServerInterceptor(logger, logOpts...),
			recovery.StreamServerInterceptor(recoveryOpt),
			requestSizeStreamInterceptor,
		),
	}
}

// serverLogOptions log each finished call, successful ones at debug (see
// serverCodeToLevel), with the trace id.
func serverLogOptions() []logging.Option {
	return []logging.Option{
		logging.WithLogOnEvents(logging.FinishCall),
		logging.WithLevels(serverCodeToLevel),
		logging.WithFieldsFromContext(traceFields),
	}
}

// maxRecvMsgSize lets a produce request carrying a full batch through: the
// proto encoding of records is about the size of the encoded batch, and the
// batch limit may be above gRPC's 4 MiB default.
func maxRecvMsgSize(maxBatchBytes int) int {
	const grpcDefault = 4 << 20
	return max(grpcDefault, 2*maxBatchBytes+(1<<20))
}

func (s *Server) setServing(st healthpb.HealthCheckResponse_ServingStatus) {
	s.health.SetServingStatus("", st)
	for _, name := range s.services {
		s.health.SetServingStatus(name, st)
	}
}

// GRPCServer exposes the underlying server (to register more services).
func (s *Server) GRPCServer() *grpc.Server { return s.grpc }

// Serve marks the server SERVING and serves lis until Shutdown.
func (s *Server) Serve(lis net.Listener) error {
	s.setServing(healthpb.HealthCheckResponse_SERVING)
	return s.grpc.Serve(s.limits.limits.listener(lis))
}

// Shutdown reports NOT_SERVING (so load balancers and probes stop sending),
// then stops accepting calls and waits for in-flight ones until ctx is done,
// after which it cancels whatever is left. It reports whether every call
// finished on its own.
func (s *Server) Shutdown(ctx context.Context) (graceful bool) {
	// health.Server.Shutdown sets every service NOT_SERVING and ignores later updates.
	s.health.Shutdown()
	s.stopDraining()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-ctx.Done():
		s.grpc.Stop()
		<-done
		return false
	}
}

// NewReplicaManagerService returns the ReplicaManagerService handlers that
// NewServer registers (the controller guard and the registration check
// included), without a gRPC server: a cluster run in one process over an
// in-memory network (tests/sim) calls them directly.
func NewReplicaManagerService(opts Options) replicadv1.ReplicaManagerServiceServer {
	return &replicaManagerService{rm: opts.ReplicaManager, brokerEpoch: opts.BrokerEpoch, onACLs: opts.OnACLs,
		guard: opts.ControllerGuard, logger: opts.Logger}
}
