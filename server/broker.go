package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/logmgr"
	"github.com/replicad/replicad/core/vfs"
	"github.com/replicad/replicad/fetcher"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/authz"
	"github.com/replicad/replicad/internal/dirlock"
	"github.com/replicad/replicad/internal/sdnotify"
	"github.com/replicad/replicad/internal/telemetry"
	"github.com/replicad/replicad/internal/tlsconf"
	"github.com/replicad/replicad/server/metrics"
	"github.com/replicad/replicad/service"
)

// Bounds on the stages of a clean stop. In-flight calls (a long-poll
// consume, an acks=-1 produce) get gracefulStopTimeout to finish before they
// are cancelled; the replica manager then checkpoints and flushes.
const (
	gracefulStopTimeout = 10 * time.Second
	rmShutdownTimeout   = 30 * time.Second
	telemetryTimeout    = 5 * time.Second
)

// DefaultControlledShutdownTimeout is the bound on the controlled shutdown
// when BrokerConfig.ControlledShutdownTimeout is 0.
const DefaultControlledShutdownTimeout = 30 * time.Second

// ListeningPrefix starts the fixed stderr line naming the address the
// broker's gRPC server is bound to, whatever the log format, so that
// scripts and tests using port 0 learn the port.
const ListeningPrefix = "replicad listening on "

// BrokerConfig is everything a broker process is made of: the validated
// settings (cmd/replicad fills them from its flags and --config file), and
// the injection points a test harness replaces (the zero value of each is
// what ships).
type BrokerConfig struct {
	BrokerID int32
	// Listen is the gRPC server's host:port (port 0: a free one).
	Listen string
	// LogDirs are absolute, cleaned and distinct.
	LogDirs []string
	// Controllers are the controller addresses; none: standalone.
	Controllers []string
	// AdvertisedAddress is the host:port registered with the controller;
	// empty: the address bound (see advertisedEndpoint).
	AdvertisedAddress string
	// ControlledShutdownTimeout bounds the controlled shutdown of Stop; 0:
	// DefaultControlledShutdownTimeout.
	ControlledShutdownTimeout time.Duration
	HWCheckpointInterval      time.Duration
	ReplicaLagTimeMax         time.Duration
	NumReplicaFetchers        int
	MinInsyncReplicas         int
	MaxPartitions             int
	LogConfig                 log.Config
	// Retention nil: core.DefaultRetention.
	Retention                *log.Retention
	RetentionCheckInterval   time.Duration
	ProducerIDExpiration     time.Duration
	MaxProducersPerPartition int
	// StateChangeLevel is the state.change logger's own level; nil: the
	// Logger's.
	StateChangeLevel *zerolog.Level
	// TraceDataPlane: Produce, Consume and Fetch create spans too.
	TraceDataPlane bool
	// MetricsListen serves Prometheus text ("": nothing is measured).
	MetricsListen    string
	MetricsLogSeries bool
	MetricsTLS       bool
	Pprof            bool
	// MaxConnections and ConnectionsMaxIdle: service.Limits.
	MaxConnections     int
	ConnectionsMaxIdle time.Duration
	// TLS: no file, plaintext.
	TLS   tlsconf.Options
	Authz authz.Config

	// Logger is the broker's (broker_id on every line).
	Logger zerolog.Logger
	// Stderr takes the fixed lines scripts read (ListeningPrefix and the
	// metrics one) and the start-up refusals; nil: discarded.
	Stderr io.Writer

	// What a harness replaces; the zero values are production's.

	// Clock: nil, the real one.
	Clock clock.Clock
	// FS holds the log dirs: nil, the OS's files, locked against a second
	// process (dirlock); a harness's file system (crashfs) is its own.
	FS vfs.FS
	// BootID names this boot of the machine; nil reads Linux's boot_id.
	BootID func() string
	// TracerProvider makes the tracers of core and the fetchers; nil sets
	// telemetry up from the OTEL_* environment (telemetry.Setup), which
	// also installs it as the global provider.
	TracerProvider trace.TracerProvider
	// Network is how the broker is reached and reaches its peers; the zero
	// value is TCP and gRPC with TLS.
	Network Network
	// Random draws the jitter of the clients' retries; the zero value is
	// math/rand/v2's.
	Random Random
	// IncarnationID names this life of the broker in its registrations;
	// empty: a random one.
	IncarnationID string
	// WrapIsrChanger, if set, is given the AlterPartition client and
	// returns what core submits ISR changes to (a harness holds them back
	// to release them in an order it chooses).
	WrapIsrChanger func(core.IsrChanger) core.IsrChanger
	// OnStop is called first when Run's context is done, before the
	// controlled shutdown (the daemon restores the default signal handling,
	// so that a second signal kills it).
	OnStop func()
}

