package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/replicad/replicad/client"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The commands that ask the controller (ControllerService): create-topic,
// delete-topic, elect, reassign, describe-cluster. Each calls the
// client.Admin of --controller (e.controller), so --controller may list
// every controller and the active one is found.

// topicNameRE is the legal topic name (SPEC: validation).
var topicNameRE = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

func checkTopicName(topic string) error {
	if !topicNameRE.MatchString(topic) {
		return usagef("--topic: %q is not a legal topic name: want 1 to 249 of a-z A-Z 0-9 . _ -", topic)
	}
	return nil
}

// controllerAnswerError is the exit-1 error of an answer with an error code.
func controllerAnswerError(what string, code replicadv1.ErrorCode, msg string) error {
	if code == replicadv1.ErrorCode_ERROR_CODE_NONE {
		return nil
	}
	s := what + ": " + codeName(code)
	if msg != "" {
		s += ": " + msg
	}
	return answerError{s}
}

// adminAnswer is the answer of a controller admin call.
type adminAnswer interface {
	proto.Message
	GetErrorCode() replicadv1.ErrorCode
	GetErrorMessage() string
}

// printAdminAnswer prints resp as protojson (-o json) or with table, then
// turns a non-NONE error code into the command's failure, named by what.
func (e *env) printAdminAnswer(resp adminAnswer, table func() error, what string) error {
	var err error
	if e.jsonOutput() {
		err = e.printJSON(resp)
	} else {
		err = table()
	}
	if err != nil {
		return err
	}
	return controllerAnswerError(what, resp.GetErrorCode(), resp.GetErrorMessage())
}

const controllerExitDetails = `--controller may list several controllers (ADDR,ADDR,...): the call goes to
the one answering as the active controller, moving on from standbys
(NOT_CONTROLLER, to the one a standby names when it is listed) and unreachable
addresses, and retrying for up to --timeout. A change that reached a
controller without an answer is not sent again: it may have been applied,
and the error says how to check before a retry.`

