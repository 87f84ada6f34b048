package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The commands that ask the controller (ControllerService): create-topic,
// delete-topic, elect, reassign, describe-cluster. Each goes through
// callController, so --controller may list every controller and the active
// one is found.

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
(NOT_CONTROLLER) and unreachable addresses, and retrying for up to --timeout.`

func createTopicCommand() *command {
	return &command{
		name:    "create-topic",
		summary: "create a topic through the controller",
		usage:   "--topic T --partitions N --replication-factor R",
		details: `The controller assigns the replicas over the live brokers, elects a leader
for each partition and tells the brokers. Prints the answer's error code and
the partitions created. Exits 1 unless the answer is NONE
(TOPIC_ALREADY_EXISTS, INVALID_REPLICATION_FACTOR: more than the live
brokers, ...).

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 create-topic --topic orders --partitions 3 --replication-factor 3",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "name of the new topic: 1 to 249 of a-z A-Z 0-9 . _ -")
			partitions := int32Var(fs, "partitions", 0, "number of partitions (>= 1)")
			rf := int32Var(fs, "replication-factor", 0, "replicas of each partition (>= 1)")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic", "partitions", "replication-factor"); err != nil {
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
				req := &replicadv1.CreateTopicRequest{Topic: *topic, Partitions: *partitions, ReplicationFactor: *rf}
				resp, err := callController(ctx, cc, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.CreateTopicResponse, error) {
					return c.CreateTopic(ctx, req)
				})
				if err != nil {
					return err
				}
				return e.printAdminAnswer(resp, func() error {
					return printTopicResult(e.stdout, *topic, resp.GetErrorCode(), resp.GetPartitions())
				}, "create-topic "+*topic)
			}
		},
	}
}

