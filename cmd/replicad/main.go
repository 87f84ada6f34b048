package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/internal/telemetry"
	"github.com/replicad/replicad/internal/version"
	"github.com/replicad/replicad/server"
)

func main() {
	tuneGC()
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch picks the daemon: `replicad controller ...` runs the controller
// (package server), `replicad version` prints the build, anything
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

	ctx, stopSignals := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stopSignals()

	b, err := server.NewBroker(brokerConfig(cfg, logger, stderr, stopSignals))
	if err != nil {
		return 1
	}
	if err := b.Run(ctx); err != nil {
		return 1
	}
	return 0
}

// brokerConfig is the server's configuration from the flags. stopSignals
// runs when the first signal arrives: a second one then kills the process
// the default way.
func brokerConfig(cfg config, logger zerolog.Logger, stderr io.Writer, stopSignals func()) server.BrokerConfig {
	return server.BrokerConfig{
		BrokerID:                  cfg.brokerID,
		Listen:                    cfg.listen,
		LogDirs:                   cfg.logDirs,
		Controllers:               cfg.controllers(),
		AdvertisedAddress:         cfg.advertisedAddress,
		ControlledShutdownTimeout: cfg.controlledShutdownTimeout,
		HWCheckpointInterval:      cfg.hwCheckpointInterval,
		ReplicaLagTimeMax:         cfg.replicaLagTimeMax,
		NumReplicaFetchers:        cfg.numReplicaFetchers,
		MinInsyncReplicas:         cfg.minInsyncReplicas,
		MaxPartitions:             cfg.maxPartitions,
		LogConfig:                 cfg.logConfig,
		Retention:                 &cfg.retention,
		RetentionCheckInterval:    cfg.retentionCheckInterval,
		ProducerIDExpiration:      cfg.producerIDExpiration,
		MaxProducersPerPartition:  cfg.maxProducersPerPartition,
		StateChangeLevel:          cfg.stateChangeLevel,
		TraceDataPlane:            cfg.traceDataPlane,
		MetricsListen:             cfg.metricsListen,
		MetricsLogSeries:          cfg.metricsLogSeries,
		MetricsTLS:                cfg.metricsTLS,
		Pprof:                     cfg.pprof,
		MaxConnections:            cfg.maxConnections,
		ConnectionsMaxIdle:        cfg.connectionsMaxIdle,
		TLS:                       cfg.tls,
		Authz:                     cfg.authz,
		Logger:                    logger,
		Stderr:                    stderr,
		OnStop:                    stopSignals,
	}
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
