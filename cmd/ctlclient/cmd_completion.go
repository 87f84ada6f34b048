package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// completionCommand prints a completion script for bash, zsh or fish, made
// from the command table itself, so it never falls behind the commands:
// command names (two-word ones after their group word), each command's
// flags, and the global flags.
func completionCommand() *command {
	return &command{
		name:    "completion",
		summary: "print a shell completion script (bash, zsh or fish)",
		usage:   "bash|zsh|fish",
		details: `Prints a script that completes ctlclient's commands, their subcommands
(perf produce, cluster health, ...) and their flags. Load it with
  source <(ctlclient completion bash)          # bash, e.g. in ~/.bashrc
  source <(ctlclient completion zsh)           # zsh, e.g. in ~/.zshrc
  ctlclient completion fish | source           # fish
Exits 2 for another shell.`,
		example: "ctlclient completion bash > /etc/bash_completion.d/ctlclient",
		args:    true,
		local:   true,
		flags: func(fs *flag.FlagSet) func(context.Context, *env) error {
			return func(_ context.Context, e *env) error {
				if fs.NArg() != 1 {
					return usagef("want one shell: bash, zsh or fish (got %d arguments)", fs.NArg())
				}
				tree := completionTree()
				switch fs.Arg(0) {
				case "bash":
					return writeBashCompletion(e.stdout, tree)
				case "zsh":
					// zsh runs bash completions through bashcompinit.
					fmt.Fprintln(e.stdout, "autoload -U +X bashcompinit && bashcompinit")
					return writeBashCompletion(e.stdout, tree)
				case "fish":
					return writeFishCompletion(e.stdout, tree)
				}
				return usagef("unknown shell %q: want bash, zsh or fish", fs.Arg(0))
			}
		},
	}
}

// completionNode is one word of the command tree: its subcommands (for a
// group word) or its flags.
type completionNode struct {
	subs  []string
	flags []string
}

// completionTree is "" (the top level: commands and global flags) and each
// command name (its flags, globals included) and group word (its
// subcommands).
func completionTree() map[string]*completionNode {
	tree := map[string]*completionNode{"": {}}
	globals := flagNames(func(fs *flag.FlagSet) { newGlobals(func(string) string { return "" }).register(fs) })
	tree[""].flags = globals
	for _, c := range commands() {
		first, rest, two := strings.Cut(c.name, " ")
		if !slices.Contains(tree[""].subs, first) {
			tree[""].subs = append(tree[""].subs, first)
		}
		if two {
			if tree[first] == nil {
				tree[first] = &completionNode{}
			}
			tree[first].subs = append(tree[first].subs, rest)
		}
		flags := slices.Clone(globals)
		if c.flags != nil {
			flags = append(flags, flagNames(func(fs *flag.FlagSet) { c.flags(fs) })...)
		}
		slices.Sort(flags)
		tree[c.name] = &completionNode{flags: slices.Compact(flags)}
	}
	return tree
}

func flagNames(register func(*flag.FlagSet)) []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	register(fs)
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if len(f.Name) == 1 {
			out = append(out, "-"+f.Name) // -o
		} else {
			out = append(out, "--"+f.Name)
		}
	})
	return out
}

// valuedGlobalFlags are the global flags that take a value (the next word,
// unless given as --flag=value), each as -x and --x (Go's flag package takes
// both).
func valuedGlobalFlags() []string {
	fs := flag.NewFlagSet("", flag.ContinueOnError)
	newGlobals(func(string) string { return "" }).register(fs)
	var out []string
	fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			return
		}
		out = append(out, "-"+f.Name, "--"+f.Name)
	})
	return out
}

func sortedKeys(tree map[string]*completionNode) []string {
	keys := make([]string, 0, len(tree))
	for k := range tree {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func writeBashCompletion(w io.Writer, tree map[string]*completionNode) error {
	var groups []string
	for _, k := range sortedKeys(tree) {
		if k != "" && len(tree[k].subs) > 0 {
			groups = append(groups, k)
		}
	}
	var b strings.Builder
	// The command is the first word that is neither a flag nor a global
	// flag's value, and for a group word the next one too; the words after
	// it (flag values) do not move it.
	fmt.Fprintf(&b, `# ctlclient completion for bash (ctlclient completion bash)
_ctlclient() {
  local cur="${COMP_WORDS[COMP_CWORD]}" path="" i w groups=" %s " valued=" %s "
  for ((i = 1; i < COMP_CWORD; i++)); do
    w="${COMP_WORDS[i]}"
    if [[ "$w" == -* ]]; then
      [[ -z "$path" && "$w" != *=* && "$valued" == *" $w "* ]] && ((i++))
      continue
    fi
    if [[ -z "$path" ]]; then
      path="$w"
      [[ "$groups" == *" $w "* ]] || break
    else
      path="$path $w"
      break
    fi
  done
  local words=""
  case "$path" in
`, strings.Join(groups, " "), strings.Join(valuedGlobalFlags(), " "))
	for _, k := range sortedKeys(tree) {
		n := tree[k]
		words := append(slices.Clone(n.subs), n.flags...)
		if strings.HasPrefix(k, "-") {
			continue
		}
		fmt.Fprintf(&b, "    %q) words=%q ;;\n", k, strings.Join(words, " "))
	}
	b.WriteString(`  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _ctlclient ctlclient
`)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFishCompletion(w io.Writer, tree map[string]*completionNode) error {
	var b strings.Builder
	b.WriteString("# ctlclient completion for fish (ctlclient completion fish | source)\ncomplete -c ctlclient -f\n")
	for _, sub := range tree[""].subs {
		fmt.Fprintf(&b, "complete -c ctlclient -n '__fish_use_subcommand' -a %q\n", sub)
	}
	for _, k := range sortedKeys(tree) {
		if k == "" {
			continue
		}
		n := tree[k]
		cond := fmt.Sprintf("__fish_seen_subcommand_from %s", strings.Fields(k)[0])
		if words := strings.Fields(k); len(words) == 2 {
			cond = fmt.Sprintf("__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s", words[0], words[1])
		}
		for _, sub := range n.subs {
			fmt.Fprintf(&b, "complete -c ctlclient -n '%s' -a %q\n", cond, sub)
		}
		for _, f := range n.flags {
			fmt.Fprintf(&b, "complete -c ctlclient -n '%s' -l %s\n", cond, strings.TrimPrefix(f, "--"))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
