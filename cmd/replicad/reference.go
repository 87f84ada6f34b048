package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/replicad/replicad/internal/flagfile"
)

// helpMarkdownFlag is the hidden `replicad --help-markdown`: the broker's
// and the controller's flags as Markdown, the replicad part of
// docs/reference/flags.md (`make gen` writes it, `make check-gen` fails
// when it is stale). Hidden because it is for the build, not for users:
// --help is theirs.
const helpMarkdownFlag = "--help-markdown"

// runHelpMarkdown prints both daemons' flag tables from their real flag
// sets, with the defaults that depend on the machine or the environment
// (RLIMIT_NOFILE, REPLICAD_TLS_*) written as the rule that makes them, so
// the page is the same wherever it is generated.
func runHelpMarkdown(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "replicad %s: takes no arguments\n", helpMarkdownFlag)
		return 2
	}
	getenv = func(string) string { return "" }
	var broker, controller *flag.FlagSet
	referenceFlags = func(fs *flag.FlagSet) { broker = fs }
	parseFlags(nil, io.Discard)
	referenceFlags = func(fs *flag.FlagSet) { controller = fs }
	parseControllerFlags(nil, io.Discard)
	referenceFlags = nil

	f := broker.Lookup("max-partitions")
	f.DefValue = maxPartitionsDefaultRule
	broker.Lookup("max.broker.partitions").DefValue = maxPartitionsDefaultRule
	f = broker.Lookup("max-open-files")
	f.Usage = strings.Replace(f.Usage, fmt.Sprintf(" (%d here)", openFilesLimit()), "", 1)

	fmt.Fprint(stdout, "## replicad (broker)\n\n`replicad [flags]`: a broker. With no flag and no --config it starts broker 1 on 127.0.0.1:9091 and says so.\n\n")
	flagfile.WriteMarkdown(stdout, broker, nil)
	fmt.Fprint(stdout, "\n## replicad controller\n\n`replicad controller [flags]`: the controller daemon (`ctlclient controller run` takes the same flags).\n\n")
	flagfile.WriteMarkdown(stdout, controller, nil)
	return 0
}
