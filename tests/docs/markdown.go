package docs

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"unicode"
)

// Page is one markdown file, parsed as far as the checks need.
type Page struct {
	Path     string // relative to the repository root, slash-separated
	Headings []Heading
	Anchors  map[string]bool // GitHub's anchors of the headings
	Blocks   []*Block        // fenced blocks, in page order
	Links    []Link
}

// Heading is a markdown heading and its anchor.
type Heading struct {
	Line   int
	Level  int
	Text   string
	Anchor string
}

// Block is a fenced code block.
type Block struct {
	Page    string
	Line    int    // of the opening fence
	Lang    string // the info string's first word
	Heading string // the nearest heading above it
	Anchor  string // that heading's anchor
	Marker  string // what follows "docs-test:" on the line before the fence
	Lines   []string
	Output  *Block // the expected output, for a shell block
	After   *Block // the fence right after this one (nothing but blank lines or a marker between)
}

// Link is a markdown link outside code.
type Link struct {
	Line   int
	Target string
}

// IsShell says whether a block is commands: sh, bash or shell.
func (b *Block) IsShell() bool {
	switch b.Lang {
	case "sh", "bash", "shell":
		return true
	}
	return false
}

// NotRun is the reason a block is marked not run, and whether it is.
func (b *Block) NotRun() (reason string, marked bool) {
	if r, ok := strings.CutPrefix(b.Marker, "not run"); ok {
		return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(r), ":")), true
	}
	return "", false
}

// Fails says the block is marked to exit non-zero.
func (b *Block) Fails() bool { return b.Marker == "fails" }

// IsOutput says the block is marked as the expected output of the one before.
func (b *Block) IsOutput() bool { return strings.HasPrefix(b.Marker, "output") }

// Eventually says an output block is to be matched by rerunning its command.
func (b *Block) Eventually() bool { return b.Marker == "output eventually" }

// Where names the block for messages.
func (b *Block) Where() string { return fmt.Sprintf("%s:%d (section %q)", b.Page, b.Line, b.Heading) }

var (
	markerRe  = regexp.MustCompile(`^<!--\s*docs-test:\s*(.*?)\s*-->$`)
	linkRe    = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan  = regexp.MustCompile("`[^`]*`")
	mdLinkRe  = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	headingRe = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
)

// Slug is GitHub's anchor for a heading's text, before the -N of repeats:
// markdown links become their text, then lower case, every character that is
// not a letter, a digit, a space, '-' or '_' dropped, spaces to dashes.
func Slug(text string) string {
	text = mdLinkRe.ReplaceAllString(text, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// ParsePage reads one page; root is the repository root, rel the page's path in it.
func ParsePage(root, rel string) (*Page, error) {
	data, err := os.ReadFile(filepath.Join(root, rel))
	if err != nil {
		return nil, err
	}
	p := &Page{Path: filepath.ToSlash(rel), Anchors: map[string]bool{}}
	seen := map[string]int{}
	var cur *Block
	var last *Block // the last closed fence, while only blank lines or a marker follow it
	heading, anchor, marker := "", "", ""
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			if strings.HasPrefix(trimmed, "```") && strings.Trim(trimmed, "`") == "" {
				p.Blocks = append(p.Blocks, cur)
				last, cur = cur, nil
				continue
			}
			if k := len(cur.Lines); k > 0 && cur.IsShell() && strings.HasSuffix(cur.Lines[k-1], "\\") {
				cur.Lines[k-1] += "\n" + line
			} else {
				cur.Lines = append(cur.Lines, line)
			}
			continue
		}
		switch {
		case strings.HasPrefix(trimmed, "```"):
			cur = &Block{Page: p.Path, Line: n, Lang: strings.Fields(strings.TrimLeft(trimmed, "`") + " x")[0],
				Heading: heading, Anchor: anchor, Marker: marker}
			if cur.Lang == "x" {
				cur.Lang = ""
			}
			if last != nil {
				last.After = cur
				if cur.IsOutput() && last.IsShell() {
					last.Output = cur
				}
			}
			marker, last = "", nil
			continue
		case trimmed == "":
			continue
		case markerRe.MatchString(trimmed):
			marker = markerRe.FindStringSubmatch(trimmed)[1]
			continue
		}
		marker, last = "", nil
		if m := headingRe.FindStringSubmatch(line); m != nil {
			heading = m[2]
			anchor = Slug(heading)
			if k := seen[anchor]; k > 0 {
				seen[anchor]++
				anchor = fmt.Sprintf("%s-%d", anchor, k)
			} else {
				seen[anchor] = 1
			}
			p.Anchors[anchor] = true
			p.Headings = append(p.Headings, Heading{Line: n, Level: len(m[1]), Text: heading, Anchor: anchor})
			continue
		}
		for _, m := range linkRe.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			p.Links = append(p.Links, Link{Line: n, Target: m[1]})
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a fence is never closed", rel, cur.Line)
	}
	// Explicit anchors (<a id="...">, <a name="...">) count too.
	for _, m := range regexp.MustCompile(`<a (?:id|name)="([^"]+)"`).FindAllStringSubmatch(string(data), -1) {
		p.Anchors[m[1]] = true
	}
	return p, sc.Err()
}

// Root is the repository root, found from the working directory upwards.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Pages parses README.md and every docs/**/*.md, keyed by path.
func Pages(root string) (map[string]*Page, error) {
	rels := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			rels = append(rels, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(rels[1:])
	pages := map[string]*Page{}
	for _, rel := range rels {
		p, err := ParsePage(root, rel)
		if err != nil {
			return nil, err
		}
		pages[p.Path] = p
	}
	return pages, nil
}

// SortedPaths lists the pages' paths, README.md first.
func SortedPaths(pages map[string]*Page) []string {
	var out []string
	for k := range pages {
		if k != "README.md" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return append([]string{"README.md"}, out...)
}
