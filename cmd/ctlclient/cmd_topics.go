package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The everyday read-only commands built on the controller's DescribeCluster:
// list-topics, describe-topic, and describe-cluster's kafka-topics filters
// (--under-replicated, --unavailable, --under-min-isr). Each reads one
// DescribeCluster answer and computes what it shows on the client, so an
// older controller serves them too.

// describeCluster is one DescribeCluster call on the active controller; a
// non-NONE error code in the answer is the command's failure.
func describeCluster(ctx context.Context, cc *controllerClient, what string) (*replicadv1.DescribeClusterResponse, error) {
	resp, err := cc.DescribeCluster(ctx)
	err = controllerError(err, cc)
	if err != nil {
		return nil, err
	}
	if err := controllerAnswerError(what+": describe-cluster", resp.GetErrorCode(), ""); err != nil {
		return nil, err
	}
	return resp, nil
}

// replicationFactor is the partition's replica count as kafka-topics counts
// it: during a reassignment, the replicas that are to stay (the removing
// ones left out).
func replicationFactor(p *replicadv1.ClusterPartition) int {
	return len(p.GetReplicas()) - len(p.GetRemovingReplicas())
}

// underReplicated and unavailable are client's, so that describe's
// filters and cluster health count alike.
var (
	underReplicated = client.UnderReplicated
	unavailable     = client.Unavailable
)

// underMinIsr: acks=all produces are refused, because the ISR is smaller
// than the partition's effective min.insync.replicas or there is no leader
// at all (Kafka's isUnderMinIsr counts leaderless partitions too). A
// controller that does not give min_insync_replicas (0) leaves only the
// leaderless ones.
func underMinIsr(p *replicadv1.ClusterPartition) bool {
	if p.GetLeader() < 0 {
		return true
	}
	m := p.GetMinInsyncReplicas()
	return m > 0 && int32(len(p.GetIsr())) < m
}

// aliveBrokers is the set of the brokers whose session holds.
func aliveBrokers(resp *replicadv1.DescribeClusterResponse) map[int32]bool {
	alive := map[int32]bool{}
	for _, b := range resp.GetBrokers() {
		if b.GetAlive() {
			alive[b.GetId()] = true
		}
	}
	return alive
}

// sortedPartitions is parts by topic, then partition.
func sortedPartitions(parts []*replicadv1.ClusterPartition) []*replicadv1.ClusterPartition {
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b *replicadv1.ClusterPartition) int {
		return cmp.Or(cmp.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	return parts
}

// topicSummary is one row of list-topics.
type topicSummary struct {
	Topic             string `json:"topic"`
	TopicID           string `json:"topicId,omitempty"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replicationFactor"`
}

// summarizeTopics groups the partitions by topic, sorted by name. The
// replication factor is the first partition's, as kafka-topics shows it.
func summarizeTopics(parts []*replicadv1.ClusterPartition) []topicSummary {
	out := []topicSummary{}
	for _, p := range sortedPartitions(parts) {
		if n := len(out); n > 0 && out[n-1].Topic == p.GetTopic() {
			out[n-1].Partitions++
			continue
		}
		out = append(out, topicSummary{Topic: p.GetTopic(), TopicID: p.GetTopicId(), Partitions: 1, ReplicationFactor: replicationFactor(p)})
	}
	return out
}

// printJSONValue prints v with encoding/json, two-space indent, as
// printJSON prints a protobuf answer.
func (e *env) printJSONValue(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode json: %w", err)
	}
	_, err = e.stdout.Write(append(b, '\n'))
	return err
}

// protoJSON is m as protojson, for embedding in a printJSONValue object
// (encoding/json compacts it, so protojson's varying whitespace goes).
func protoJSON(m *replicadv1.ClusterPartition) (json.RawMessage, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode json: %w", err)
	}
	return json.RawMessage(b), nil
}

