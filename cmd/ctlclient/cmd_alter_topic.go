package main

import (
	"context"
	"flag"
	"fmt"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// alterTopicCommand is kafka-topics --alter --partitions: it adds partitions
// to a topic through the controller (CreatePartitions).
func alterTopicCommand() *command {
	return &command{
		name:    "alter-topic",
		summary: "add partitions to a topic (kafka-topics --alter --partitions)",
		usage:   "(TOPIC | --topic TOPIC) --partitions N [--validate-only]",
		details: `Grows the topic to N partitions in all (Kafka's CreatePartitions): the
controller assigns the new ones over the live brokers with the replica shift
create-topic uses, continuing the topic's pattern (as if it had been created
with N), stores them all in one write, and tells the brokers, which create
their logs and elect the leaders. Producers pick the new partitions up at
their next metadata refresh. Prints the answer's error code and the
partitions added; --validate-only prints the partitions that would be added
and changes nothing.

Partitions are never removed, and records keyed to a partition before the
change may hash to another after it (as in Kafka). Exits 1 unless the answer
is NONE: UNKNOWN_TOPIC_OR_PARTITION (no such topic), INVALID_PARTITIONS (N is
not more than the topic has: "already has N partitions" also answers a
request repeated after one that timed out but was applied; describe-topic
shows the count), INVALID_REPLICATION_FACTOR (fewer live brokers than the
topic's replication factor), WILL_EXCEED_PARTITION_LIMITS (a broker's
--max-partitions).

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 alter-topic orders --partitions 6\n" +
			"ctlclient --controller 127.0.0.1:9090 alter-topic --topic orders --partitions 12 --validate-only",
		args: true,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topicFlag := fs.String("topic", "", "the topic, instead of the TOPIC argument (as kafka-topics --alter --topic)")
			partitions := int32Var(fs, "partitions", 0, "the topic's partition count after the change (more than it has)")
			validateOnly := fs.Bool("validate-only", false, "print the partitions that would be added without adding them")
			return func(ctx context.Context, e *env) error {
				topic, err := topicOperand(fs, e, topicFlag)
				if err != nil {
					return err
				}
				if err := requireFlags(fs, "partitions"); err != nil {
					return err
				}
				if *partitions < 1 {
					return usagef("--partitions must be >= 1 (got %d)", *partitions)
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				req := &replicadv1.CreatePartitionsRequest{Topic: topic, Count: *partitions, ValidateOnly: *validateOnly}
				resp, err := cc.CreatePartitions(ctx, req)
				err = controllerError(err, cc)
				if err != nil {
					return err
				}
				return e.printAdminAnswer(resp, func() error {
					if err := printTopicResult(e.stdout, topic, resp.GetErrorCode(), resp.GetPartitions()); err != nil {
						return err
					}
					if *validateOnly && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
						_, err := fmt.Fprintf(e.stdout, "\nvalidate only: %d partitions would be added; nothing changed\n", len(resp.GetPartitions()))
						return err
					}
					return nil
				}, "alter-topic "+topic)
			}
		},
	}
}
