package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func updateMetadataCommand() *command {
	return &command{
		name:    "update-metadata",
		summary: "replace the broker's list of live brokers (their endpoints)",
		usage:   "--controller-id N --controller-epoch N [--broker-epoch N] --live-broker ID=HOST:PORT ...",
		details: `Followers find their leaders' endpoints in this list. Exits 1 unless the
answer is NONE (a stale controller epoch answers STALE_CONTROLLER_EPOCH).`,
		example: "ctlclient update-metadata --controller-id 0 --controller-epoch 1 \\\n    --live-broker 1=127.0.0.1:9091 --live-broker 2=127.0.0.1:9092",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			controllerID := int32Var(fs, "controller-id", 0, "id of the controller sending the request")
			controllerEpoch := int32Var(fs, "controller-epoch", 0, "epoch of that controller")
			brokerEpoch := fs.Int64("broker-epoch", 0, "the receiving broker's registration epoch (0 without a controller)")
			var live brokerList
			fs.Var(&live, "live-broker", "a live broker, `ID=HOST:PORT` (repeatable)")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "controller-id", "controller-epoch"); err != nil {
					return err
				}
				var resp *replicadv1.UpdateMetadataResponse
				err := e.callReplicaManager(ctx, func(rctx context.Context, c replicadv1.ReplicaManagerServiceClient) (err error) {
					resp, err = c.UpdateMetadata(rctx, &replicadv1.UpdateMetadataRequest{
						ControllerId: *controllerID, ControllerEpoch: *controllerEpoch, BrokerEpoch: *brokerEpoch, LiveBrokers: live,
					})
					return err
				})
				if err != nil {
					return err
				}
				if e.jsonOutput() {
					err = e.printJSON(resp)
				} else {
					t := newTable(e.stdout, "ERROR")
					t.row(codeName(resp.GetErrorCode()))
					err = t.flush()
				}
				if err != nil {
					return err
				}
				return checkPartitionErrors("update-metadata", resp.GetErrorCode(), resp.GetErrorMessage(), nil)
			}
		},
	}
}

func stopReplicaCommand() *command {
	return &command{
		name:    "stop-replica",
		summary: "stop replicating a partition, optionally deleting its log",
		usage:   "--controller-id N --controller-epoch N --topic T --partition P [--leader-epoch E] [--delete] [--topic-id ID] [--broker-epoch N]",
		details: `The broker stops its fetcher for the partition and forgets it; with --delete
it also removes the log. --leader-epoch older than the partition's answers
FENCED_LEADER_EPOCH; -1 (the default) matches any epoch. With --topic-id, a
replica of another topic ID is left alone (answered NONE). Exits 1 unless
all error codes are NONE.`,
		example: "ctlclient stop-replica --controller-id 0 --controller-epoch 1 --topic orders --partition 0 --leader-epoch 2 --delete",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			controllerID := int32Var(fs, "controller-id", 0, "id of the controller sending the request")
			controllerEpoch := int32Var(fs, "controller-epoch", 0, "epoch of that controller")
			brokerEpoch := fs.Int64("broker-epoch", 0, "the receiving broker's registration epoch (0 without a controller)")
			topic := fs.String("topic", "", "topic")
			partition := int32Var(fs, "partition", 0, "partition")
			leaderEpoch := int32Var(fs, "leader-epoch", -1, "leader epoch the stop is for; -1: any")
			del := fs.Bool("delete", false, "also delete the partition's log")
			topicID := fs.String("topic-id", "", "stop only a replica of this topic `ID`")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "controller-id", "controller-epoch", "topic", "partition"); err != nil {
					return err
				}
				var resp *replicadv1.StopReplicaResponse
				err := e.callReplicaManager(ctx, func(rctx context.Context, c replicadv1.ReplicaManagerServiceClient) (err error) {
					resp, err = c.StopReplica(rctx, &replicadv1.StopReplicaRequest{
						ControllerId: *controllerID, ControllerEpoch: *controllerEpoch, BrokerEpoch: *brokerEpoch,
						Partitions: []*replicadv1.StopReplicaPartition{{Topic: *topic, Partition: *partition, LeaderEpoch: *leaderEpoch,
							DeletePartition: *del, TopicId: *topicID}},
					})
					return err
				})
				if err != nil {
					return err
				}
				if err := e.printPartitionErrorsResponse(resp, resp.GetErrorCode(), resp.GetPartitionErrors()); err != nil {
					return err
				}
				return checkPartitionErrors("stop-replica", resp.GetErrorCode(), resp.GetErrorMessage(), resp.GetPartitionErrors())
			}
		},
	}
}

func describeCommand() *command {
	return &command{
		name:    "describe",
		summary: "show the replicas the broker hosts: role, epochs, ISR, HW, LEO, producers, log dir",
		usage:   "[--topic T] [--partition P] [--producers]",
		details: `Without --topic every hosted partition is shown; --partition needs --topic.
The table also lists the broker's log dirs and whether each is online, and
a last line when the broker's periodic retention check last ran and runs
next ("retention: last check 12s ago, next in 4m48s"; retention run runs
one now).
PRODUCERS is how many idempotent producers the replica holds state for (every
replica rebuilds it from its log); --producers lists them per partition, the
last to append first, at most 100 each (Kafka's kafka-transactions.sh
describe-producers).`,
		example: "ctlclient describe --topic orders\nctlclient describe --topic orders --partition 0 --producers\nctlclient --broker 127.0.0.1:9092 describe -o json",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "only this topic")
			partition := int32Var(fs, "partition", 0, "only this partition (needs --topic)")
			producers := fs.Bool("producers", false, "also list each partition's idempotent producers")
			return func(ctx context.Context, e *env) error {
				req := &replicadv1.DescribePartitionsRequest{Topic: *topic}
				if setFlags(fs)["partition"] {
					if *topic == "" {
						return usagef("--partition needs --topic")
					}
					req.Partition = partition
				}
				var resp *replicadv1.DescribePartitionsResponse
				err := e.callReplicaManager(ctx, func(rctx context.Context, c replicadv1.ReplicaManagerServiceClient) (err error) {
					resp, err = c.DescribePartitions(rctx, req)
					return err
				})
				if err != nil {
					return err
				}
				if e.jsonOutput() {
					return e.printJSON(resp)
				}
				if err := printDescription(e, resp); err != nil {
					return err
				}
				if err := printRetentionTimes(e, resp); err != nil || !*producers {
					return err
				}
				return printProducers(e, resp)
			}
		},
	}
}

