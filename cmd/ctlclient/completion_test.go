package main

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// bashComplete loads the bash completion script into a real bash and
// completes the words (the last one being completed).
func bashComplete(t *testing.T, script string, words ...string) []string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = "'" + w + "'"
	}
	prog := script + "\nCOMP_WORDS=(" + strings.Join(quoted, " ") + ")\nCOMP_CWORD=" + strconv.Itoa(len(words)-1) +
		"\n_ctlclient\necho \"${COMPREPLY[*]}\"\n"
	out, err := exec.Command(bash, "--norc", "-c", prog).CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// The completion scripts come from the command table: bash (and zsh through
// bashcompinit) completes commands, a group's subcommands past the group
// word, and a command's flags past flag values; fish gets the same words.
func TestCompletion(t *testing.T) {
	r := ctl(t, "", "", "completion", "bash")
	wantCode(t, r, 0)
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"ctlclient", "perf", ""}, "produce"},
		{[]string{"ctlclient", "cr"}, "create-topic"},
		{[]string{"ctlclient", "produce", "--topic", "orders", "--ac"}, "--acks"},
		{[]string{"ctlclient", "-o", "json", "cluster", "health", "--exit"}, "--exit-when-healthy"},
		{[]string{"ctlclient", "alter-config", "--val"}, "--validate-only"},
	} {
		got := bashComplete(t, r.stdout, tc.words...)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("completing %q: %v, want [%s]", tc.words, got, tc.want)
		}
	}
	z := ctl(t, "", "", "completion", "zsh")
	wantCode(t, z, 0)
	wantContains(t, "zsh script", z.stdout, "bashcompinit", "complete -o default -F _ctlclient ctlclient")
	f := ctl(t, "", "", "completion", "fish")
	wantCode(t, f, 0)
	wantContains(t, "fish script", f.stdout, `-a "create-topic"`, "__fish_seen_subcommand_from perf", "-l acks")
	wantCode(t, ctl(t, "", "", "completion", "tcsh"), 2)
	wantCode(t, ctl(t, "", "", "completion"), 2)
}
