package main

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/replicad/replicad/internal/version"
)

// runVersion is `replicad version [-o table|json]`.
func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replicad version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	output := fs.String("o", "table", "output `format`: table (one line) or json (one object, every field)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	info := version.Get()
	switch {
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "replicad version: unexpected argument %q\n", fs.Arg(0))
		return 2
	case *output == "json":
		stdout.Write(info.JSON())
	case *output == "table":
		fmt.Fprintln(stdout, info.String("replicad"))
	default:
		fmt.Fprintf(stderr, "replicad version: -o: want table or json (got %q)\n", *output)
		return 2
	}
	return 0
}