func listTopicsCommand() *command {
	return &command{
		name:    "list-topics",
		summary: "list the topics: name, topic ID, partitions, replication factor",
		usage:   "",
		details: `Prints one row per topic the controller knows (from its DescribeCluster):
its name, topic ID, partition count and replication factor (during a
reassignment, the replicas that are to stay). Topics being deleted are not
listed (describe-cluster shows their pending deletions). -o json prints
{"topics": [{"topic", "topicId", "partitions", "replicationFactor"}, ...]}.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 list-topics\nctlclient --controller 127.0.0.1:9090 list-topics -o json",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(ctx context.Context, e *env) error {
				cc, err := e.controller()
				if err != nil {
					return err
				}
				resp, err := describeCluster(ctx, cc, "list-topics")
				if err != nil {
					return err
				}
				topics := summarizeTopics(resp.GetPartitions())
				if e.jsonOutput() {
					return e.printJSONValue(struct {
						Topics []topicSummary `json:"topics"`
					}{topics})
				}
				t := newTable(e.stdout, "TOPIC", "TOPIC-ID", "PARTITIONS", "REPLICATION-FACTOR")
				for _, s := range topics {
					id := s.TopicID
					if id == "" {
						id = "-"
					}
					t.row(s.Topic, id, s.Partitions, s.ReplicationFactor)
				}
				return t.flush()
			}
		},
	}
}

func describeTopicCommand() *command {
	return &command{
		name:    "describe-topic",
		summary: "show a topic's partitions: leader, ISR, replicas, ELR, min ISR",
		usage:   "TOPIC | --topic TOPIC",
		details: `Prints the topic's ID, partition count and replication factor, then one row
per partition: leader ("none" when it has none), leader epoch, partition
epoch, ISR, replicas, the replicas being added and removed by a
reassignment, the eligible leader replicas (ELR; a last known ELR is marked
*), the offline replicas (on a broker not alive, or reported offline by
their broker, as kafka-topics --describe counts them), and the effective
min.insync.replicas. "-" is an empty set.

-o json prints {"topic", "topicId", "partitions": N, "replicationFactor",
"partitionStates": [ClusterPartition as protojson, ...]}.

Exits 1 when the controller has no such topic (saying so when it is being
deleted).

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 describe-topic orders",
		args:    true,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topicFlag := fs.String("topic", "", "the topic, instead of the TOPIC argument (as kafka-topics --describe --topic)")
			return func(ctx context.Context, e *env) error {
				topic, err := topicOperand(fs, e, topicFlag)
				if err != nil {
					return err
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				resp, err := describeCluster(ctx, cc, "describe-topic "+topic)
				if err != nil {
					return err
				}
				var parts []*replicadv1.ClusterPartition
				for _, p := range sortedPartitions(resp.GetPartitions()) {
					if p.GetTopic() == topic {
						parts = append(parts, p)
					}
				}
				if len(parts) == 0 {
					return unknownTopicError("describe-topic", topic, resp)
				}
				return printTopicDescription(e, topic, parts, aliveBrokers(resp))
			}
		},
	}
}

// interspersedArgs collects the positional arguments, parsing the flags
// between and after them (the flag package stops at the first one), so
// `describe-topic orders -o json` works; the global flags are validated
// again, since some may have come only now.
func interspersedArgs(fs *flag.FlagSet, g *globals) ([]string, error) {
	var pos []string
	for fs.NArg() > 0 {
		pos = append(pos, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return nil, usagef("%v", err)
		}
	}
	if err := g.validate(); err != nil {
		return nil, usagef("%v", err)
	}
	return pos, nil
}

// unknownTopicError is the exit-1 error of a topic the controller does not
// have, saying so when its deletion is still pending.
func unknownTopicError(cmd, topic string, resp *replicadv1.DescribeClusterResponse) error {
	pending := 0
	for _, d := range resp.GetPendingDeletions() {
		if d.GetTopic() == topic {
			for _, p := range d.GetPending() {
				pending += len(p.GetBrokers())
			}
		}
	}
	switch {
	case pending == 1:
		return answerError{fmt.Sprintf("%s: topic %q does not exist: it was deleted, and 1 replica is still deleting its log", cmd, topic)}
	case pending > 1:
		return answerError{fmt.Sprintf("%s: topic %q does not exist: it was deleted, and %d replicas are still deleting their logs", cmd, topic, pending)}
	}
	return answerError{fmt.Sprintf("%s: topic %q does not exist", cmd, topic)}
}

