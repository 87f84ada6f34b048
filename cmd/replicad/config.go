package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/log"
	"github.com/replicad/replicad/core/topicconfig"
	"github.com/replicad/replicad/internal/authz"
	"github.com/replicad/replicad/internal/flagfile"
	"github.com/replicad/replicad/internal/tlsconf"
	"github.com/replicad/replicad/server"
	"github.com/replicad/replicad/service"
)

// config is the broker's validated command line.
type config struct {
	brokerID             int32
	listen               string
	logDirs              []string // absolute, cleaned, distinct
	controller           string   // comma list of host:port (see controllers); empty: standalone
	hwCheckpointInterval time.Duration
	replicaLagTimeMax    time.Duration
	numReplicaFetchers   int
	minInsyncReplicas    int
	logLevel             zerolog.Level
	// stateChangeLevel is the state.change logger's own level; nil: logLevel.
	stateChangeLevel *zerolog.Level
	logFormat        string
	metricsListen    string
	metricsLogSeries bool
	pprof            bool
	logConfig        log.Config
	// traceDataPlane: Produce, Consume and Fetch create spans too.
	traceDataPlane bool
	// advertisedAddress is the host:port the broker registers with the
	// controller; empty: the address it listens on (see advertisedEndpoint).
	advertisedAddress string
	// controlledShutdownTimeout bounds the controlled shutdown on SIGTERM;
	// 0 means defaultControlledShutdownTimeout (see shutdownTimeout).
	controlledShutdownTimeout time.Duration
	// maxConnections caps the gRPC server's connections (negative: none);
	// connectionsMaxIdle closes idle ones (negative: never).
	maxConnections     int
	connectionsMaxIdle time.Duration
	// tls is --tls-*: the certificate of the gRPC server and of every
	// client of the broker (controller, leaders); no file: plaintext.
	tls tlsconf.Options
	// metricsTLS serves --metrics-listen over HTTPS with the same certificate.
	metricsTLS bool
	// authz is --super-users, --tls-principal-rule and --no-authorization;
	// authorization is on with --tls-client-auth require.
	authz authz.Config
	// memoryLimit is the Go runtime's soft memory limit in bytes (0: none);
	// memoryLimitSet: --memory-limit was given (it then wins over GOMEMLIMIT).
	memoryLimit    int64
	memoryLimitSet bool
	// retention is --log-retention-ms and --log-retention-bytes, checked
	// every retentionCheckInterval.
	retention              log.Retention
	retentionCheckInterval time.Duration
	// showVersion is --version: print the build and exit (nothing else is
	// checked).
	showVersion bool
	// maxPartitions is --max-partitions: the most replicas this broker
	// hosts (the controller assigns no more; core refuses more).
	maxPartitions int
	// producerIDExpiration and maxProducersPerPartition bound the
	// idempotent producers' state of each partition (core.Config).
	producerIDExpiration     time.Duration
	maxProducersPerPartition int
}

const usageHeader = `replicad: a broker hosting replicas of partitioned append-only logs.

Usage: replicad [flags]
       replicad controller [flags]   the controller daemon ('replicad controller --help')
       replicad version [-o json]    the version, commit and build date

It serves ReplicaManagerService, LogService and FetchService over gRPC on
--listen (with server reflection and grpc.health.v1). Drive it with ctlclient
or grpcurl. SIGTERM or SIGINT stops it cleanly: in-flight calls finish, the
high watermarks are checkpointed, logs are flushed, exit status 0.

OpenTelemetry spans are exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT
(or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, over gRPC unless
OTEL_EXPORTER_OTLP_PROTOCOL says http/protobuf or http/json;
OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none turn it off. Every state change (the
control plane) is traced and sampled; Produce, Consume and follower fetches
are traced only with --trace-data-plane. State changes are also logged by the
logger=state.change logger, per partition at trace level
(--state-change-log-level trace shows those without the rest of the broker).

With --controller the broker registers with the controller (advertising
--advertised-address) once its gRPC server is up, heartbeats to keep its
session and broker epoch, and sends its ISR changes as AlterPartition. It
rejects controller requests meant for an earlier registration
(STALE_BROKER_EPOCH). On SIGTERM it first asks the controller to move its
leaderships away (controlled shutdown, at most --controlled-shutdown-timeout),
then stops as above.

With --tls-cert and --tls-key every connection is TLS 1.3: the gRPC server,
and the broker's channels to the controller and to the leaders it follows,
with the one certificate as server and client certificate; --tls-ca verifies
the peers (by the host dialed), and --tls-client-auth require makes it mutual
TLS. The files are re-read when they change (rotation without a restart). No
--tls-* flag: plaintext, for local use. ctlclient certs init makes
development certificates. With --tls-client-auth require, authorization is
on: each call is allowed by the role in the client certificate's spiffe://
SAN (controller, broker/N, admin, client/NAME) or --super-users, otherwise
refused with PermissionDenied; --no-authorization turns it off.

Flags:
`