// Network replaces the broker's network. Each field left nil is TCP and
// gRPC.
type Network struct {
	// Serve, when set, replaces the listener and the gRPC server: Start
	// hands it the broker's services, and it returns the address they are
	// reached at. It must stop serving on its own when the harness takes
	// the broker down (Stop and Close stop nothing of it).
	Serve func(Services) (net.Addr, error)
	// DialController makes the broker's clients of the controller at addr:
	// purpose is "session", "alterpartition" or "producerids".
	DialController func(purpose, addr string) (replicadv1.ControllerServiceClient, io.Closer, error)
	// LeaderClient is the followers' client of their leaders.
	LeaderClient fetcher.LeaderClient
}

// Services are what a broker serves, for Network.Serve.
type Services struct {
	ReplicaManager *core.ReplicaManager
	// ReplicaManagerService is the controller's side (LeaderAndIsr,
	// UpdateMetadata, StopReplica), as the gRPC server serves it.
	ReplicaManagerService replicadv1.ReplicaManagerServiceServer
	// ProducerIDs is InitProducerId's source; nil standalone.
	ProducerIDs service.ProducerIDs
}

// Random are the sources of the clients' jitter.
type Random struct {
	// Float64: the fetchers' reconnect jitter, in [0, 1).
	Float64 func() float64
	// Int64N: the session's and the producer ID client's backoff, in [0, n).
	Int64N func(n int64) int64
	// AlterPartition: the AlterPartition client's.
	AlterPartition *rand.Rand
}

// shutdownTimeout is the bound on the controlled shutdown.
func (c BrokerConfig) shutdownTimeout() time.Duration {
	if c.ControlledShutdownTimeout > 0 {
		return c.ControlledShutdownTimeout
	}
	return DefaultControlledShutdownTimeout
}

// Broker is one broker process: the replica manager and its log dirs, the
// fetchers, the clients of the controller, the gRPC server, metrics,
// telemetry and authorization, assembled as cmd/replicad ships them.
// NewBroker opens it, Start serves it and registers it with the
// controller, and Stop (graceful) or Close (abrupt) ends it; Run does all
// of it for a daemon.
type Broker struct {
	cfg    BrokerConfig
	logger zerolog.Logger
	stderr io.Writer

	dirLock     *dirlock.Lock
	tel         *telemetry.Telemetry // nil with an injected TracerProvider
	tlsConf     *tlsconf.TLS
	link        *controllerLink
	fetchClient *fetcher.GRPCClient // nil with an injected LeaderClient
	fetchers    *fetcher.Manager
	closeIsr    func()
	closeIDs    func()
	producerIDs service.ProducerIDs
	metrics     *metrics.Metrics
	rm          *core.ReplicaManager

	metricsSrv *metricsServer
	srv        *service.Server // nil with an injected Serve
	addr       net.Addr
	served     chan error
	registered <-chan error

	closeOnce sync.Once
	closeErr  error
}

