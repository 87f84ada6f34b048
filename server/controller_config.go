package server

import (
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/trace"

	"github.com/replicad/replicad/controller"
	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/core/clock"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/authz"
	"github.com/replicad/replicad/internal/flagfile"
	"github.com/replicad/replicad/internal/tlsconf"
)

// ControllerConfig is the controller daemon's command line.
type ControllerConfig struct {
	Listen         string
	Store          string
	ID             int32
	SessionTimeout time.Duration
	ElectionTTL    time.Duration
	Unclean        bool
	// The automatic leader rebalance (Kafka's auto.leader.rebalance.*).
	AutoRebalance     bool
	ImbalanceInterval time.Duration
	ImbalancePercent  int
	LogLevel          string
	LogFormat         string
	// MetricsListen serves Prometheus text at /metrics ("": off, nothing
	// is measured); MetricsTLS serves it over HTTPS with --tls-cert.
	MetricsListen string
	MetricsTLS    bool
	// TLS is --tls-*: the server's certificate, and the client certificate
	// of the channels to the brokers. The command registering the flags
	// fills it.
	TLS tlsconf.Options
	// Authz: --super-users, --tls-principal-rule, --no-authorization
	// (MutualTLS follows TLS.ClientAuth, see NewController).
	Authz authz.Config

	// Stderr takes the fixed lines scripts read (the listening addresses)
	// and, without Logger, the log; nil: discarded.
	Stderr io.Writer

	// What a harness replaces; the zero values are production's.

	// Logger, when set, replaces the one made from LogLevel and LogFormat.
	Logger *zerolog.Logger
	// MetadataStore, when set, replaces the store Store names (and Elector
	// its election; nil: this controller is the only one). Stop closes it.
	MetadataStore store.Store
	Elector       store.Elector
	// Clock: nil, the real one.
	Clock clock.Clock
	// TracerProvider, when set, replaces telemetry.Setup from the OTEL_*
	// environment (the controller traces through the global provider).
	TracerProvider trace.TracerProvider
	// Network replaces the listener and the gRPC server, and the dialer of
	// the brokers; nil fields are TCP and gRPC.
	Network ControllerNetwork
	// Tune, when set, adjusts controller.Config before the controller is
	// made (the knobs no flag sets: decision batches, the queues' jitter).
	Tune func(*controller.Config)
}

// ControllerNetwork replaces the controller's network.
type ControllerNetwork struct {
	// Serve, when set, replaces the listener and the gRPC server: Start
	// hands it the controller, and it returns the address it is reached
	// at. It must stop serving on its own when the harness takes the
	// controller down.
	Serve func(*controller.Controller) (net.Addr, error)
	// DialBroker makes the controller's client of the broker at addr.
	DialBroker func(addr string) (replicadv1.ReplicaManagerServiceClient, io.Closer, error)
}

// DefaultControllerConfig is the daemon's flag defaults.
func DefaultControllerConfig() ControllerConfig {
	var c ControllerConfig
	fs := flag.NewFlagSet("controller", flag.ContinueOnError)
	c.RegisterFlags(fs)
	_ = fs.Parse(nil)
	return c
}

// DefaultControllerStore is --store's default.
const DefaultControllerStore = "./data/controller"

// UsageError is a mistake on the command line: the commands print it with
// their usage hint and exit 2.
type UsageError struct{ Msg string }

func (u UsageError) Error() string { return u.Msg }

func usagef(format string, args ...any) error { return UsageError{fmt.Sprintf(format, args...)} }

// ControllerUsage is the flags synopsis of the daemon.
const ControllerUsage = "[--listen 127.0.0.1:9090] [--store DIR | etcd://HOST:PORT[,HOST:PORT]] [--session-timeout 6s] [--unclean-leader-election]\n" +
	"    [--auto-leader-rebalance-enable=true] [--leader-imbalance-check-interval 5m] [--leader-imbalance-per-broker-percentage 10]\n" +
	"    [--metrics-listen HOST:PORT [--metrics-tls]]"

// ControllerDetails is the daemon's help text, shared by both commands.
var ControllerDetails = `Serves ControllerService until SIGTERM or Ctrl-C. Brokers started with
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

--metrics-listen HOST:PORT serves Prometheus text at /metrics: whether this
controller is the active one and its epoch, and from the active one the
brokers registered and fenced, the offline, leaderless, under-min-ISR and
under-replicated partitions, the preferred-leader imbalance (in all and per
broker), each broker queue's depth, the partition state changes committed,
and the store write latency (README, Monitoring).

OpenTelemetry export follows the OTEL_* environment variables.`

