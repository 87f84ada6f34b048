package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"github.com/replicad/replicad/controller"
	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/authz"
	"github.com/replicad/replicad/internal/telemetry"
	"github.com/replicad/replicad/internal/tlsconf"
	"github.com/replicad/replicad/service"
)

// controllerConfig is `ctlclient controller run`'s command line.
type controllerConfig struct {
	listen         string
	store          string
	id             int32
	sessionTimeout time.Duration
	electionTTL    time.Duration
	unclean        bool
	// The automatic leader rebalance (Kafka's auto.leader.rebalance.*).
	autoRebalance     bool
	imbalanceInterval time.Duration
	imbalancePercent  int
	logLevel          string
	logFormat         string
	// tls is the global --tls-*: the server's certificate, and the client
	// certificate of the channels to the brokers.
	tls tlsconf.Options
	// authz: --super-users, --tls-principal-rule, --no-authorization.
	authz authz.Config
}

const defaultControllerStore = "./data/controller"

func controllerRunCommand() *command {
	return &command{
		name:    "controller run",
		summary: "run the controller daemon",
		usage: "[--listen 127.0.0.1:9090] [--store DIR | etcd://HOST:PORT[,HOST:PORT]] [--session-timeout 6s] [--unclean-leader-election]\n" +
			"    [--auto-leader-rebalance-enable=true] [--leader-imbalance-check-interval 5m] [--leader-imbalance-per-broker-percentage 10]",
		details: `Serves ControllerService until SIGTERM or Ctrl-C. Brokers started with
--controller register here, heartbeat, and get their leadership from it; a
broker silent for --session-timeout is fenced and its partitions get new
leaders from their ISR.

--store DIR keeps the metadata in DIR/controller.db (bbolt, fsynced per
change); one controller per DIR (the file is locked). --store etcd://... keeps
it in etcd: run several controllers on the same etcd; they campaign, one acts,
the others answer NOT_CONTROLLER and take over within --election-ttl when it
dies. The controller epoch rises at every start and election.

Leader rebalance (Kafka's auto.leader.rebalance.enable, on by default): every
--leader-imbalance-check-interval the active controller computes, for each
broker, its imbalance: of the partitions whose preferred leader (first
replica) it is, the share led by another broker. Where that is above
--leader-imbalance-per-broker-percentage, leadership moves back to the
preferred replica, but only where it is in the ISR, live, unfenced and not
offline, and the partition is not being reassigned. A check moves at most
` + strconv.Itoa(controller.DefaultLeaderRebalanceBatch) + ` leaderships; when it had more, the next check comes after ` + controller.RebalanceFollowUp.String() + `
instead of the interval. ctlclient elect --preferred does the same on demand.

OpenTelemetry export follows the OTEL_* environment variables.`,
		example: "ctlclient controller run --listen 127.0.0.1:9090 --store ./data/controller\n" +
			"ctlclient controller run --listen 127.0.0.1:9190 --store etcd://127.0.0.1:2379",
		daemon: true,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			cfg := &controllerConfig{}
			fs.StringVar(&cfg.listen, "listen", "127.0.0.1:9090", "`ADDR` to serve ControllerService on")
			fs.StringVar(&cfg.store, "store", defaultControllerStore, "metadata store: a `DIR` (embedded bbolt) or etcd://HOST:PORT[,HOST:PORT]")
			id := int32Var(fs, "id", 0, "controller id stamped on requests to brokers")
			fs.DurationVar(&cfg.sessionTimeout, "session-timeout", controller.DefaultSessionTimeout, "a broker silent this long is fenced")
			fs.DurationVar(&cfg.electionTTL, "election-ttl", 5*time.Second, "etcd only: lease TTL of the election; a dead controller is replaced within it")
			fs.BoolVar(&cfg.unclean, "unclean-leader-election", false, "let the most caught-up live replica lead a partition with no live ISR member (loses records)")
			fs.BoolVar(&cfg.autoRebalance, "auto-leader-rebalance-enable", true, "move leadership back to the preferred replicas when a broker's leader imbalance is above the percentage")
			fs.DurationVar(&cfg.imbalanceInterval, "leader-imbalance-check-interval", controller.DefaultLeaderImbalanceCheckInterval,
				"how often the leader imbalance is checked (Kafka's leader.imbalance.check.interval.seconds)")
			fs.IntVar(&cfg.imbalancePercent, "leader-imbalance-per-broker-percentage", controller.DefaultLeaderImbalancePerBrokerPercentage,
				"`PCT` 0-100: a broker's leader imbalance above this triggers a rebalance (Kafka's leader.imbalance.per.broker.percentage)")
			fs.StringVar(&cfg.logLevel, "log-level", "info", "debug, info, warn or error")
			fs.StringVar(&cfg.logFormat, "log-format", "console", "console or json")
			fs.StringVar(&cfg.authz.SuperUsers, "super-users", "", "comma-separated principals allowed every call (spiffe://replicad/admin,...)")
			fs.Func("tls-principal-rule", "maps a client certificate without a spiffe:// SAN to a principal:\n'CN=(.*)->spiffe://replicad/client/$1' (CN, DNS, EMAIL or URI); repeatable, first match wins",
				func(v string) error { cfg.authz.Rules = append(cfg.authz.Rules, v); return nil })
			fs.BoolVar(&cfg.authz.Disabled, "no-authorization", false, "turn authorization off under --tls-client-auth require (logged at error)")
			return func(ctx context.Context, e *env) error {
				cfg.id = *id
				cfg.tls = e.g.tls
				cfg.authz.MutualTLS = cfg.tls.ClientAuth == tlsconf.ClientAuthRequire
				return runController(ctx, e.stderr, *cfg)
			}
		},
	}
}