// configFileOptions are the --config rules of both daemons: the principal
// rules are the one repeatable flag; config and version make no sense in a file.
var configFileOptions = flagfile.Options{Repeatable: []string{"tls-principal-rule"}, Refused: []string{"config", "version"}}

var flushPolicies = map[string]log.FlushPolicy{
	"every-batch": log.FlushEveryBatch,
	"interval":    log.FlushInterval,
	"os":          log.FlushOS,
}

// parseFlags parses and validates args. It returns flag.ErrHelp for --help
// (usage already printed) and otherwise an error naming the bad flag.
func parseFlags(args []string, stderr io.Writer) (config, error) {
	def := log.DefaultConfig()
	fs := flag.NewFlagSet("replicad", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHeader)
		fs.PrintDefaults()
	}
	id := fs.Int("id", 1, "broker id (>= 0); a log dir remembers its broker in meta.properties and refuses another")
	listen := fs.String("listen", "127.0.0.1:9091", "host:port of the gRPC server; port 0 picks a free port (the stderr line\n'replicad listening on HOST:PORT' tells which)")
	logDirs := fs.String("log-dirs", "", "comma-separated log dirs holding the partitions (default ./data/broker-<id>)")
	controller := fs.String("controller", "", "comma-separated controller addresses (host:port,...): the broker registers with the active one\n(a standby answers NOT_CONTROLLER and the next address is tried), heartbeats to it, and sends it\nits ISR changes as AlterPartition. Empty runs the broker standalone (it applies its ISR changes\nitself, and LeaderAndIsr comes from ctlclient)")
	advertised := fs.String("advertised-address", "", "host:port the broker registers with the controller, which other brokers and clients dial\n(default: --listen, with the port actually bound; a wildcard host becomes the hostname)")
	shutdownTimeout := fs.Duration("controlled-shutdown-timeout", 0, fmt.Sprintf("with --controller, how long SIGTERM waits for the controller to move this broker's leaderships\naway before stopping anyway (default %v)", defaultControlledShutdownTimeout))
	hwInterval := fs.Duration("hw-checkpoint-interval", 5*time.Second, "how often each log dir's replication-offset-checkpoint (the high watermarks) is written")
	lagMax := fs.Duration("replica-lag-time-max", 30*time.Second, "a follower not caught up for this long leaves the ISR")
	fetchers := fs.Int("num-replica-fetchers", 1, "fetcher streams per source broker (>= 1)")
	minISR := fs.Int("min-insync-replicas", 1, "smallest ISR that accepts acks=-1 produces and advances the high watermark (>= 1)")
	maxParts := fs.Int("max-partitions", defaultMaxPartitions(), "most partition replicas this broker hosts (Kafka's max.broker.partitions, KIP-578): the\ncontroller refuses a create or reassignment that would put more on it, and the broker refuses\nnew partitions beyond it in a LeaderAndIsr (made from RLIMIT_NOFILE: "+maxPartitionsDefaultRule+")")
	level := fs.String("log-level", "info", "log level: trace, debug, info, warn or error")
	stateLevel := fs.String("state-change-log-level", "", "level of the state-change log (logger=state.change) alone, as Kafka's separate state-change\nlog: trace shows every partition's transition without the rest of the broker at trace (default: --log-level)")
	format := fs.String("log-format", "console", "log format: console (human) or json")
	metrics := fs.String("metrics-listen", "", "host:port serving Prometheus text at /metrics; empty: off")
	pprofOn := fs.Bool("pprof", false, "also serve Go's profiles at /debug/pprof on --metrics-listen (off by default: they show the\nprogram's internals to whoever reaches the port)")
	logSeries := fs.Bool("metrics-log-series", true, "export the per-partition log series (replicad_log_size_bytes, _start_offset, _end_offset,\n_segments_deleted_total: four per partition hosted; about 23 µs of CPU per partition a scrape)")
	traceDataPlane := fs.Bool("trace-data-plane", false, "also trace the data plane: a span for every Produce and Consume call and every follower\nfetch request (off by default: those paths are hot; the control plane is always traced)")
	flush := fs.String("log-flush", "every-batch", "when appends are fsynced: every-batch (before a produce is acknowledged),\ninterval (every --log-flush-interval) or os (left to the OS, as Kafka does)")
	flushInterval := fs.Duration("log-flush-interval", def.FlushInterval, "fsync period with --log-flush=interval")
	segmentBytes := fs.Int64("segment-bytes", def.SegmentBytes, "a log segment rolls beyond this size (>= 1024)")
	maxBatchBytes := fs.Int("max-batch-bytes", 1048576, "largest encoded produce batch accepted (>= 1024, <= --segment-bytes)")
	maxConns := fs.Int("max-connections", service.DefaultMaxConnections, "most client connections served at once (Kafka's max.connections); further ones wait in\nthe listen backlog until one closes. -1: no limit")
	connIdle := fs.Duration("connections-max-idle", service.DefaultConnectionsMaxIdle, "close a connection that carried no RPC for this long (Kafka's connections.max.idle.ms;\nthe client reconnects when it next calls). -1s: never")
	tlsCert := fs.String("tls-cert", getenv("REPLICAD_TLS_CERT"), "PEM certificate of the broker, as TLS server and as client of the controller and the leaders\n(re-read when it changes); env REPLICAD_TLS_CERT. No --tls-* flag: plaintext")
	tlsKey := fs.String("tls-key", getenv("REPLICAD_TLS_KEY"), "PEM private key of --tls-cert; env REPLICAD_TLS_KEY")
	tlsCA := fs.String("tls-ca", getenv("REPLICAD_TLS_CA"), "PEM CA bundle verifying the controller, the other brokers and (with --tls-client-auth) the clients;\nenv REPLICAD_TLS_CA (default with --tls-cert: the system roots)")
	tlsClientAuth := fs.String("tls-client-auth", getenvDefault("REPLICAD_TLS_CLIENT_AUTH", "none"), "client certificates the server asks for: none, request (verified by --tls-ca if given) or\nrequire (mutual TLS: a certificate signed by --tls-ca); env REPLICAD_TLS_CLIENT_AUTH")
	metricsTLS := fs.Bool("metrics-tls", false, "serve --metrics-listen over HTTPS with --tls-cert and --tls-key (and --tls-client-auth)")
	superUsers := fs.String("super-users", "", "comma-separated principals allowed every call (spiffe://replicad/admin,...); with authorization on")
	var principalRules stringList
	fs.Var(&principalRules, "tls-principal-rule", "maps a client certificate without a spiffe:// SAN to a principal, as Kafka's\nssl.principal.mapping.rules: 'CN=(.*)->spiffe://replicad/client/$1' (fields CN, DNS, EMAIL, URI);\nrepeatable, the first match wins")
	noAuthz := fs.Bool("no-authorization", false, "turn authorization off under --tls-client-auth require: any certificate of --tls-ca may call\nanything (logged at error at startup). Authorization is always off without require")
	memLimit := fs.String("memory-limit", defaultMemoryLimit, "soft limit of the Go heap (B, KiB, MiB, GiB or TiB; 0: none), as GOMEMLIMIT: near it the\nGC runs more often, so a broker's memory stays bounded under floods of reads. Size it to about\n3/4 of the memory the process may use (GOMEMLIMIT, when set, is used unless this flag is given)")
	retentionMs := fs.Int64("log-retention-ms", core.DefaultRetention.Ms, "every replica deletes its oldest segments whose newest record is older than this, in ms\n(Kafka's log.retention.ms; default 7 days); -1: no limit by time")
	retentionBytes := fs.Int64("log-retention-bytes", core.DefaultRetention.Bytes, "every replica deletes its oldest segments while its log without them still\nholds this many bytes (Kafka's log.retention.bytes); -1: no limit by size")
	retentionCheck := fs.Duration("log-retention-check-interval", core.DefaultRetentionCheckInterval, "how often every replica, leader or follower, applies retention (Kafka's log.retention.check.interval.ms); ctlclient retention run runs it now, describe shows when it runs next")
	truncateDamaged := fs.Bool("truncate-damaged-logs", false, "at start-up, cut a log found damaged below its recovery point (a batch failing its CRC\nwhere everything was fsynced: damage at rest) at the damage, losing the intact records after\nit, as Kafka does; by default such a log keeps them, refuses leadership, and is repaired\nfrom its leader. For a partition whose only copy is damaged: restart once with it to accept the loss")
	maxOpenFiles := fs.Int("max-open-files", 0, fmt.Sprintf("most log segment and index files kept open at once, for all partitions together: the files\nof idle logs are closed, least recently used first, and reopened on use, so a broker hosts more\npartitions than it has descriptors (about 2 per busy log). 0: half of RLIMIT_NOFILE (%d here),\nleaving the rest to connections, checkpoints and the like; at least %d, at most RLIMIT_NOFILE", openFilesLimit(), minMaxOpenFiles))
	rollMs := fs.Int64("log-roll-ms", topicconfig.Defaults().SegmentMs, "a log segment also rolls once a record is this many ms newer (by record timestamp) than the\nsegment's first, so retention by time can delete it (Kafka's log.roll.ms; default 7 days); -1: never")
	producerExpiry := fs.Duration("producer-id-expiration", time.Duration(log.DefaultProducerIDExpirationMs)*time.Millisecond, "a partition forgets an idempotent producer whose last batch there is this old (by its\ntimestamp), at the retention check; its next batch must then start a sequence (Kafka's\nproducer.id.expiration.ms; default a day)")
	maxProducers := fs.Int("max-producers-per-partition", log.DefaultMaxProducers, "most idempotent producers a partition keeps state for (about 200 bytes each); past it the\nones whose last batch is oldest are forgotten first; -1: no bound")
	fs.Var((*msDuration)(producerExpiry), "producer.id.expiration.ms", "alias of --producer-id-expiration, in ms (Kafka's name)")
	// Kafka's names of the topic defaults, accepted as aliases so a Kafka
	// operator's server.properties keys work as flags.
	kafkaAlias(fs, "log.retention.ms", "log-retention-ms", retentionMs)
	kafkaAlias(fs, "log.retention.bytes", "log-retention-bytes", retentionBytes)
	kafkaAlias(fs, "log.segment.bytes", "segment-bytes", segmentBytes)
	kafkaAlias(fs, "log.roll.ms", "log-roll-ms", rollMs)
	fs.IntVar(minISR, "min.insync.replicas", *minISR, "alias of --min-insync-replicas (Kafka's name)")
	fs.IntVar(maxParts, "max.broker.partitions", *maxParts, "alias of --max-partitions (Kafka's name, KIP-578)")
	fs.Var((*msDuration)(retentionCheck), "log.retention.check.interval.ms", "alias of --log-retention-check-interval, in ms (Kafka's name)")
	showVersion := fs.Bool("version", false, "print the version, commit and build date, and exit ('replicad version -o json': as JSON)")
	configFile := fs.String("config", "", "YAML `FILE` of flag values, keys the flag names (listen: 127.0.0.1:9091); flags given on the\ncommand line override it, an unknown key is an error")
	if referenceFlags != nil {
		referenceFlags(fs)
		return config{}, flag.ErrHelp
	}
	if err := flagfile.ParseFlags(fs, args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected argument %q (replicad takes flags only)", fs.Arg(0))
	}
	if *showVersion {
		return config{showVersion: true}, nil
	}
	if *configFile != "" {
		if err := flagfile.Apply(fs, *configFile, configFileOptions); err != nil {
			return config{}, err
		}
	}

	cfg := config{
		hwCheckpointInterval: *hwInterval,
		replicaLagTimeMax:    *lagMax,
		numReplicaFetchers:   *fetchers,
		minInsyncReplicas:    *minISR,
		logFormat:            *format,
		metricsListen:        *metrics,
		metricsLogSeries:     *logSeries,
		pprof:                *pprofOn,
		logConfig:            def,
		traceDataPlane:       *traceDataPlane,
	}
	var errs []error
	check := func(ok bool, flagName, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf("--%s: %s", flagName, fmt.Sprintf(format, args...)))
		}
	}

	check(*id >= 0 && *id <= 1<<31-1, "id", "must be in 0..%d (got %d)", 1<<31-1, *id)
	cfg.brokerID = int32(*id)
	addrCheck := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	addrCheck(flagfile.Address("listen", *listen, "127.0.0.1:9091", true))
	cfg.listen = *listen
	dirs := *logDirs
	if dirs == "" {
		dirs = fmt.Sprintf("./data/broker-%d", *id)
	}
	var err error
	cfg.logDirs, err = absoluteDirs(dirs)
	check(err == nil, "log-dirs", "%v", err)
	_, err = splitControllers(*controller)
	addrCheck(err)
	cfg.controller = *controller
	if *advertised != "" {
		addrCheck(flagfile.Address("advertised-address", *advertised, "broker1.example.com:9091", false))
	}
	cfg.advertisedAddress = *advertised
	check(*shutdownTimeout > 0 || !flagSet(fs, "controlled-shutdown-timeout"), "controlled-shutdown-timeout", "must be positive (got %v)", *shutdownTimeout)
	cfg.controlledShutdownTimeout = *shutdownTimeout
	check(*hwInterval > 0, "hw-checkpoint-interval", "must be positive (got %v)", *hwInterval)
	check(*lagMax > 0, "replica-lag-time-max", "must be positive (got %v)", *lagMax)
	check(*fetchers >= 1, "num-replica-fetchers", "must be at least 1 (got %d)", *fetchers)
	check(*minISR >= 1, "min-insync-replicas", "must be at least 1 (got %d)", *minISR)
	check(*maxParts >= 1 && *maxParts <= 1<<31-1, "max-partitions", "must be in 1..%d (got %d)", 1<<31-1, *maxParts)
	cfg.maxPartitions = *maxParts
	cfg.logLevel, err = parseLevel(*level)
	check(err == nil, "log-level", "%v", err)
	if *stateLevel != "" {
		l, err := parseLevel(*stateLevel)
		check(err == nil, "state-change-log-level", "%v", err)
		cfg.stateChangeLevel = &l
	}
	check(*format == "console" || *format == "json", "log-format", "want console or json (got %q)", *format)
	if *metrics != "" {
		addrCheck(flagfile.Address("metrics-listen", *metrics, "127.0.0.1:9100", true))
	}
	policy, ok := flushPolicies[*flush]
	check(ok, "log-flush", "want every-batch, interval or os (got %q)", *flush)
	cfg.logConfig.FlushPolicy = policy
	check(*flushInterval > 0, "log-flush-interval", "must be positive (got %v)", *flushInterval)
	cfg.logConfig.FlushInterval = *flushInterval
	check(*segmentBytes >= 1024, "segment-bytes", "must be at least 1024 (got %d)", *segmentBytes)
	cfg.logConfig.SegmentBytes = *segmentBytes
	// A batch is never split, so it has to fit in one segment.
	check(*maxBatchBytes >= 1024 && int64(*maxBatchBytes) <= *segmentBytes, "max-batch-bytes",
		"must be in 1024..--segment-bytes (%d) (got %d)", *segmentBytes, *maxBatchBytes)
	cfg.logConfig.MaxBatchBytes = *maxBatchBytes
	cfg.logConfig.TruncateDamaged = *truncateDamaged
	limit := openFilesLimit()
	if *maxOpenFiles == 0 {
		cfg.logConfig.MaxOpenFiles = max(limit/2, minMaxOpenFiles)
	} else {
		check(*maxOpenFiles >= minMaxOpenFiles && *maxOpenFiles <= limit, "max-open-files",
			"must be in %d..%d, the process's RLIMIT_NOFILE (got %d); 0 picks half of it", minMaxOpenFiles, limit, *maxOpenFiles)
		cfg.logConfig.MaxOpenFiles = *maxOpenFiles
	}
	cfg.memoryLimit, err = parseByteSize(*memLimit)
	check(err == nil, "memory-limit", "%v", err)
	cfg.memoryLimitSet = flagSet(fs, "memory-limit")
	check(*retentionMs >= -1, "log-retention-ms", "want a number of ms, or -1 for no limit (got %d)", *retentionMs)
	check(*retentionBytes >= -1, "log-retention-bytes", "want a number of bytes, or -1 for no limit (got %d)", *retentionBytes)
	check(*retentionCheck > 0, "log-retention-check-interval", "must be positive (got %v)", *retentionCheck)
	check(*rollMs >= 1 || *rollMs == -1, "log-roll-ms", "want a number of ms, or -1 for never (got %d)", *rollMs)
	cfg.logConfig.SegmentMs = max(*rollMs, 0)
	cfg.retention = log.Retention{Ms: *retentionMs, Bytes: *retentionBytes}
	cfg.retentionCheckInterval = *retentionCheck
	check(*producerExpiry >= time.Millisecond, "producer-id-expiration", "must be at least 1ms (got %v)", *producerExpiry)
	cfg.producerIDExpiration = *producerExpiry
	check(*maxProducers >= 1 || *maxProducers == -1, "max-producers-per-partition", "must be at least 1, or -1 for no bound (got %d)", *maxProducers)
	cfg.maxProducersPerPartition = *maxProducers
	check(*maxConns >= 1 || *maxConns == -1, "max-connections", "must be at least 1, or -1 for no limit (got %d)", *maxConns)
	cfg.maxConnections = *maxConns
	check(*connIdle > 0 || *connIdle == -time.Second, "connections-max-idle", "must be positive, or -1s for never (got %v)", *connIdle)
	cfg.connectionsMaxIdle = *connIdle
	cfg.tls = tlsconf.Options{Cert: *tlsCert, Key: *tlsKey, CA: *tlsCA}
	cfg.tls.ClientAuth, err = tlsconf.ParseClientAuth(*tlsClientAuth)
	check(err == nil, "tls-client-auth", "%v", err)
	if err := cfg.tls.Validate(); err != nil {
		errs = append(errs, err)
	}
	check(!*metricsTLS || (*tlsCert != "" && *metrics != ""), "metrics-tls", "needs --metrics-listen, --tls-cert and --tls-key")
	check(!*pprofOn || *metrics != "", "pprof", "needs --metrics-listen, which serves it")
	cfg.metricsTLS = *metricsTLS
	cfg.authz = authz.Config{MutualTLS: cfg.tls.ClientAuth == tlsconf.ClientAuthRequire, Disabled: *noAuthz,
		SuperUsers: *superUsers, Rules: principalRules}
	if err := cfg.authz.Validate(); err != nil {
		errs = append(errs, err)
	}
	return cfg, errors.Join(errs...)
}

