package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replicad/replicad/core/log"
	"github.com/rs/zerolog"
)

// TestPprofNeedsMetricsListen: --pprof is served on --metrics-listen, so
// one without the other is a flag error naming --pprof.
func TestPprofNeedsMetricsListen(t *testing.T) {
	if _, err := parseFlags([]string{"--pprof"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--pprof") {
		t.Fatalf("--pprof without --metrics-listen: %v", err)
	}
}

// TestFlagsReachTheServerConfig: the flags land in the BrokerConfig the
// daemon runs (a field the conversion forgot would silently be zero).
func TestFlagsReachTheServerConfig(t *testing.T) {
	cfg, err := parseFlags([]string{"--id", "3", "--listen", "127.0.0.1:0", "--log-dirs", "/a,/b",
		"--controller", "c1:9090,c2:9090", "--advertised-address", "b3:9092", "--controlled-shutdown-timeout", "7s",
		"--num-replica-fetchers", "2", "--min-insync-replicas", "2", "--max-partitions", "500",
		"--log-retention-ms", "60000", "--log-retention-bytes", "1024", "--log-retention-check-interval", "9s",
		"--metrics-listen", "127.0.0.1:0", "--metrics-log-series=false", "--pprof", "--trace-data-plane",
		"--max-connections", "50", "--connections-max-idle", "3m", "--state-change-log-level", "trace",
		"--producer-id-expiration", "1h", "--max-producers-per-partition", "5", "--segment-bytes", "4194304"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	stop := func() {}
	sc := brokerConfig(cfg, zerolog.Nop(), io.Discard, stop)
	switch {
	case sc.BrokerID != 3 || sc.Listen != "127.0.0.1:0" || !slices.Equal(sc.LogDirs, []string{"/a", "/b"}):
		t.Errorf("identity: %+v", sc)
	case !slices.Equal(sc.Controllers, []string{"c1:9090", "c2:9090"}) || sc.AdvertisedAddress != "b3:9092" ||
		sc.ControlledShutdownTimeout != 7*time.Second:
		t.Errorf("controller: %v %q %v", sc.Controllers, sc.AdvertisedAddress, sc.ControlledShutdownTimeout)
	case sc.NumReplicaFetchers != 2 || sc.MinInsyncReplicas != 2 || sc.MaxPartitions != 500 || sc.LogConfig.SegmentBytes != 4194304:
		t.Errorf("replication: %+v", sc)
	case sc.Retention == nil || *sc.Retention != (log.Retention{Ms: 60000, Bytes: 1024}) || sc.RetentionCheckInterval != 9*time.Second:
		t.Errorf("retention: %v %v", sc.Retention, sc.RetentionCheckInterval)
	case sc.MetricsListen != "127.0.0.1:0" || sc.MetricsLogSeries || !sc.Pprof || !sc.TraceDataPlane:
		t.Errorf("observability: %+v", sc)
	case sc.MaxConnections != 50 || sc.ConnectionsMaxIdle != 3*time.Minute:
		t.Errorf("limits: %d %v", sc.MaxConnections, sc.ConnectionsMaxIdle)
	case sc.StateChangeLevel == nil || *sc.StateChangeLevel != zerolog.TraceLevel:
		t.Errorf("state-change level: %v", sc.StateChangeLevel)
	case sc.ProducerIDExpiration != time.Hour || sc.MaxProducersPerPartition != 5:
		t.Errorf("producers: %v %d", sc.ProducerIDExpiration, sc.MaxProducersPerPartition)
	case sc.OnStop == nil || sc.Stderr == nil:
		t.Errorf("process hooks: %+v", sc)
	}
	// What only a harness sets stays at production's zero values.
	if sc.FS != nil || sc.Clock != nil || sc.TracerProvider != nil || sc.Network.Serve != nil || sc.Network.DialController != nil ||
		sc.Network.LeaderClient != nil || sc.WrapIsrChanger != nil || sc.BootID != nil || sc.IncarnationID != "" {
		t.Errorf("injection points set by the daemon: %+v", sc)
	}
}
