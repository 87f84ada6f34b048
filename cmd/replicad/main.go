package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/clock"
	"github.com/replicad/replicad/core/logmgr"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/authz"
	"github.com/replicad/replicad/internal/dirlock"
	"github.com/replicad/replicad/internal/metrics"
	"github.com/replicad/replicad/internal/sdnotify"
	"github.com/replicad/replicad/internal/telemetry"
	"github.com/replicad/replicad/internal/tlsconf"
	"github.com/replicad/replicad/internal/version"
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

func main() {
	tuneGC()
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch picks the daemon: `replicad controller ...` runs the controller
// (internal/controllerd), `replicad version` prints the build, anything
// else is the broker's flags.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "controller":
			return runControllerCommand(args[1:], stdout, stderr)
		case "version":
			return runVersion(args[1:], stdout, stderr)
		case helpMarkdownFlag:
			return runHelpMarkdown(args[1:], stdout, stderr)
		}
	}
	if len(args) == 0 {
		announceDefaults(stderr)
	}
	return run(args, stdout, stderr)
}

// defaultGCPercent replaces Go's 100 unless GOGC is set. A broker's heap is
// mostly produce and fetch batches that live for one request; collecting at 4x
// the live heap instead of 2x measured 30-40% more acks=1 throughput (README,
// "Performance"), and the live heap of a broker is small (about 1 KiB per idle
// partition), so the extra headroom is cheap.
const defaultGCPercent = 400

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(defaultGCPercent)
	}
}

// applyMemoryLimit sets the runtime's soft memory limit from --memory-limit,
// unless only GOMEMLIMIT was given (the runtime has applied it already).
func applyMemoryLimit(cfg config, logger zerolog.Logger) {
	if _, env := os.LookupEnv("GOMEMLIMIT"); env && !cfg.memoryLimitSet {
		logger.Info().Int64("memory_limit_bytes", debug.SetMemoryLimit(-1)).Msg("memory limit from GOMEMLIMIT")
		return
	}
	limit := cfg.memoryLimit
	if limit == 0 {
		limit = math.MaxInt64 // the runtime's "no limit"
	}
	debug.SetMemoryLimit(limit)
}

