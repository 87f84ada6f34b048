package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/replicad/replicad/client"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The plan modes of reassign: --generate, --execute, --verify, --cancel.

// reassignOptions are the flags of the plan modes.
type reassignOptions struct {
	topics            []string
	brokers           []int32
	plan              string
	throttle          int64
	throttleSet       bool
	wait              bool
	waitTimeout       time.Duration
	preserveThrottles bool
}

// printResultJSON prints a plan mode's result (not a proto message) with
// the indentation printJSON uses.
func (e *env) printResultJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = fmt.Fprintf(e.stdout, "%s\n", b)
	return err
}

// runGenerate prints the current assignment of the topics and a proposed
// one over the brokers (client.GeneratePlan); it changes nothing.
func runGenerate(ctx context.Context, e *env, cc *controllerClient, o reassignOptions) error {
	resp, err := describeCluster(ctx, cc, "reassign --generate")
	if err != nil {
		return err
	}
	ix := client.IndexCluster(resp)
	var unknown []int32
	for _, b := range o.brokers {
		if !ix.Brokers[b] {
			unknown = append(unknown, b)
		}
	}
	if len(unknown) > 0 {
		return answerError{fmt.Sprintf("reassign --generate: broker(s) %s are not registered", joinInt32s(unknown))}
	}
	parts, err := partitionsOfTopics(resp, o.topics)
	if err != nil {
		return err
	}
	if len(o.brokers) == 0 {
		return usagef("--brokers must name at least one broker")
	}
	proposed, err := client.GeneratePlan(parts, o.brokers)
	if err != nil {
		return usagef("%v", err) // a replication factor above the brokers given
	}
	current := client.CurrentPlan(parts)
	moved, added := client.MoveCount(proposed, ix)
	if e.jsonOutput() {
		return e.printResultJSON(struct {
			Current         reassignPlan `json:"current"`
			Proposed        reassignPlan `json:"proposed"`
			MovedPartitions int          `json:"movedPartitions"`
			AddedReplicas   int          `json:"addedReplicas"`
		}{current, proposed, moved, added})
	}
	fmt.Fprintf(e.stdout, "Current partition replica assignment\n%s\n\nProposed partition reassignment configuration\n%s\n", planJSON(current), planJSON(proposed))
	fmt.Fprintf(e.stderr, "%d of %d partitions change, %d replicas to copy\n", moved, len(parts), added)
	return nil
}

// runExecute validates the whole plan, sets the throttle, starts every
// move and, with --wait, follows them to the end.
func runExecute(ctx context.Context, e *env, cc *controllerClient, o reassignOptions) error {
	plan, err := readPlan(o.plan, e.stdin)
	if err != nil {
		return err
	}
	resp, err := describeCluster(ctx, cc, "reassign --execute")
	if err != nil {
		return err
	}
	ix := client.IndexCluster(resp)
	if err := client.ValidatePlan(plan, ix); err != nil {
		return err
	}
	before, moves := client.PlanMoves(plan, ix)
	if !e.jsonOutput() {
		fmt.Fprintf(e.stdout, "Current partition replica assignment\n%s\n\nSave this to use as the --plan of a rollback.\n", planJSON(client.CurrentPlan(before)))
	}
	if o.throttleSet {
		if err := setThrottle(ctx, cc, o.throttle); err != nil {
			return err
		}
		if !e.jsonOutput() {
			fmt.Fprintf(e.stdout, "Replication throttle: %d bytes/s for the replicas being added (reassign --verify removes it once every move is done).\n", o.throttle)
		}
	}
	started, notStarted := cc.StartReassignments(ctx, moves)
	var failed []string
	for _, f := range notStarted {
		failed = append(failed, wordedError(f.Partition.String(), f.Err, cc).Error())
	}
	if !e.jsonOutput() {
		fmt.Fprintf(e.stdout, "Started %d reassignment(s); %d partition(s) of the plan already had their replicas.\n", started, len(plan.Partitions)-len(moves))
	}
	var progress []planProgress
	if len(failed) > 0 {
		err = answerError{fmt.Sprintf("reassign --execute: %d move(s) not started:\n  %s", len(failed), strings.Join(failed, "\n  "))}
	} else if o.wait {
		// Not with a move refused: it would never complete.
		progress, err = waitForPlan(ctx, e, cc, plan, o.plan, o.waitTimeout)
	}
	if e.jsonOutput() {
		result := executeResult{Current: client.CurrentPlan(before), Started: started, AlreadyDone: len(plan.Partitions) - len(moves),
			NotStarted: failed, Partitions: progress}
		if o.throttleSet {
			result.Throttle = o.throttle
		}
		if o.wait {
			complete := err == nil
			result.Complete = &complete
		}
		if jerr := e.printResultJSON(result); jerr != nil {
			return jerr
		}
	}
	return err
}

