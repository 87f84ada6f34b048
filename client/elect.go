package client

import (
	"context"
	"fmt"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// PreferredElectBatch is how many partitions one ElectLeaders request of
// ElectPreferredLeaders carries: each request waits for the brokers to hear
// of its elections, so a batch is also a progress step, and no single
// request moves thousands of leaderships at once.
const PreferredElectBatch = 20

// ElectPreferredLeaders elects the preferred leader (the first replica of
// the assignment) of every partition of topic, or of every topic when
// topic is "", as kafka-leader-election --election-type preferred does. It
// lists the partitions from DescribeCluster and sends them in topic and
// partition order, PreferredElectBatch to an ElectLeaders request. It
// returns each partition's result, in that order: NONE (elected),
// ELECTION_NOT_NEEDED (the preferred replica already leads) or why not.
// onResult, if not nil, is called with each result as its batch answers,
// with how many results are in so far and how many partitions there are.
//
// An unknown topic is an *Error (UNKNOWN_TOPIC_OR_PARTITION, Op
// "elect-leaders"), as is an answer that failed a whole batch; a failed
// DescribeCluster answer is one with Op "describe-cluster". A batch sent
// without an answer is not sent again (IsMaybeApplied): the results so far
// are returned with the error.
func (a *Admin) ElectPreferredLeaders(ctx context.Context, topic string, onResult func(r *replicadv1.ElectLeadersResult, done, total int)) ([]*replicadv1.ElectLeadersResult, error) {
	resp, err := a.describeClusterOK(ctx)
	if err != nil {
		return nil, err
	}
	batches := preferredBatches(resp, topic)
	if len(batches) == 0 && topic != "" {
		return nil, &Error{Op: "elect-leaders", Code: replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
			Message: fmt.Sprintf("topic %q does not exist", topic)}
	}
	total := 0
	for _, b := range batches {
		for _, t := range b {
			total += len(t.GetPartitions())
		}
	}
	var results []*replicadv1.ElectLeadersResult
	for _, b := range batches {
		resp, err := a.ElectLeaders(ctx, &replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED, Topics: b})
		if err != nil {
			return results, err
		}
		if err := answerErr("elect-leaders", TopicPartition{}, resp.GetErrorCode(), resp.GetErrorMessage()); err != nil {
			return results, err
		}
		for _, r := range resp.GetResults() {
			results = append(results, r)
			if onResult != nil {
				onResult(r, len(results), total)
			}
		}
	}
	return results, nil
}

// preferredBatches lists the partitions of topic (every topic's with "")
// in resp, in topic and partition order (so that a batch names each topic
// once and the progress reads in order), in batches of
// PreferredElectBatch.
func preferredBatches(resp *replicadv1.DescribeClusterResponse, topic string) [][]*replicadv1.ElectLeadersTopic {
	var batches [][]*replicadv1.ElectLeadersTopic
	var cur []*replicadv1.ElectLeadersTopic
	n := 0
	for _, p := range sortedPartitions(resp.GetPartitions()) {
		if topic != "" && p.GetTopic() != topic {
			continue
		}
		if n == PreferredElectBatch {
			batches, cur, n = append(batches, cur), nil, 0
		}
		if len(cur) == 0 || cur[len(cur)-1].GetTopic() != p.GetTopic() {
			cur = append(cur, &replicadv1.ElectLeadersTopic{Topic: p.GetTopic()})
		}
		last := cur[len(cur)-1]
		last.Partitions = append(last.Partitions, p.GetPartition())
		n++
	}
	if n > 0 {
		batches = append(batches, cur)
	}
	return batches
}
