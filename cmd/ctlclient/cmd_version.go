package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/replicad/replicad/internal/version"
)

func versionCommand() *command {
	return &command{
		name:    "version",
		summary: "print ctlclient's version, commit and build date",
		usage:   "[-o table|json]",
		details: `Prints the version, the commit and its date, and the Go toolchain, from
the build info Go embeds in the binary (internal/version). A binary built
outside a git checkout, or with -buildvcs=false, says "unknown" for them
(make build stamps them). -o json prints one object with every field.
It contacts nothing.`,
		example: "ctlclient version\nctlclient version -o json | jq -r .commit",
		local:   true,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(_ context.Context, e *env) error {
				info := version.Get()
				if e.jsonOutput() {
					_, err := e.stdout.Write(info.JSON())
					return err
				}
				_, err := fmt.Fprintln(e.stdout, info.String("ctlclient"))
				return err
			}
		},
	}
}