// NewBroker opens a broker: it locks and opens the log dirs and builds
// every component, serving nothing yet. On an error, everything it opened
// is closed again.
func NewBroker(cfg BrokerConfig) (_ *Broker, err error) {
	if cfg.Stderr == nil {
		cfg.Stderr = io.Discard
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.BootID == nil {
		cfg.BootID = bootID
	}
	logger := cfg.Logger
	b := &Broker{cfg: cfg, logger: logger, stderr: cfg.Stderr, closeIsr: func() {}, closeIDs: func() {}}
	defer func() {
		if err != nil {
			b.closeAll()
		}
	}()

	// First of all: another process on these dirs (a second replicad with
	// this broker's id, or any other) would append to and truncate the
	// same files. The refused process writes nothing and exits.
	if cfg.FS == nil {
		dirLock, unlocked, err := dirlock.Acquire(cfg.LogDirs, fmt.Sprintf("pid=%d broker.id=%d started=%s",
			os.Getpid(), cfg.BrokerID, time.Now().UTC().Format(time.RFC3339)))
		if err != nil {
			logger.Error().Err(err).Strs("log_dirs", cfg.LogDirs).Msg("refusing to start: a log dir is locked by another process")
			fmt.Fprintf(b.stderr, "replicad: start broker %d: %v\n", cfg.BrokerID, err)
			return nil, err
		}
		for dir, err := range unlocked {
			// The log manager meets the same error and takes the dir offline.
			logger.Warn().Err(err).Str("log_dir", dir).Msg("cannot lock a log dir; it is left to fail at open")
		}
		// Released last, after the replica manager's shutdown.
		b.dirLock = dirLock
	}

	tracers := cfg.TracerProvider
	if tracers == nil {
		b.tel, err = telemetry.Setup(context.Background(), telemetry.Config{
			ServiceName: "replicad",
			InstanceID:  strconv.Itoa(int(cfg.BrokerID)),
			Logger:      logger,
		})
		if err != nil {
			logger.Error().Err(err).Msg("telemetry setup failed")
			return nil, err
		}
		// The provider telemetry.Setup installed.
		tracers = otel.GetTracerProvider()
	}

	// Nil without TLS files: plaintext everywhere.
	b.tlsConf, err = tlsconf.New(cfg.TLS, logger)
	if err != nil {
		logger.Error().Err(err).Msg("TLS setup failed")
		fmt.Fprintf(b.stderr, "replicad: %v\n", err)
		return nil, err
	}

	// With controllers: the registration and session, made once the gRPC
	// server is up; until then the broker epoch is 0.
	b.link = newControllerLink(cfg, logger, b.tlsConf)

	fetchers, fetchClient, err := newFetcherManager(cfg, logger, b.tlsConf, &b.rm, b.link.brokerEpochFunc(), tracers)
	if err != nil {
		logger.Error().Err(err).Msg("fetcher setup failed")
		return nil, err
	}
	b.fetchers, b.fetchClient = fetchers, fetchClient
	alterLogDirs, err := newAlterLogDirsManager(cfg, logger, &b.rm, tracers)
	if err != nil {
		logger.Error().Err(err).Msg("alter-log-dirs fetcher setup failed")
		return nil, err
	}
	isrChanger, useController, closeIsrChanger, err := newIsrChanger(cfg, logger, b.tlsConf, b.link.brokerEpochFunc())
	if err != nil {
		logger.Error().Err(err).Strs("controllers", cfg.Controllers).Msg("controller client setup failed")
		return nil, err
	}
	// Closed after the replica manager's shutdown: nothing then acts on the ISR.
	b.closeIsr = closeIsrChanger
	if useController != nil {
		b.link.followController(useController)
	}
	if cfg.WrapIsrChanger != nil {
		isrChanger = cfg.WrapIsrChanger(isrChanger)
	}
	producerIDs, useControllerForIDs, closeProducerIDs, err := newProducerIDs(cfg, logger, b.tlsConf, b.link.brokerEpochFunc())
	if err != nil {
		logger.Error().Err(err).Strs("controllers", cfg.Controllers).Msg("producer ID client setup failed")
		return nil, err
	}
	b.producerIDs, b.closeIDs = producerIDs, closeProducerIDs
	b.link.followController(useControllerForIDs)
	// Nil without MetricsListen: nothing is measured.
	b.metrics, err = newMetrics(cfg)
	if err != nil {
		logger.Error().Err(err).Msg("metrics setup failed")
		return nil, err
	}
	b.rm, err = core.NewReplicaManager(core.Config{
		BrokerID:                 cfg.BrokerID,
		LogDirs:                  cfg.LogDirs,
		LogConfig:                cfg.LogConfig,
		HWCheckpointInterval:     cfg.HWCheckpointInterval,
		ReplicaLagTimeMax:        cfg.ReplicaLagTimeMax,
		Retention:                cfg.Retention,
		RetentionCheckInterval:   cfg.RetentionCheckInterval,
		MinInsyncReplicas:        cfg.MinInsyncReplicas,
		Clock:                    cfg.Clock,
		Logger:                   logger,
		StateChangeLevel:         cfg.StateChangeLevel,
		Tracer:                   tracers.Tracer("github.com/replicad/replicad/core"),
		Fetchers:                 fetchers,
		AlterLogDirsFetchers:     alterLogDirs,
		IsrChanger:               isrChanger,
		BrokerEpoch:              b.link.brokerEpochFunc(),
		Metrics:                  metricsRecorder(b.metrics),
		BootID:                   cfg.BootID(),
		MaxPartitions:            cfg.MaxPartitions,
		ProducerIDExpiration:     cfg.ProducerIDExpiration,
		MaxProducersPerPartition: cfg.MaxProducersPerPartition,
		FS:                       cfg.FS,
	})
	if err != nil {
		if errors.Is(err, logmgr.ErrOtherBroker) {
			logger.Error().Err(err).Strs("log_dirs", cfg.LogDirs).Msg("refusing to start on a log dir of another broker")
		} else {
			logger.Error().Err(err).Strs("log_dirs", cfg.LogDirs).Msg("cannot open the log dirs")
		}
		fmt.Fprintf(b.stderr, "replicad: start broker %d: %v\n", cfg.BrokerID, err)
		return nil, err
	}
	return b, nil
}

// ReplicaManager is the broker's (for a harness's checks).
func (b *Broker) ReplicaManager() *core.ReplicaManager { return b.rm }

// BrokerEpoch is the current broker epoch: 0 until registered, and
// standalone.
func (b *Broker) BrokerEpoch() int64 { return b.link.brokerEpoch() }

// Registered reports whether the broker holds a session with the controller.
func (b *Broker) Registered() bool { return b.link != nil && b.link.session.Load() != nil }

// ControlledShutdown asks the controller to move this broker's leaderships
// away, within ctx, without stopping the broker (Stop does it, bounded by
// ControlledShutdownTimeout); an error when not registered.
func (b *Broker) ControlledShutdown(ctx context.Context) error {
	if b.link == nil {
		return errors.New("no controller: a standalone broker has no controlled shutdown")
	}
	s := b.link.session.Load()
	if s == nil {
		return errors.New("not registered with the controller")
	}
	return s.ControlledShutdown(ctx)
}

// Addr is the address served; nil before Start.
func (b *Broker) Addr() net.Addr { return b.addr }

// Start serves the broker (metrics first, then the gRPC services) and, with
// controllers, registers it in the background until ctx is done. On an
// error the broker is closed.
func (b *Broker) Start(ctx context.Context) (err error) {
	cfg, logger := b.cfg, b.logger
	defer func() {
		if err != nil {
			b.closeAll()
		}
	}()
	var lis net.Listener
	if cfg.Network.Serve == nil {
		lis, err = net.Listen("tcp", cfg.Listen)
		if err != nil {
			logger.Error().Err(err).Str("listen", cfg.Listen).Msg("cannot listen")
			return err
		}
		defer func() {
			if err != nil {
				lis.Close()
			}
		}()
		b.addr = lis.Addr()
		// A fixed line (whatever the log format) so scripts and tests using port 0 learn the port.
		fmt.Fprintf(b.stderr, "%s%s\n", ListeningPrefix, lis.Addr())
	}

	if b.metrics != nil {
		err = b.metrics.Observe(metrics.Sources{Replicas: b.rm.MetricsSnapshot, FetcherMaxLag: b.fetchers.MaxLag,
			NoLogSeries: !cfg.MetricsLogSeries, FollowerLags: followerLags(b.fetchers)})
		if err == nil {
			// Free bytes of each log dir's filesystem: the disk-filling alert.
			err = b.metrics.ObserveLogDirs(cfg.LogDirs)
		}
		if err != nil {
			logger.Error().Err(err).Msg("metrics setup failed")
			return err
		}
	}
	var metricsTLS *tls.Config
	if cfg.MetricsTLS {
		metricsTLS = b.tlsConf.ServerConfig("http/1.1")
	}
	b.metricsSrv, err = startMetrics(cfg.MetricsListen, b.metrics, logger, metricsTLS, cfg.Pprof)
	if err != nil {
		logger.Error().Err(err).Str("metrics_listen", cfg.MetricsListen).Msg("cannot serve metrics")
		return err
	}
	if a := b.metricsSrv.addr(); a != "" {
		fmt.Fprintf(b.stderr, "%s%s\n", metricsListeningPrefix, a)
	}

	// Nil when authorization is off (no mutual TLS, or Authz.Disabled).
	enforcer, err := authz.NewEnforcer(cfg.Authz, logger, b.metrics.AuthorizationDenied)
	if err != nil {
		logger.Error().Err(err).Msg("authorization setup failed")
		return err
	}
	opts := service.Options{ReplicaManager: b.rm, BrokerEpoch: b.link.brokerEpochFunc(), ControllerGuard: b.link.guard(),
		Logger: logger, TraceDataPlane: cfg.TraceDataPlane,
		Limits: service.Limits{MaxConnections: cfg.MaxConnections, ConnectionsMaxIdle: cfg.ConnectionsMaxIdle},
		OnACLs: aclSink(enforcer, logger), DescribeFilter: describeFilter(enforcer), ProducerIDs: b.producerIDs}
	b.served = make(chan error, 1)
	if serve := cfg.Network.Serve; serve != nil {
		b.addr, err = serve(Services{ReplicaManager: b.rm, ReplicaManagerService: service.NewReplicaManagerService(opts),
			ProducerIDs: b.producerIDs})
		if err != nil {
			logger.Error().Err(err).Msg("cannot serve")
			return err
		}
	} else {
		opts.ServerOptions = append(metricsServerOptions(b.metrics), b.tlsConf.ServerOption())
		if enforcer != nil {
			opts.ServerOptions = append(opts.ServerOptions, enforcer.ServerOptions()...)
		}
		b.srv = service.NewServer(opts)
		go func() { b.served <- b.srv.Serve(lis) }()
	}
	// broker_id is already on every line (the daemon's logger).
	logger.Info().Str("listen", b.addr.String()).Strs("log_dirs", cfg.LogDirs).Int("max_open_files", cfg.LogConfig.MaxOpenFiles).Msg("replicad started")
	// Type=notify units: serving now (the log dirs are open, the listener
	// bound, health SERVING); registration with the controller follows.
	notifySystemd(logger, sdnotify.Ready)
	// Register only now: the controller sends LeaderAndIsr right after.
	previous := b.rm.PreviousBrokerEpoch()
	if b.link != nil {
		logger.Info().Int64("previous_broker_epoch", previous).Bool("previous_life_intact", previous >= 0).
			Msg("last life of this broker, as the log dirs tell it")
	}
	b.registered = b.link.start(ctx, b.addr, brokerLife{previousEpoch: previous, offline: b.rm.OfflinePartitions, registered: b.rm.RecordBrokerEpoch})
	return nil
}

// Run starts the broker and serves it until ctx is done, then stops it
// gracefully (Stop); it returns nil after a clean stop, and an error when
// the broker could not start, could not register, lost its last log dir,
// or its server failed (the broker is then closed).
func (b *Broker) Run(ctx context.Context) error {
	if err := b.Start(ctx); err != nil {
		return err
	}
	registered := b.registered
	for {
		select {
		case <-ctx.Done():
			if b.cfg.OnStop != nil {
				b.cfg.OnStop()
			}
			b.logger.Info().Msg("signal received, shutting down")
			if err := b.Stop(); err != nil {
				return err
			}
			b.logger.Info().Msg("replicad stopped")
			return nil
		case err := <-registered:
			registered = nil
			if err == nil || ctx.Err() != nil {
				continue
			}
			b.logger.Error().Err(err).Msg("cannot register with the controller, exiting")
			b.Close()
			return err
		case err := <-b.rm.Fatal():
			b.logger.Error().Err(err).Msg("no log dir left online, exiting")
			b.Close()
			return err
		case err := <-b.served:
			b.logger.Error().Err(err).Msg("gRPC server failed")
			b.Close()
			return err
		}
	}
}

// Stop ends a started broker gracefully: the controller moves its
// leaderships away while it still serves, in-flight calls finish, then the
// replica manager checkpoints and flushes. It returns the replica
// manager's shutdown error.
func (b *Broker) Stop() error {
	notifySystemd(b.logger, sdnotify.Stopping)
	// First: a controller request in flight (a StopReplica deleting
	// 10,000 logs) stops at its next partition, so that the controlled
	// shutdown's LeaderAndIsr is not queued behind it for minutes;
	// followers stop fetching for the leaving broker (see core's
	// BeginShutdown).
	b.rm.BeginShutdown()
	// While the broker still serves: the controller moves its
	// leaderships away, and the new leaders' followers catch up from it.
	b.link.controlledShutdown()
	return b.Close()
}

// Close ends the broker without a controlled shutdown (a broker that must
// exit, or a harness's crashed one): in-flight calls drain, the replica
// manager checkpoints and flushes, then the registration or session ends
// (the controller fences the broker once its session times out) and the
// rest closes. Idempotent; it returns the replica manager's shutdown
// error.
func (b *Broker) Close() error {
	b.closeAll()
	return b.closeErr
}

func (b *Broker) closeAll() {
	b.closeOnce.Do(func() {
		if b.srv != nil {
			stopServing(b.srv, b.logger)
		}
		if b.rm != nil {
			b.closeErr = shutdownReplicaManager(b.rm, b.logger)
		}
		// The session lasts until the logs are flushed: the controller
		// fences the broker only once it is gone.
		b.link.close()
		if b.metricsSrv != nil {
			b.metricsSrv.close()
		} else if b.metrics != nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_ = b.metrics.Shutdown(ctx)
			cancel()
		}
		b.closeIDs()
		b.closeIsr()
		if b.fetchClient != nil {
			_ = b.fetchClient.Close()
		}
		if b.tel != nil {
			shutdownTelemetry(b.tel, b.logger)
		}
		if b.dirLock != nil {
			b.dirLock.Release()
		}
	})
}

