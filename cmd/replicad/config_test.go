package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/replicad/replicad/core/log"
)

// TestDefaultsFollowSpec ensures the flag defaults are the SPEC's and the
// default log dir is ./data/broker-<id>, made absolute.
func TestDefaultsFollowSpec(t *testing.T) {
	cfg, err := parseFlags([]string{"--id", "3"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	wd, _ := os.Getwd()
	want := config{
		brokerID: 3, listen: "127.0.0.1:9091", logDirs: []string{filepath.Join(wd, "data", "broker-3")},
		hwCheckpointInterval: 5 * time.Second, replicaLagTimeMax: 30 * time.Second,
		numReplicaFetchers: 1, minInsyncReplicas: 1, logLevel: zerolog.InfoLevel, logFormat: "console", metricsLogSeries: true,
		logConfig: log.DefaultConfig(), maxConnections: 1000, connectionsMaxIdle: 10 * time.Minute,
		memoryLimit: 1 << 30, retention: log.Retention{Ms: 7 * 24 * 3600 * 1000, Bytes: -1}, retentionCheckInterval: 5 * time.Minute,
		maxPartitions: defaultMaxPartitions(), producerIDExpiration: 24 * time.Hour, maxProducersPerPartition: 10000,
	}
	want.logConfig.MaxBatchBytes = 1048576
	want.logConfig.SegmentMs = 7 * 24 * 3600 * 1000 // Kafka's log.roll.hours 168
	want.logConfig.MaxOpenFiles = max(openFilesLimit()/2, minMaxOpenFiles)
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got  %+v\nwant %+v", cfg, want)
	}
}

// TestKafkaNamesAreAliases ensures Kafka's names of the topic defaults set
// the same fields as replicad's flags, and a bad value through an alias is
// refused like through the flag.
func TestKafkaNamesAreAliases(t *testing.T) {
	cfg, err := parseFlags([]string{"--id", "1", "--log.retention.ms", "1000", "--log.retention.bytes", "2048",
		"--log.segment.bytes", "8192", "--max-batch-bytes", "4096", "--log.roll.ms", "3000", "--min.insync.replicas", "2",
		"--log.retention.check.interval.ms", "1500", "--producer.id.expiration.ms", "2500"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.retention != (log.Retention{Ms: 1000, Bytes: 2048}) || cfg.logConfig.SegmentBytes != 8192 || cfg.logConfig.SegmentMs != 3000 ||
		cfg.minInsyncReplicas != 2 || cfg.retentionCheckInterval != 1500*time.Millisecond ||
		cfg.producerIDExpiration != 2500*time.Millisecond {
		t.Fatalf("aliases gave %+v", cfg)
	}
	for _, args := range [][]string{{"--log.retention.ms", "-2"}, {"--log.roll.ms", "0"}, {"--log.retention.check.interval.ms", "1s"}} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

// TestFlagsReachConfig ensures every flag's value lands in the config.
func TestFlagsReachConfig(t *testing.T) {
	cfg, err := parseFlags([]string{
		"--id", "0", "--listen", "0.0.0.0:0", "--log-dirs", "/a, /b/../c", "--hw-checkpoint-interval", "1s",
		"--replica-lag-time-max", "2s", "--num-replica-fetchers", "4", "--min-insync-replicas", "2",
		"--log-level", "debug", "--log-format", "json", "--metrics-listen", "127.0.0.1:0", "--log-flush", "interval",
		"--log-flush-interval", "250ms", "--segment-bytes", "4096", "--max-batch-bytes", "2048",
		"--controller", "127.0.0.1:9090", "--trace-data-plane", "--state-change-log-level", "trace",
		"--truncate-damaged-logs", "--max-connections", "7", "--connections-max-idle", "90s",
		"--memory-limit", "512MiB", "--log-retention-ms", "60000", "--log-retention-bytes", "1000000",
		"--log-retention-check-interval", "30s", "--log-roll-ms", "5000", "--metrics-log-series=false",
		"--max-partitions", "1234",
		"--max-open-files", "100", "--producer-id-expiration", "1h", "--max-producers-per-partition", "-1",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	lc := log.DefaultConfig()
	lc.FlushPolicy, lc.FlushInterval, lc.SegmentBytes, lc.MaxBatchBytes = log.FlushInterval, 250*time.Millisecond, 4096, 2048
	lc.TruncateDamaged = true
	lc.SegmentMs = 5000
	lc.MaxOpenFiles = 100
	trace := zerolog.TraceLevel
	want := config{
		brokerID: 0, listen: "0.0.0.0:0", logDirs: []string{"/a", "/c"}, hwCheckpointInterval: time.Second,
		replicaLagTimeMax: 2 * time.Second, numReplicaFetchers: 4, minInsyncReplicas: 2, logLevel: zerolog.DebugLevel,
		logFormat: "json", metricsListen: "127.0.0.1:0", logConfig: lc, metricsLogSeries: false, controller: "127.0.0.1:9090",
		traceDataPlane: true, stateChangeLevel: &trace, maxConnections: 7, connectionsMaxIdle: 90 * time.Second,
		memoryLimit: 512 << 20, memoryLimitSet: true,
		retention: log.Retention{Ms: 60000, Bytes: 1000000}, retentionCheckInterval: 30 * time.Second,
		maxPartitions: 1234, producerIDExpiration: time.Hour, maxProducersPerPartition: -1,
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("got  %+v\nwant %+v", cfg, want)
	}
}

// TestBadFlagsNameTheFlag ensures each invalid flag is refused with a
// message naming it.
func TestBadFlagsNameTheFlag(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--id", "-1"}, "--id:"},
		{[]string{"--listen", "nohost"}, "--listen nohost: missing port (want host:port, e.g. 127.0.0.1:9091)"},
		{[]string{"--listen", "h:70000"}, `--listen h:70000: port "70000" is not a number in 0..65535`},
		{[]string{"--listen", "http://127.0.0.1:9091"}, "--listen http://127.0.0.1:9091: a scheme (http://) is not allowed"},
		{[]string{"--log-dirs", "/a,,/b"}, "--log-dirs: empty entry"},
		{[]string{"--log-dirs", "/a,/a/"}, "--log-dirs: /a named twice"},
		{[]string{"--controller", "nohost"}, "--controller nohost: missing port (want host:port, e.g. 127.0.0.1:9090)"},
		{[]string{"--controller", "127.0.0.1:9090,http://127.0.0.1:9190"}, "--controller http://127.0.0.1:9190: a scheme (http://) is not allowed"},
		{[]string{"--controller", "127.0.0.1:9090,127.0.0.1:9090"}, "--controller: 127.0.0.1:9090 named twice"},
		{[]string{"--advertised-address", "broker1"}, "--advertised-address broker1: missing port"},
		{[]string{"--advertised-address", "broker1:0"}, `--advertised-address broker1:0: port "0" is not a number in 1..65535`},
		{[]string{"--hw-checkpoint-interval", "5"}, `invalid value "5" for flag -hw-checkpoint-interval: missing unit in duration; did you mean 5s?`},
		{[]string{"--controlled-shutdown-timeout", "30"}, "did you mean 30s?"},
		{[]string{"--hw-checkpoint-interval", "0s"}, "--hw-checkpoint-interval:"},
		{[]string{"--replica-lag-time-max", "-1s"}, "--replica-lag-time-max:"},
		{[]string{"--num-replica-fetchers", "0"}, "--num-replica-fetchers:"},
		{[]string{"--min-insync-replicas", "0"}, "--min-insync-replicas:"},
		{[]string{"--log-level", "loud"}, "--log-level:"},
		{[]string{"--state-change-log-level", "chatty"}, "--state-change-log-level:"},
		{[]string{"--log-format", "xml"}, "--log-format:"},
		{[]string{"--metrics-listen", "9100"}, "--metrics-listen 9100: missing port"},
		{[]string{"--log-flush", "never"}, "--log-flush:"},
		{[]string{"--log-flush-interval", "0s"}, "--log-flush-interval:"},
		{[]string{"--segment-bytes", "10"}, "--segment-bytes:"},
		{[]string{"--max-batch-bytes", "10"}, "--max-batch-bytes:"},
		{[]string{"--max-connections", "0"}, "--max-connections:"},
		{[]string{"--connections-max-idle", "0s"}, "--connections-max-idle:"},
		{[]string{"--segment-bytes", "4096", "--max-batch-bytes", "8192"}, "--max-batch-bytes:"},
		{[]string{"--memory-limit", "1GB"}, "--memory-limit:"},
		{[]string{"--log-retention-ms", "-2"}, "--log-retention-ms:"},
		{[]string{"--log-retention-bytes", "-5"}, "--log-retention-bytes:"},
		{[]string{"--log-retention-check-interval", "0s"}, "--log-retention-check-interval:"},
		{[]string{"--memory-limit", "-1"}, "--memory-limit:"},
		{[]string{"--max-open-files", "10"}, "--max-open-files:"},
		{[]string{"--producer-id-expiration", "0s"}, "--producer-id-expiration:"},
		{[]string{"--max-producers-per-partition", "0"}, "--max-producers-per-partition:"},
		{[]string{"--max-open-files", "-1"}, "--max-open-files:"},
		{[]string{"--max-open-files", strconv.Itoa(openFilesLimit() + 1)}, "--max-open-files:"},
		{[]string{"extra"}, "unexpected argument"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
	}
	for _, tc := range cases {
		var stderr bytes.Buffer
		_, err := parseFlags(tc.args, &stderr)
		if err == nil {
			t.Errorf("%v: accepted", tc.args)
			continue
		}
		if msg := err.Error() + stderr.String(); !strings.Contains(msg, tc.want) {
			t.Errorf("%v: %q does not mention %q", tc.args, msg, tc.want)
		}
	}
}

// TestParseByteSize covers --memory-limit's sizes.
func TestParseByteSize(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "1024": 1024, "7B": 7, "64KiB": 64 << 10, "512MiB": 512 << 20,
		"1GiB": 1 << 30, " 2 TiB": 2 << 40} {
		if got, err := parseByteSize(in); err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "GiB", "1.5GiB", "1GB", "-1", "99999999TiB"} {
		if got, err := parseByteSize(in); err == nil {
			t.Errorf("%q: accepted as %d", in, got)
		}
	}
}

// TestBadFlagsExitTwo ensures run exits 2 on a usage error and 0 on --help,
// before touching any log dir.
func TestBadFlagsExitTwo(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"--log-format", "xml"}, io.Discard, &stderr); code != 2 {
		t.Fatalf("exit %d, want 2 (%s)", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{"--help"}, io.Discard, &stderr); code != 0 {
		t.Fatalf("--help exit %d, want 0", code)
	}
}

// TestHelpExplainsEveryFlag ensures --help documents each flag.
func TestHelpExplainsEveryFlag(t *testing.T) {
	var stderr bytes.Buffer
	if _, err := parseFlags([]string{"--help"}, &stderr); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("err = %v, want flag.ErrHelp", err)
	}
	for _, name := range []string{"id", "listen", "log-dirs", "controller", "hw-checkpoint-interval", "replica-lag-time-max",
		"num-replica-fetchers", "min-insync-replicas", "log-level", "log-format", "metrics-listen", "log-flush",
		"log-flush-interval", "segment-bytes", "max-batch-bytes", "state-change-log-level", "trace-data-plane",
		"truncate-damaged-logs", "max-connections", "connections-max-idle", "max-open-files"} {
		if !strings.Contains(stderr.String(), "-"+name+" ") && !strings.Contains(stderr.String(), "-"+name+"\n") {
			t.Errorf("--help does not explain -%s", name)
		}
	}
}

func TestParseFlagsAuthorization(t *testing.T) {
	base := []string{"--tls-cert", "c.crt", "--tls-key", "c.key", "--tls-ca", "ca.crt", "--tls-client-auth", "require"}
	cfg, err := parseFlags(append(base, "--super-users", "spiffe://replicad/admin",
		"--tls-principal-rule", "CN=(.*)->spiffe://replicad/client/$1", "--tls-principal-rule", "DNS=(.*)->spiffe://x/$1"), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.authz.MutualTLS || cfg.authz.Disabled || len(cfg.authz.Rules) != 2 || cfg.authz.SuperUsers != "spiffe://replicad/admin" {
		t.Fatalf("%+v", cfg.authz)
	}
	if cfg, _ := parseFlags(append(base, "--no-authorization"), io.Discard); !cfg.authz.Disabled {
		t.Fatal("--no-authorization lost")
	}
	if _, err := parseFlags(append(base, "--tls-principal-rule", "CN=(.*)"), io.Discard); err == nil || !strings.Contains(err.Error(), "--tls-principal-rule") {
		t.Fatalf("a bad rule: %v", err)
	}
}

// TestLogLinesCarryMilliseconds ensures both log formats stamp each line
// to the millisecond and durations say their unit in the key.
func TestLogLinesCarryMilliseconds(t *testing.T) {
	var js bytes.Buffer
	jl := newLogger(config{logFormat: "json", logLevel: zerolog.InfoLevel, brokerID: 7}, &js)
	jl.Info().Dur("took_ms", 1500*time.Microsecond).Msg("x")
	var line struct {
		Time   string  `json:"time"`
		TookMs float64 `json:"took_ms"`
		Broker int32   `json:"broker_id"`
	}
	if err := json.Unmarshal(js.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, js.String())
	}
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`).MatchString(line.Time) || line.TookMs != 1.5 || line.Broker != 7 {
		t.Fatalf("json line %s: time %q, took_ms %v", js.String(), line.Time, line.TookMs)
	}
	var console bytes.Buffer
	cl := newLogger(config{logFormat: "console", logLevel: zerolog.InfoLevel}, &console)
	cl.Info().Msg("y")
	if !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}`).MatchString(console.String()) {
		t.Fatalf("console line %q: want a timestamp to the millisecond first", console.String())
	}
}

// TestMaxPartitionsDefault ensures --max-partitions' default follows the
// descriptor limit: under this machine's 20,000 descriptors 30,000 logs and
// 60,000 (100,000 partitions RF 3 on 5 brokers) fit while 100,000 (the same
// on 3 brokers) does not; tiny and unlimited limits are clamped.
func TestMaxPartitionsDefault(t *testing.T) {
	if got := maxPartitionsFor(20_000); got < 60_000 || got >= 100_000 {
		t.Errorf("default under 20,000 descriptors: %d, want 60,000 <= x < 100,000", got)
	}
	if got := maxPartitionsFor(16); got != minDefaultMaxPartitions {
		t.Errorf("default under 16 descriptors: %d, want %d", got, minDefaultMaxPartitions)
	}
	if got := maxPartitionsFor(^uint64(0)); got != maxDefaultMaxPartitions {
		t.Errorf("default without a descriptor limit: %d, want %d", got, maxDefaultMaxPartitions)
	}
	for _, v := range []string{"0", "-1"} {
		if _, err := parseFlags([]string{"--max-partitions", v}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "--max-partitions") {
			t.Errorf("--max-partitions %s: %v, want an error naming the flag", v, err)
		}
	}
	cfg, err := parseFlags([]string{"--max.broker.partitions", "77"}, &bytes.Buffer{})
	if err != nil || cfg.maxPartitions != 77 {
		t.Errorf("--max.broker.partitions 77: %d %v", cfg.maxPartitions, err)
	}
}
