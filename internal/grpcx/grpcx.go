package grpcx

import (
	"google.golang.org/grpc"
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
