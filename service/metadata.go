package service

import (
	"context"
	"fmt"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/protoconv"
)

// MaxMetadataTopics bounds the topics one Metadata request may name: the
// answer holds every partition of each.
const MaxMetadataTopics = 10_000

// DescribeFilter tells, for one call, which topics its caller may describe
// (Options.DescribeFilter).
type DescribeFilter func(ctx context.Context) func(topic string) bool

// validateMetadata checks every topic name; a topic named twice is fine
// (answered once), as Kafka takes the topics as a set.
func validateMetadata(req *replicadv1.MetadataRequest) error {
	if n := len(req.GetTopics()); n > MaxMetadataTopics {
		return invalid("topics", "%d topics, over the limit of %d per request: split the request", n, MaxMetadataTopics)
	}
	for i, t := range req.GetTopics() {
		if err := validateTopic(fmt.Sprintf("topics[%d]", i), t); err != nil {
			return err
		}
	}
	return nil
}

// Metadata answers the broker's view of the cluster (core's MetadataView).
// As Kafka's, it shows only the topics the caller may describe: one named
// that it may not is answered TOPIC_AUTHORIZATION_FAILED, and, asking for
// every topic, the others are left out. The brokers and the controller are
// shown to every caller that passed authorization (Kafka too): a client
// needs them to reach the leaders.
func (s *logService) Metadata(ctx context.Context, req *replicadv1.MetadataRequest) (*replicadv1.MetadataResponse, error) {
	if err := validateMetadata(req); err != nil {
		return nil, err
	}
	allowed := func(string) bool { return true }
	if s.describeFilter != nil {
		allowed = s.describeFilter(ctx)
	}
	var asked []string // distinct, in request order
	seen := map[string]bool{}
	for _, t := range req.GetTopics() {
		if !seen[t] {
			seen[t] = true
			asked = append(asked, t)
		}
	}
	var permitted []string // nil: every topic
	if len(asked) > 0 {
		permitted = []string{}
		for _, t := range asked {
			if allowed(t) {
				permitted = append(permitted, t)
			}
		}
	}
	v := s.rm.Metadata(permitted)
	resp := &replicadv1.MetadataResponse{BrokerId: v.BrokerID, ControllerId: v.ControllerID, ControllerEpoch: v.ControllerEpoch}
	for _, b := range v.Brokers {
		resp.Brokers = append(resp.Brokers, &replicadv1.Broker{Id: b.ID, Host: b.Host, Port: b.Port})
	}
	found := make(map[string]*replicadv1.MetadataTopic, len(v.Topics))
	for _, tm := range v.Topics {
		if len(asked) == 0 && !allowed(tm.Topic) {
			continue
		}
		mt := topicMetadataToProto(tm)
		found[tm.Topic] = mt
		if len(asked) == 0 {
			resp.Topics = append(resp.Topics, mt)
		}
	}
	for _, t := range asked {
		switch mt, ok := found[t]; {
		case ok:
			resp.Topics = append(resp.Topics, mt)
		default:
			resp.Topics = append(resp.Topics, &replicadv1.MetadataTopic{Topic: t,
				ErrorCode:    replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED,
				ErrorMessage: "the caller may not describe this topic"})
		}
	}
	return resp, nil
}

func topicMetadataToProto(tm core.TopicMetadata) *replicadv1.MetadataTopic {
	mt := &replicadv1.MetadataTopic{Topic: tm.Topic, TopicId: tm.TopicID, ErrorCode: protoconv.ErrorCodeToProto(tm.Error),
		Configs: tm.Configs, ConfigVersion: tm.ConfigVersion}
	if tm.Error == core.ErrUnknownTopicOrPartition {
		mt.ErrorMessage = "this broker knows no such topic (one just created may not have reached it yet)"
	}
	for _, pm := range tm.Partitions {
		mt.Partitions = append(mt.Partitions, &replicadv1.MetadataPartition{
			Partition: pm.Partition, ErrorCode: protoconv.ErrorCodeToProto(pm.Error), Leader: pm.Leader, LeaderEpoch: pm.LeaderEpoch,
			PartitionEpoch: pm.PartitionEpoch, Replicas: pm.Replicas, Isr: pm.ISR, OfflineReplicas: pm.OfflineReplicas})
	}
	return mt
}