// minMaxOpenFiles is the smallest --max-open-files: enough for the files
// that busy logs use at once (an append that rolls holds three, a read
// one), so that the cache does not close and reopen a file on every call.
const minMaxOpenFiles = 64

// openFilesLimit is the process's RLIMIT_NOFILE: the soft limit, which Go
// raises to the hard one at start-up.
func openFilesLimit() int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(rl.Cur)
}

// defaultMemoryLimit is --memory-limit's default: Kafka's default heap
// (-Xmx1G), but soft. A broker's live heap is small (about 1 KiB per idle
// partition, plus the answers in flight, which the response budget bounds),
// and defaultGCPercent lets the heap grow to 5x it: this limit is what keeps
// a flood of large reads from growing the process to gigabytes.
const defaultMemoryLimit = "1GiB"

// parseByteSize parses a size as GOMEMLIMIT writes it: an integer with an
// optional B, KiB, MiB, GiB or TiB suffix.
func parseByteSize(s string) (int64, error) {
	units := []struct {
		suffix string
		shift  uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}, {"B", 0}}
	num, shift := strings.TrimSpace(s), uint(0)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(num, u.suffix); ok {
			num, shift = strings.TrimSpace(rest), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || n > (1<<62)>>shift {
		return 0, fmt.Errorf("want a size such as 1GiB, 512MiB or 0 (got %q)", s)
	}
	return n << shift, nil
}

