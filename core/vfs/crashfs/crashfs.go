package crashfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replicad/replicad/core/vfs"
)

// PageSize is the unit in which unsynced file data survives a cut or not;
// SectorSize the unit in which a page tears.
const (
	PageSize   = 4096
	SectorSize = 512
)

// ErrPowerCut is what every operation returns once the power was cut.
var ErrPowerCut = errors.New("crashfs: power cut")

// OpKind names an operation, as the fault hook and the trace see it.
type OpKind int

const (
	OpOpen     OpKind = iota // FS.OpenFile
	OpRead                   // File.ReadAt, FS.ReadFile
	OpWrite                  // File.WriteAt, File.Write
	OpSync                   // File.Sync
	OpTruncate               // File.Truncate; O_TRUNC is part of OpOpen
	OpStat                   // File.Stat
	OpClose                  // File.Close
	OpRename                 // FS.Rename
	OpRemove                 // FS.Remove, FS.RemoveAll
	OpMkdir                  // FS.Mkdir, FS.MkdirAll
	OpReadDir                // FS.ReadDir
	OpSyncDir                // FS.SyncDir
	OpSyncFS                 // FS.SyncFS
)

var opNames = [...]string{"open", "read", "write", "sync", "truncate", "stat", "close", "rename", "remove", "mkdir", "readdir", "syncdir", "syncfs"}

func (k OpKind) String() string {
	if k < 0 || int(k) >= len(opNames) {
		return fmt.Sprintf("op(%d)", int(k))
	}
	return opNames[k]
}

// Op is one operation on the file system.
type Op struct {
	Kind OpKind
	// Path is the file or directory operated on: the name a file was
	// opened with for the operations of an open file, the old name of a
	// rename.
	Path string
	// NewPath is a rename's new name.
	NewPath string
	// Offset is where a read or write starts (-1 for Write, which writes
	// at the file's offset), or a truncation's size.
	Offset int64
	// Len is the number of bytes of a read or write (-1 for ReadFile).
	Len int
	// Flag is OpenFile's flag.
	Flag int
}

func (op Op) String() string {
	switch op.Kind {
	case OpRename:
		return fmt.Sprintf("rename %s -> %s", op.Path, op.NewPath)
	case OpRead, OpWrite:
		return fmt.Sprintf("%s %s @%d+%d", op.Kind, op.Path, op.Offset, op.Len)
	case OpTruncate:
		return fmt.Sprintf("truncate %s to %d", op.Path, op.Offset)
	case OpOpen:
		return fmt.Sprintf("open %s %s", op.Path, flagString(op.Flag))
	}
	return op.Kind.String() + " " + op.Path
}

func flagString(flag int) string {
	var s []string
	switch flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR) {
	case os.O_WRONLY:
		s = append(s, "w")
	case os.O_RDWR:
		s = append(s, "rw")
	default:
		s = append(s, "r")
	}
	for _, f := range []struct {
		bit  int
		name string
	}{{os.O_CREATE, "create"}, {os.O_EXCL, "excl"}, {os.O_TRUNC, "trunc"}, {os.O_APPEND, "append"}} {
		if flag&f.bit != 0 {
			s = append(s, f.name)
		}
	}
	return strings.Join(s, "|")
}

// Event is an operation as it ran, for Trace.
type Event struct {
	Seq int64 // 1 for the first operation
	Op  Op
	Err error // nil when it succeeded
}

func (e Event) String() string {
	if e.Err != nil {
		return fmt.Sprintf("%5d %s: %v", e.Seq, e.Op, e.Err)
	}
	return fmt.Sprintf("%5d %s", e.Seq, e.Op)
}

// FS is the crash-simulating file system. It is safe for concurrent use.
type FS struct {
	fault atomic.Pointer[func(Op) error]

	mu     sync.Mutex
	root   *inode
	nextID uint64
	ops    int64 // operations counted so far
	trace  []Event
	// The armed cut (CutPowerAfter): just before operation cutAt, if > 0.
	cutAt  int64
	cutRng *rand.Rand
	// dead: the power was cut; after is the FS the cut left.
	dead  bool
	after *FS
	// report, on an FS that a cut returned, says what the cut kept.
	report []string
}

var _ vfs.FS = (*FS)(nil)

// New returns an empty file system: a root directory, durable.
func New() *FS {
	f := &FS{}
	f.root = f.newInode(true)
	return f
}

