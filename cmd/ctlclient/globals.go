package main

import (
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"

	"github.com/replicad/replicad/internal/flagfile"
	"github.com/replicad/replicad/internal/grpcx"
	"github.com/replicad/replicad/internal/tlsconf"

	"context"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const defaultBroker = "127.0.0.1:9091"

// globals are the flags every command takes.
type globals struct {
	broker     string
	controller string
	// bootstrap lists brokers whose Metadata finds partitions' leaders
	// (Kafka's bootstrap.servers); it wins over controller for that.
	bootstrap string
	output    string
	timeout   time.Duration
	// --tls-*: ctlclient's certificate and CA (and, for controller run,
	// the server's); no file: plaintext.
	tlsCert, tlsKey, tlsCA, tlsClientAuth string
	tls                                   tlsconf.Options // parsed by validate
	// brokerOnly: --broker was given on the command line and neither
	// --controller nor --bootstrap was, so produce, consume and perf go to
	// that broker even when CTLCLIENT_CONTROLLER or CTLCLIENT_BOOTSTRAP is
	// set (an explicit flag wins over the environment).
	brokerOnly bool
	// profile is the connection profile whose values are the defaults
	// ("" none); profileErr why the selected one could not be read, which
	// validate reports.
	profile    string
	profileErr error
	// explicit are the global flags given on the command line.
	explicit map[string]bool
}

func newGlobals(getenv func(string) string) *globals { return newGlobalsProfile(getenv, "") }

// newGlobalsProfile is the defaults, then the connection profile named
// (--profile; "" for CTLCLIENT_PROFILE's, else the current one), then the
// CTLCLIENT_* variables: the flags parsed later override all three.
func newGlobalsProfile(getenv func(string) string, profileName string) *globals {
	g := &globals{broker: defaultBroker, output: "table", timeout: 10 * time.Second}
	if profileName == "" {
		profileName = getenv("CTLCLIENT_PROFILE")
	}
	g.profileErr = applyProfile(g, getenv, profileName)
	env := func(dst *string, name string) {
		if v := getenv(name); v != "" {
			*dst = v
		}
	}
	env(&g.broker, "CTLCLIENT_BROKER")
	env(&g.controller, "CTLCLIENT_CONTROLLER")
	env(&g.bootstrap, "CTLCLIENT_BOOTSTRAP")
	env(&g.tlsCert, "CTLCLIENT_TLS_CERT")
	env(&g.tlsKey, "CTLCLIENT_TLS_KEY")
	env(&g.tlsCA, "CTLCLIENT_TLS_CA")
	g.tlsClientAuth = getenv("CTLCLIENT_TLS_CLIENT_AUTH")
	if g.tlsClientAuth == "" {
		g.tlsClientAuth = "none"
	}
	return g
}

// register adds the global flags to fs. The current values are the
// defaults, so flags given before the command survive the command's own parse.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.broker, "broker", g.broker, "broker `ADDR` (host:port); env CTLCLIENT_BROKER")
	fs.StringVar(&g.profile, "profile", g.profile, "connection `profile` giving the defaults of these flags (ctlclient profile list); env\nCTLCLIENT_PROFILE, else the current one")
	fs.StringVar(&g.controller, "controller", g.controller, "controller `ADDR[,ADDR...]`: the active one is found among them; env CTLCLIENT_CONTROLLER")
	fs.StringVar(&g.bootstrap, "bootstrap", g.bootstrap, "broker `ADDR[,ADDR...]` whose Metadata finds partitions' leaders (produce, consume, perf produce),\nany live one of them or of the brokers they name: the controller may be down. It wins over\n--controller for finding leaders; env CTLCLIENT_BOOTSTRAP")
	fs.StringVar(&g.output, "o", g.output, "output `format`: table or json (each RPC response as protojson, as grpcurl prints it)")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "deadline of each RPC; with --bootstrap or --controller also how long one call keeps retrying")
	fs.StringVar(&g.tlsCert, "tls-cert", g.tlsCert, "PEM client `FILE` (certificate) presented to brokers and controllers, and controller run's server\ncertificate; env CTLCLIENT_TLS_CERT. No --tls-* flag: plaintext")
	fs.StringVar(&g.tlsKey, "tls-key", g.tlsKey, "PEM private key `FILE` of --tls-cert; env CTLCLIENT_TLS_KEY")
	fs.StringVar(&g.tlsCA, "tls-ca", g.tlsCA, "PEM CA `FILE` verifying the servers dialed (by their host) and, for controller run, clients;\nenv CTLCLIENT_TLS_CA. Alone (no --tls-cert): TLS without a client certificate")
	fs.StringVar(&g.tlsClientAuth, "tls-client-auth", g.tlsClientAuth, "controller run: client certificates its server asks for: none, request or require (mutual TLS);\nenv CTLCLIENT_TLS_CLIENT_AUTH")
}

