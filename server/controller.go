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
	"sync"
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
	cfg.Stderr = stderr
	c, err := NewController(ctx, cfg)
	if err != nil {
		return err
	}
	return c.Run(ctx)
}

// Controller is one controller process: controller.Controller with its
// store (and election), telemetry, metrics, TLS, authorization and gRPC
// server. NewController opens it, Start serves it, and Stop (graceful) or
// Kill (a crash) ends it; Run does all of it for a daemon.
type Controller struct {
	cfg    ControllerConfig
	logger zerolog.Logger
	stderr io.Writer
	ctl    *controller.Controller
	tc     *tlsconf.TLS
	// The listener, bound by NewController with --listen HOST:0 (only
	// binding tells the port), by Start otherwise.
	lis      net.Listener
	serving  bool
	srv      *service.Server // nil with an injected Serve
	addr     net.Addr
	serveErr chan error

	stopRun context.CancelFunc
	runDone chan struct{}

	// closers run in reverse at Stop (or when NewController or Start fails).
	closers   []func()
	closeOnce sync.Once
}

// NewController validates cfg and opens the controller: the store (or the
// injected one), telemetry, metrics; it serves nothing yet. ctx bounds the
// store's opening. On an error, everything it opened is closed again.
func NewController(ctx context.Context, cfg ControllerConfig) (_ *Controller, err error) {
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	stderr := cfg.Stderr
	// Authorization is on exactly with mutual TLS (authz.Config).
	cfg.Authz.MutualTLS = cfg.TLS.ClientAuth == tlsconf.ClientAuthRequire
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Controller{cfg: cfg, stderr: stderr, runDone: make(chan struct{})}
	defer func() {
		if err != nil {
			c.closeAll()
		}
	}()
	// The address names this controller in its logs and its traces'
	// service.instance.id. With --listen HOST:0 only binding tells the port,
	// so it binds now; otherwise it binds once the store is open, so that
	// no connection is accepted while nothing can answer it (brokers would
	// wait out a timeout instead of moving to the next controller).
	addr := cfg.Listen
	if host, port, err := net.SplitHostPort(cfg.Listen); err == nil && port == "0" && cfg.Network.Serve == nil {
		if err := c.listen(); err != nil {
			return nil, err
		}
		_, bound, _ := net.SplitHostPort(c.lis.Addr().String())
		addr = net.JoinHostPort(host, bound)
	}
	if cfg.Logger != nil {
		c.logger = *cfg.Logger
	} else {
		level, _ := zerolog.ParseLevel(cfg.LogLevel)
		var out io.Writer = stderr
		if cfg.LogFormat == "console" {
			out = zerolog.ConsoleWriter{Out: stderr, TimeFormat: telemetry.LogTimeFormat, NoColor: true}
		}
		c.logger = zerolog.New(out).Level(level).Hook(telemetry.LogTimestamps).With().Str("controller", addr).Logger()
	}
	logger := c.logger

	if cfg.TracerProvider == nil {
		tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "replicad-controller", InstanceID: addr,
			Logger: logger, AlwaysSample: true})
		if err != nil {
			return nil, err
		}
		c.onClose(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = tel.Shutdown(sctx)
		})
	}

	c.tc, err = tlsconf.New(cfg.TLS, logger)
	if err != nil {
		return nil, err
	}
	st, elector := cfg.MetadataStore, cfg.Elector
	if st == nil {
		if st, elector, err = openStore(ctx, cfg, addr, logger); err != nil {
			return nil, err
		}
	}
	c.onClose(func() {
		if err := st.Close(); err != nil {
			logger.Warn().Err(err).Msg("close store")
		}
	})
	// Nil without --metrics-listen: nothing is measured (Store then
	// returns st itself).
	var cm *metrics.ControllerMetrics
	if cfg.MetricsListen != "" {
		if cm, err = metrics.NewController(); err != nil {
			return nil, err
		}
		c.onClose(func() {
			sctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = cm.Shutdown(sctx)
		})
	}
	dialBroker := cfg.Network.DialBroker
	if dialBroker == nil {
		dialBroker = brokerDialer(c.tc)
	}
	ctlCfg := controller.Config{
		Store: cm.Store(st), Elector: elector, ID: cfg.ID, SessionTimeout: cfg.SessionTimeout, Advertise: addr,
		UncleanLeaderElection: cfg.Unclean, DialBroker: dialBroker, Logger: logger,
		AutoLeaderRebalance: cfg.AutoRebalance, LeaderImbalanceCheckInterval: cfg.ImbalanceInterval,
		LeaderImbalancePerBrokerPercentage: cfg.ImbalancePercent,
		Clock:                              cfg.Clock,
	}
	if cfg.Tune != nil {
		cfg.Tune(&ctlCfg)
	}
	c.ctl, err = controller.New(ctlCfg)
	if err != nil {
		return nil, err
	}
	if cm != nil {
		if err := cm.Observe(c.ctl.MetricsSnapshot); err != nil {
			return nil, err
		}
		var metricsTLS *tls.Config
		if cfg.MetricsTLS {
			metricsTLS = c.tc.ServerConfig("http/1.1")
		}
		ms, err := metrics.Serve(cfg.MetricsListen, cm.Handler(), logger, metricsTLS, false)
		if err != nil {
			return nil, fmt.Errorf("--metrics-listen %s: %w", cfg.MetricsListen, err)
		}
		c.onClose(ms.Close)
		fmt.Fprintf(stderr, "%s%s\n", ControllerMetricsListeningPrefix, ms.Addr())
	}
	return c, nil
}