func createTopicCommand() *command {
	return &command{
		name:    "create-topic",
		summary: "create a topic through the controller",
		usage:   "--topic T --partitions N --replication-factor R [--config KEY=VALUE ...] [--if-not-exists]",
		details: `The controller assigns the replicas over the live brokers, elects a leader
for each partition and tells the brokers, with the topic's configs (--config,
repeatable: ` + topicConfigKeysHelp + `; see alter-config). Prints the answer's error code and
the partitions created. Exits 1 unless the answer is NONE
(TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR: more than the live
brokers, ...).

--if-not-exists makes TOPIC_ALREADY_EXISTS a no-op that exits 0, saying so
(on stderr with -o json, which prints the answer as is), so a script can
run it again; as with kafka-topics, the existing topic's partitions and
replication factor are not compared with the flags.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 create-topic --topic orders --partitions 3 --replication-factor 3 --config retention.ms=86400000",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "name of the new topic: 1 to 249 of a-z A-Z 0-9 . _ -")
			partitions := int32Var(fs, "partitions", 0, "number of partitions (>= 1)")
			rf := int32Var(fs, "replication-factor", 0, "replicas of each partition (>= 1)")
			var configs stringList
			fs.Var(&configs, "config", "a topic config override KEY=VALUE (repeatable), e.g. retention.ms=3600000")
			ifNotExists := fs.Bool("if-not-exists", false, "a topic that already exists is a no-op (exit 0)")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic", "partitions", "replication-factor"); err != nil {
					return err
				}
				cfgs, err := parseConfigFlags("config", configs)
				if err != nil {
					return err
				}
				if err := checkTopicName(*topic); err != nil {
					return err
				}
				if *partitions < 1 || *rf < 1 {
					return usagef("--partitions and --replication-factor must be >= 1 (got %d and %d)", *partitions, *rf)
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				req := &replicadv1.CreateTopicRequest{Topic: *topic, Partitions: *partitions, ReplicationFactor: *rf, Configs: cfgs}
				resp, err := cc.CreateTopic(ctx, req)
				err = controllerError(err, cc)
				check := "check with `ctlclient describe-topic " + *topic + "`"
				if err != nil {
					return mayBeApplied(err, check)
				}
				if *ifNotExists && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_TOPIC_ALREADY_EXISTS {
					return e.noop(resp, fmt.Sprintf("topic %s already exists: nothing to do (--if-not-exists)", *topic))
				}
				return e.printAdminAnswer(resp, func() error {
					return printTopicResult(e.stdout, *topic, resp.GetErrorCode(), resp.GetPartitions())
				}, "create-topic "+*topic)
			}
		},
	}
}

// deletePollInterval is how often delete-topic --wait asks for the pending deletions.
var deletePollInterval = 500 * time.Millisecond

func deleteTopicCommand() *command {
	return &command{
		name:    "delete-topic",
		summary: "delete a topic through the controller",
		usage:   "--topic T [--if-exists] [--wait [--wait-timeout 5m]]",
		details: `The controller forgets the topic and tells its brokers to stop and delete
its replicas. Exits 1 unless the answer is NONE (UNKNOWN_TOPIC_OR_PARTITION:
no such topic).

--if-exists makes UNKNOWN_TOPIC_OR_PARTITION a no-op that exits 0, saying so
(on stderr with -o json, which prints the answer as is), so a script can run
it again.

--wait then follows the deletion: every 500ms it asks the controller which
replicas have not deleted their logs yet (DescribeCluster's pending
deletions) and prints a line when that changes, like
  waiting for 2 replicas to delete their logs: orders-0 on 3; orders-1 on 2,3
until none is left:
  done: every replica of orders deleted its log
A replica on a broker that is down deletes its log when the broker comes
back; until then the wait goes on, for up to --wait-timeout, after which it
exits 1 (the deletion goes on). With -o json nothing is printed meanwhile,
and one final object: {"topic", "topicId", "deleted" (false: the --if-exists
no-op), "done", "pending": [{"partition", "brokers"}], "elapsedMs"}.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 delete-topic --topic orders\n" +
			"ctlclient --controller 127.0.0.1:9090 delete-topic --topic orders --if-exists --wait -o json",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic to delete")
			ifExists := fs.Bool("if-exists", false, "a topic that does not exist is a no-op (exit 0)")
			wait := fs.Bool("wait", false, "wait until every replica has deleted its log, showing progress")
			waitTimeout := fs.Duration("wait-timeout", 5*time.Minute, "with --wait: give up waiting after this long")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic"); err != nil {
					return err
				}
				if err := checkTopicName(*topic); err != nil {
					return err
				}
				if *waitTimeout <= 0 {
					return usagef("--wait-timeout must be positive (got %v)", *waitTimeout)
				}
				if setFlags(fs)["wait-timeout"] && !*wait {
					return usagef("--wait-timeout needs --wait")
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				start := time.Now()
				// The topic's ID tells its pending deletions from those of
				// an older topic of the same name (deleted while a broker
				// was down).
				topicID := ""
				if *wait {
					before, err := describeCluster(ctx, cc, "delete-topic "+*topic)
					if err != nil {
						return err
					}
					for _, p := range before.GetPartitions() {
						if p.GetTopic() == *topic {
							topicID = p.GetTopicId()
							break
						}
					}
				}
				resp, err := cc.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: *topic})
				err = controllerError(err, cc)
				if err != nil {
					return mayBeApplied(err, "check with `ctlclient list-topics`")
				}
				if *ifExists && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
					msg := fmt.Sprintf("topic %s does not exist: nothing to do (--if-exists)", *topic)
					if *wait && e.jsonOutput() {
						fmt.Fprintln(e.stderr, msg)
						return e.printJSONValue(deleteWaitResult{Topic: *topic, Done: true, Pending: []pendingJSON{}, ElapsedMs: time.Since(start).Milliseconds()})
					}
					return e.noop(resp, msg)
				}
				if !*wait || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
					return e.printAdminAnswer(resp, func() error {
						return printTopicResult(e.stdout, *topic, resp.GetErrorCode(), nil)
					}, "delete-topic "+*topic)
				}
				if !e.jsonOutput() {
					if err := printTopicResult(e.stdout, *topic, resp.GetErrorCode(), nil); err != nil {
						return err
					}
				}
				return waitForDeletion(ctx, e, cc, *topic, topicID, start, *waitTimeout)
			}
		},
	}
}

// noop ends a command whose answer says there is nothing to do (the
// --if-exists kind): the message on stdout, or with -o json the answer
// there and the message on stderr; exit 0.
func (e *env) noop(resp adminAnswer, msg string) error {
	if e.jsonOutput() {
		fmt.Fprintln(e.stderr, msg)
		return e.printJSON(resp)
	}
	_, err := fmt.Fprintln(e.stdout, msg)
	return err
}

// deleteWaitResult is delete-topic --wait's -o json result.
type deleteWaitResult struct {
	Topic     string        `json:"topic"`
	TopicID   string        `json:"topicId,omitempty"`
	Deleted   bool          `json:"deleted"`
	Done      bool          `json:"done"`
	Pending   []pendingJSON `json:"pending"`
	ElapsedMs int64         `json:"elapsedMs"`
}

