package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// retention run: the retention check now, on every broker hosting the
// topic (issue 22: operators verify retention before trusting it), and the
// periodic check's times under describe.

func retentionRunCommand() *command {
	return &command{
		name:    "retention run",
		summary: "run a topic's retention check now and show what it deleted",
		usage:   "TOPIC | --topic TOPIC [--partition P]",
		details: `Runs the retention check now (the one every --log-retention-check-interval
runs) for the topic's replicas, leader and followers alike, as that check
would: each replica deletes its oldest whole segments past the topic's
retention.ms or retention.bytes, never the active segment and never above
its high watermark. Prints one row per partition and broker: the replica's
role, its log start offset before -> after, the segments and bytes deleted,
and the limit that deleted them (retention.ms, retention.bytes, or
log-start-offset for segments already below a raised log start); "-" when
nothing was due. A follower also follows its leader's log start at its next
fetch, as always.

With --controller or --bootstrap it asks every broker that hosts a replica
of the topic (of --partition), from the controller's DescribeCluster or a
bootstrap broker's Metadata; otherwise only --broker. -o json prints each
broker's RunRetentionResponse. Exits 1 when a broker could not be reached or
answered an error code (NOT_LEADER_OR_FOLLOWER: the replica's leadership
changed during the check; run it again). With authorization on, it needs the
delete ACL on the topic (or the admin role), as delete-records does.

'ctlclient describe' shows when the broker's periodic check last ran and
when it runs next.`,
		example: "ctlclient --bootstrap 127.0.0.1:9091 retention run orders\nctlclient --controller 127.0.0.1:9090 retention run --topic orders --partition 0",
		args:    true,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topicFlag := fs.String("topic", "", "the topic, instead of the TOPIC argument")
			partition := int32Var(fs, "partition", 0, "only this partition")
			return func(ctx context.Context, e *env) error {
				topic, err := topicOperand(fs, e, topicFlag)
				if err != nil {
					return err
				}
				req := &replicadv1.RunRetentionRequest{Topic: topic}
				if setFlags(fs)["partition"] {
					if *partition < 0 {
						return usagef("--partition must not be negative (got %d)", *partition)
					}
					req.Partition = partition
				}
				return runRetention(ctx, e, req)
			}
		},
	}
}

// retentionTarget is a broker to ask.
type retentionTarget struct {
	id   int32 // -1: --broker, not known
	addr string
}

func runRetention(ctx context.Context, e *env, req *replicadv1.RunRetentionRequest) error {
	targets, err := retentionTargets(ctx, e, req)
	if err != nil {
		return err
	}
	var failures []string
	var answers []*replicadv1.RunRetentionResponse
	for _, tg := range targets {
		resp, err := runRetentionOn(ctx, e, tg.addr, req)
		if err != nil {
			failures = append(failures, fmt.Sprintf("broker %s: %v", brokerLabel(tg), err))
			continue
		}
		answers = append(answers, resp)
	}
	if e.jsonOutput() {
		for _, a := range answers {
			if err := e.printJSON(a); err != nil {
				return err
			}
		}
	} else if len(answers) > 0 {
		if err := printRetentionResults(e, answers); err != nil {
			return err
		}
	}
	for _, a := range answers {
		for _, r := range a.GetResults() {
			if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
				msg := fmt.Sprintf("broker %d: %s-%d: %s", a.GetBrokerId(), r.GetTopic(), r.GetPartition(), codeName(r.GetErrorCode()))
				if r.GetErrorMessage() != "" {
					msg += ": " + r.GetErrorMessage()
				}
				failures = append(failures, msg)
			}
		}
	}
	if len(failures) > 0 {
		return answerError{"retention run " + req.GetTopic() + ": " + strings.Join(failures, "; ")}
	}
	return nil
}

func brokerLabel(tg retentionTarget) string {
	if tg.id < 0 {
		return tg.addr
	}
	return fmt.Sprintf("%d (%s)", tg.id, tg.addr)
}

func runRetentionOn(ctx context.Context, e *env, addr string, req *replicadv1.RunRetentionRequest) (*replicadv1.RunRetentionResponse, error) {
	conn, err := e.dialPeer(addr, "broker")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	rctx, cancel := e.rpcContext(ctx)
	defer cancel()
	return replicadv1.NewReplicaManagerServiceClient(conn).RunRetention(rctx, req)
}