// wordedError is an error of a client.Admin helper as ctlclient words it:
// an answer's error code (a *client.Error) as "WHAT: CODE: message", the
// controller channel's errors as controllerError's.
func wordedError(what string, err error, cc *controllerClient) error {
	var ae *client.Error
	if errors.As(err, &ae) {
		return controllerAnswerError(what, ae.Code, ae.Message)
	}
	return controllerError(err, cc)
}

// executeResult is --execute's -o json result.
type executeResult struct {
	// Current is the assignment before, the rollback plan.
	Current     reassignPlan `json:"current"`
	Started     int          `json:"started"`
	AlreadyDone int          `json:"alreadyDone"`
	Throttle    int64        `json:"throttleBytesPerSec,omitempty"`
	NotStarted  []string     `json:"notStarted,omitempty"`
	// Complete and Partitions are --wait's outcome.
	Complete   *bool          `json:"complete,omitempty"`
	Partitions []planProgress `json:"partitions,omitempty"`
}

// waitForPlan follows the plan's partitions (client's
// Admin.WaitReassignments) until every one is complete, printing a line
// when a partition's state changes (unless -o json), and gives up after
// timeout. It returns the last progress seen.
func waitForPlan(ctx context.Context, e *env, cc *controllerClient, plan reassignPlan, planFile string, timeout time.Duration) ([]planProgress, error) {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Ctrl-C stops the watching, not the moves: say so, and how to follow
	// or cancel them, rather than exit as if nothing were under way.
	interrupted := func(done int) error {
		file := planFile
		if file == "" || file == "-" {
			file = "PLAN.json (the plan given on stdin)"
		}
		return interruptedError{fmt.Sprintf("reassign: interrupted with %d of %d partition(s) complete; the moves go on in the cluster. "+
			"Follow them with `ctlclient reassign --verify --plan %s`, or stop them with `ctlclient reassign --cancel --plan %s`",
			done, len(plan.Partitions), file, file)}
	}
	done := 0
	last := map[client.TopicPartition]string{}
	progress, err := cc.WaitReassignments(ctx, plan, reassignPollInterval, func(progress []planProgress) {
		done = 0
		for _, pp := range progress {
			if pp.Status == client.ProgressComplete {
				done++
			}
			k := client.TopicPartition{Topic: pp.Topic, Partition: pp.Partition}
			if line := pp.String(); line != last[k] {
				last[k] = line
				if !e.jsonOutput() {
					fmt.Fprintf(e.stdout, "[%d/%d] %s\n", done, len(plan.Partitions), line)
				}
			}
		}
	})
	var ae *client.Error
	switch {
	case err == nil:
		if !e.jsonOutput() {
			fmt.Fprintf(e.stdout, "done: %d partition(s) complete\n", done)
		}
		return progress, nil
	case errors.As(err, &ae):
		return progress, controllerAnswerError("reassign: describe-cluster", ae.Code, "")
	case err == context.DeadlineExceeded || err == context.Canceled:
		// ctx ended between two rounds.
		if ctx.Err() == context.DeadlineExceeded {
			return progress, answerError{fmt.Sprintf("reassign: %d of %d moves done after %s (they go on; see reassign --verify)", done, len(plan.Partitions), timeout)}
		}
		if errors.Is(parent.Err(), context.Canceled) {
			return progress, interrupted(done)
		}
		return progress, ctx.Err()
	case errors.Is(parent.Err(), context.Canceled):
		return progress, interrupted(done)
	case ctx.Err() == context.DeadlineExceeded:
		return progress, answerError{fmt.Sprintf("reassign: not every move is done after %s (they go on; see reassign --verify)", timeout)}
	}
	return progress, controllerError(err, cc)
}