// defaultControlledShutdownTimeout is --controlled-shutdown-timeout's default.
const defaultControlledShutdownTimeout = server.DefaultControlledShutdownTimeout

// controllers are the --controller addresses (none: standalone).
func (c config) controllers() []string {
	addrs, _ := splitControllers(c.controller)
	return addrs
}

// splitControllers parses --controller: empty, or a comma list of distinct
// HOST:PORT addresses.
func splitControllers(list string) ([]string, error) {
	if list == "" {
		return nil, nil
	}
	var addrs []string
	seen := map[string]bool{}
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		if err := flagfile.Address("controller", a, "127.0.0.1:9090", false); err != nil {
			return nil, err
		}
		if seen[a] {
			return nil, fmt.Errorf("--controller: %s named twice", a)
		}
		seen[a] = true
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// announceDefaults is the line a bare `replicad` prints first: with no
// flag and no --config it starts a broker on the defaults, which a user who
// meant to get usage, or a controller, would otherwise not learn until
// data/ appears or :9091 is taken.
func announceDefaults(stderr io.Writer) {
	cfg, err := parseFlags(nil, io.Discard)
	if err != nil {
		return // run reports it
	}
	fmt.Fprintf(stderr, "replicad: starting a broker with id %d on %s, log dir %s (no --config or flags given;"+
		" 'replicad --help' lists them, 'replicad controller' starts a controller)\n",
		cfg.brokerID, cfg.listen, strings.Join(cfg.logDirs, ","))
}

// referenceFlags, when set (replicad --help-markdown), receives the broker's
// flag set once every flag is registered, and parseFlags stops there: the
// reference page is made from the flag set that parses, so it cannot drift.
var referenceFlags func(*flag.FlagSet)

// flagSet reports whether the command line set flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// absoluteDirs splits a comma list into absolute, cleaned paths: the broker
// names its dirs in DescribePartitions and logs, and a relative path would
// change meaning with the working directory.
func absoluteDirs(list string) ([]string, error) {
	var dirs []string
	seen := map[string]bool{}
	for _, d := range strings.Split(list, ",") {
		d = strings.TrimSpace(d)
		if d == "" {
			return nil, fmt.Errorf("empty entry in %q", list)
		}
		abs, err := filepath.Abs(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d, err)
		}
		if seen[abs] {
			return nil, fmt.Errorf("%s named twice", abs)
		}
		seen[abs] = true
		dirs = append(dirs, abs)
	}
	return dirs, nil
}