type pendingJSON struct {
	Partition int32   `json:"partition"`
	Brokers   []int32 `json:"brokers"`
}

// waitForDeletion polls DescribeCluster until no replica of the deleted
// topic (by topicID, or by name when the ID is unknown) is pending
// deletion, printing each change, bounded by timeout.
func waitForDeletion(ctx context.Context, e *env, cc *controllerClient, topic, topicID string, start time.Time, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(deletePollInterval)
	defer tick.Stop()
	result := deleteWaitResult{Topic: topic, TopicID: topicID, Deleted: true, Pending: []pendingJSON{}}
	finish := func(err error) error {
		result.ElapsedMs = time.Since(start).Milliseconds()
		if e.jsonOutput() {
			if perr := e.printJSONValue(result); perr != nil {
				return perr
			}
		}
		return err
	}
	timedOut := func(last string) error {
		return finish(answerError{fmt.Sprintf("delete-topic %s: replicas still deleting their logs after %s (the deletion goes on); last seen: %s", topic, timeout, last)})
	}
	last := ""
	for {
		resp, err := describeCluster(ctx, cc, "delete-topic "+topic)
		switch {
		case err != nil && ctx.Err() == context.DeadlineExceeded:
			return timedOut(last)
		case err != nil:
			return finish(err)
		}
		result.Pending = result.Pending[:0]
		count := 0
		for _, d := range resp.GetPendingDeletions() {
			if d.GetTopic() != topic || (topicID != "" && d.GetTopicId() != topicID) {
				continue
			}
			if result.TopicID == "" {
				result.TopicID = d.GetTopicId()
			}
			for _, p := range d.GetPending() {
				if len(p.GetBrokers()) > 0 {
					result.Pending = append(result.Pending, pendingJSON{Partition: p.GetPartition(), Brokers: p.GetBrokers()})
					count += len(p.GetBrokers())
				}
			}
		}
		slices.SortFunc(result.Pending, func(a, b pendingJSON) int { return cmp.Compare(a.Partition, b.Partition) })
		if count == 0 {
			result.Done = true
			if !e.jsonOutput() {
				fmt.Fprintf(e.stdout, "done: every replica of %s deleted its log\n", topic)
			}
			return finish(nil)
		}
		if line := deletionProgress(topic, count, result.Pending); line != last {
			if !e.jsonOutput() {
				fmt.Fprintln(e.stdout, line)
			}
			last = line
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return timedOut(last)
			}
			return finish(ctx.Err())
		case <-tick.C:
		}
	}
}

// maxListed bounds the partitions a progress or health line names.
const maxListed = 10

// deletionProgress is "waiting for 2 replicas to delete their logs:
// orders-0 on 3; orders-1 on 3", at most maxListed partitions named.
func deletionProgress(topic string, count int, pending []pendingJSON) string {
	var parts []string
	for i, p := range pending {
		if i == maxListed {
			parts = append(parts, fmt.Sprintf("and %d more partitions", len(pending)-maxListed))
			break
		}
		parts = append(parts, fmt.Sprintf("%s-%d on %s", topic, p.Partition, joinInt32s(p.Brokers)))
	}
	what := fmt.Sprintf("%d replicas to delete their logs", count)
	if count == 1 {
		what = "1 replica to delete its log"
	}
	return fmt.Sprintf("waiting for %s: %s", what, strings.Join(parts, "; "))
}

