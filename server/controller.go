package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/replicad/replicad/controller"
	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/authz"
	"github.com/replicad/replicad/internal/grpcx"
	"github.com/replicad/replicad/internal/sdnotify"
	"github.com/replicad/replicad/internal/telemetry"
	"github.com/replicad/replicad/internal/tlsconf"
	"github.com/replicad/replicad/server/metrics"
	"github.com/replicad/replicad/service"
)

// ControllerListeningPrefix starts the stderr line telling the bound address: scripts
// and tests started with --listen HOST:0 read the port from it.
const ControllerListeningPrefix = "replicad controller listening on "

// ControllerMetricsListeningPrefix starts the stderr line telling the address of
// --metrics-listen, for the same reason.
const ControllerMetricsListeningPrefix = "replicad controller metrics listening on "

// RunController is the controller daemon: it returns when ctx is done (a signal),
// after a graceful stop. A bad flag value is a UsageError.
func RunController(ctx context.Context, stderr io.Writer, cfg ControllerConfig) error {
	// Authorization is on exactly with mutual TLS (authz.Config).
	cfg.Authz.MutualTLS = cfg.TLS.ClientAuth == tlsconf.ClientAuthRequire
	if err := cfg.Validate(); err != nil {
		return err
	}
	// The address names this controller in its logs and its traces'
	// service.instance.id. With --listen HOST:0 only binding tells the port,
	// so it binds now; otherwise it binds once the store is open, so that
	// no connection is accepted while nothing can answer it (brokers would
	// wait out a timeout instead of moving to the next controller).
	var lis net.Listener
	serving := false
	defer func() {
		if lis != nil && !serving {
			lis.Close()
		}
	}()
	listen := func() error {
		if lis != nil {
			return nil
		}
		var err error
		if lis, err = net.Listen("tcp", cfg.Listen); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.Listen, err)
		}
		return nil
	}
	addr := cfg.Listen
	if host, port, err := net.SplitHostPort(cfg.Listen); err == nil && port == "0" {
		if err := listen(); err != nil {
			return err
		}
		_, bound, _ := net.SplitHostPort(lis.Addr().String())
		addr = net.JoinHostPort(host, bound)
	}
	level, _ := zerolog.ParseLevel(cfg.LogLevel)
	var out io.Writer = stderr
	if cfg.LogFormat == "console" {
		out = zerolog.ConsoleWriter{Out: stderr, TimeFormat: telemetry.LogTimeFormat, NoColor: true}
	}
	logger := zerolog.New(out).Level(level).Hook(telemetry.LogTimestamps).With().Str("controller", addr).Logger()

	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "replicad-controller", InstanceID: addr,
		Logger: logger, AlwaysSample: true})
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()

	tc, err := tlsconf.New(cfg.TLS, logger)
	if err != nil {
		return err
	}
	st, elector, err := openStore(ctx, cfg, addr, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Warn().Err(err).Msg("close store")
		}
	}()
	// Nil without --metrics-listen: nothing is measured (Store then
	// returns st itself).
	var cm *metrics.ControllerMetrics
	if cfg.MetricsListen != "" {
		if cm, err = metrics.NewController(); err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = cm.Shutdown(sctx)
		}()
	}
	ctl, err := controller.New(controller.Config{
		Store: cm.Store(st), Elector: elector, ID: cfg.ID, SessionTimeout: cfg.SessionTimeout, Advertise: addr,
		UncleanLeaderElection: cfg.Unclean, DialBroker: brokerDialer(tc), Logger: logger,
		AutoLeaderRebalance: cfg.AutoRebalance, LeaderImbalanceCheckInterval: cfg.ImbalanceInterval,
		LeaderImbalancePerBrokerPercentage: cfg.ImbalancePercent,
	})
	if err != nil {
		return err
	}
	if cm != nil {
		if err := cm.Observe(ctl.MetricsSnapshot); err != nil {
			return err
		}
		var metricsTLS *tls.Config
		if cfg.MetricsTLS {
			metricsTLS = tc.ServerConfig("http/1.1")
		}
		ms, err := metrics.Serve(cfg.MetricsListen, cm.Handler(), logger, metricsTLS, false)
		if err != nil {
			return fmt.Errorf("--metrics-listen %s: %w", cfg.MetricsListen, err)
		}
		defer ms.Close()
		fmt.Fprintf(stderr, "%s%s\n", ControllerMetricsListeningPrefix, ms.Addr())
	}
	if err := listen(); err != nil {
		return err
	}
	// Nil when authorization is off (no mutual TLS, or --no-authorization).
	enforcer, err := authz.NewEnforcer(cfg.Authz, logger, nil)
	if err != nil {
		return err
	}
	srvOpts := []grpc.ServerOption{tc.ServerOption()}
	if enforcer != nil {
		srvOpts = append(srvOpts, enforcer.ServerOptions()...)
	}
	srv := service.NewControllerServer(ctl, logger, srvOpts...)
	serveErr := make(chan error, 1)
	serving = true
	go func() { serveErr <- srv.Serve(lis) }()
	fmt.Fprintf(stderr, "%s%s\n", ControllerListeningPrefix, lis.Addr())
	logger.Info().Str("listen", lis.Addr().String()).Str("store", cfg.Store).Dur("session_timeout_ms", cfg.SessionTimeout).
		Bool("tls", tc != nil).Str("tls_client_auth", cfg.TLS.ClientAuth.String()).
		Bool("unclean_leader_election", cfg.Unclean).Msg("controller serving")
	// Type=notify units: serving (the store is open, the listener bound).
	notifySystemd(logger, sdnotify.Ready)

	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = ctl.Run(runCtx)
	}()
	select {
	case <-ctx.Done():
		logger.Info().Msg("stopping")
		notifySystemd(logger, sdnotify.Stopping)
	case err = <-serveErr:
		logger.Error().Err(err).Msg("gRPC server failed")
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	stopRun()
	<-runDone
	logger.Info().Msg("controller stopped")
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// openStore opens the embedded store in a directory or, for etcd://, the
// etcd store, which is also the election.
func openStore(ctx context.Context, cfg ControllerConfig, advertise string, logger zerolog.Logger) (store.Store, store.Elector, error) {
	if rest, ok := strings.CutPrefix(cfg.Store, "etcd://"); ok {
		endpoints := etcdEndpoints(rest)
		if len(endpoints) == 0 {
			return nil, nil, usagef("--store: etcd:// needs at least one HOST:PORT")
		}
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		es, err := store.OpenEtcd(octx, store.EtcdConfig{Endpoints: endpoints, SessionTTL: cfg.ElectionTTL, Advertise: advertise, Logger: logger})
		if err != nil {
			return nil, nil, err
		}
		return es, es, nil
	}
	if err := os.MkdirAll(cfg.Store, 0o755); err != nil {
		return nil, nil, fmt.Errorf("--store: %w", err)
	}
	bs, err := store.OpenBolt(cfg.Store)
	if err != nil {
		return nil, nil, err
	}
	return bs, nil, nil
}

// maxMsgSize admits a LeaderAndIsr of many thousands of partitions, far
// above gRPC's 4 MiB default.
const maxMsgSize = 256 << 20

// brokerDialer is the controller's connection to one broker, over TLS with
// tc (nil: plaintext); otelgrpc carries the trace of a decision into the
// broker, and the message size limits admit a LeaderAndIsr of many
// thousands of partitions.
func brokerDialer(tc *tlsconf.TLS) func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
	creds := tc.DialOptions(tlsconf.Roles{Peer: "broker", Self: "the controller"})
	return func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
		opts := append(grpcx.DialOptions(),
			// A broker back after a cut gets its LeaderAndIsr and
			// UpdateMetadata within a second, not gRPC's up to two minutes.
			grpcx.ConnectParams(),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithStatsHandler(otelgrpc.NewClientHandler(grpcx.OtelOptions(false)...)),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
		)
		// The TLS credentials, if any, override the plaintext default.
		conn, err := grpc.NewClient(addr, append(opts, creds...)...)
		if err != nil {
			return nil, nil, fmt.Errorf("broker: dial %s: %w", addr, err)
		}
		return replicadv1.NewReplicaManagerServiceClient(conn), conn, nil
	}
}