// inode is a file or a directory. Every field is guarded by FS.mu.
type inode struct {
	id  uint64
	dir bool

	// A file: data is what reads see; durable is what the disk holds for
	// sure (content and size); dirty[p] says page p was changed since the
	// last fsync, so a cut may keep it old, new or torn.
	data    []byte
	durable []byte
	dirty   []bool

	// A directory: entries are the current names, durableEntries those a
	// cut keeps for sure, pending the changes since the last SyncDir,
	// oldest first.
	entries        map[string]*inode
	durableEntries map[string]*inode
	pending        []entryChange
}

// entryChange is one change to a directory's entries, kept whole or not at
// all by a cut: a name set to an inode, or removed (ino nil); a rename sets
// two names.
type entryChange struct {
	names []string
	inos  []*inode
	desc  string
}

func (f *FS) newInode(dir bool) *inode {
	f.nextID++
	n := &inode{id: f.nextID, dir: dir}
	if dir {
		n.entries = make(map[string]*inode)
		n.durableEntries = make(map[string]*inode)
	}
	return n
}

// SetFault installs hook (nil removes it). It is called before every
// operation, outside the file system's lock and possibly from several
// goroutines at once; an operation for which it returns an error fails with
// that error and changes nothing, but for Sync, which drops the file's dirty
// pages as a failed fsync does. The hook may call CutPower.
func (f *FS) SetFault(hook func(Op) error) {
	if hook == nil {
		f.fault.Store(nil)
		return
	}
	f.fault.Store(&hook)
}

// Ops is the number of operations run so far (failed ones included).
func (f *FS) Ops() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ops
}

// Trace returns every operation run so far, in the order they ran.
func (f *FS) Trace() []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.trace)
}

// Report says, on an FS returned by a cut, what the cut kept of each file
// and directory that had something not durable; nil on any other FS.
func (f *FS) Report() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.report)
}

// CutPower loses power now and returns the file system as it is when the
// power comes back, chosen with rng. From now on every operation of f fails
// with ErrPowerCut. Cutting an FS whose power is already cut returns what
// the first cut returned.
func (f *FS) CutPower(rng *rand.Rand) *FS {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.dead {
		f.cutLocked(rng)
	}
	return f.after
}

// CutPowerAfter arms a cut just before the n+1-th operation from now: n
// more operations run, the next one and every one after it fail with
// ErrPowerCut. The cut happens inside the lock that orders the operations,
// so it can fall between any two of them. PowerCut returns its result.
func (f *FS) CutPowerAfter(n int64, rng *rand.Rand) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cutAt, f.cutRng = f.ops+n+1, rng
}

// PowerCut returns the file system a cut left, or nil while the power is on.
func (f *FS) PowerCut() *FS {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.after
}

// begin starts an operation: it calls the fault hook, takes the lock and
// counts the operation, cutting the power first if the armed cut is due. It
// returns with f.mu held; err is the hook's error, or ErrPowerCut.
func (f *FS) begin(op Op) (seq int64, err error) {
	if hook := f.fault.Load(); hook != nil {
		err = (*hook)(op)
	}
	f.mu.Lock()
	f.ops++
	seq = f.ops
	if !f.dead && f.cutAt > 0 && seq >= f.cutAt {
		f.cutLocked(f.cutRng)
	}
	if f.dead {
		err = ErrPowerCut
	}
	return seq, err
}

// end records the operation's outcome and releases the lock. err is
// wrapped in an *fs.PathError unless it already is one.
func (f *FS) end(seq int64, op Op, err error) error {
	if err != nil {
		var pe *fs.PathError
		var le *os.LinkError
		if !errors.As(err, &pe) && !errors.As(err, &le) {
			if op.Kind == OpRename {
				err = &os.LinkError{Op: "rename", Old: op.Path, New: op.NewPath, Err: err}
			} else {
				err = &fs.PathError{Op: op.Kind.String(), Path: op.Path, Err: err}
			}
		}
	}
	f.trace = append(f.trace, Event{Seq: seq, Op: op, Err: err})
	f.mu.Unlock()
	return err
}

// run is begin, fn under the lock unless begin failed, and end.
func (f *FS) run(op Op, fn func() error) error {
	seq, err := f.begin(op)
	if err == nil {
		err = fn()
	}
	return f.end(seq, op, err)
}