// RegisterFlags adds the daemon's flags, but not --tls-*, to fs; the
// values land in c once fs is parsed.
func (c *ControllerConfig) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:9090", "`ADDR` to serve ControllerService on")
	fs.StringVar(&c.Store, "store", DefaultControllerStore, "metadata store: a `DIR` (embedded bbolt) or etcd://HOST:PORT[,HOST:PORT]")
	fs.Var((*int32Flag)(&c.ID), "id", "controller id stamped on requests to brokers")
	fs.DurationVar(&c.SessionTimeout, "session-timeout", controller.DefaultSessionTimeout, "a broker silent this long is fenced")
	fs.DurationVar(&c.ElectionTTL, "election-ttl", 5*time.Second, "etcd only: lease TTL of the election; a dead controller is replaced within it")
	fs.BoolVar(&c.Unclean, "unclean-leader-election", false, "let the most caught-up live replica lead a partition with no live ISR member (loses records)")
	fs.BoolVar(&c.AutoRebalance, "auto-leader-rebalance-enable", true, "move leadership back to the preferred replicas when a broker's leader imbalance is above the percentage")
	fs.DurationVar(&c.ImbalanceInterval, "leader-imbalance-check-interval", controller.DefaultLeaderImbalanceCheckInterval,
		"how often the leader imbalance is checked (Kafka's leader.imbalance.check.interval.seconds)")
	fs.IntVar(&c.ImbalancePercent, "leader-imbalance-per-broker-percentage", controller.DefaultLeaderImbalancePerBrokerPercentage,
		"`PCT` 0-100: a broker's leader imbalance above this triggers a rebalance (Kafka's leader.imbalance.per.broker.percentage)")
	fs.StringVar(&c.LogLevel, "log-level", "info", "debug, info, warn or error")
	fs.StringVar(&c.LogFormat, "log-format", "console", "console or json")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "`HOST:PORT` serving Prometheus text at /metrics (replicad_controller_*); empty: off")
	fs.BoolVar(&c.MetricsTLS, "metrics-tls", false, "serve --metrics-listen over HTTPS with --tls-cert and --tls-key (and --tls-client-auth)")
	fs.StringVar(&c.Authz.SuperUsers, "super-users", "", "comma-separated principals allowed every call (spiffe://replicad/admin,...)")
	fs.Func("tls-principal-rule", "maps a client certificate without a spiffe:// SAN to a principal:\n'CN=(.*)->spiffe://replicad/client/$1' (CN, DNS, EMAIL or URI); repeatable, first match wins",
		func(v string) error { c.Authz.Rules = append(c.Authz.Rules, v); return nil })
	fs.BoolVar(&c.Authz.Disabled, "no-authorization", false, "turn authorization off under --tls-client-auth require (logged at error)")
}

// int32Flag is an int32 flag; wider values are refused at parse time.
type int32Flag int32

func (f *int32Flag) String() string { return strconv.Itoa(int(*f)) }
func (f *int32Flag) Set(s string) error {
	v, err := strconv.ParseInt(s, 10, 32)
	if err != nil {
		return fmt.Errorf("want a 32-bit integer")
	}
	*f = int32Flag(v)
	return nil
}

// Validate checks the values; every mistake is a UsageError naming its flag.
func (c ControllerConfig) Validate() error {
	if err := flagfile.Address("listen", c.Listen, "127.0.0.1:9090", true); err != nil {
		return UsageError{err.Error()}
	}
	if c.Store == "" {
		return usagef("--store: must not be empty")
	}
	if rest, ok := strings.CutPrefix(c.Store, "etcd://"); ok {
		if len(etcdEndpoints(rest)) == 0 {
			return usagef("--store: etcd:// needs at least one HOST:PORT")
		}
		// Each endpoint as an address of its own: "etcd://127.0.0.1"
		// would otherwise wait out etcd's dial timeout.
		if _, err := flagfile.AddressList("store", rest, "etcd://127.0.0.1:2379", false); err != nil {
			return UsageError{err.Error()}
		}
	}
	if c.SessionTimeout < 100*time.Millisecond {
		return usagef("--session-timeout: must be at least 100ms (got %v)", c.SessionTimeout)
	}
	if c.ElectionTTL < time.Second {
		return usagef("--election-ttl: must be at least 1s (got %v)", c.ElectionTTL)
	}
	if c.ID < 0 {
		return usagef("--id: must not be negative")
	}
	if c.ImbalanceInterval < 10*time.Millisecond {
		return usagef("--leader-imbalance-check-interval: must be at least 10ms (got %v)", c.ImbalanceInterval)
	}
	if c.ImbalancePercent < 0 || c.ImbalancePercent > 100 {
		return usagef("--leader-imbalance-per-broker-percentage: want 0 to 100 (got %d)", c.ImbalancePercent)
	}
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel == "" {
		return usagef("--log-level: want debug, info, warn or error (got %q)", c.LogLevel)
	}
	if c.LogFormat != "console" && c.LogFormat != "json" {
		return usagef("--log-format: want console or json (got %q)", c.LogFormat)
	}
	if c.MetricsListen != "" {
		if err := flagfile.Address("metrics-listen", c.MetricsListen, "127.0.0.1:9190", true); err != nil {
			return UsageError{err.Error()}
		}
	}
	if c.MetricsTLS && (c.MetricsListen == "" || c.TLS.Cert == "") {
		return usagef("--metrics-tls: needs --metrics-listen, --tls-cert and --tls-key")
	}
	if err := c.Authz.Validate(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// etcdEndpoints splits the HOST:PORT list after etcd://.
func etcdEndpoints(list string) []string {
	var endpoints []string
	for _, ep := range strings.Split(list, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			endpoints = append(endpoints, ep)
		}
	}
	return endpoints
}