func (cfg controllerConfig) validate() error {
	if _, _, err := net.SplitHostPort(cfg.listen); err != nil {
		return usagef("--listen: %v", err)
	}
	if cfg.store == "" {
		return usagef("--store: must not be empty")
	}
	if cfg.sessionTimeout < 100*time.Millisecond {
		return usagef("--session-timeout: must be at least 100ms (got %v)", cfg.sessionTimeout)
	}
	if cfg.electionTTL < time.Second {
		return usagef("--election-ttl: must be at least 1s (got %v)", cfg.electionTTL)
	}
	if cfg.id < 0 {
		return usagef("--id: must not be negative")
	}
	if cfg.imbalanceInterval < 10*time.Millisecond {
		return usagef("--leader-imbalance-check-interval: must be at least 10ms (got %v)", cfg.imbalanceInterval)
	}
	if cfg.imbalancePercent < 0 || cfg.imbalancePercent > 100 {
		return usagef("--leader-imbalance-per-broker-percentage: want 0 to 100 (got %d)", cfg.imbalancePercent)
	}
	if _, err := zerolog.ParseLevel(cfg.logLevel); err != nil || cfg.logLevel == "" {
		return usagef("--log-level: want debug, info, warn or error (got %q)", cfg.logLevel)
	}
	if cfg.logFormat != "console" && cfg.logFormat != "json" {
		return usagef("--log-format: want console or json (got %q)", cfg.logFormat)
	}
	if err := cfg.authz.Validate(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// runController is the controller daemon: it returns when ctx is done (a
// signal), after a graceful stop.
func runController(ctx context.Context, stderr io.Writer, cfg controllerConfig) error {
	if err := cfg.validate(); err != nil {
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
		if lis, err = net.Listen("tcp", cfg.listen); err != nil {
			return fmt.Errorf("listen %s: %w", cfg.listen, err)
		}
		return nil
	}
	addr := cfg.listen
	if host, port, err := net.SplitHostPort(cfg.listen); err == nil && port == "0" {
		if err := listen(); err != nil {
			return err
		}
		_, bound, _ := net.SplitHostPort(lis.Addr().String())
		addr = net.JoinHostPort(host, bound)
	}
	level, _ := zerolog.ParseLevel(cfg.logLevel)
	var out io.Writer = stderr
	if cfg.logFormat == "console" {
		out = zerolog.ConsoleWriter{Out: stderr, TimeFormat: time.RFC3339Nano, NoColor: true}
	}
	logger := zerolog.New(out).Level(level).With().Timestamp().Str("controller", addr).Logger()

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

	tc, err := tlsconf.New(cfg.tls, logger)
	if err != nil {
		return err
	}
	st, elector, err := openStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			logger.Warn().Err(err).Msg("close store")
		}
	}()
	ctl, err := controller.New(controller.Config{
		Store: st, Elector: elector, ID: cfg.id, SessionTimeout: cfg.sessionTimeout,
		UncleanLeaderElection: cfg.unclean, DialBroker: brokerDialer(tc), Logger: logger,
		AutoLeaderRebalance: cfg.autoRebalance, LeaderImbalanceCheckInterval: cfg.imbalanceInterval,
		LeaderImbalancePerBrokerPercentage: cfg.imbalancePercent,
	})
	if err != nil {
		return err
	}
	if err := listen(); err != nil {
		return err
	}
	// Nil when authorization is off (no mutual TLS, or --no-authorization).
	enforcer, err := authz.NewEnforcer(cfg.authz, logger, nil)
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
	// Scripts and tests started with --listen HOST:0 read the port here.
	fmt.Fprintf(stderr, "replicad controller listening on %s\n", lis.Addr())
	logger.Info().Str("listen", lis.Addr().String()).Str("store", cfg.store).Dur("session_timeout", cfg.sessionTimeout).
		Bool("tls", tc != nil).Str("tls_client_auth", cfg.tls.ClientAuth.String()).
		Bool("unclean_leader_election", cfg.unclean).Msg("controller serving")

	runCtx, stopRun := context.WithCancel(ctx)
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = ctl.Run(runCtx)
	}()
	select {
	case <-ctx.Done():
		logger.Info().Msg("stopping")
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
func openStore(ctx context.Context, cfg controllerConfig, logger zerolog.Logger) (store.Store, store.Elector, error) {
	if rest, ok := strings.CutPrefix(cfg.store, "etcd://"); ok {
		var endpoints []string
		for _, ep := range strings.Split(rest, ",") {
			if ep = strings.TrimSpace(ep); ep != "" {
				endpoints = append(endpoints, ep)
			}
		}
		if len(endpoints) == 0 {
			return nil, nil, usagef("--store: etcd:// needs at least one HOST:PORT")
		}
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		es, err := store.OpenEtcd(octx, store.EtcdConfig{Endpoints: endpoints, SessionTTL: cfg.electionTTL, Logger: logger})
		if err != nil {
			return nil, nil, err
		}
		return es, es, nil
	}
	if err := os.MkdirAll(cfg.store, 0o755); err != nil {
		return nil, nil, fmt.Errorf("--store: %w", err)
	}
	bs, err := store.OpenBolt(cfg.store)
	if err != nil {
		return nil, nil, err
	}
	return bs, nil, nil
}

// brokerDialer is the controller's connection to one broker, over TLS with
// tc (nil: plaintext); otelgrpc carries the trace of a decision into the
// broker, and the message size limits admit a LeaderAndIsr of many
// thousands of partitions.
func brokerDialer(tc *tlsconf.TLS) func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
	creds := tc.DialOptions(tlsconf.Roles{Peer: "broker", Self: "the controller"})
	return func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error) {
		conn, err := dialAddr(addr, creds...)
		if err != nil {
			return nil, nil, fmt.Errorf("broker: %w", err)
		}
		return replicadv1.NewReplicaManagerServiceClient(conn), conn, nil
	}
}