// split cleans name into the path elements below the root.
func split(name string) []string {
	p := path.Clean("/" + name)
	if p == "/" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// lookup returns the inode at name, or nil.
func (f *FS) lookup(name string) (*inode, error) {
	n := f.root
	for _, e := range split(name) {
		if !n.dir {
			return nil, syscall.ENOTDIR
		}
		n = n.entries[e]
		if n == nil {
			return nil, fs.ErrNotExist
		}
	}
	return n, nil
}

// parent returns the directory holding name and name's last element.
func (f *FS) parent(name string) (*inode, string, error) {
	elems := split(name)
	if len(elems) == 0 {
		return nil, "", fs.ErrInvalid // the root has no parent
	}
	dir, err := f.lookup(strings.Join(elems[:len(elems)-1], "/"))
	if err != nil {
		return nil, "", err
	}
	if !dir.dir {
		return nil, "", syscall.ENOTDIR
	}
	return dir, elems[len(elems)-1], nil
}

// change applies c to dir's entries and records it as pending.
func (dir *inode) change(c entryChange) {
	for i, name := range c.names {
		if c.inos[i] == nil {
			delete(dir.entries, name)
		} else {
			dir.entries[name] = c.inos[i]
		}
	}
	dir.pending = append(dir.pending, c)
}

func (dir *inode) syncEntries() {
	dir.durableEntries = cloneEntries(dir.entries)
	dir.pending = nil
}

func cloneEntries(m map[string]*inode) map[string]*inode {
	out := make(map[string]*inode, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// OpenFile opens name. Supported flags: O_RDONLY, O_WRONLY, O_RDWR,
// O_CREATE, O_EXCL, O_TRUNC, O_APPEND; directories cannot be opened.
func (f *FS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	op := Op{Kind: OpOpen, Path: name, Flag: flag}
	var h *file
	err := f.run(op, func() error {
		dir, base, err := f.parent(name)
		if err != nil {
			return err
		}
		n := dir.entries[base]
		switch {
		case n == nil && flag&os.O_CREATE == 0:
			return fs.ErrNotExist
		case n == nil:
			n = f.newInode(false)
			dir.change(entryChange{names: []string{base}, inos: []*inode{n}, desc: "+" + base})
		case flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
			return fs.ErrExist
		case n.dir:
			return syscall.EISDIR
		}
		if flag&os.O_TRUNC != 0 && flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			n.truncate(0)
		}
		h = &file{fs: f, ino: n, name: name, flag: flag}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// ReadFile returns name's content.
func (f *FS) ReadFile(name string) ([]byte, error) {
	var data []byte
	err := f.run(Op{Kind: OpRead, Path: name, Len: -1}, func() error {
		n, err := f.lookup(name)
		if err != nil {
			return err
		}
		if n.dir {
			return syscall.EISDIR
		}
		data = slices.Clone(n.data)
		if data == nil {
			data = []byte{}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return data, nil
}

// Mkdir creates the directory name.
func (f *FS) Mkdir(name string, perm fs.FileMode) error {
	return f.run(Op{Kind: OpMkdir, Path: name}, func() error { return f.mkdirLocked(name) })
}

func (f *FS) mkdirLocked(name string) error {
	dir, base, err := f.parent(name)
	if err != nil {
		if errors.Is(err, fs.ErrInvalid) {
			return fs.ErrExist // the root
		}
		return err
	}
	if dir.entries[base] != nil {
		return fs.ErrExist
	}
	dir.change(entryChange{names: []string{base}, inos: []*inode{f.newInode(true)}, desc: "+" + base + "/"})
	return nil
}

// MkdirAll creates name and every missing parent: one operation.
func (f *FS) MkdirAll(name string, perm fs.FileMode) error {
	return f.run(Op{Kind: OpMkdir, Path: name}, func() error {
		elems := split(name)
		for i := range elems {
			p := strings.Join(elems[:i+1], "/")
			n, err := f.lookup(p)
			if err == nil {
				if !n.dir {
					return syscall.ENOTDIR
				}
				continue
			}
			if err := f.mkdirLocked(p); err != nil {
				return err
			}
		}
		return nil
	})
}

// Remove removes a file or an empty directory.
func (f *FS) Remove(name string) error {
	return f.run(Op{Kind: OpRemove, Path: name}, func() error {
		dir, base, err := f.parent(name)
		if err != nil {
			return err
		}
		n := dir.entries[base]
		switch {
		case n == nil:
			return fs.ErrNotExist
		case n.dir && len(n.entries) > 0:
			return syscall.ENOTEMPTY
		}
		dir.change(entryChange{names: []string{base}, inos: []*inode{nil}, desc: "-" + base})
		return nil
	})
}

// RemoveAll removes name and everything below it, children first: one
// operation. A missing name is no error.
func (f *FS) RemoveAll(name string) error {
	return f.run(Op{Kind: OpRemove, Path: name}, func() error {
		dir, base, err := f.parent(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		n := dir.entries[base]
		if n == nil {
			return nil
		}
		n.removeChildren()
		dir.change(entryChange{names: []string{base}, inos: []*inode{nil}, desc: "-" + base})
		return nil
	})
}

func (dir *inode) removeChildren() {
	if !dir.dir {
		return
	}
	for _, name := range sortedNames(dir.entries) {
		dir.entries[name].removeChildren()
		dir.change(entryChange{names: []string{name}, inos: []*inode{nil}, desc: "-" + name})
	}
}

// Rename renames oldpath to newpath within one directory, replacing a file
// or an empty directory there.
func (f *FS) Rename(oldpath, newpath string) error {
	return f.run(Op{Kind: OpRename, Path: oldpath, NewPath: newpath}, func() error {
		odir, obase, err := f.parent(oldpath)
		if err != nil {
			return err
		}
		ndir, nbase, err := f.parent(newpath)
		if err != nil {
			return err
		}
		n := odir.entries[obase]
		if n == nil {
			return fs.ErrNotExist
		}
		if odir != ndir {
			return syscall.EXDEV
		}
		if obase == nbase {
			return nil
		}
		if old := ndir.entries[nbase]; old != nil {
			switch {
			case old.dir && !n.dir:
				return syscall.EISDIR
			case !old.dir && n.dir:
				return syscall.ENOTDIR
			case old.dir && len(old.entries) > 0:
				return syscall.ENOTEMPTY
			}
		}
		odir.change(entryChange{names: []string{obase, nbase}, inos: []*inode{nil, n}, desc: obase + "->" + nbase})
		return nil
	})
}

// ReadDir lists the directory name, sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	var out []fs.DirEntry
	err := f.run(Op{Kind: OpReadDir, Path: name}, func() error {
		n, err := f.lookup(name)
		if err != nil {
			return err
		}
		if !n.dir {
			return syscall.ENOTDIR
		}
		for _, e := range sortedNames(n.entries) {
			out = append(out, fs.FileInfoToDirEntry(n.entries[e].info(e)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// SyncDir makes dir's current entries durable.
func (f *FS) SyncDir(dir string) error {
	return f.run(Op{Kind: OpSyncDir, Path: dir}, func() error {
		n, err := f.lookup(dir)
		if err != nil {
			return err
		}
		if !n.dir {
			return syscall.ENOTDIR
		}
		n.syncEntries()
		return nil
	})
}

// SyncFS makes everything durable: every directory's entries and every
// file's dirty pages and size (one file system holds every path).
func (f *FS) SyncFS(dir string) error {
	return f.run(Op{Kind: OpSyncFS, Path: dir}, func() error {
		if _, err := f.lookup(dir); err != nil {
			return err
		}
		f.root.syncTree()
		return nil
	})
}

func (n *inode) syncTree() {
	if !n.dir {
		n.syncData()
		return
	}
	n.syncEntries()
	for _, c := range n.entries {
		c.syncTree()
	}
}

func sortedNames(m map[string]*inode) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	slices.Sort(names)
	return names
}

func (n *inode) info(name string) fs.FileInfo {
	fi := fileInfo{name: name, size: int64(len(n.data)), mode: 0o644}
	if n.dir {
		fi.mode = fs.ModeDir | 0o755
	}
	return fi
}

type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (fi fileInfo) Name() string       { return fi.name }
func (fi fileInfo) Size() int64        { return fi.size }
func (fi fileInfo) Mode() fs.FileMode  { return fi.mode }
func (fi fileInfo) ModTime() time.Time { return time.Time{} }
func (fi fileInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi fileInfo) Sys() any           { return nil }

// markDirty marks the pages holding [from, to) dirty.
func (n *inode) markDirty(from, to int64) {
	if to <= from {
		return
	}
	last := (to - 1) / PageSize
	for int64(len(n.dirty)) <= last {
		n.dirty = append(n.dirty, false)
	}
	for p := from / PageSize; p <= last; p++ {
		n.dirty[p] = true
	}
}

// resize sets the file's current size; new bytes are zeros.
func (n *inode) resize(size int64) {
	if size <= int64(len(n.data)) {
		n.data = n.data[:size]
		return
	}
	n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
}

func (n *inode) writeAt(p []byte, off int64) {
	if end := off + int64(len(p)); end > int64(len(n.data)) {
		n.resize(end)
	}
	copy(n.data[off:], p)
	n.markDirty(off, off+int64(len(p)))
}

// truncate changes the size: the pages between the old and the new end
// (the partial page included) differ from the disk until the next fsync.
func (n *inode) truncate(size int64) {
	old := int64(len(n.data))
	n.resize(size)
	n.markDirty(min(old, size), max(old, size))
}

// syncData writes the dirty pages and the size to the disk. Pages not
// dirty keep what the disk has, zeros past its old end: after a failed
// fsync that is not what reads see.
func (n *inode) syncData() {
	size := len(n.data)
	if len(n.durable) > size {
		n.durable = slices.Clone(n.durable[:size])
	} else if len(n.durable) < size {
		n.durable = append(n.durable, make([]byte, size-len(n.durable))...)
	}
	for p, d := range n.dirty {
		if d {
			from := p * PageSize
			copy(n.durable[min(from, size):min(from+PageSize, size)], n.data[min(from, size):])
		}
	}
	n.dirty = n.dirty[:0]
}

// dropDirty is a failed fsync: the dirty pages are marked clean unwritten.
func (n *inode) dropDirty() { n.dirty = n.dirty[:0] }

// file is an open file.
type file struct {
	fs     *FS
	ino    *inode
	name   string
	flag   int
	off    int64 // for Write
	closed bool  // under fs.mu
}

var _ vfs.File = (*file)(nil)

func (h *file) Name() string { return h.name }

// usable says why h cannot read or write at off.
func (h *file) usable(write bool, off int64) error {
	acc := h.flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	switch {
	case h.closed:
		return fs.ErrClosed
	case write && acc == os.O_RDONLY || !write && acc == os.O_WRONLY:
		return syscall.EBADF
	case off < 0:
		return fs.ErrInvalid
	}
	return nil
}

func (h *file) ReadAt(p []byte, off int64) (int, error) {
	var n int
	op := Op{Kind: OpRead, Path: h.name, Offset: off, Len: len(p)}
	err := h.fs.run(op, func() error {
		if err := h.usable(false, off); err != nil {
			return err
		}
		if off < int64(len(h.ino.data)) {
			n = copy(p, h.ino.data[off:])
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (h *file) WriteAt(p []byte, off int64) (int, error) {
	op := Op{Kind: OpWrite, Path: h.name, Offset: off, Len: len(p)}
	err := h.fs.run(op, func() error {
		if err := h.usable(true, off); err != nil {
			return err
		}
		h.ino.writeAt(p, off)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *file) Write(p []byte) (int, error) {
	// The offset is read under the lock, with the write.
	op := Op{Kind: OpWrite, Path: h.name, Offset: -1, Len: len(p)}
	err := h.fs.run(op, func() error {
		if err := h.usable(true, 0); err != nil {
			return err
		}
		if h.flag&os.O_APPEND != 0 {
			h.off = int64(len(h.ino.data))
		}
		h.ino.writeAt(p, h.off)
		h.off += int64(len(p))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

func (h *file) Sync() error {
	seq, err := h.fs.begin(Op{Kind: OpSync, Path: h.name})
	switch {
	case h.fs.dead: // err is ErrPowerCut
	case h.closed:
		err = fs.ErrClosed
	case err != nil:
		// An injected fsync failure, as Linux's: the dirty pages are
		// marked clean without being written.
		h.ino.dropDirty()
	default:
		h.ino.syncData()
	}
	return h.fs.end(seq, Op{Kind: OpSync, Path: h.name}, err)
}

func (h *file) Truncate(size int64) error {
	return h.fs.run(Op{Kind: OpTruncate, Path: h.name, Offset: size}, func() error {
		if err := h.usable(true, size); err != nil {
			return err
		}
		h.ino.truncate(size)
		return nil
	})
}

func (h *file) Stat() (fs.FileInfo, error) {
	var fi fs.FileInfo
	err := h.fs.run(Op{Kind: OpStat, Path: h.name}, func() error {
		if h.closed {
			return fs.ErrClosed
		}
		fi = h.ino.info(path.Base(h.name))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return fi, nil
}

func (h *file) Close() error {
	return h.fs.run(Op{Kind: OpClose, Path: h.name}, func() error {
		if h.closed {
			return fs.ErrClosed
		}
		h.closed = true
		return nil
	})
}