// notifySystemd tells a Type=notify unit's systemd the daemon's state; a
// failure is only logged: the daemon works the same without a supervisor.
func notifySystemd(logger zerolog.Logger, state string) {
	if sent, err := sdnotify.Notify(state); err != nil {
		logger.Warn().Err(err).Str("state", state).Msg("cannot notify systemd")
	} else if sent {
		logger.Debug().Str("state", state).Msg("notified systemd")
	}
}

// bootID names this boot of the machine (Linux); "" elsewhere, when only a
// clean shutdown counts as a life that lost nothing.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// stopServing turns health NOT_SERVING and drains in-flight calls, cancelling
// the ones still running after gracefulStopTimeout.
func stopServing(srv *service.Server, logger zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), gracefulStopTimeout)
	defer cancel()
	if !srv.Shutdown(ctx) {
		logger.Warn().Dur("timeout_ms", gracefulStopTimeout).Msg("in-flight calls cancelled after the graceful stop timeout")
	}
}

// shutdownReplicaManager stops fetchers, checkpoints HWs and flushes the logs.
func shutdownReplicaManager(rm *core.ReplicaManager, logger zerolog.Logger) error {
	ctx, cancel := context.WithTimeout(context.Background(), rmShutdownTimeout)
	defer cancel()
	if err := rm.Shutdown(ctx); err != nil {
		logger.Error().Err(err).Msg("replica manager shutdown failed")
		return err
	}
	return nil
}