// retentionTargets are the brokers hosting a replica of the topic (of the
// partition), by id, from the controller or a bootstrap broker; just
// --broker without either.
func retentionTargets(ctx context.Context, e *env, req *replicadv1.RunRetentionRequest) ([]retentionTarget, error) {
	if !e.routed() {
		return []retentionTarget{{id: -1, addr: e.g.broker}}, nil
	}
	type part struct {
		partition int32
		replicas  []int32
	}
	addrs := map[int32]string{}
	var parts []part
	if e.g.bootstrap != "" {
		resp, err := bootstrapMetadata(ctx, e, req.GetTopic())
		if err != nil {
			return nil, err
		}
		for _, b := range resp.GetBrokers() {
			addrs[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
		}
		for _, t := range resp.GetTopics() {
			if t.GetTopic() != req.GetTopic() {
				continue
			}
			if t.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
				return nil, answerError{fmt.Sprintf("retention run %s: %s", req.GetTopic(), codeName(t.GetErrorCode()))}
			}
			for _, p := range t.GetPartitions() {
				parts = append(parts, part{p.GetPartition(), p.GetReplicas()})
			}
		}
	} else {
		cc, err := e.controller()
		if err != nil {
			return nil, err
		}
		resp, err := describeCluster(ctx, cc, "retention run "+req.GetTopic())
		if err != nil {
			return nil, err
		}
		for _, b := range resp.GetBrokers() {
			if b.GetAlive() {
				addrs[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
			}
		}
		for _, p := range resp.GetPartitions() {
			if p.GetTopic() == req.GetTopic() {
				parts = append(parts, part{p.GetPartition(), p.GetReplicas()})
			}
		}
	}
	if len(parts) == 0 {
		return nil, answerError{fmt.Sprintf("retention run %s: UNKNOWN_TOPIC_OR_PARTITION: no such topic", req.GetTopic())}
	}
	var ids []int32
	found := false
	for _, p := range parts {
		if req.Partition != nil && p.partition != req.GetPartition() {
			continue
		}
		found = true
		for _, id := range p.replicas {
			if !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if !found {
		return nil, answerError{fmt.Sprintf("retention run %s: UNKNOWN_TOPIC_OR_PARTITION: no partition %d (it has %d)",
			req.GetTopic(), req.GetPartition(), len(parts))}
	}
	slices.Sort(ids)
	var out []retentionTarget
	var gone []string
	for _, id := range ids {
		addr, ok := addrs[id]
		if !ok {
			gone = append(gone, strconv.Itoa(int(id)))
			continue
		}
		out = append(out, retentionTarget{id: id, addr: addr})
	}
	if len(gone) > 0 {
		// Their replicas check retention when they are back; the others
		// are still asked.
		fmt.Fprintf(e.stderr, "ctlclient: retention run %s: broker(s) %s not live: not asked\n", req.GetTopic(), strings.Join(gone, ","))
	}
	if len(out) == 0 {
		return nil, answerError{fmt.Sprintf("retention run %s: no live broker hosts it", req.GetTopic())}
	}
	return out, nil
}

// bootstrapMetadata asks the --bootstrap brokers in turn for the topic's
// metadata; the first answer is taken.
func bootstrapMetadata(ctx context.Context, e *env, topic string) (*replicadv1.MetadataResponse, error) {
	var errs []error
	for _, addr := range e.g.bootstrapAddrs() {
		conn, err := e.dialPeer(addr, "broker")
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rctx, cancel := e.rpcContext(ctx)
		resp, err := replicadv1.NewLogServiceClient(conn).Metadata(rctx, &replicadv1.MetadataRequest{Topics: []string{topic}})
		cancel()
		conn.Close()
		if err == nil {
			return resp, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return nil, fmt.Errorf("no bootstrap broker answered Metadata: %w", errors.Join(errs...))
}

func printRetentionResults(e *env, answers []*replicadv1.RunRetentionResponse) error {
	type row struct {
		broker int32
		r      *replicadv1.RetentionResult
	}
	var rows []row
	for _, a := range answers {
		for _, r := range a.GetResults() {
			rows = append(rows, row{a.GetBrokerId(), r})
		}
	}
	slices.SortStableFunc(rows, func(a, b row) int {
		if c := strings.Compare(a.r.GetTopic(), b.r.GetTopic()); c != 0 {
			return c
		}
		if a.r.GetPartition() != b.r.GetPartition() {
			return int(a.r.GetPartition() - b.r.GetPartition())
		}
		return int(a.broker - b.broker)
	})
	t := newTable(e.stdout, "TOPIC", "PARTITION", "BROKER", "ROLE", "LOG-START", "DELETED-SEGMENTS", "DELETED-BYTES", "REASON")
	for _, x := range rows {
		r := x.r
		role, start, reason := roleName(r.GetRole()), fmt.Sprintf("%d -> %d", r.GetLogStartOffsetBefore(), r.GetLogStartOffsetAfter()), r.GetReason()
		if r.GetRole() == replicadv1.ReplicaRole_REPLICA_ROLE_UNSPECIFIED {
			role = "-"
		}
		if r.GetLogStartOffsetBefore() < 0 {
			start = "-"
		}
		if reason == "" {
			reason = "-"
		}
		if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			reason = codeName(r.GetErrorCode())
		}
		t.row(r.GetTopic(), r.GetPartition(), x.broker, role, start, r.GetDeletedSegments(), r.GetDeletedBytes(), reason)
	}
	return t.flush()
}

// printRetentionTimes is describe's line on the periodic retention check,
// "retention: last check 12s ago, next in 4m48s"; nothing from a broker
// that says neither (an older one).
func printRetentionTimes(e *env, resp *replicadv1.DescribePartitionsResponse) error {
	line := retentionTimesLine(time.Now(), resp.GetLastRetentionCheckMs(), resp.GetNextRetentionCheckMs())
	if line == "" {
		return nil
	}
	_, err := fmt.Fprintf(e.stdout, "\n%s\n", line)
	return err
}

func retentionTimesLine(now time.Time, lastMs, nextMs int64) string {
	if lastMs == 0 && nextMs == 0 {
		return ""
	}
	last := "no check yet"
	if lastMs != 0 {
		last = "last check " + roundedDuration(now.Sub(time.UnixMilli(lastMs))) + " ago"
	}
	next := "next not scheduled"
	if nextMs != 0 {
		if d := time.UnixMilli(nextMs).Sub(now); d > 0 {
			next = "next in " + roundedDuration(d)
		} else {
			next = "next due now"
		}
	}
	return "retention: " + last + ", " + next
}

// roundedDuration is d to the second ("4m48s"), or to the millisecond
// under a second.
func roundedDuration(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