func printTopicDescription(e *env, topic string, parts []*replicadv1.ClusterPartition, alive map[int32]bool) error {
	id := parts[0].GetTopicId()
	rf := replicationFactor(parts[0])
	if e.jsonOutput() {
		states := make([]json.RawMessage, len(parts))
		for i, p := range parts {
			var err error
			if states[i], err = protoJSON(p); err != nil {
				return err
			}
		}
		return e.printJSONValue(struct {
			Topic             string            `json:"topic"`
			TopicID           string            `json:"topicId,omitempty"`
			Partitions        int               `json:"partitions"`
			ReplicationFactor int               `json:"replicationFactor"`
			PartitionStates   []json.RawMessage `json:"partitionStates"`
		}{topic, id, len(parts), rf, states})
	}
	if id == "" {
		id = "-"
	}
	fmt.Fprintf(e.stdout, "topic %s, topic ID %s, %d partitions, replication factor %d\n\n", topic, id, len(parts), rf)
	t := newTable(e.stdout, "PARTITION", "LEADER", "EPOCH", "P-EPOCH", "ISR", "REPLICAS", "ADDING", "REMOVING", "ELR", "OFFLINE", "MIN-ISR")
	for _, p := range parts {
		t.row(p.GetPartition(), leaderName(p.GetLeader()), p.GetLeaderEpoch(), p.GetPartitionEpoch(), idsOrDash(p.GetIsr()), idsOrDash(p.GetReplicas()),
			idsOrDash(p.GetAddingReplicas()), idsOrDash(p.GetRemovingReplicas()), elrCell(p), idsOrDash(offlineReplicas(p, alive)), minIsrCell(p))
	}
	return t.flush()
}

func leaderName(id int32) string {
	if id < 0 {
		return "none"
	}
	return strconv.Itoa(int(id))
}

// elrCell is the ELR, or the last known ELR marked * when the ELR is empty.
func elrCell(p *replicadv1.ClusterPartition) string {
	if len(p.GetElr()) == 0 && len(p.GetLastKnownElr()) > 0 {
		return joinInt32s(p.GetLastKnownElr()) + "*"
	}
	return idsOrDash(p.GetElr())
}

// minIsrCell is the effective min.insync.replicas, "-" when the controller
// does not give it.
func minIsrCell(p *replicadv1.ClusterPartition) string {
	if p.GetMinInsyncReplicas() <= 0 {
		return "-"
	}
	return strconv.Itoa(int(p.GetMinInsyncReplicas()))
}

// partitionFilter is describe-cluster's --under-replicated, --unavailable
// or --under-min-isr.
type partitionFilter struct {
	flag  string // the flag's name
	label string // "under-replicated partitions"
	match func(p *replicadv1.ClusterPartition, alive map[int32]bool) bool
}

var partitionFilters = []partitionFilter{
	{"under-replicated", "under-replicated partitions", func(p *replicadv1.ClusterPartition, _ map[int32]bool) bool { return underReplicated(p) }},
	{"unavailable", "unavailable partitions", unavailable},
	{"under-min-isr", "partitions under min ISR", func(p *replicadv1.ClusterPartition, _ map[int32]bool) bool { return underMinIsr(p) }},
}

// narrowCluster keeps the partitions of topic (any when empty) that f
// matches (any when nil); with a filter the pending deletions go, since
// they are no partitions' state.
func narrowCluster(resp *replicadv1.DescribeClusterResponse, topic string, f *partitionFilter) *replicadv1.DescribeClusterResponse {
	out := &replicadv1.DescribeClusterResponse{ControllerEpoch: resp.GetControllerEpoch(), Brokers: resp.GetBrokers(), ErrorCode: resp.GetErrorCode(),
		SessionTimeoutMs: resp.GetSessionTimeoutMs(), UncleanLeaderElection: resp.GetUncleanLeaderElection()}
	alive := aliveBrokers(resp)
	for _, p := range resp.GetPartitions() {
		if (topic == "" || p.GetTopic() == topic) && (f == nil || f.match(p, alive)) {
			out.Partitions = append(out.Partitions, p)
		}
	}
	if f == nil {
		for _, d := range resp.GetPendingDeletions() {
			if topic == "" || d.GetTopic() == topic {
				out.PendingDeletions = append(out.PendingDeletions, d)
			}
		}
	}
	return out
}

// printFilteredPartitions is describe-cluster's table under a filter: the
// matching partitions only (with MIN-ISR), or a line saying there are none.
func printFilteredPartitions(w io.Writer, f *partitionFilter, topic string, parts []*replicadv1.ClusterPartition, alive map[int32]bool) error {
	if len(parts) == 0 {
		where := ""
		if topic != "" {
			where = " in topic " + topic
		}
		_, err := fmt.Fprintf(w, "no %s%s\n", f.label, where)
		return err
	}
	return printPartitionsTable(w, parts, alive, true)
}