func electCommand() *command {
	return &command{
		name:    "elect",
		summary: "elect a partition's leader, or the preferred leaders of a topic or of all",
		usage:   "--topic T --partition P [--leader B] | --preferred (--topic T [--partition P] | --all)",
		details: `Without --preferred: elects broker B (--leader), which must be a live member
of the ISR, or without --leader the first live ISR member in assignment order
(ElectLeader). Prints the answer's error code and the partition as it is now.
Exits 1 unless the answer is NONE (ELECTION_NOT_NEEDED: the leader already
leads; ELIGIBLE_LEADERS_NOT_AVAILABLE, INELIGIBLE_REPLICA, ...).

With --preferred: Kafka's preferred replica election (ElectLeaders, type
PREFERRED) of one partition, of every partition of --topic, or of every
partition with --all. The preferred leader is the first replica of the
assignment; it is elected only where it is in the ISR, live, unfenced and
not offline, otherwise that partition answers PREFERRED_LEADER_NOT_AVAILABLE.
A partition it already leads answers ELECTION_NOT_NEEDED, a no-op: the
command still exits 0. A topic or --all goes in batches of ` + strconv.Itoa(client.PreferredElectBatch) + ` partitions,
printing a line per partition to stderr as each batch is answered, then the
outcome of each partition (a table, or with -o json one ElectLeadersResponse
holding every result) and a summary on stderr. Exits 1 if any partition
answered anything but NONE or ELECTION_NOT_NEEDED. The controller also does
this by itself (controller run --auto-leader-rebalance-enable).

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 elect --topic orders --partition 0 --leader 2\n" +
			"ctlclient --controller 127.0.0.1:9090 elect --preferred --topic orders\n" +
			"ctlclient --controller 127.0.0.1:9090 -o json elect --preferred --all",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition")
			leader := int32Var(fs, "leader", 0, "broker id to elect (default: the first live ISR member)")
			preferred := fs.Bool("preferred", false, "elect the preferred replica (the first of the assignment) where it is in the ISR and eligible")
			all := fs.Bool("all", false, "with --preferred: every partition of every topic")
			return func(ctx context.Context, e *env) error {
				set := setFlags(fs)
				if *preferred || *all {
					return runPreferredElection(ctx, e, fs, *topic, *partition, *all)
				}
				if err := requireFlags(fs, "topic", "partition"); err != nil {
					return err
				}
				if err := checkTopicName(*topic); err != nil {
					return err
				}
				if *partition < 0 {
					return usagef("--partition must not be negative (got %d)", *partition)
				}
				req := &replicadv1.ElectLeaderRequest{Topic: *topic, Partition: *partition}
				if set["leader"] {
					if *leader < 0 {
						return usagef("--leader must be a broker id >= 0 (got %d)", *leader)
					}
					req.Leader = leader
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				resp, err := cc.ElectLeader(ctx, req)
				err = controllerError(err, cc)
				if err != nil {
					return mayBeApplied(err, "check with `ctlclient describe-topic "+*topic+"`")
				}
				return e.printAdminAnswer(resp, func() error {
					return printPartitionResult(e.stdout, *topic, *partition, resp.GetErrorCode(), resp.GetPartition())
				}, fmt.Sprintf("elect %s-%d", *topic, *partition))
			}
		},
	}
}

// reassignPollInterval is how often reassign asks for the partition's state while it waits.
var reassignPollInterval = 500 * time.Millisecond

func reassignCommand() *command {
	return &command{
		name:    "reassign",
		summary: "move partitions' replicas: one partition, or a plan (generate, execute, verify, cancel)",
		usage: `--topic T --partition P --replicas 1,2,3 [--no-wait] [--wait-timeout 5m]
  | --generate --topics T,... --brokers 1,2,4
  | --execute --plan FILE [--throttle BYTES_PER_SEC] [--wait] [--wait-timeout 5m]
  | --verify --plan FILE
  | --cancel [--plan FILE] [--preserve-throttles]`,
		details: `One partition (--topic, --partition, --replicas): the controller adds the new
replicas, waits until they have caught up (joined the ISR), moves the
leadership if the leader is to go, and removes the replicas that are not in
--replicas (whose first broker becomes the preferred leader). Prints the
answer's error code and the partition as the reassignment starts; exits 1
unless it is NONE (REASSIGNMENT_IN_PROGRESS, INVALID_REPLICA_ASSIGNMENT, ...).
When the partition already has exactly --replicas, in that order, the
controller changes nothing: reassign says so ("orders-0 already has replicas
[1 2 3]: nothing changed"; on stderr with -o json, which prints the answer)
and exits 0 without waiting.
Unless --no-wait, it then asks the controller every 500ms and prints a line
when the progress changes, like
  adding [4], removing [1]: ISR [1 2 3], waiting for 4
until the partition has exactly the new replicas and nothing to add or remove:
  done: replicas [2 3 4], ISR [2 3 4]
It exits 1 if that takes longer than --wait-timeout (the reassignment goes
on). With -o json only the answer is printed.

Plans, as kafka-reassign-partitions has them, in its JSON format
  {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,4]}]}
(--plan - reads stdin):

--generate prints the current assignment of every partition of --topics
(save it: it is the rollback plan) and a proposed one over --brokers, and
changes nothing. The proposal keeps each partition's replication factor,
spreads replicas evenly (no broker above ceil(replicas/brokers)) and
preferred leaders (first replicas) evenly, and keeps every replica that
already sits on one of --brokers while its broker is under that share, so
a partition placed well does not move. -o json: {"current", "proposed",
"moved_partitions", "added_replicas"}.

--execute checks the whole plan first: every partition exists and is named
once, nothing of it is being reassigned already, and its replicas are
registered brokers, none twice, as many as it has now; a problem is an
error naming the entry (partitions[3] (orders-7): ...) and nothing starts.
It prints the current assignment (the rollback plan), sets --throttle if
given, and starts every move (partitions already so are skipped). With
--wait it follows them, a line per partition when its state changes (the
added replicas still catching up), until all are complete or --wait-timeout
(exit 1; the moves go on); -o json then prints one final result.

