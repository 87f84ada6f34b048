package crashfs

import (
	"fmt"
	"math/rand/v2"
	"path"
	"strings"
)

// cutLocked loses power: f dies, and f.after becomes what the disk holds
// when the power comes back. Runs under f.mu.
func (f *FS) cutLocked(rng *rand.Rand) {
	c := &cutter{rng: rng, to: New()}
	c.dir(f.root, c.to.root, "/")
	c.to.report = c.report
	f.dead, f.after, f.cutAt, f.cutRng = true, c.to, 0, nil
}

// cutter builds the file system a cut leaves. It walks the old tree in name
// order, so that its random choices depend on the seed alone.
type cutter struct {
	rng    *rand.Rand
	to     *FS
	report []string
}

// dir gives to the entries of from that survive: the durable ones and a
// random prefix of the pending changes, applied in order.
func (c *cutter) dir(from, to *inode, p string) {
	entries := cloneEntries(from.durableEntries)
	if n := len(from.pending); n > 0 {
		k := c.rng.IntN(n + 1)
		for _, ch := range from.pending[:k] {
			for i, name := range ch.names {
				if ch.inos[i] == nil {
					delete(entries, name)
				} else {
					entries[name] = ch.inos[i]
				}
			}
		}
		c.report = append(c.report, fmt.Sprintf("dir %s: kept %d of %d pending entry changes [%s], lost [%s]",
			p, k, n, describe(from.pending[:k]), describe(from.pending[k:])))
	}
	for _, name := range sortedNames(entries) {
		old := entries[name]
		n := c.to.newInode(old.dir)
		if old.dir {
			c.dir(old, n, path.Join(p, name))
		} else {
			n.data = c.file(old, path.Join(p, name))
			n.durable = append([]byte(nil), n.data...)
		}
		to.entries[name] = n
		to.durableEntries[name] = n
	}
}

func describe(changes []entryChange) string {
	s := make([]string, len(changes))
	for i, ch := range changes {
		s[i] = ch.desc
	}
	return strings.Join(s, " ")
}

// file returns the content of n after the cut: the durable or the current
// size, and each dirty page old, new or torn. Old bytes past the durable
// end are zeros.
func (c *cutter) file(n *inode, p string) []byte {
	size := len(n.durable)
	var notes []string
	if len(n.data) != len(n.durable) {
		if c.rng.IntN(2) == 1 {
			size = len(n.data)
		}
		notes = append(notes, fmt.Sprintf("size %d (durable %d, current %d)", size, len(n.durable), len(n.data)))
	}
	out := make([]byte, size)
	copy(out, n.durable)
	var dirty []int
	for pg, d := range n.dirty {
		if d && pg*PageSize < size {
			dirty = append(dirty, pg)
		}
	}
	if len(dirty) > 0 {
		// All old, all new, or each page on its own: the extremes are
		// where the bugs are, and page by page they would be rare.
		mode := c.rng.IntN(4)
		var pages []string
		for _, pg := range dirty {
			from, to := pg*PageSize, min((pg+1)*PageSize, size)
			outcome := mode
			if mode >= 2 {
				outcome = c.rng.IntN(3)
			}
			switch outcome {
			case 0:
				pages = append(pages, fmt.Sprintf("%d:old", pg))
			case 1:
				copyCurrent(out, n.data, from, to)
				pages = append(pages, fmt.Sprintf("%d:new", pg))
			default:
				var sectors strings.Builder
				for s := from; s < to; s += SectorSize {
					if c.rng.IntN(2) == 1 {
						copyCurrent(out, n.data, s, min(s+SectorSize, to))
						sectors.WriteByte('n')
					} else {
						sectors.WriteByte('o')
					}
				}
				pages = append(pages, fmt.Sprintf("%d:torn[%s]", pg, sectors.String()))
			}
		}
		notes = append(notes, "pages "+strings.Join(pages, " "))
	}
	if len(notes) > 0 {
		c.report = append(c.report, "file "+p+": "+strings.Join(notes, "; "))
	}
	return out
}

// copyCurrent puts the current bytes [from, to) into out, zeros past the
// current end (a truncated tail that was written back).
func copyCurrent(out, data []byte, from, to int) {
	end := min(to, max(from, len(data)))
	copy(out[from:end], data[from:end])
	clear(out[end:to])
}
