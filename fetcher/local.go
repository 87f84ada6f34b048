package fetcher

import (
	"context"
	"time"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// LocalSource answers fetches from this broker's own logs, without a network:
// the source of the alter-log-dirs fetchers (Kafka's ReplicaAlterLogDirsThread
// reads the current log of the same broker). It is usually
// ReplicaManager.FetchFromCurrentLog.
type LocalSource func(ctx context.Context, req core.FetchRequest) core.FetchResponse

var _ FetchHandler = LocalSource(nil)

// Fetch implements FetchHandler.
func (s LocalSource) Fetch(ctx context.Context, req *replicadv1.FetchRequest) (*replicadv1.FetchResponse, error) {
	return localFetchToProto(req.GetCorrelationId(), s(ctx, localFetchFromProto(req))), nil
}

// NewLocalClient is the LeaderClient of an alter-log-dirs fetcher manager:
// streams opened to brokerID (this broker) are served in process by src.
func NewLocalClient(brokerID int32, src LocalSource) *InmemClient {
	c := NewInmemClient()
	c.Register(brokerID, src)
	return c
}

func localFetchFromProto(req *replicadv1.FetchRequest) core.FetchRequest {
	out := core.FetchRequest{
		ReplicaID:   req.GetReplicaId(),
		BrokerEpoch: req.GetBrokerEpoch(),
		MaxWait:     time.Duration(req.GetMaxWaitMs()) * time.Millisecond,
		MinBytes:    int(req.GetMinBytes()),
		MaxBytes:    int(req.GetMaxBytes()),
		Partitions:  make([]core.FetchPartition, len(req.GetPartitions())),
	}
	for i, p := range req.GetPartitions() {
		out.Partitions[i] = core.FetchPartition{
			TopicPartition:     tp.TopicPartition{Topic: p.GetTopic(), Partition: p.GetPartition()},
			FetchOffset:        p.GetFetchOffset(),
			CurrentLeaderEpoch: p.GetCurrentLeaderEpoch(),
			LastFetchedEpoch:   p.GetLastFetchedEpoch(),
			LogStartOffset:     p.GetLogStartOffset(),
		}
	}
	return out
}

func localFetchToProto(correlationID int64, resp core.FetchResponse) *replicadv1.FetchResponse {
	out := &replicadv1.FetchResponse{CorrelationId: correlationID, Partitions: make([]*replicadv1.FetchPartitionResult, len(resp.Partitions))}
	for i, r := range resp.Partitions {
		pr := &replicadv1.FetchPartitionResult{
			Topic:          r.TopicPartition.Topic,
			Partition:      r.TopicPartition.Partition,
			ErrorCode:      replicadv1.ErrorCode(r.Error),
			HighWatermark:  r.HighWatermark,
			LogStartOffset: r.LogStartOffset,
			LogEndOffset:   r.LogEndOffset,
			Records:        r.Records,
		}
		if d := r.DivergingEpoch; d != nil {
			pr.DivergingEpoch = &replicadv1.EpochEndOffset{Epoch: d.Epoch, EndOffset: d.EndOffset}
		}
		out.Partitions[i] = pr
	}
	return out
}
