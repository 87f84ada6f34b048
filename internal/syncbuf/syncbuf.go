package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer behind a mutex. The zero value is empty and
// ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// WriteLine appends line and a newline.
func (b *Buffer) WriteLine(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(line)
	b.buf.WriteByte('\n')
}

// From returns what was written from byte off on ("" when off is at or past
// the end): a poller reading new lines copies only them, not everything
// written so far.
func (b *Buffer) From(off int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if off >= b.buf.Len() {
		return ""
	}
	return string(b.buf.Bytes()[max(off, 0):])
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Take returns everything written since the last Take and empties the
// buffer.
func (b *Buffer) Take() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf.String()
	b.buf.Reset()
	return s
}