--throttle BYTES_PER_SEC (Kafka's leader.replication.throttled.rate): each
leader sends at most that many bytes/s, over all its partitions, to
followers that are not in their ISR (the replicas being added); ISR
followers are never held back, so a move does not slow acks=all produces.
It is one cluster-wide rate, stored by the controller; it stays until
--verify sees every move complete, or --cancel, removes it.

--verify reports each partition of the plan: complete (exactly the planned
replicas, in order, nothing moving), in progress (with the added replicas
catching up), or not started or differs. It exits 0 only when all are
complete, and then removes the throttle.

--cancel stops the reassignments in flight of the plan's partitions (of
every partition without --plan), as Kafka's --cancel (KIP-455): each goes
back to its original replicas (the current ones minus those being added;
their order may differ from before: --execute the saved rollback plan to
restore it) and the added replicas stop and delete their logs. A partition
with nothing in flight is reported and skipped. It removes the throttle
unless --preserve-throttles.

` + controllerExitDetails,
		example: `ctlclient --controller 127.0.0.1:9090 reassign --topic orders --partition 0 --replicas 2,3,4
ctlclient reassign --generate --topics orders,events --brokers 1,2,4 > plans.txt
ctlclient reassign --execute --plan plan.json --throttle 10485760 --wait
ctlclient reassign --verify --plan plan.json
ctlclient reassign --cancel --plan plan.json`,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic (one partition)")
			partition := int32Var(fs, "partition", 0, "partition (one partition)")
			var replicas int32List
			fs.Var(&replicas, "replicas", "the new replicas, comma-separated broker ids; the first is the preferred leader (one partition)")
			noWait := fs.Bool("no-wait", false, "return once the controller has accepted the reassignment (one partition)")
			waitTimeout := fs.Duration("wait-timeout", 5*time.Minute, "give up waiting after this long")
			generate := fs.Bool("generate", false, "print the current assignment of --topics and a proposed one over --brokers")
			execute := fs.Bool("execute", false, "validate --plan and start every move in it")
			verify := fs.Bool("verify", false, "report the progress of --plan; remove the throttle once all is complete")
			cancelMoves := fs.Bool("cancel", false, "cancel the moves in flight of --plan (all without --plan)")
			topics := fs.String("topics", "", "comma-separated topics (--generate)")
			var brokers int32List
			fs.Var(&brokers, "brokers", "comma-separated broker ids to spread the replicas over (--generate)")
			plan := fs.String("plan", "", "the plan `file`, Kafka's JSON format (- for stdin)")
			throttle := fs.Int64("throttle", 0, "bytes/s for the replicas being added, until they join the ISR (--execute)")
			wait := fs.Bool("wait", false, "follow the moves until all are complete (--execute)")
			preserve := fs.Bool("preserve-throttles", false, "keep the throttle (--cancel)")
			return func(ctx context.Context, e *env) error {
				if *waitTimeout <= 0 {
					return usagef("--wait-timeout must be positive (got %v)", *waitTimeout)
				}
				modes := 0
				for _, m := range []bool{*generate, *execute, *verify, *cancelMoves} {
					if m {
						modes++
					}
				}
				if modes > 1 {
					return usagef("--generate, --execute, --verify and --cancel exclude each other")
				}
				if modes == 1 {
					if err := forbidFlags(fs, "a plan mode", "topic", "partition", "replicas", "no-wait"); err != nil {
						return err
					}
					return runPlanMode(ctx, e, fs, planMode{*generate, *execute, *verify, *cancelMoves}, reassignOptions{
						topics: splitList(*topics), brokers: brokers, plan: *plan, throttle: *throttle,
						throttleSet: setFlags(fs)["throttle"], wait: *wait, waitTimeout: *waitTimeout, preserveThrottles: *preserve,
					})
				}
				if err := forbidFlags(fs, "--topic/--partition/--replicas (give --generate, --execute, --verify or --cancel)",
					"topics", "brokers", "plan", "throttle", "wait", "preserve-throttles"); err != nil {
					return err
				}
				if err := requireFlags(fs, "topic", "partition", "replicas"); err != nil {
					return err
				}
				if err := checkTopicName(*topic); err != nil {
					return err
				}
				if *partition < 0 {
					return usagef("--partition must not be negative (got %d)", *partition)
				}
				if err := checkReplicas(replicas); err != nil {
					return err
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				// The partition as it was, to tell a no-op (the controller
				// answers NONE and changes nothing when the replicas are
				// already these, in this order) from a started reassignment.
				before, err := describeCluster(ctx, cc, fmt.Sprintf("reassign %s-%d", *topic, *partition))
				if err != nil {
					return err
				}
				var was *replicadv1.ClusterPartition
				for _, p := range before.GetPartitions() {
					if p.GetTopic() == *topic && p.GetPartition() == *partition {
						was = p
					}
				}
				req := &replicadv1.ReassignPartitionRequest{Topic: *topic, Partition: *partition, Replicas: replicas}
				resp, err := cc.ReassignPartition(ctx, req)
				err = controllerError(err, cc)
				if err != nil {
					return mayBeApplied(err, "check with `ctlclient describe-topic "+*topic+"`")
				}
				if reassignNoop(was, resp, replicas) {
					return e.noop(resp, fmt.Sprintf("%s-%d already has replicas %s: nothing changed", *topic, *partition, tp.IDList(replicas)))
				}
				if e.jsonOutput() {
					err = e.printJSON(resp)
				} else {
					err = printPartitionResult(e.stdout, *topic, *partition, resp.GetErrorCode(), resp.GetPartition())
				}
				if err != nil {
					return err
				}
				if err := controllerAnswerError(fmt.Sprintf("reassign %s-%d", *topic, *partition), resp.GetErrorCode(), resp.GetErrorMessage()); err != nil || *noWait {
					return err
				}
				return waitForReassignment(ctx, e, cc, partitionKey{*topic, *partition}, replicas, *waitTimeout)
			}
		},
	}
}

// reassignNoop reports whether the answer left the partition as it was
// before (was): NONE, the same replicas in the same order as target,
// nothing being added or removed, the same leader epoch (a reassignment
// raises it).
func reassignNoop(was *replicadv1.ClusterPartition, resp *replicadv1.ReassignPartitionResponse, target []int32) bool {
	now := resp.GetPartition()
	return was != nil && now != nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE &&
		slices.Equal(was.GetReplicas(), target) && len(was.GetAddingReplicas()) == 0 && len(was.GetRemovingReplicas()) == 0 &&
		slices.Equal(now.GetReplicas(), target) && len(now.GetAddingReplicas()) == 0 && len(now.GetRemovingReplicas()) == 0 &&
		now.GetLeaderEpoch() == was.GetLeaderEpoch()
}

// checkReplicas refuses an empty list, negative ids and duplicates.
func checkReplicas(replicas []int32) error {
	if len(replicas) == 0 {
		return usagef("--replicas must name at least one broker")
	}
	seen := map[int32]bool{}
	for _, r := range replicas {
		if r < 0 {
			return usagef("--replicas: broker ids must be >= 0 (got %d)", r)
		}
		if seen[r] {
			return usagef("--replicas: broker %d is listed twice", r)
		}
		seen[r] = true
	}
	return nil
}

// waitForReassignment polls DescribeCluster until k has exactly target as
// replicas and no replica left to add or remove, printing each new state.
func waitForReassignment(ctx context.Context, e *env, cc *controllerClient, k partitionKey, target []int32, timeout time.Duration) error {
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Ctrl-C stops the watching, not the move.
	interrupted := interruptedError{fmt.Sprintf("reassign %s: interrupted; the move to %s goes on in the cluster. "+
		"Follow it with `ctlclient describe-topic %s`; `ctlclient reassign --cancel` cancels it (and every other reassignment in flight)",
		k, tp.IDList(target), k.topic)}
	last := ""
	p, err := cc.WaitReassignment(ctx, client.TopicPartition{Topic: k.topic, Partition: k.partition}, target, reassignPollInterval, func(p *replicadv1.ClusterPartition) {
		if line := client.ReassignStatus(p, target); line != last {
			if !e.jsonOutput() {
				fmt.Fprintln(e.stdout, line)
			}
			last = line
		}
	})
	var ae *client.Error
	switch {
	case err == nil:
		if !e.jsonOutput() {
			fmt.Fprintf(e.stdout, "done: replicas %s, ISR %s\n", tp.IDList(p.GetReplicas()), tp.IDList(p.GetIsr()))
		}
		return nil
	case errors.Is(err, client.ErrPartitionGone):
		return answerError{fmt.Sprintf("reassign %s: the partition is gone (topic deleted?)", k)}
	case errors.As(err, &ae):
		return controllerAnswerError("reassign: describe-cluster", ae.Code, "")
	case err == context.DeadlineExceeded || err == context.Canceled:
		// ctx ended between two rounds.
		if ctx.Err() == context.DeadlineExceeded {
			return answerError{fmt.Sprintf("reassign %s: not done after %s; last seen: %s", k, timeout, last)}
		}
		if errors.Is(parent.Err(), context.Canceled) {
			return interrupted
		}
		return ctx.Err()
	case errors.Is(parent.Err(), context.Canceled):
		return interrupted
	case ctx.Err() == context.DeadlineExceeded:
		return answerError{fmt.Sprintf("reassign %s: not done after %s; last seen: %s", k, timeout, last)}
	}
	return controllerError(err, cc)
}

func describeClusterCommand() *command {
	return &command{
		name:    "describe-cluster",
		summary: "show brokers and partitions as the controller sees them",
		usage:   "[--under-replicated | --unavailable | --under-min-isr] [--topic T]",
		details: `Prints the controller's epoch and settings, its brokers (id, address, broker
