package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

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
	merged := &replicadv1.ElectLeadersResponse{}
	progress := !set["partition"]
	if progress {
		if all {
			topic = ""
		}
		merged.Results, err = cc.ElectPreferredLeaders(ctx, topic, func(r *replicadv1.ElectLeadersResult, done, total int) {
			fmt.Fprintf(e.stderr, "[%d/%d] %s\n", done, total, describeElectResult(r))
		})
		if err != nil {
			return electError(err, cc, topic)
		}
	} else {
		req := &replicadv1.ElectLeadersRequest{ElectionType: replicadv1.ElectionType_ELECTION_TYPE_PREFERRED,
			Topics: []*replicadv1.ElectLeadersTopic{{Topic: topic, Partitions: []int32{partition}}}}
		resp, err := cc.ElectLeaders(ctx, req)
		if err != nil {
			return controllerError(err, cc)
		}
		if err := controllerAnswerError("elect --preferred", resp.GetErrorCode(), resp.GetErrorMessage()); err != nil {
			return err
		}
		merged.Results = resp.GetResults()
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

// electError words ElectPreferredLeaders' errors as elect --preferred's.
func electError(err error, cc *controllerClient, topic string) error {
	var ae *client.Error
	if !errors.As(err, &ae) {
		return controllerError(err, cc)
	}
	switch {
	case ae.Op == "describe-cluster":
		return controllerAnswerError("elect --preferred: describe-cluster", ae.Code, ae.Message)
	case ae.Code == replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION && topic != "":
		return controllerAnswerError("elect --preferred --topic "+topic, ae.Code, ae.Message)
	}
	return controllerAnswerError("elect --preferred", ae.Code, ae.Message)
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