func setThrottle(ctx context.Context, cc *controllerClient, rate int64) error {
	r, err := cc.AlterReplicationThrottle(ctx, &replicadv1.AlterReplicationThrottleRequest{BytesPerSec: rate})
	if err != nil {
		return controllerError(err, cc)
	}
	return controllerAnswerError("reassign: set the replication throttle", r.GetErrorCode(), r.GetErrorMessage())
}

// runVerify reports each plan partition's progress; once all are complete
// it removes the throttle. It fails (exit 1) while any is not.
func runVerify(ctx context.Context, e *env, cc *controllerClient, o reassignOptions) error {
	plan, err := readPlan(o.plan, e.stdin)
	if err != nil {
		return err
	}
	resp, err := describeCluster(ctx, cc, "reassign --verify")
	if err != nil {
		return err
	}
	progress, complete := client.PlanProgressOf(plan, client.IndexCluster(resp))
	allDone := complete == len(plan.Partitions)
	throttleRemoved := false
	if allDone {
		// As Kafka's --verify: the throttle was for these moves.
		if err := setThrottle(ctx, cc, 0); err != nil {
			return err
		}
		throttleRemoved = true
	}
	if e.jsonOutput() {
		if err := e.printResultJSON(struct {
			Complete        bool           `json:"complete"`
			ThrottleRemoved bool           `json:"throttleRemoved"`
			Partitions      []planProgress `json:"partitions"`
		}{allDone, throttleRemoved, progress}); err != nil {
			return err
		}
	} else {
		for _, pp := range progress {
			fmt.Fprintln(e.stdout, pp)
		}
		fmt.Fprintf(e.stdout, "%d of %d partition(s) complete\n", complete, len(plan.Partitions))
		if throttleRemoved {
			fmt.Fprintln(e.stdout, "Replication throttle removed.")
		}
	}
	if !allDone {
		return answerError{fmt.Sprintf("reassign --verify: %s: %d of %d partition(s) complete", errIncomplete, complete, len(plan.Partitions))}
	}
	return nil
}