func (g *globals) validate() error {
	if g.profileErr != nil {
		return fmt.Errorf("--profile: %w", g.profileErr)
	}
	if g.output != "table" && g.output != "json" {
		return fmt.Errorf("-o: want table or json (got %q)", g.output)
	}
	if g.timeout <= 0 {
		return fmt.Errorf("--timeout: must be positive (got %v)", g.timeout)
	}
	// Every address is checked before anything is dialed: gRPC would take
	// "127.0.0.1" as 127.0.0.1:443 and "http://h:9090" as a host named
	// "http", and wait out --timeout on either.
	if g.broker == "" {
		return fmt.Errorf("--broker: must not be empty")
	}
	if err := flagfile.Address("broker", g.broker, defaultBroker, false); err != nil {
		return g.fromElsewhere("broker", err)
	}
	if g.controller != "" {
		if _, err := flagfile.AddressList("controller", g.controller, "127.0.0.1:9090", false); err != nil {
			return g.fromElsewhere("controller", err)
		}
	}
	if g.bootstrap != "" {
		if _, err := flagfile.AddressList("bootstrap", g.bootstrap, defaultBroker, false); err != nil {
			return g.fromElsewhere("bootstrap", err)
		}
	}
	auth, err := tlsconf.ParseClientAuth(g.tlsClientAuth)
	if err != nil {
		return fmt.Errorf("--tls-client-auth: %w", err)
	}
	g.tls = tlsconf.Options{Cert: g.tlsCert, Key: g.tlsKey, CA: g.tlsCA, ClientAuth: auth}
	if err := g.tls.Validate(); err != nil {
		return err
	}
	return nil
}

// fromElsewhere adds to err, about global flag name, where its value came
// from when the command line did not give it: a bad CTLCLIENT_BROKER
// reported as "--broker" alone would send the user looking for a flag
// they never typed.
func (g *globals) fromElsewhere(name string, err error) error {
	if g.explicit[name] {
		return err
	}
	src := "CTLCLIENT_" + strings.ToUpper(name)
	if g.profile != "" {
		src += fmt.Sprintf(" or profile %q", g.profile)
	}
	return fmt.Errorf("%w (the value comes from %s)", err, src)
}

// controllers is --controller split at its commas, empty entries left out.
func (g *globals) controllers() []string {
	var addrs []string
	for _, a := range strings.Split(g.controller, ",") {
		if a = strings.TrimSpace(a); a != "" {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// bootstrapAddrs is --bootstrap split at its commas, empty entries and
// repeats left out.
func (g *globals) bootstrapAddrs() []string {
	var addrs []string
	for _, a := range strings.Split(g.bootstrap, ",") {
		if a = strings.TrimSpace(a); a != "" && !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// maxRecvMsgSize admits consume answers far above gRPC's 4 MiB default.
const maxRecvMsgSize = 256 << 20

// dial connects to the broker lazily; otelgrpc carries the command's trace context.
func (e *env) dial() (*grpc.ClientConn, error) {
	return e.dialPeer(e.g.broker, "broker")
}

// tlsConfig is the --tls-* configuration, loaded at first use; nil:
// plaintext.
func (e *env) tlsConfig() (*tlsconf.TLS, error) {
	e.tlsOnce.Do(func() {
		logger := zerolog.New(zerolog.ConsoleWriter{Out: e.stderr, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}}).Level(zerolog.WarnLevel)
		e.tls, e.tlsErr = tlsconf.New(e.g.tls, logger)
	})
	return e.tls, e.tlsErr
}

// dialPeer connects to addr, a peer ("broker", "controller"), lazily, with
// the --tls-* credentials.
func (e *env) dialPeer(addr, peer string) (*grpc.ClientConn, error) {
	tc, err := e.tlsConfig()
	if err != nil {
		return nil, err
	}
	return dialAddr(addr, tc.DialOptions(tlsconf.Roles{Peer: peer, Self: "ctlclient"})...)
}

// dialAddr connects to addr (a broker or a controller) lazily; extra (the
// transport credentials) override the default plaintext.
func dialAddr(addr string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts := append(grpcx.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(grpcx.OtelOptions(false)...)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize), grpc.MaxCallSendMsgSize(maxRecvMsgSize)),
	)
	opts = append(opts, extra...)
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return conn, nil
}

// callReplicaManager dials the broker and makes one ReplicaManagerService
// call under --timeout.
func (e *env) callReplicaManager(ctx context.Context, call func(context.Context, replicadv1.ReplicaManagerServiceClient) error) error {
	conn, err := e.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	rctx, cancel := e.rpcContext(ctx)
	defer cancel()
	return call(rctx, replicadv1.NewReplicaManagerServiceClient(conn))
}

// rpcContext bounds one RPC by --timeout.
func (e *env) rpcContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.g.timeout)
}

// rpcContextWithWait bounds an RPC the broker may hold for wait (a long poll).
func (e *env) rpcContextWithWait(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.g.timeout+wait)
}