// stringList is a repeatable string flag.
// kafkaAlias defines name (Kafka's) as another name of the int64 flag of.
func kafkaAlias(fs *flag.FlagSet, name, of string, v *int64) {
	fs.Int64Var(v, name, *v, "alias of --"+of+" (Kafka's name)")
}

// msDuration is a duration flag given in integer ms, as Kafka's *.ms keys.
type msDuration time.Duration

func (d *msDuration) String() string { return strconv.FormatInt(time.Duration(*d).Milliseconds(), 10) }
func (d *msDuration) Set(v string) error {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("want an integer number of ms (got %q)", v)
	}
	*d = msDuration(time.Duration(n) * time.Millisecond)
	return nil
}

type stringList []string

func (l *stringList) String() string { return strings.Join(*l, " ") }
func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// getenv reads the environment variables of the --tls-* flags' defaults
// (a variable for tests).
var getenv = os.Getenv

func getenvDefault(key, def string) string {
	if v := getenv(key); v != "" {
		return v
	}
	return def
}

func parseLevel(s string) (zerolog.Level, error) {
	switch s {
	case "trace", "debug", "info", "warn", "error":
		return zerolog.ParseLevel(s)
	}
	return zerolog.NoLevel, fmt.Errorf("want trace, debug, info, warn or error (got %q)", s)
}
