package flagfile

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes the flags of fs, except those in skip, as a
// Markdown table (flag and argument, default, description) in name order:
// the generated reference (docs/reference/flags.md) is made from the very
// flag sets that parse the command lines, so it cannot drift from them.
// The caller makes fs's machine-dependent defaults and texts fixed first.
func WriteMarkdown(w io.Writer, fs *flag.FlagSet, skip map[string]bool) {
	fmt.Fprintln(w, "| Flag | Default | Description |")
	fmt.Fprintln(w, "|------|---------|-------------|")
	fs.VisitAll(func(f *flag.Flag) {
		if skip[f.Name] {
			return
		}
		arg, usage := flag.UnquoteUsage(f)
		dashes := "--"
		if len(f.Name) == 1 {
			dashes = "-" // -o, as the help writes it
		}
		name := "`" + dashes + f.Name
		if arg != "" {
			name += " " + arg
		}
		name += "`"
		def := ""
		if f.DefValue != "" {
			def = "`" + f.DefValue + "`"
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", name, cell(def), cell(usage))
	})
}

// cell is s on one line, safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	s = strings.ReplaceAll(s, "<", "&lt;")
	return s
}