epoch, alive: its session holds) and every partition (leader, leader epoch,
partition epoch, ISR, replicas, and during a reassignment the replicas being
added and removed). -o json prints the DescribeClusterResponse.

The kafka-topics filters (one at a time) print only the matching partitions,
with their effective min.insync.replicas (MIN-ISR), or a line saying there
are none; -o json prints the DescribeClusterResponse with only them (and no
pending deletions):
  --under-replicated  the ISR is smaller than the replica set (during a
                      reassignment, the replicas that are to stay)
  --unavailable       no leader, or a leader whose broker is not alive
  --under-min-isr     no leader, or an ISR smaller than the partition's
                      effective min.insync.replicas: acks=all is refused
--topic T narrows the output (with or without a filter) to topic T. A filter
matching nothing still exits 0; see 'cluster health' for an exit status.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 describe-cluster\n" +
			"ctlclient --controller 127.0.0.1:9090,127.0.0.1:9190 describe-cluster -o json\n" +
			"ctlclient --controller 127.0.0.1:9090 describe-cluster --under-replicated --topic orders",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			on := make([]*bool, len(partitionFilters))
			for i, f := range partitionFilters {
				on[i] = fs.Bool(f.flag, false, "only the "+f.label)
			}
			topic := fs.String("topic", "", "only the partitions of this topic")
			return func(ctx context.Context, e *env) error {
				var filter *partitionFilter
				for i := range partitionFilters {
					if !*on[i] {
						continue
					}
					if filter != nil {
						return usagef("--%s and --%s: give one filter at a time", filter.flag, partitionFilters[i].flag)
					}
					filter = &partitionFilters[i]
				}
				if setFlags(fs)["topic"] {
					if err := checkTopicName(*topic); err != nil {
						return err
					}
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				resp, err := cc.DescribeCluster(ctx)
				err = controllerError(err, cc)
				if err != nil {
					return err
				}
				if resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE && (filter != nil || *topic != "") {
					resp = narrowCluster(resp, *topic, filter)
				}
				switch {
				case e.jsonOutput():
					err = e.printJSON(resp)
				case filter != nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE:
					err = printFilteredPartitions(e.stdout, filter, *topic, resp.GetPartitions(), aliveBrokers(resp))
				default:
					err = printCluster(e.stdout, resp)
				}
				if err != nil {
					return err
				}
				return controllerAnswerError("describe-cluster", resp.GetErrorCode(), "")
			}
		},
	}
}