// Controller is the controller.Controller served (for a harness's checks
// and calls).
func (c *Controller) Controller() *controller.Controller { return c.ctl }

// Done is closed once the controller's Run has returned (after Stop or
// Kill).
func (c *Controller) Done() <-chan struct{} { return c.runDone }

func (c *Controller) onClose(f func()) { c.closers = append(c.closers, f) }

func (c *Controller) listen() error {
	if c.lis != nil {
		return nil
	}
	var err error
	if c.lis, err = net.Listen("tcp", c.cfg.Listen); err != nil {
		return fmt.Errorf("listen %s: %w", c.cfg.Listen, err)
	}
	return nil
}

// Start serves the controller and runs it (campaigning first with an
// election) until ctx is done or Stop or Kill. On an error the controller
// is closed.
func (c *Controller) Start(ctx context.Context) (err error) {
	cfg, logger := c.cfg, c.logger
	defer func() {
		if err != nil {
			c.closeAll()
		}
	}()
	c.serveErr = make(chan error, 1)
	if cfg.Network.Serve != nil {
		if c.addr, err = cfg.Network.Serve(c.ctl); err != nil {
			return err
		}
	} else {
		if err := c.listen(); err != nil {
			return err
		}
		// Nil when authorization is off (no mutual TLS, or --no-authorization).
		enforcer, err := authz.NewEnforcer(cfg.Authz, logger, nil)
		if err != nil {
			return err
		}
		srvOpts := []grpc.ServerOption{c.tc.ServerOption()}
		if enforcer != nil {
			srvOpts = append(srvOpts, enforcer.ServerOptions()...)
		}
		c.srv = service.NewControllerServer(c.ctl, logger, srvOpts...)
		c.serving = true
		lis := c.lis
		go func() { c.serveErr <- c.srv.Serve(lis) }()
		c.addr = lis.Addr()
		fmt.Fprintf(c.stderr, "%s%s\n", ControllerListeningPrefix, lis.Addr())
	}
	logger.Info().Str("listen", c.addr.String()).Str("store", cfg.Store).Dur("session_timeout_ms", cfg.SessionTimeout).
		Bool("tls", c.tc != nil).Str("tls_client_auth", cfg.TLS.ClientAuth.String()).
		Bool("unclean_leader_election", cfg.Unclean).Msg("controller serving")
	// Type=notify units: serving (the store is open, the listener bound).
	notifySystemd(logger, sdnotify.Ready)

	runCtx, stopRun := context.WithCancel(ctx)
	c.stopRun = stopRun
	go func() {
		defer close(c.runDone)
		_ = c.ctl.Run(runCtx)
	}()
	return nil
}

// Run starts the controller and serves it until ctx is done (then stops
// it gracefully and returns nil) or its gRPC server fails.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.Start(ctx); err != nil {
		return err
	}
	var err error
	select {
	case <-ctx.Done():
		c.logger.Info().Msg("stopping")
		notifySystemd(c.logger, sdnotify.Stopping)
	case err = <-c.serveErr:
		c.logger.Error().Err(err).Msg("gRPC server failed")
	}
	c.Stop()
	if err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		return err
	}
	return nil
}

// Stop drains the gRPC server's calls, ends the controller's Run and
// closes the store, metrics and telemetry. Idempotent.
func (c *Controller) Stop() {
	if c.srv != nil {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		c.srv.Shutdown(sctx)
		cancel()
	}
	if c.stopRun != nil {
		c.stopRun()
		<-c.runDone
		c.logger.Info().Msg("controller stopped")
	}
	c.closeAll()
}

// Kill ends the controller's Run at once, as a crash would, and returns
// without waiting (Done tells when it has returned); nothing is drained or
// closed: what a harness injected (the store, the network) is its own.
func (c *Controller) Kill() {
	if c.stopRun != nil {
		c.stopRun()
	}
}

func (c *Controller) closeAll() {
	c.closeOnce.Do(func() {
		if c.lis != nil && !c.serving {
			c.lis.Close()
		}
		for i := len(c.closers) - 1; i >= 0; i-- {
			c.closers[i]()
		}
	})
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
