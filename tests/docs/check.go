package docs

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
)

// resolve turns a link on page from into a repository path and an anchor.
func resolve(from, target string) (string, string) {
	file, anchor, _ := strings.Cut(target, "#")
	if file == "" {
		return from, anchor
	}
	return path.Clean(path.Join(path.Dir(from), file)), anchor
}

var schemeRe = regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`)

func external(target string) bool { return schemeRe.MatchString(target) }

// CheckLinks returns a problem for every relative link of pages whose file
// does not exist under root (unless allowed lists it) or whose #anchor is no
// heading of the page it names.
func CheckLinks(root string, pages map[string]*Page, allowed map[string]bool) []string {
	var errs []string
	for _, name := range SortedPaths(pages) {
		p := pages[name]
		for _, l := range p.Links {
			if external(l.Target) {
				continue
			}
			file, anchor := resolve(p.Path, l.Target)
			if strings.HasPrefix(file, "../") {
				errs = append(errs, fmt.Sprintf("%s:%d: link %q leaves the repository", p.Path, l.Line, l.Target))
				continue
			}
			if _, err := os.Stat(filepath.Join(root, file)); err != nil {
				if !allowed[file] {
					errs = append(errs, fmt.Sprintf("%s:%d: link %q: %s does not exist", p.Path, l.Line, l.Target, file))
				}
				continue
			}
			if anchor == "" || !strings.HasSuffix(file, ".md") {
				continue
			}
			target, ok := pages[file]
			if !ok {
				var err error
				if target, err = ParsePage(root, file); err != nil {
					errs = append(errs, fmt.Sprintf("%s:%d: %v", p.Path, l.Line, err))
					continue
				}
			}
			if !target.Anchors[anchor] {
				errs = append(errs, fmt.Sprintf("%s:%d: link %q: %s has no heading with anchor #%s", p.Path, l.Line, l.Target, file, anchor))
			}
		}
	}
	return errs
}

// CheckReachable returns every page that no chain of links from README.md reaches.
func CheckReachable(pages map[string]*Page) []string {
	reached := map[string]bool{"README.md": true}
	queue := []string{"README.md"}
	for len(queue) > 0 {
		p, ok := pages[queue[0]]
		queue = queue[1:]
		if !ok {
			continue
		}
		for _, l := range p.Links {
			if external(l.Target) {
				continue
			}
			file, _ := resolve(p.Path, l.Target)
			if _, ok := pages[file]; ok && !reached[file] {
				reached[file] = true
				queue = append(queue, file)
			}
		}
	}
	var errs []string
	for _, name := range SortedPaths(pages) {
		if !reached[name] {
			errs = append(errs, name+" is not reachable by links from README.md")
		}
	}
	return errs
}

// BlockReport is what CheckBlocks found.
type BlockReport struct {
	Errors []string
	Ran    int            // shell blocks a path runs
	Marked map[string]int // shell blocks marked not run, by reason
}

// CheckBlocks checks the conventions of doc.go: every shell block is in a
// path or marked not run with a reason; markers are known; a fence right
// after a run shell block is marked output; no console transcripts; every
// section a path names exists and has a block to run.
func CheckBlocks(pages map[string]*Page, paths []Path) BlockReport {
	r := BlockReport{Marked: map[string]int{}}
	fail := func(format string, args ...any) { r.Errors = append(r.Errors, fmt.Sprintf(format, args...)) }
	pathed := map[string]bool{}
	for _, p := range paths {
		for _, s := range p.Sections {
			pathed[s] = true
		}
	}
	runs := map[string]int{}
	for _, name := range SortedPaths(pages) {
		owned := map[*Block]bool{}
		for _, b := range pages[name].Blocks {
			if b.Output != nil {
				owned[b.Output] = true
			}
		}
		for _, b := range pages[name].Blocks {
			if b.IsOutput() && !owned[b] {
				fail("%s: an output block that follows no shell block", b.Where())
			}
			if b.IsOutput() && b.IsShell() {
				fail("%s: an output block must not be a shell block", b.Where())
			}
			if b.Lang == "console" {
				// A transcript of "$ command" and output cannot be run or
				// checked: commands go in sh blocks, output in a marked fence.
				fail("%s: a console transcript: write the commands as ```sh and the output as a <!-- docs-test: output --> fence after it", b.Where())
			}
			if !b.IsShell() {
				continue
			}
			reason, notRun := b.NotRun()
			switch {
			case notRun && reason == "":
				fail("%s: marked not run without a reason", b.Where())
				continue
			case notRun:
				r.Marked[reason]++
				continue
			case !pathed[b.Page+"#"+b.Anchor]:
				fail("%s: a shell block no path runs (tests/docs/paths.go) and not marked <!-- docs-test: not run: REASON -->", b.Where())
				continue
			case b.Marker != "" && !b.Fails():
				fail("%s: unknown marker %q on a shell block", b.Where(), b.Marker)
			}
			r.Ran++
			runs[b.Page+"#"+b.Anchor]++
			if b.After != nil && !b.After.IsOutput() && !b.After.IsShell() {
				fail("%s: the fence after this run shell block (line %d) looks like output: mark it <!-- docs-test: output -->", b.Where(), b.After.Line)
			}
		}
	}
	for _, p := range paths {
		for _, s := range p.Sections {
			page, anchor, _ := strings.Cut(s, "#")
			pg, ok := pages[page]
			switch {
			case !ok:
				fail("path %s: no page %s", p.Name, page)
			case !pg.Anchors[anchor]:
				fail("path %s: %s has no section #%s", p.Name, page, anchor)
			case runs[s] == 0:
				fail("path %s: section %s has no shell block to run", p.Name, s)
			}
		}
	}
	return r
}
