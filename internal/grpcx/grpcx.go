package grpcx

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/experimental"
)

// HTTP/2 flow-control windows. gRPC's 64 KiB default makes a 100 KiB produce
// batch wait for a WINDOW_UPDATE round trip; record batches are that size
// and larger, so windows are set well above one batch. (Fixed windows turn
// off gRPC's bandwidth-delay estimation, which on loopback only ever grows
// them toward these sizes anyway.)
const (
	streamWindow = 4 << 20
	connWindow   = 16 << 20
	bufferSize   = 256 << 10
)

// ServerOptions are the transport options of a replicad gRPC server.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.ReadBufferSize(bufferSize),
		grpc.WriteBufferSize(bufferSize),
		experimental.BufferPool(BufferPool),
	}
}

// Reconnect bounds of a client's channel. gRPC's defaults (1 s growing 1.6
// times per failed attempt up to 120 s, 20 s to connect) leave a channel
// that failed for tens of seconds waiting about as long again after the
// network is back: followers cut from their leader for 40 s reconnected 40 s
// after the heal, and the leader refused acks=all meanwhile. These follow
// Kafka's reconnect.backoff.ms (50 ms) and reconnect.backoff.max.ms (1 s);
// MinConnectTimeout, Kafka's socket.connection.setup.timeout.ms, is shorter
// than its 10 s so that an attempt stuck behind a silent cut gives way to a
// fresh one soon after the heal (a connection and TLS handshake on a LAN
// take milliseconds).
const (
	ReconnectBaseDelay = 100 * time.Millisecond
	ReconnectMaxDelay  = time.Second
	MinConnectTimeout  = 3 * time.Second
)

// ConnectParams is the dial option that sets the reconnect bounds above, for
// the channels between replicad processes (fetchers, AlterPartition, the
// controller's to its brokers; the broker session sets its own, as short).
// ctlclient, a one-shot command, keeps gRPC's.
func ConnectParams() grpc.DialOption {
	bc := backoff.DefaultConfig
	bc.BaseDelay, bc.MaxDelay = ReconnectBaseDelay, ReconnectMaxDelay
	return grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: MinConnectTimeout})
}

// DialOptions are the transport options of a client of replicad.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithReadBufferSize(bufferSize),
		grpc.WithWriteBufferSize(bufferSize),
		experimental.WithBufferPool(BufferPool),
	}
}

// ActiveControllerKey is the gRPC trailer in which a standby controller's
// NOT_CONTROLLER answer names the active controller's address, when it
// knows it (every ControllerService method; the admin methods also say it
// in their error_message, for people). controllerchannel follows it.
const ActiveControllerKey = "replicad-active-controller"
