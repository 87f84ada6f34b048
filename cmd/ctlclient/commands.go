package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one ctlclient subcommand.
type command struct {
	name    string
	summary string // one line for the command list
	usage   string // flags synopsis
	details string // what it does, exit status specifics
	example string
	// later names the work a not-yet-implemented command arrives with
	// (replication, controller, observability); empty when implemented.
	later string
	// daemon commands run for long and set up their own telemetry (the
	// controller), instead of running under one root span.
	daemon bool
	// local commands contact nothing (version): no root span, no telemetry.
	local bool
	// args commands take positional arguments, which they read from their
	// FlagSet (fs.Args()) themselves; the others refuse any.
	args bool
	// flags registers the command's flags and returns the function running it.
	flags func(fs *flag.FlagSet) func(ctx context.Context, e *env) error
}

// commands lists every command of the SPEC, implemented or not, in help order.
func commands() []*command {
	return []*command{
		leaderAndIsrCommand(),
		updateMetadataCommand(),
		stopReplicaCommand(),
		describeCommand(),
		checkpointCommand(),
		produceCommand(),
		consumeCommand(),
		deleteRecordsCommand(),
		retentionRunCommand(),
		perfProduceCommand(),
		alterLogDirCommand(),
		controllerRunCommand(),
		createTopicCommand(),
		deleteTopicCommand(),
		alterTopicCommand(),
		alterConfigCommand(),
		describeConfigCommand(),
		electCommand(),
		reassignCommand(),
		describeClusterCommand(),
		listTopicsCommand(),
		describeTopicCommand(),
		clusterHealthCommand(),
		aclAddCommand(),
		aclRemoveCommand(),
		aclListCommand(),
		traceCommand(),
		certsInitCommand(),
		certsIssueCommand(),
		completionCommand(),
		profileCommands()[0],
		profileCommands()[1],
		profileCommands()[2],
		versionCommand(),
	}
}

const mainHelpHeader = `ctlclient drives replicad brokers.

Usage: ctlclient [global flags] COMMAND [flags]

Global flags (also accepted after COMMAND):
  --broker ADDR      broker to talk to (env CTLCLIENT_BROKER, default 127.0.0.1:9091)
  --controller ADDR[,ADDR...]
                     controllers (env CTLCLIENT_CONTROLLER): create-topic,
                     delete-topic, alter-topic, elect, reassign,
                     describe-cluster, list-topics, describe-topic, cluster
                     health and acl ask the active one; with it produce,
                     consume, perf produce and retention run find each
                     partition's brokers themselves
  --bootstrap ADDR[,ADDR...]
                     brokers (env CTLCLIENT_BOOTSTRAP) whose Metadata produce,
                     consume and perf produce find leaders in, asking each in
                     turn (Kafka's bootstrap.servers): works with the
                     controller down; wins over --controller for that
  -o table|json      output: aligned table (default), or each RPC response as
                     protojson, as grpcurl prints it
  --timeout D        deadline of each RPC (default 10s); with --bootstrap or
                     --controller also how long one call keeps retrying
                     through a controller failover or a leader change (at
                     most 20 attempts)
  --tls-cert FILE --tls-key FILE --tls-ca FILE
                     TLS 1.3 (env CTLCLIENT_TLS_CERT, CTLCLIENT_TLS_KEY,
                     CTLCLIENT_TLS_CA): the client certificate and the CA
                     verifying the servers; none: plaintext. controller run
                     serves with them too, and takes --tls-client-auth
                     none|request|require (env CTLCLIENT_TLS_CLIENT_AUTH)

Commands:
`

const mainHelpFooter = `
Exit status: 0 when every RPC succeeded and every error code in the answers is
NONE; 1 when an RPC failed (printed as "ctlclient: <code>: <message>"), an
answer carried an error code, or the command is not implemented yet; 2 for
usage errors; 130 when Ctrl-C stopped a wait on work that goes on in the
cluster (reassign --wait: the message says how to follow or cancel it).

Run 'ctlclient COMMAND --help' for a command's flags and an example.
`

func printMainHelp(w io.Writer) {
	fmt.Fprint(w, mainHelpHeader)
	for _, c := range commands() {
		summary := c.summary
		if c.later != "" {
			summary += " (not implemented yet: arrives with " + c.later + ")"
		}
		fmt.Fprintf(w, "  %-16s %s\n", c.name, summary)
	}
	fmt.Fprint(w, mainHelpFooter)
}

func printCommandHelp(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "ctlclient %s: %s\n\nUsage: ctlclient [global flags] %s %s\n", c.name, c.summary, c.name, c.usage)
	if fs != nil && !c.args && takesTopicArgument(fs) {
		fmt.Fprintf(w, "       (the topic may be given as the first argument instead of --topic)\n")
	}
	if c.later != "" {
		fmt.Fprintf(w, "\nNot implemented yet: arrives with %s.\n", c.later)
	}
	if c.details != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(c.details))
	}
	fmt.Fprintf(w, "\nExample:\n  %s\n", strings.ReplaceAll(strings.TrimSpace(c.example), "\n", "\n  "))
	if fs != nil {
		fmt.Fprintf(w, "\nFlags (global flags included):\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// runHelp serves `ctlclient help [COMMAND]`.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printMainHelp(stdout)
		return exitOK
	}
	c, _, err := findCommand(args)
	var gerr groupError
	if errors.As(err, &gerr) && gerr.name == gerr.group {
		fmt.Fprintf(stdout, "ctlclient %v\n", err) // `help cluster`: the group's commands
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "ctlclient: %v\n", err)
		return exitUsage
	}
	fs := flag.NewFlagSet("ctlclient "+c.name, flag.ContinueOnError)
	newGlobals(func(string) string { return "" }).register(fs)
	if c.flags != nil {
		c.flags(fs)
	}
	printCommandHelp(stdout, c, fs)
	return exitOK
}