// run is the whole daemon; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if cfg.showVersion {
		fmt.Fprintln(stdout, version.Get().String("replicad"))
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "replicad: %v\nRun 'replicad --help' for usage.\n", err)
		return 2
	}
	// Every stderr line from here on goes through one queue and one writer
	// goroutine (see logWriter); closed last, after every other deferred
	// step has logged.
	lw := newLogWriter(stderr, cfg.logFormat == "console", !isTerminal(stderr))
	defer lw.Close()
	stderr = lw.Raw()
	logger := eventLogger(cfg, lw.Events())
	applyMemoryLimit(cfg, logger)

	// First of all: another process on these dirs (a second replicad with
	// this broker's id, or any other) would append to and truncate the
	// same files. The refused process writes nothing and exits.
	dirLock, unlocked, err := dirlock.Acquire(cfg.logDirs, fmt.Sprintf("pid=%d broker.id=%d started=%s",
		os.Getpid(), cfg.brokerID, time.Now().UTC().Format(time.RFC3339)))
	if err != nil {
		logger.Error().Err(err).Strs("log_dirs", cfg.logDirs).Msg("refusing to start: a log dir is locked by another process")
		fmt.Fprintf(stderr, "replicad: start broker %d: %v\n", cfg.brokerID, err)
		return 1
	}
	for dir, err := range unlocked {
		// The log manager meets the same error and takes the dir offline.
		logger.Warn().Err(err).Str("log_dir", dir).Msg("cannot lock a log dir; it is left to fail at open")
	}
	// Released when run returns, after the replica manager's shutdown
	// (deferred later, so run first).
	defer dirLock.Release()

	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stopSignals()

	tel, err := telemetry.Setup(ctx, telemetry.Config{
		ServiceName: "replicad",
		InstanceID:  strconv.Itoa(int(cfg.brokerID)),
		Logger:      logger,
	})
	if err != nil {
		logger.Error().Err(err).Msg("telemetry setup failed")
		return 1
	}
	defer shutdownTelemetry(tel, logger)

	// Nil without --tls-*: plaintext everywhere.
	tlsConf, err := tlsconf.New(cfg.tls, logger)
	if err != nil {
		logger.Error().Err(err).Msg("TLS setup failed")
		fmt.Fprintf(stderr, "replicad: %v\n", err)
		return 1
	}

	// With --controller: the registration and session, made once the gRPC
	// server is up; until then the broker epoch is 0.
	link := newControllerLink(cfg, logger, tlsConf)
	defer link.close()

	var rm *core.ReplicaManager
	fetchers, fetchClient, err := newFetcherManager(cfg, logger, tlsConf, &rm, link.brokerEpochFunc())
	if err != nil {
		logger.Error().Err(err).Msg("fetcher setup failed")
		return 1
	}
	defer fetchClient.Close()
	alterLogDirs, err := newAlterLogDirsManager(cfg, logger, &rm)
	if err != nil {
		logger.Error().Err(err).Msg("alter-log-dirs fetcher setup failed")
		return 1
	}
	isrChanger, useController, closeIsrChanger, err := newIsrChanger(cfg, logger, tlsConf, link.brokerEpochFunc())
	if err != nil {
		logger.Error().Err(err).Str("controller", cfg.controller).Msg("controller client setup failed")
		return 1
	}
	// Deferred, so it runs after the replica manager's shutdown: nothing then acts on the ISR.
	defer closeIsrChanger()
	if useController != nil {
		link.followController(useController)
	}
	producerIDs, useControllerForIDs, closeProducerIDs, err := newProducerIDs(cfg, logger, tlsConf, link.brokerEpochFunc())
	if err != nil {
		logger.Error().Err(err).Str("controller", cfg.controller).Msg("producer ID client setup failed")
		return 1
	}
	defer closeProducerIDs()
	link.followController(useControllerForIDs)
	// Nil without --metrics-listen: nothing is measured.
	brokerMetrics, err := newMetrics(cfg)
	if err != nil {
		logger.Error().Err(err).Msg("metrics setup failed")
		return 1
	}
	rm, err = core.NewReplicaManager(core.Config{
		BrokerID:                 cfg.brokerID,
		LogDirs:                  cfg.logDirs,
		LogConfig:                cfg.logConfig,
		HWCheckpointInterval:     cfg.hwCheckpointInterval,
		ReplicaLagTimeMax:        cfg.replicaLagTimeMax,
		Retention:                &cfg.retention,
		RetentionCheckInterval:   cfg.retentionCheckInterval,
		MinInsyncReplicas:        cfg.minInsyncReplicas,
		Clock:                    clock.Real{},
		Logger:                   logger,
		StateChangeLevel:         cfg.stateChangeLevel,
		Tracer:                   tel.Tracer("github.com/replicad/replicad/core"),
		Fetchers:                 fetchers,
		AlterLogDirsFetchers:     alterLogDirs,
		IsrChanger:               isrChanger,
		BrokerEpoch:              link.brokerEpochFunc(),
		Metrics:                  metricsRecorder(brokerMetrics),
		BootID:                   bootID(),
		MaxPartitions:            cfg.maxPartitions,
		ProducerIDExpiration:     cfg.producerIDExpiration,
		MaxProducersPerPartition: cfg.maxProducersPerPartition,
	})
	if err != nil {
		if errors.Is(err, logmgr.ErrOtherBroker) {
			logger.Error().Err(err).Strs("log_dirs", cfg.logDirs).Msg("refusing to start on a log dir of another broker")
		} else {
			logger.Error().Err(err).Strs("log_dirs", cfg.logDirs).Msg("cannot open the log dirs")
		}
		fmt.Fprintf(stderr, "replicad: start broker %d: %v\n", cfg.brokerID, err)
		return 1
	}

	lis, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		logger.Error().Err(err).Str("listen", cfg.listen).Msg("cannot listen")
		shutdownReplicaManager(rm, logger)
		return 1
	}
	// A fixed line (whatever the log format) so scripts and tests using port 0 learn the port.
	fmt.Fprintf(stderr, "replicad listening on %s\n", lis.Addr())

	err = brokerMetrics.Observe(metrics.Sources{Replicas: rm.MetricsSnapshot, FetcherMaxLag: fetchers.MaxLag,
		NoLogSeries: !cfg.metricsLogSeries, FollowerLags: followerLags(fetchers)})
	if err == nil {
		// Free bytes of each log dir's filesystem: the disk-filling alert.
		err = brokerMetrics.ObserveLogDirs(cfg.logDirs)
	}
	if err != nil {
		logger.Error().Err(err).Msg("metrics setup failed")
		lis.Close()
		shutdownReplicaManager(rm, logger)
		return 1
	}
	var metricsTLS *tls.Config
	if cfg.metricsTLS {
		metricsTLS = tlsConf.ServerConfig("http/1.1")
	}
	metricsSrv, err := startMetrics(cfg.metricsListen, brokerMetrics, logger, metricsTLS, cfg.pprof)
	if err != nil {
		logger.Error().Err(err).Str("metrics_listen", cfg.metricsListen).Msg("cannot serve metrics")
		lis.Close()
		shutdownReplicaManager(rm, logger)
		return 1
	}
	defer metricsSrv.close()
	if a := metricsSrv.addr(); a != "" {
		fmt.Fprintf(stderr, "%s%s\n", metricsListeningPrefix, a)
	}

	// Nil when authorization is off (no mutual TLS, or --no-authorization).
	enforcer, err := authz.NewEnforcer(cfg.authz, logger, brokerMetrics.AuthorizationDenied)
	if err != nil {
		logger.Error().Err(err).Msg("authorization setup failed")
		lis.Close()
		shutdownReplicaManager(rm, logger)
		return 1
	}
	serverOpts := append(metricsServerOptions(brokerMetrics), tlsConf.ServerOption())
	if enforcer != nil {
		serverOpts = append(serverOpts, enforcer.ServerOptions()...)
	}
	srv := service.NewServer(service.Options{ReplicaManager: rm, BrokerEpoch: link.brokerEpochFunc(), ControllerGuard: link.guard(),
		Logger: logger, ServerOptions: serverOpts, TraceDataPlane: cfg.traceDataPlane,
		Limits: service.Limits{MaxConnections: cfg.maxConnections, ConnectionsMaxIdle: cfg.connectionsMaxIdle},
		OnACLs: aclSink(enforcer, logger), DescribeFilter: describeFilter(enforcer), ProducerIDs: producerIDs})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	// broker_id is already on every line (newLogger).
	logger.Info().Str("listen", lis.Addr().String()).Strs("log_dirs", cfg.logDirs).Int("max_open_files", cfg.logConfig.MaxOpenFiles).Msg("replicad started")
	// Type=notify units: serving now (the log dirs are open, the listener
	// bound, health SERVING); registration with the controller follows.
	notifySystemd(logger, sdnotify.Ready)
	// Register only now: the controller sends LeaderAndIsr right after.
	previous := rm.PreviousBrokerEpoch()
	if link != nil {
		logger.Info().Int64("previous_broker_epoch", previous).Bool("previous_life_intact", previous >= 0).
			Msg("last life of this broker, as the log dirs tell it")
	}
	registered := link.start(ctx, lis.Addr(), brokerLife{previousEpoch: previous, offline: rm.OfflinePartitions, registered: rm.RecordBrokerEpoch})

	for {
		select {
		case <-ctx.Done():
			// A second signal now kills the process the default way.
			stopSignals()
			logger.Info().Msg("signal received, shutting down")
			notifySystemd(logger, sdnotify.Stopping)
			// First: a controller request in flight (a StopReplica
			// deleting 10,000 logs) stops at its next partition, so that
			// the controlled shutdown's LeaderAndIsr is not queued behind
			// it for minutes; followers stop fetching for the leaving
			// broker (see core's BeginShutdown).
			rm.BeginShutdown()
			// While the broker still serves: the controller moves its
			// leaderships away, and the new leaders' followers catch up
			// from it.
			link.controlledShutdown()
			stopServing(srv, logger)
			err := shutdownReplicaManager(rm, logger)
			link.close()
			if err != nil {
				return 1
			}
			logger.Info().Msg("replicad stopped")
			return 0
		case err := <-registered:
			registered = nil
			if err == nil || ctx.Err() != nil {
				continue
			}
			logger.Error().Err(err).Msg("cannot register with the controller, exiting")
			stopServing(srv, logger)
			shutdownReplicaManager(rm, logger)
			return 1
		case err := <-rm.Fatal():
			logger.Error().Err(err).Msg("no log dir left online, exiting")
			stopServing(srv, logger)
			shutdownReplicaManager(rm, logger)
			return 1
		case err := <-served:
			logger.Error().Err(err).Msg("gRPC server failed")
			shutdownReplicaManager(rm, logger)
			return 1
		}
	}
}

// notifySystemd tells a Type=notify unit's systemd the broker's state; a
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

func newLogger(cfg config, stderr io.Writer) zerolog.Logger {
	out := stderr
	if cfg.logFormat == "console" {
		out = zerolog.ConsoleWriter{Out: stderr, TimeFormat: telemetry.LogTimeFormat, NoColor: !isTerminal(stderr)}
	}
	return eventLogger(cfg, out)
}

// eventLogger is the broker's logger writing its events to out, as JSON
// (which out may format: see logWriter).
func eventLogger(cfg config, out io.Writer) zerolog.Logger {
	return zerolog.New(out).Level(cfg.logLevel).Hook(telemetry.LogTimestamps).With().Int32("broker_id", cfg.brokerID).Logger()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
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
