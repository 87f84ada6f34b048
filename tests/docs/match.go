package docs

import (
	"fmt"
	"regexp"
	"strings"
)

var (
	spaces      = regexp.MustCompile(`\s+`)
	placeholder = regexp.MustCompile(`<[A-Z][A-Z0-9_]*>`)
)

func normalize(s string) string { return strings.TrimSpace(spaces.ReplaceAllString(s, " ")) }

// lineRe turns one expected line into a regexp over a normalized output line.
func lineRe(want string) *regexp.Regexp {
	want = strings.ReplaceAll(normalize(want), "…", "...")
	var b strings.Builder
	b.WriteString("^")
	for i, part := range strings.Split(want, "...") {
		if i > 0 {
			b.WriteString(".*")
		}
		idx := placeholder.FindAllStringIndex(part, -1)
		prev := 0
		for _, m := range idx {
			b.WriteString(regexp.QuoteMeta(part[prev:m[0]]))
			b.WriteString(`\S+`)
			prev = m[1]
		}
		b.WriteString(regexp.QuoteMeta(part[prev:]))
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// MatchOutput checks that every non-blank line of want matches a line of got,
// in order (the conventions are in the package comment). It returns nil on a
// match, else what was not found.
func MatchOutput(want []string, got string) error {
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		lines = append(lines, normalize(l))
	}
	i := 0
	for _, w := range want {
		if normalize(w) == "" || normalize(w) == "..." || normalize(w) == "…" {
			continue
		}
		re := lineRe(w)
		for i < len(lines) && !re.MatchString(lines[i]) {
			i++
		}
		if i == len(lines) {
			return fmt.Errorf("expected output line %q not found (in order) in the output", w)
		}
		i++
	}
	return nil
}