func shutdownTelemetry(tel *telemetry.Telemetry, logger zerolog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), telemetryTimeout)
	defer cancel()
	if err := tel.Shutdown(ctx); err != nil {
		logger.Warn().Err(err).Msg("spans may be lost")
	}
}

// describeFilter is the enforcer's for Metadata answers; nil (every topic)
// when authorization is off.
func describeFilter(enforcer *authz.Enforcer) service.DescribeFilter {
	if enforcer == nil {
		return nil
	}
	return enforcer.DescribeFilter
}

// aclSink gives the ACL set of each UpdateMetadata to the broker's
// authorizer; nil when authorization is off (nothing to give it to). Until
// the first set arrives the authorizer holds none and refuses every client
// produce and consume.
func aclSink(enforcer *authz.Enforcer, logger zerolog.Logger) func(int32, int64, []*replicadv1.Acl) {
	if enforcer == nil {
		return nil
	}
	return newACLSink(enforcer.Authorizer, logger)
}

// newACLSink keeps the newest ACL set by (controller epoch, acls_version):
// UpdateMetadata handlers run concurrently, and one holding an older set
// (a slow attempt its retry overtook, a deposed controller's request) must
// not replace a newer one, or a removed ACL would come back.
func newACLSink(a *authz.Authorizer, logger zerolog.Logger) func(int32, int64, []*replicadv1.Acl) {
	var mu sync.Mutex
	lastEpoch, lastVersion, lastLen := int32(-1), int64(-1), -1
	return func(ctrlEpoch int32, version int64, acls []*replicadv1.Acl) {
		mu.Lock()
		defer mu.Unlock()
		if ctrlEpoch < lastEpoch || (ctrlEpoch == lastEpoch && version < lastVersion) {
			logger.Debug().Int32("controller_epoch", ctrlEpoch).Int64("acls_version", version).
				Int32("held_controller_epoch", lastEpoch).Int64("held_acls_version", lastVersion).
				Msg("ignoring an older ACL set")
			return
		}
		set, skipped := authz.ACLSetFromProto(acls)
		for _, err := range skipped {
			logger.Warn().Err(err).Msg("ignoring an ACL from the controller this broker cannot read")
		}
		a.SetACLs(set)
		// Every UpdateMetadata carries the set: log when it changes, not
		// at every request.
		if ctrlEpoch != lastEpoch || version != lastVersion || set.Len() != lastLen {
			logger.Info().Int("acls", set.Len()).Int32("controller_epoch", ctrlEpoch).Int64("acls_version", version).
				Msg("acls from the controller")
		}
		lastEpoch, lastVersion, lastLen = ctrlEpoch, version, set.Len()
	}
}
