package fetcher

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
)

// maxMsgSize bounds a fetch answer: max_bytes of records plus framing. It
// matches ctlclient's limit.
const maxMsgSize = 256 << 20

// GRPCClient opens FetchService/Fetch streams over gRPC. It keeps one
// connection per leader address, shared by the fetchers to that leader
// (each holds its own stream on it).
type GRPCClient struct {
	opts []grpc.DialOption

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// NewGRPCClient returns a client dialing with replicad's transport options,
// insecure credentials and otelgrpc tracing; extra options come last. Fetch
// streams, the data plane, create no client spans (see NewGRPCClientTracing).
func NewGRPCClient(extra ...grpc.DialOption) *GRPCClient {
	return NewGRPCClientTracing(false, extra...)
}

// NewGRPCClientTracing is NewGRPCClient whose Fetch streams create client
// spans when traceFetches is set (replicad --trace-data-plane). Either way
// the stream carries the trace context it was opened in (the fetcher's
// ReplicaFetcher.openStream span) to the leader.
func NewGRPCClientTracing(traceFetches bool, extra ...grpc.DialOption) *GRPCClient {
	opts := append(grpcx.DialOptions(),
		// A leader back after a cut is reconnected to within a second.
		grpcx.ConnectParams(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(grpcx.OtelOptions(traceFetches)...)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
	)
	return &GRPCClient{opts: append(opts, extra...), conns: make(map[string]*grpc.ClientConn)}
}

// readyWait bounds how long Open waits for a channel that is not connected
// to connect before it opens the stream (which then fails at once if the
// channel is still down): the channel's reconnect delay, so a fetcher
// retrying Open polls the channel rather than adding its own backoff to it.
const readyWait = grpcx.ReconnectMaxDelay

// Open implements LeaderClient.
func (c *GRPCClient) Open(ctx context.Context, leader core.Broker) (FetchStream, error) {
	conn, err := c.conn(leader.Addr())
	if err != nil {
		return nil, err
	}
	waitReady(ctx, conn, readyWait)
	ctx, cancel := context.WithCancel(ctx)
	s, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open fetch stream to %d at %s: %w", leader.ID, leader.Addr(), err)
	}
	return &grpcStream{s: s, cancel: cancel}, nil
}

// waitReady waits up to d for conn to be connected. A stream opened on a
// channel in transient failure fails at once without dialing (the channel
// dials on its own backoff): waiting here, the stream opens as soon as the
// leader is back, within the channel's reconnect delay of a heal, instead of
// at the fetcher's next try after it.
func waitReady(ctx context.Context, conn *grpc.ClientConn, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if s == connectivity.Idle {
			conn.Connect()
		}
		if s == connectivity.Shutdown || !conn.WaitForStateChange(ctx, s) {
			return
		}
	}
}

// conn returns the connection to addr, creating it (grpc.NewClient does not
// dial until first use, so this does no I/O under mu).
func (c *GRPCClient) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if conn, ok := c.conns[addr]; ok {
		return conn, nil
	}
	conn, err := grpc.NewClient(addr, c.opts...)
	if err != nil {
		return nil, fmt.Errorf("fetch client for %s: %w", addr, err)
	}
	c.conns[addr] = conn
	return conn, nil
}

// Close closes every connection; call it after the Manager's Shutdown.
func (c *GRPCClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var first error
	for addr, conn := range c.conns {
		if err := conn.Close(); err != nil && first == nil {
			first = err
		}
		delete(c.conns, addr)
	}
	return first
}

type grpcStream struct {
	s      grpc.BidiStreamingClient[replicadv1.FetchRequest, replicadv1.FetchResponse]
	cancel context.CancelFunc
}

func (g *grpcStream) Send(req *replicadv1.FetchRequest) error  { return g.s.Send(req) }
func (g *grpcStream) Recv() (*replicadv1.FetchResponse, error) { return g.s.Recv() }
func (g *grpcStream) Close()                                   { g.cancel() }

// FetchServer is a FetchService whose Fetch answers each request of a stream
// with handler, in order: the leader side in tests, and a template for the
// real one. OffsetsForLeaderEpoch is unimplemented.
type FetchServer struct {
	replicadv1.UnimplementedFetchServiceServer
	Handler FetchHandler
}

// Fetch implements replicadv1.FetchServiceServer.
func (s *FetchServer) Fetch(stream grpc.BidiStreamingServer[replicadv1.FetchRequest, replicadv1.FetchResponse]) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil // the follower closed its side
		}
		if err != nil {
			return err
		}
		resp, err := s.Handler.Fetch(stream.Context(), req)
		if err != nil {
			return err
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}
