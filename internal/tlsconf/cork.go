package tlsconf

import (
	"net"
	"sync"
	"sync/atomic"
)

// crypto/tls writes each record (at most 16 KiB of data) to the connection
// with a Write of its own, so each 256 KiB that gRPC writes at once took 16
// write syscalls, and syscalls were the largest part of what TLS cost an
// acks=all producer (README, "Performance"). corkConn sits under the TLS
// connection and gathers the records of one write of gRPC's, which
// corkedConn, above it, sends with a single syscall.

// corkConn is the connection under crypto/tls. While corked, its writes
// are gathered in a buffer that uncork writes out.
type corkConn struct {
	net.Conn
	mu     sync.Mutex
	corked int     // writers between cork and uncork
	buf    *[]byte // gathered records; nil when empty (idle connections hold none)
	// flushing is set while uncork writes: a Close then breaks the write
	// (see corkedConn.Close).
	flushing atomic.Bool
}

// corkBuffers hold gathered records between writes; one is about what gRPC
// writes at once (grpcx's 256 KiB write buffer) plus the records' overhead.
var corkBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 272<<10); return &b }}

// maxCorkBuffer is the largest buffer put back in corkBuffers.
const maxCorkBuffer = 1 << 20

func (c *corkConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.corked > 0 {
		if c.buf == nil {
			c.buf = corkBuffers.Get().(*[]byte)
		}
		*c.buf = append(*c.buf, b...)
		c.mu.Unlock()
		return len(b), nil
	}
	// Holding mu keeps this write after the gathered ones of a flush that
	// is under way.
	defer c.mu.Unlock()
	return c.Conn.Write(b)
}

func (c *corkConn) cork() {
	c.mu.Lock()
	c.corked++
	c.mu.Unlock()
}

// uncork ends one cork; the last one writes what was gathered.
func (c *corkConn) uncork() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.corked--
	if c.corked > 0 || c.buf == nil {
		return nil
	}
	c.flushing.Store(true)
	_, err := c.Conn.Write(*c.buf)
	c.flushing.Store(false)
	if cap(*c.buf) <= maxCorkBuffer {
		*c.buf = (*c.buf)[:0]
		corkBuffers.Put(c.buf)
	}
	c.buf = nil
	return err
}

// corkedConn is the TLS connection over a corkConn: each Write's records
// leave in one syscall.
type corkedConn struct {
	net.Conn // the TLS connection
	cork     *corkConn
}

// Close is crypto/tls's Close, which breaks a Write in flight by closing the
// connection under it instead of queuing a close_notify behind it (for up
// to 5 s, to a peer that stopped reading). Here the blocking part of a write
// is uncork's, after tls.Conn.Write returned: a flush under way is broken
// the same way.
func (c *corkedConn) Close() error {
	if c.cork.flushing.Load() {
		err := c.cork.Conn.Close()
		_ = c.Conn.Close() // its close_notify fails at once now
		return err
	}
	return c.Conn.Close()
}

func (c *corkedConn) Write(b []byte) (int, error) {
	c.cork.cork()
	n, err := c.Conn.Write(b)
	if uerr := c.cork.uncork(); err == nil && uerr != nil {
		// The records were encrypted but not sent: the connection is
		// broken, as a failed write leaves a TLS connection.
		return 0, uerr
	}
	return n, err
}
