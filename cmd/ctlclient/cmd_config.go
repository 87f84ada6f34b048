package main

import (
	"context"
	"flag"
	"maps"
	"slices"

	"github.com/replicad/replicad/core/topicconfig"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Topic configs: create-topic --config, alter-config and describe-config
// (the controller's AlterTopicConfig and DescribeTopicConfig).

const topicConfigKeysHelp = `retention.ms, retention.bytes, segment.bytes,
segment.ms, min.insync.replicas, cleanup.policy=delete`

// parseConfigFlags reads repeated KEY=VALUE flags and checks them as the
// controller will, so a typo fails here with the key named (exit 2).
func parseConfigFlags(flagName string, kvs []string) (map[string]string, error) {
	m, err := topicconfig.ParseAssignments(kvs)
	if err != nil {
		return nil, usagef("--%s: %v", flagName, err)
	}
	if err := topicconfig.Validate(m); err != nil {
		return nil, usagef("--%s: %v", flagName, err)
	}
	return m, nil
}

func alterConfigCommand() *command {
	return &command{
		name:    "alter-config",
		summary: "set or remove a topic's config overrides",
		usage:   "--topic T [--set KEY=VALUE ...] [--delete KEY ...] [--validate-only]",
		details: `Changes the topic's config overrides through the controller, as Kafka's
incremental alter-configs: --set adds or replaces a key, --delete removes
one (back to the brokers' flag). Keys: ` + topicConfigKeysHelp + `.
The controller stores them and sends them to every broker, which applies
them to the topic's replicas at once: retention at the next check, segment
rolls from the next append, min.insync.replicas to the next produce.
Prints the overrides that hold after the change. An unknown key or a bad
value changes nothing and exits 2 (the controller refuses it with
InvalidArgument naming the key). --validate-only checks and prints without
changing anything.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 alter-config --topic orders --set retention.ms=3600000 --delete retention.bytes",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic whose configs change")
			var set, del stringList
			fs.Var(&set, "set", "KEY=VALUE to set (repeatable)")
			fs.Var(&del, "delete", "KEY to remove (repeatable)")
			validateOnly := fs.Bool("validate-only", false, "check the change and print the result without applying it")
			return func(ctx context.Context, e *env) error {
				if err := requireFlags(fs, "topic"); err != nil {
					return err
				}
				if err := checkTopicName(*topic); err != nil {
					return err
				}
				if len(set) == 0 && len(del) == 0 {
					return usagef("nothing to change: give --set KEY=VALUE or --delete KEY")
				}
				sets, err := parseConfigFlags("set", set)
				if err != nil {
					return err
				}
				for _, k := range del {
					if err := topicconfig.ValidateKey(k); err != nil {
						return usagef("--delete: %v", err)
					}
					if _, ok := sets[k]; ok {
						return usagef("--delete %s: also given to --set", k)
					}
				}
				cc, err := e.controller()
				if err != nil {
					return err
				}
				req := &replicadv1.AlterTopicConfigRequest{Topic: *topic, Set: sets, Delete: del, ValidateOnly: *validateOnly}
				resp, err := cc.AlterTopicConfig(ctx, req)
				err = controllerError(err, cc)
				if err != nil {
					return mayBeApplied(err, "check with `ctlclient describe-config --topic "+*topic+"`")
				}
				return e.printAdminAnswer(resp, func() error {
					if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
						return nil
					}
					t := newTable(e.stdout, "TOPIC", "KEY", "VALUE", "VERSION")
					for _, k := range slices.Sorted(maps.Keys(resp.GetConfigs())) {
						t.row(*topic, k, resp.GetConfigs()[k], resp.GetVersion())
					}
					if len(resp.GetConfigs()) == 0 {
						t.row(*topic, "-", "(no overrides: the brokers' flags apply)", resp.GetVersion())
					}
					return t.flush()
				}, "alter-config "+*topic)
			}
		},
	}
}

func describeConfigCommand() *command {
	return &command{
		name:    "describe-config",
		summary: "show a topic's configs and where each comes from",
		usage:   "--topic T",
		details: `Prints every topic config key with its value and its source: TOPIC (an
override, see alter-config) or BROKER_DEFAULT (the brokers' flag; the value
shown is the default of that flag, or for min.insync.replicas the smallest
the topic's replicas registered with; a broker started with another flag
value uses its own). DescribePartitions on a broker (ctlclient describe)
shows the config in effect on each of its replicas.

` + controllerExitDetails,
		example: "ctlclient --controller 127.0.0.1:9090 describe-config --topic orders",
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			topic := fs.String("topic", "", "topic to describe")
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
				resp, err := cc.DescribeTopicConfig(ctx, &replicadv1.DescribeTopicConfigRequest{Topic: *topic})
				err = controllerError(err, cc)
				if err != nil {
					return err
				}
				return e.printAdminAnswer(resp, func() error {
					if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
						return nil
					}
					t := newTable(e.stdout, "TOPIC", "KEY", "VALUE", "SOURCE")
					for _, en := range resp.GetEntries() {
						t.row(*topic, en.GetName(), en.GetValue(), configSourceName(en.GetSource()))
					}
					return t.flush()
				}, "describe-config "+*topic)
			}
		},
	}
}

func configSourceName(s replicadv1.ConfigSource) string {
	switch s {
	case replicadv1.ConfigSource_CONFIG_SOURCE_TOPIC:
		return "TOPIC"
	case replicadv1.ConfigSource_CONFIG_SOURCE_BROKER_DEFAULT:
		return "BROKER_DEFAULT"
	}
	return "-"
}
