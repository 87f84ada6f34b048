package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/replicad/replicad/client"
	"github.com/replicad/replicad/internal/flagfile"
)

// The hidden `ctlclient help --markdown` and `ctlclient help
// --markdown-errors` print ctlclient's part of docs/reference/flags.md and
// the whole of docs/reference/errors.md. `make gen` writes them and `make
// check-gen` fails when they are stale, as for gen/: the pages come from
// the flag sets that parse the command lines and from the proto enum, so
// they cannot drift. They live in the binary, not in a generator of their
// own, because the flag sets do (package main).
const (
	helpMarkdownFlags  = "--markdown"
	helpMarkdownErrors = "--markdown-errors"
)

// runHelpMarkdown serves both; the environment is not read (the page is the
// same wherever it is made): the CTLCLIENT_* defaults and the profile's are
// left out by the caller (`make gen` runs it under env -i).
func runHelpMarkdown(which string, stdout, stderr io.Writer) int {
	switch which {
	case helpMarkdownFlags:
		writeFlagsMarkdown(stdout)
	case helpMarkdownErrors:
		client.WriteErrorCodesMarkdown(stdout)
	default:
		fmt.Fprintf(stderr, "ctlclient help: unknown %q (want %s or %s)\n", which, helpMarkdownFlags, helpMarkdownErrors)
		return exitUsage
	}
	return exitOK
}

func writeFlagsMarkdown(w io.Writer) {
	noEnv := func(string) string { return "" }
	global := flag.NewFlagSet("ctlclient", flag.ContinueOnError)
	newGlobals(noEnv).register(global)
	isGlobal := map[string]bool{}
	global.VisitAll(func(f *flag.Flag) { isGlobal[f.Name] = true })

	fmt.Fprint(w, "## ctlclient\n\n`ctlclient [global flags] COMMAND [flags]`. The global flags are taken before or after COMMAND.\n\n### Global flags\n\n")
	flagfile.WriteMarkdown(w, global, nil)
	for _, c := range commands() {
		summary := strings.TrimSuffix(c.summary, ".")
		if summary != "" {
			summary = strings.ToUpper(summary[:1]) + summary[1:]
		}
		fmt.Fprintf(w, "\n### ctlclient %s\n\n%s.", c.name, summary)
		if c.later != "" {
			fmt.Fprintf(w, " Not implemented yet: arrives with %s.", c.later)
		}
		fmt.Fprintf(w, "\n\n```\nctlclient %s %s\n```\n\n", c.name, strings.TrimSpace(c.usage))
		fs := flag.NewFlagSet("ctlclient "+c.name, flag.ContinueOnError)
		if c.flags != nil {
			c.flags(fs)
		}
		own := 0
		fs.VisitAll(func(f *flag.Flag) {
			if !isGlobal[f.Name] {
				own++
			}
		})
		if own == 0 {
			fmt.Fprint(w, "No flags of its own.\n")
			continue
		}
		flagfile.WriteMarkdown(w, fs, isGlobal)
	}
}
