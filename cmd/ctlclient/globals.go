package main

import (
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"

	"github.com/replicad/replicad/internal/grpcx"

	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const defaultBroker = "127.0.0.1:9091"

// globals are the flags every command takes.
type globals struct {
	broker     string
	controller string
	output     string
	timeout    time.Duration
}

func newGlobals(getenv func(string) string) *globals {
	g := &globals{broker: defaultBroker, output: "table", timeout: 10 * time.Second}
	if b := getenv("CTLCLIENT_BROKER"); b != "" {
		g.broker = b
	}
	g.controller = getenv("CTLCLIENT_CONTROLLER")
	return g
}

// register adds the global flags to fs. The current values are the
// defaults, so flags given before the command survive the command's own parse.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.broker, "broker", g.broker, "broker `ADDR` (host:port); env CTLCLIENT_BROKER")
	fs.StringVar(&g.controller, "controller", g.controller, "controller `ADDR[,ADDR...]`: the active one is found among them; env CTLCLIENT_CONTROLLER")
	fs.StringVar(&g.output, "o", g.output, "output `format`: table or json (each RPC response as protojson, as grpcurl prints it)")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "deadline of each RPC; with --controller also how long one call keeps retrying")
}

func (g *globals) validate() error {
	if g.output != "table" && g.output != "json" {
		return fmt.Errorf("-o: want table or json (got %q)", g.output)
	}
	if g.timeout <= 0 {
		return fmt.Errorf("--timeout: must be positive (got %v)", g.timeout)
	}
	if g.broker == "" {
		return fmt.Errorf("--broker: must not be empty")
	}
	if g.controller != "" && len(g.controllers()) == 0 {
		return fmt.Errorf("--controller: want ADDR[,ADDR...] (got %q)", g.controller)
	}
	return nil
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

// maxRecvMsgSize admits consume answers far above gRPC's 4 MiB default.
const maxRecvMsgSize = 256 << 20

// dial connects to the broker lazily; otelgrpc carries the command's trace context.
func (e *env) dial() (*grpc.ClientConn, error) {
	return dialAddr(e.g.broker)
}

// dialAddr connects to addr (a broker or a controller) lazily.
func dialAddr(addr string) (*grpc.ClientConn, error) {
	opts := append(grpcx.DialOptions(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(grpcx.OtelOptions(false)...)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize), grpc.MaxCallSendMsgSize(maxRecvMsgSize)),
	)
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
