package main

import (
	"context"
	"sort"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/tp"
)

// RunRetention answers, for each partition of topic it holds (or the one
// named), that retention by retention.ms took the first half of its
// records in one segment of 100 bytes a record.
func (b *memBroker) RunRetention(_ context.Context, topic string, partition *int32) core.RetentionResponse {
	b.mu.Lock()
	defer b.mu.Unlock()
	resp := core.RetentionResponse{BrokerID: 1}
	for t, recs := range b.logs {
		if t.Topic != topic || partition != nil && t.Partition != *partition {
			continue
		}
		n := int64(len(recs) / 2)
		r := core.RetentionResult{TopicPartition: t, Leader: true, LogStartAfter: n}
		if n > 0 {
			r.DeletedSegments, r.DeletedBytes, r.Reason = 1, 100*n, "retention.ms"
		}
		resp.Results = append(resp.Results, r)
	}
	if partition != nil && len(resp.Results) == 0 {
		resp.Results = append(resp.Results, core.RetentionResult{TopicPartition: tp.TopicPartition{Topic: topic, Partition: *partition},
			Error: core.ErrUnknownTopicOrPartition, LogStartBefore: -1, LogStartAfter: -1})
	}
	sort.Slice(resp.Results, func(i, j int) bool { return tp.Less(resp.Results[i].TopicPartition, resp.Results[j].TopicPartition) })
	return resp
}