func deleteTopicCommand() *command {
	return &command{
		name:    "delete-topic",
		summary: "delete a topic through the controller",
		usage:   "--topic T",
		details: `The controller forgets the topic and tells its brokers to stop and delete
its replicas. Exits 1 unless the answer is NONE (UNKNOWN_TOPIC_OR_PARTITION:
no such topic).

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 delete-topic --topic orders",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic to delete")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic"); err != nil {
					return err
				}
				if err := checkTopicName(*topic); err != nil {
					return err
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				resp, err := callController(ctx, cc, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DeleteTopicResponse, error) {
					return c.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: *topic})
				})
				if err != nil {
					return err
				}
				return e.printAdminAnswer(resp, func() error {
					return printTopicResult(e.stdout, *topic, resp.GetErrorCode(), nil)
				}, "delete-topic "+*topic)
			}
		},
	}
}

func electCommand() *command {
	return &command{
		name:    "elect",
		summary: "elect a partition's leader",
		usage:   "--topic T --partition P [--leader B]",
		details: `Without --leader the preferred replica (the first live one in the ISR) is
elected; with it, broker B, which must be a live member of the ISR. Prints the
answer's error code and the partition as it is now. Exits 1 unless the answer
is NONE (ELECTION_NOT_NEEDED: the leader already leads;
ELIGIBLE_LEADERS_NOT_AVAILABLE, PREFERRED_LEADER_NOT_AVAILABLE, ...).

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 elect --topic orders --partition 0 --leader 2",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition")
			leader := int32Var(fs, "leader", 0, "broker id to elect (default: the preferred replica)")
			return func(ctx context.Context, e *env) error {
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
				if setFlags(fs)["leader"] {
					if *leader < 0 {
						return usagef("--leader must be a broker id >= 0 (got %d)", *leader)
					}
					req.Leader = leader
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				resp, err := callController(ctx, cc, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.ElectLeaderResponse, error) {
					return c.ElectLeader(ctx, req)
				})
				if err != nil {
					return err
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
			throttle := fs.Int64("throttle", 0, "bytes/s for replicas catching up, outside the ISR (--execute)")
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
				req := &replicadv1.ReassignPartitionRequest{Topic: *topic, Partition: *partition, Replicas: replicas}
				resp, err := callController(ctx, cc, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.ReassignPartitionResponse, error) {
					return c.ReassignPartition(ctx, req)
				})
				if err != nil {
					return err
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(reassignPollInterval)
	defer tick.Stop()
	last := ""
	for {
		resp, err := callController(ctx, cc, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeClusterResponse, error) {
			return c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
		})
		switch {
		case err != nil && ctx.Err() == context.DeadlineExceeded:
			return answerError{fmt.Sprintf("reassign %s: not done after %s; last seen: %s", k, timeout, last)}
		case err != nil:
			return err
		case resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
			return controllerAnswerError("reassign: describe-cluster", resp.GetErrorCode(), "")
		}
		var p *replicadv1.ClusterPartition
		for _, cp := range resp.GetPartitions() {
			if cp.GetTopic() == k.topic && cp.GetPartition() == k.partition {
				p = cp
			}
		}
		if p == nil {
			return answerError{fmt.Sprintf("reassign %s: the partition is gone (topic deleted?)", k)}
		}
		if len(p.GetAddingReplicas()) == 0 && len(p.GetRemovingReplicas()) == 0 && sameMembers(p.GetReplicas(), target) {
			if !e.jsonOutput() {
				fmt.Fprintf(e.stdout, "done: replicas %v, ISR %v\n", p.GetReplicas(), p.GetIsr())
			}
			return nil
		}
		if line := reassignProgress(p, target); line != last {
			if !e.jsonOutput() {
				fmt.Fprintln(e.stdout, line)
			}
			last = line
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return answerError{fmt.Sprintf("reassign %s: not done after %s; last seen: %s", k, timeout, last)}
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// reassignProgress describes a partition still being reassigned:
// "adding [4], removing [1]: ISR [1 2 3], waiting for 4".
func reassignProgress(p *replicadv1.ClusterPartition, target []int32) string {
	adding, removing := p.GetAddingReplicas(), p.GetRemovingReplicas()
	var head string
	switch {
	case len(adding) > 0 && len(removing) > 0:
		head = fmt.Sprintf("adding %v, removing %v", adding, removing)
	case len(adding) > 0:
		head = fmt.Sprintf("adding %v", adding)
	case len(removing) > 0:
		head = fmt.Sprintf("removing %v", removing)
	default:
		return fmt.Sprintf("replicas %v, ISR %v, waiting for replicas %v", p.GetReplicas(), p.GetIsr(), target)
	}
	var behind []int32
	for _, a := range adding {
		if !slices.Contains(p.GetIsr(), a) {
			behind = append(behind, a)
		}
	}
	tail := "waiting for the controller to finish"
	if len(behind) > 0 {
		tail = "waiting for " + joinInt32sSpaced(behind)
	}
	return fmt.Sprintf("%s: ISR %v, %s", head, p.GetIsr(), tail)
}

func joinInt32sSpaced(ids []int32) string {
	s := fmt.Sprint(ids)
	return s[1 : len(s)-1]
}

// sameMembers reports whether a and b hold the same broker ids, in any order.
func sameMembers(a, b []int32) bool {
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func describeClusterCommand() *command {
	return &command{
		name:    "describe-cluster",
		summary: "show brokers and partitions as the controller sees them",
		usage:   "",
		details: `Prints the controller's epoch and settings, its brokers (id, address, broker
epoch, alive: its session holds) and every partition (leader, leader epoch,
partition epoch, ISR, replicas, and during a reassignment the replicas being
added and removed). -o json prints the DescribeClusterResponse.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 describe-cluster\nctlclient --controller 127.0.0.1:9090,127.0.0.1:9190 describe-cluster -o json",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(ctx context.Context, e *env) error {
				cc, err := e.controller()
				if err != nil {
					return err
				}
				resp, err := callController(ctx, cc, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeClusterResponse, error) {
					return c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
				})
				if err != nil {
					return err
				}
				if e.jsonOutput() {
					err = e.printJSON(resp)
				} else {
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
	if err := printClusterPartitions(w, resp.GetPartitions()); err != nil {
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
func printClusterPartitions(w io.Writer, parts []*replicadv1.ClusterPartition) error {
	parts = slices.Clone(parts)
	slices.SortFunc(parts, func(a, b *replicadv1.ClusterPartition) int {
		return cmp.Or(cmp.Compare(a.GetTopic(), b.GetTopic()), cmp.Compare(a.GetPartition(), b.GetPartition()))
	})
	reassigning := slices.ContainsFunc(parts, func(p *replicadv1.ClusterPartition) bool {
		return len(p.GetAddingReplicas()) > 0 || len(p.GetRemovingReplicas()) > 0
	})
	withELR := slices.ContainsFunc(parts, func(p *replicadv1.ClusterPartition) bool {
		return len(p.GetElr()) > 0 || len(p.GetLastKnownElr()) > 0
	})
	withOffline := slices.ContainsFunc(parts, func(p *replicadv1.ClusterPartition) bool { return len(p.GetOfflineReplicas()) > 0 })
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
	t := newTable(w, header...)
	for _, p := range parts {
		leader := strconv.Itoa(int(p.GetLeader()))
		if p.GetLeader() < 0 {
			leader = "none"
		}
		row := []any{p.GetTopic(), p.GetPartition(), leader, p.GetLeaderEpoch(), p.GetPartitionEpoch(), idsOrDash(p.GetIsr()), idsOrDash(p.GetReplicas())}
		if withELR {
			elr := idsOrDash(p.GetElr())
			if len(p.GetElr()) == 0 && len(p.GetLastKnownElr()) > 0 {
				elr = joinInt32s(p.GetLastKnownElr()) + "*"
			}
			row = append(row, elr)
		}
		if withOffline {
			row = append(row, idsOrDash(p.GetOfflineReplicas()))
		}
		if reassigning {
			row = append(row, idsOrDash(p.GetAddingReplicas()), idsOrDash(p.GetRemovingReplicas()))
		}
		t.row(row...)
	}
	return t.flush()
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
