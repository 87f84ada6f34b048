// Command ctlclient drives replicad brokers: it sends the controller's
// requests (leader-and-isr, update-metadata, stop-replica) by hand, inspects
// brokers (describe, checkpoint), produces and consumes records, and
// generates load (perf produce). With --controller (one address or a
// comma-separated list, of which the active controller is found) it
// administers the cluster (create-topic, delete-topic, elect, reassign,
// describe-cluster), answers the everyday questions from the controller's
// DescribeCluster (list-topics, describe-topic, describe-cluster's
// --under-replicated/--unavailable/--under-min-isr filters, cluster health),
// and produce, consume and perf produce find each partition's leader from
// the controller and follow leader changes.
//
//	ctlclient [global flags] COMMAND [flags]
//
// A two-word command (perf produce, controller run, cluster health, acl
// add, ...) is a group word and its subcommand; the group word alone lists
// its subcommands.
//
// Global flags (--broker, --controller, -o, --timeout) may also follow the
// command. Output is an aligned table, or with -o json each RPC response as
// protojson, as grpcurl prints it.
//
// Exit status: 0 when every RPC succeeded and every error code in the answers
// is NONE; 1 when an RPC failed (`ctlclient: <code>: <message>` on stderr),
// an answer carried an error code, or the command is not implemented yet;
// 2 for usage errors.
//
// Each command runs under a root span `ctlclient <command>` whose context
// travels to the brokers (internal/telemetry, otelgrpc).
package main