func printCluster(w io.Writer, resp *replicadv1.DescribeClusterResponse) error {
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		_, err := fmt.Fprintf(w, "ERROR %s\n", codeName(resp.GetErrorCode()))
		return err
	}
	unclean := "off"
	if resp.GetUncleanLeaderElection() {
		unclean = "on"
	}
	fmt.Fprintf(w, "controller epoch %d, session timeout %s, unclean leader election %s\n\n",
		resp.GetControllerEpoch(), time.Duration(resp.GetSessionTimeoutMs())*time.Millisecond, unclean)
	brokers := slices.Clone(resp.GetBrokers())
	slices.SortFunc(brokers, func(a, b *replicadv1.BrokerDescription) int { return cmp.Compare(a.GetId(), b.GetId()) })
	t := newTable(w, "BROKER", "ADDRESS", "BROKER-EPOCH", "ALIVE")
	for _, b := range brokers {
		t.row(b.GetId(), net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort()))), b.GetBrokerEpoch(), b.GetAlive())
	}
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := printPartitionsTable(w, resp.GetPartitions(), aliveBrokers(resp), false); err != nil {
		return err
	}
	if len(resp.GetPendingDeletions()) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\npending deletions (replicas that have not deleted their logs yet):")
	t = newTable(w, "TOPIC", "TOPIC-ID", "PARTITION", "BROKERS")
	for _, d := range resp.GetPendingDeletions() {
		for _, p := range d.GetPending() {
			t.row(d.GetTopic(), d.GetTopicId(), p.GetPartition(), idsOrDash(p.GetBrokers()))
		}
	}
	return t.flush()
}

