package fetcher

import (
	"context"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/protoconv"
)

// LocalSource answers fetches from this broker's own logs, without a network:
// the source of the alter-log-dirs fetchers (Kafka's ReplicaAlterLogDirsThread
// reads the current log of the same broker). It is usually
// ReplicaManager.FetchFromCurrentLog.
type LocalSource func(ctx context.Context, req core.FetchRequest) core.FetchResponse

var _ FetchHandler = LocalSource(nil)

// Fetch implements FetchHandler.
func (s LocalSource) Fetch(ctx context.Context, req *replicadv1.FetchRequest) (*replicadv1.FetchResponse, error) {
	return protoconv.FetchResponseToProto(req.GetCorrelationId(), s(ctx, protoconv.FetchRequestFromProto(req))), nil
}

// NewLocalClient is the LeaderClient of an alter-log-dirs fetcher manager:
// streams opened to brokerID (this broker) are served in process by src.
func NewLocalClient(brokerID int32, src LocalSource) *InmemClient {
	c := NewInmemClient()
	c.Register(brokerID, src)
	return c
}