// runCancel cancels the reassignments in flight of the plan's partitions
// (every one in flight without --plan), then removes the throttle unless
// --preserve-throttles. A partition with nothing in flight is reported and
// skipped: a cancel run twice succeeds.
func runCancel(ctx context.Context, e *env, cc *controllerClient, o reassignOptions) error {
	resp, err := describeCluster(ctx, cc, "reassign --cancel")
	if err != nil {
		return err
	}
	ix := client.IndexCluster(resp)
	var keys []client.TopicPartition
	if o.plan != "" {
		plan, err := readPlan(o.plan, e.stdin)
		if err != nil {
			return err
		}
		var problems []string
		for i, entry := range plan.Partitions {
			if ix.Partitions[entry.Key()] == nil {
				problems = append(problems, fmt.Sprintf("partitions[%d] (%s-%d): unknown partition", i, entry.Topic, entry.Partition))
			}
			keys = append(keys, entry.Key())
		}
		if len(problems) > 0 {
			return &client.PlanError{Problems: problems}
		}
	} else {
		keys = client.Reassigning(resp)
	}
	type cancelResult struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Outcome   string  `json:"outcome"`
		Replicas  []int32 `json:"replicas,omitempty"`
		Error     string  `json:"error,omitempty"`
	}
	var results []cancelResult
	var failed []string
	for _, c := range cc.CancelReassignments(ctx, keys, ix) {
		res := cancelResult{Topic: c.Partition.Topic, Partition: c.Partition.Partition, Outcome: c.Outcome, Replicas: c.Replicas}
		if c.Err != nil {
			res.Error = wordedError("cancel", c.Err, cc).Error()
			failed = append(failed, fmt.Sprintf("%s: %s", c.Partition, res.Error))
		}
		results = append(results, res)
	}
	throttleRemoved := false
	if !o.preserveThrottles && len(failed) == 0 {
		if err := setThrottle(ctx, cc, 0); err != nil {
			return err
		}
		throttleRemoved = true
	}
	if e.jsonOutput() {
		if err := e.printResultJSON(struct {
			Partitions      []cancelResult `json:"partitions"`
			ThrottleRemoved bool           `json:"throttleRemoved"`
		}{results, throttleRemoved}); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			line := fmt.Sprintf("%s-%d: %s", r.Topic, r.Partition, r.Outcome)
			if r.Replicas != nil {
				line += fmt.Sprintf(": replicas %s", tp.IDList(r.Replicas))
			}
			if r.Error != "" {
				line += ": " + r.Error
			}
			fmt.Fprintln(e.stdout, line)
		}
		if len(results) == 0 {
			fmt.Fprintln(e.stdout, "no reassignment in flight")
		}
		if throttleRemoved {
			fmt.Fprintln(e.stdout, "Replication throttle removed.")
		}
	}
	if len(failed) > 0 {
		return answerError{fmt.Sprintf("reassign --cancel: %d cancel(s) failed:\n  %s", len(failed), strings.Join(failed, "\n  "))}
	}
	return nil
}

type planMode struct{ generate, execute, verify, cancel bool }

// runPlanMode checks the flags of a plan mode and runs it.
func runPlanMode(ctx context.Context, e *env, fs *flag.FlagSet, m planMode, o reassignOptions) error {
	var err error
	switch {
	case m.generate:
		if err = requireFlags(fs, "topics", "brokers"); err == nil {
			err = forbidFlags(fs, "--generate", "plan", "throttle", "wait", "preserve-throttles")
		}
		if err == nil {
			for _, t := range o.topics {
				if err = checkTopicName(t); err != nil {
					break
				}
			}
		}
		if err == nil {
			err = checkReplicas(o.brokers)
		}
	case m.execute:
		if err = requireFlags(fs, "plan"); err == nil {
			err = forbidFlags(fs, "--execute", "topics", "brokers", "preserve-throttles")
		}
		if err == nil && o.throttleSet && o.throttle <= 0 {
			err = usagef("--throttle must be positive (got %d)", o.throttle)
		}
	case m.verify:
		if err = requireFlags(fs, "plan"); err == nil {
			err = forbidFlags(fs, "--verify", "topics", "brokers", "throttle", "wait", "preserve-throttles")
		}
	case m.cancel:
		err = forbidFlags(fs, "--cancel", "topics", "brokers", "throttle", "wait")
	}
	if err != nil {
		if uerr, ok := err.(usageError); ok && strings.HasPrefix(uerr.msg, "--replicas") {
			err = usagef("--brokers%s", strings.TrimPrefix(uerr.msg, "--replicas"))
		}
		return err
	}
	cc, err := e.controller()
	if err != nil {
		return err
	}
	switch {
	case m.generate:
		return runGenerate(ctx, e, cc, o)
	case m.execute:
		return runExecute(ctx, e, cc, o)
	case m.verify:
		return runVerify(ctx, e, cc, o)
	default:
		return runCancel(ctx, e, cc, o)
	}
}

// splitList splits a comma-separated flag, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
