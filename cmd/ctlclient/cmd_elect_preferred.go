package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// preferredElectBatch is how many partitions one ElectLeaders call of
// `elect --preferred` (a topic, or --all) carries: each call waits for the
// brokers to hear of its elections, so a batch is also a progress step, and
// no single call moves thousands of leaderships at once.
const preferredElectBatch = 20

// runPreferredElection is `elect --preferred`: one partition, a topic, or
// --all, through ElectLeaders.
func runPreferredElection(ctx context.Context, e *env, fs *flag.FlagSet, topic string, partition int32, all bool) error {
	set := setFlags(fs)
	switch {
	case !set["preferred"]:
		return usagef("--all elects the preferred leaders: give --preferred too")
	case set["leader"]:
		return usagef("--leader and --preferred exclude each other: --preferred elects the first replica of the assignment")
	case all && (set["topic"] || set["partition"]):
		return usagef("--all and --topic/--partition exclude each other")
	case !all && !set["topic"]:
		return usagef("--preferred needs --topic T (with or without --partition P) or --all")
	case set["partition"] && partition < 0:
		return usagef("--partition must not be negative (got %d)", partition)
	}
	if !all {
		if err := checkTopicName(topic); err != nil {
			return err
		}
	}
	cc, err := e.controller()
	if err != nil {
		return err
	}
	var batches [][]*replicadv1.ElectLeadersTopic
	progress := false
	if set["partition"] {
		batches = [][]*replicadv1.ElectLeadersTopic{{{Topic: topic, Partitions: []int32{partition}}}}
	} else {
		progress = true
		if batches, err = preferredBatches(ctx, cc, topic, all); err != nil {
			return err
		}
	}
	total := 0
	for _, b := range batches {
		for _, t := range b {
			total += len(t.GetPartitions())
		}
	}
	merged := &replicadv1.ElectLeadersResponse{}
	for _, b := range batches {
		req := &replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED, Topics: b}
		resp, err := callController(ctx, cc, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.ElectLeadersResponse, error) {
			return c.ElectLeaders(ctx, req)
		})
		if err != nil {
			return err
		}
		if err := controllerAnswerError("elect --preferred", resp.GetErrorCode(), resp.GetErrorMessage()); err != nil {
			return err
		}
		for _, r := range resp.GetResults() {
			merged.Results = append(merged.Results, r)
			if progress {
				fmt.Fprintf(e.stderr, "[%d/%d] %s\n", len(merged.GetResults()), total, describeElectResult(r))
			}
		}
	}
	if e.jsonOutput() {
		err = e.printJSON(merged)
	} else {
		err = printElectResults(e.stdout, merged.GetResults())
	}
	if err != nil {
		return err
	}
	return electOutcome(e.stderr, merged.GetResults(), progress)
}

// preferredBatches lists the partitions of topic (every topic with all)
// from DescribeCluster, in batches of preferredElectBatch.
func preferredBatches(ctx context.Context, cc *controllerClient, topic string, all bool) ([][]*replicadv1.ElectLeadersTopic, error) {
	resp, err := callController(ctx, cc, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeClusterResponse, error) {
		return c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	})
	if err != nil {
		return nil, err
	}
	if err := controllerAnswerError("elect --preferred: describe-cluster", resp.GetErrorCode(), ""); err != nil {
		return nil, err
	}
	// In topic and partition order, so that a batch names each topic once
	// and the progress reads in order.
	parts := slices.Clone(resp.GetPartitions())
	slices.SortFunc(parts, func(a, b *replicadv1.ClusterPartition) int {
		return cmp.Or(cmp.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	var batches [][]*replicadv1.ElectLeadersTopic
	var cur []*replicadv1.ElectLeadersTopic
	n := 0
	for _, p := range parts {
		if !all && p.GetTopic() != topic {
			continue
		}
		if n == preferredElectBatch {
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
	if len(batches) == 0 && !all {
		return nil, controllerAnswerError("elect --preferred --topic "+topic, replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION,
			fmt.Sprintf("topic %q does not exist", topic))
	}
	return batches, nil
}

// describeElectResult is one partition's outcome as a progress line.
func describeElectResult(r *replicadv1.ElectLeadersResult) string {
	name := fmt.Sprintf("%s-%d", r.GetTopic(), r.GetPartition())
	switch r.GetErrorCode() {
	case replicadv1.ErrorCode_ERROR_CODE_NONE:
		return fmt.Sprintf("%s: elected the preferred leader %d", name, r.GetState().GetLeader())
	case replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED:
		return fmt.Sprintf("%s: the preferred leader %d already leads", name, r.GetState().GetLeader())
	}
	s := name + ": " + codeName(r.GetErrorCode())
	if r.GetErrorMessage() != "" {
		s += ": " + r.GetErrorMessage()
	}
	return s
}

// printElectResults is the table of the outcomes.
func printElectResults(w io.Writer, results []*replicadv1.ElectLeadersResult) error {
	t := newTable(w, "TOPIC", "PARTITION", "RESULT", "LEADER", "REPLICAS", "ISR", "MESSAGE")
	for _, r := range results {
		leader, replicas, isr := "-", "-", "-"
		if st := r.GetState(); st != nil {
			leader, replicas, isr = fmt.Sprint(st.GetLeader()), joinInt32s(st.GetReplicas()), joinInt32s(st.GetIsr())
		}
		t.row(r.GetTopic(), r.GetPartition(), codeName(r.GetErrorCode()), leader, replicas, isr, r.GetErrorMessage())
	}
	return t.flush()
}

// electOutcome prints what happened on stderr (a summary with progress, or
// the no-op message of one partition) and fails when any partition answered
// anything but NONE or ELECTION_NOT_NEEDED.
func electOutcome(stderr io.Writer, results []*replicadv1.ElectLeadersResult, summary bool) error {
	elected, notNeeded := 0, 0
	var failed []string
	for _, r := range results {
		switch r.GetErrorCode() {
		case replicadv1.ErrorCode_ERROR_CODE_NONE:
			elected++
		case replicadv1.ErrorCode_ERROR_CODE_ELECTION_NOT_NEEDED:
			notNeeded++
		default:
			failed = append(failed, describeElectResult(r))
		}
	}
	if summary {
		fmt.Fprintf(stderr, "elect --preferred: %d partitions: %d elected, %d already led by their preferred replica, %d failed\n",
			len(results), elected, notNeeded, len(failed))
	} else if len(results) == 1 && notNeeded == 1 {
		fmt.Fprintf(stderr, "elect --preferred: nothing to do: %s\n", describeElectResult(results[0]))
	}
	if len(failed) == 0 {
		return nil
	}
	const most = 10
	n, more := len(failed), ""
	if n > most {
		more = fmt.Sprintf("; and %d more", n-most)
		failed = failed[:most]
	}
	return answerError{fmt.Sprintf("elect --preferred: %d of %d partitions not elected: %s%s", n, len(results), strings.Join(failed, "; "), more)}
}