// printClusterPartitions is the partitions table, sorted by topic and
// partition; ADDING and REMOVING appear when a partition is being reassigned,
// ELR when a partition has eligible leader replicas out of its ISR (or a
// last known ELR, marked *), OFFLINE when a replica is reported offline.
// An answer without the brokers' liveness (create-topic's, elect's) shows
// the offline replicas their brokers report only.
func printClusterPartitions(w io.Writer, parts []*replicadv1.ClusterPartition) error {
	return printPartitionsTable(w, parts, nil, false)
}

// printPartitionsTable is printClusterPartitions with, when withMinIsr, a
// MIN-ISR column (the effective min.insync.replicas) last, and with alive
// (the live brokers; nil: unknown) counting the replicas on brokers not
// alive as offline too.
func printPartitionsTable(w io.Writer, parts []*replicadv1.ClusterPartition, alive map[int32]bool, withMinIsr bool) error {
	parts = sortedPartitions(parts)
	reassigning := slices.ContainsFunc(parts, func(p *replicadv1.ClusterPartition) bool {
		return len(p.GetAddingReplicas()) > 0 || len(p.GetRemovingReplicas()) > 0
	})
	withELR := slices.ContainsFunc(parts, func(p *replicadv1.ClusterPartition) bool {
		return len(p.GetElr()) > 0 || len(p.GetLastKnownElr()) > 0
	})
	withOffline := slices.ContainsFunc(parts, func(p *replicadv1.ClusterPartition) bool { return len(offlineReplicas(p, alive)) > 0 })
	header := []string{"TOPIC", "PARTITION", "LEADER", "EPOCH", "P-EPOCH", "ISR", "REPLICAS"}
	if withELR {
		header = append(header, "ELR")
	}
	if withOffline {
		header = append(header, "OFFLINE")
	}
	if reassigning {
		header = append(header, "ADDING", "REMOVING")
	}
	if withMinIsr {
		header = append(header, "MIN-ISR")
	}
	t := newTable(w, header...)
	for _, p := range parts {
		row := []any{p.GetTopic(), p.GetPartition(), leaderName(p.GetLeader()), p.GetLeaderEpoch(), p.GetPartitionEpoch(), idsOrDash(p.GetIsr()), idsOrDash(p.GetReplicas())}
		if withELR {
			row = append(row, elrCell(p))
		}
		if withOffline {
			row = append(row, idsOrDash(offlineReplicas(p, alive)))
		}
		if reassigning {
			row = append(row, idsOrDash(p.GetAddingReplicas()), idsOrDash(p.GetRemovingReplicas()))
		}
		if withMinIsr {
			row = append(row, minIsrCell(p))
		}
		t.row(row...)
	}
	return t.flush()
}

// offlineReplicas are p's replicas that cannot serve, as kafka-topics
// --describe counts them: those their brokers report offline (a failed log
// dir) and, when alive is known, those on brokers not alive (fenced, done
// with a controlled shutdown, or unknown). In replica order.
func offlineReplicas(p *replicadv1.ClusterPartition, alive map[int32]bool) []int32 {
	reported := p.GetOfflineReplicas()
	if alive == nil {
		return reported
	}
	var out []int32
	for _, r := range p.GetReplicas() {
		if !alive[r] || slices.Contains(reported, r) {
			out = append(out, r)
		}
	}
	for _, r := range reported {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

func idsOrDash(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	return joinInt32s(ids)
}

// printTopicResult is create-topic's and delete-topic's table: the error
// code, then the partitions the answer carries.
func printTopicResult(w io.Writer, topic string, code replicadv1.ErrorCode, parts []*replicadv1.ClusterPartition) error {
	t := newTable(w, "TOPIC", "ERROR")
	t.row(topic, codeName(code))
	if err := t.flush(); err != nil {
		return err
	}
	if len(parts) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	return printClusterPartitions(w, parts)
}

// printPartitionResult is elect's and reassign's table: the error code, then
// the partition as the answer shows it.
func printPartitionResult(w io.Writer, topic string, partition int32, code replicadv1.ErrorCode, p *replicadv1.ClusterPartition) error {
	t := newTable(w, "TOPIC", "PARTITION", "ERROR")
	t.row(topic, partition, codeName(code))
	if err := t.flush(); err != nil {
		return err
	}
	if p == nil {
		return nil
	}
	fmt.Fprintln(w)
	return printClusterPartitions(w, []*replicadv1.ClusterPartition{p})
}