// printProducers lists the idempotent producers of each described replica.
func printProducers(e *env, resp *replicadv1.DescribePartitionsResponse) error {
	if _, err := e.stdout.Write([]byte("\n")); err != nil {
		return err
	}
	t := newTable(e.stdout, "TOPIC", "PARTITION", "PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-OFFSET", "LAST-TIMESTAMP")
	for _, p := range resp.GetPartitions() {
		for _, pr := range p.GetProducers() {
			t.row(p.GetTopic(), p.GetPartition(), pr.GetProducerId(), pr.GetProducerEpoch(), pr.GetLastSequence(),
				pr.GetLastOffset(), time.UnixMilli(pr.GetLastTimestampMs()).UTC().Format(time.RFC3339Nano))
		}
	}
	return t.flush()
}

// followerISR is a follower's ISR cell, and followerISRNote says why.
const (
	followerISR     = "(leader's)"
	followerISRNote = "ISR (leader's): only a partition's leader tracks its ISR; ask the leader (--broker) or the controller (describe-topic)."
)

func printDescription(e *env, resp *replicadv1.DescribePartitionsResponse) error {
	// LOG-START, not LSO: to a Kafka operator LSO is the last stable offset.
	t := newTable(e.stdout, "TOPIC", "PARTITION", "ROLE", "LEADER", "EPOCH", "P-EPOCH", "REPLICAS", "ISR", "HW", "LEO", "LOG-START", "PRODUCERS", "DIR")
	followers := false
	for _, p := range resp.GetPartitions() {
		isr := orDash(joinInt32s(p.GetIsr()))
		if p.GetRole() == replicadv1.ReplicaRole_REPLICA_ROLE_FOLLOWER && len(p.GetIsr()) == 0 {
			// Only the leader tracks the ISR: an empty one here says
			// nothing about the partition's health.
			isr, followers = followerISR, true
		}
		dir := p.GetLogDir()
		if p.GetFutureLogDir() != "" {
			dir += " -> " + p.GetFutureLogDir()
		}
		if p.DamagedOffset != nil {
			dir += fmt.Sprintf(" (DAMAGED at %d: refuses leadership until repaired)", p.GetDamagedOffset())
		}
		t.row(p.GetTopic(), p.GetPartition(), roleName(p.GetRole()), p.GetLeader(), p.GetLeaderEpoch(), p.GetPartitionEpoch(),
			joinInt32s(p.GetReplicas()), isr, p.GetHighWatermark(), p.GetLogEndOffset(), p.GetLogStartOffset(),
			p.GetProducerCount(), dir)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if followers {
		if _, err := fmt.Fprintln(e.stdout, followerISRNote); err != nil {
			return err
		}
	}
	if len(resp.GetLogDirs()) == 0 {
		return nil
	}
	if _, err := e.stdout.Write([]byte("\n")); err != nil {
		return err
	}
	t = newTable(e.stdout, "LOG DIR", "ONLINE", "PARTITIONS")
	for _, d := range resp.GetLogDirs() {
		t.row(d.GetPath(), d.GetOnline(), d.GetPartitionCount())
	}
	return t.flush()
}

func checkpointCommand() *command {
	return &command{
		name:    "checkpoint",
		summary: "write every log dir's replication-offset-checkpoint (the HWs) now",
		usage:   "",
		details: `Exits 1 when a log dir failed to write (that dir goes offline).`,
		example: "ctlclient checkpoint",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(ctx context.Context, e *env) error {
				var resp *replicadv1.CheckpointHighWatermarksResponse
				err := e.callReplicaManager(ctx, func(rctx context.Context, c replicadv1.ReplicaManagerServiceClient) (err error) {
					resp, err = c.CheckpointHighWatermarks(rctx, &replicadv1.CheckpointHighWatermarksRequest{})
					return err
				})
				if err != nil {
					return err
				}
				if e.jsonOutput() {
					err = e.printJSON(resp)
				} else {
					t := newTable(e.stdout, "LOG DIR", "PARTITIONS", "ERROR")
					for _, d := range resp.GetLogDirs() {
						t.row(d.GetLogDir(), d.GetPartitions(), codeName(d.GetErrorCode()))
					}
					err = t.flush()
				}
				if err != nil {
					return err
				}
				var failed []string
				for _, d := range resp.GetLogDirs() {
					if d.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
						failed = append(failed, d.GetLogDir()+" "+codeName(d.GetErrorCode()))
					}
				}
				if len(failed) == 0 && resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
					failed = append(failed, codeName(resp.GetErrorCode()))
				}
				if len(failed) > 0 {
					return answerError{"checkpoint: " + strings.Join(failed, ", ")}
				}
				return nil
			}
		},
	}
}
