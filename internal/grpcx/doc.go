// Package grpcx holds the gRPC transport settings every replicad endpoint
// shares: the broker's and the controller's servers, ctlclient, and the
// brokers' clients (fetchers, broker session, AlterPartition). Its buffer
// pool, and the proto codec it registers for the whole process (gRPC's own,
// on that pool), keep no buffer over 1 MiB and clear none they hand out
// (see BufferPool).
package grpcx
