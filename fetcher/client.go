package fetcher

import (
	"context"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// LeaderClient opens fetch streams to leaders. It is the fetcher's one seam
// to the network (hashicorp/raft's Transport lesson): GRPCClient is the real
// one, InmemClient serves a leader in process, and both pass the same tests.
type LeaderClient interface {
	// Open starts one FetchService/Fetch stream to leader. The stream ends
	// when ctx is cancelled or Close is called.
	Open(ctx context.Context, leader core.Broker) (FetchStream, error)
}

// FetchStream is one bidi fetch stream. A fetcher sends one request and
// receives its answer (same correlation_id) before sending the next, from a
// single goroutine. Any error from Send or Recv means the stream is broken:
// the fetcher closes it and opens another.
type FetchStream interface {
	Send(req *replicadv1.FetchRequest) error
	Recv() (*replicadv1.FetchResponse, error)
	Close()
}

// FetchHandler answers fetch requests on the leader's side, one request at a
// time per stream. An error breaks the stream. InmemClient calls it directly;
// FetchServer serves it over gRPC.
type FetchHandler interface {
	Fetch(ctx context.Context, req *replicadv1.FetchRequest) (*replicadv1.FetchResponse, error)
}
