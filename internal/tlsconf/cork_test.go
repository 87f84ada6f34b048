package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"testing"
	"time"
)

// corkedPair is a TLS connection over a corkConn (the server's side) and a
// plain TLS client, over an in-memory pipe: a write blocks until the other
// side reads.
func corkedPair(t *testing.T) (*corkedConn, *tls.Conn) {
	t.Helper()
	ca, err := NewCA("test CA", time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := ca.Issue(LoopbackLeaf(BrokerPrincipal(1), time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca.Cert)
	a, b := net.Pipe()
	cork := &corkConn{Conn: a}
	server := tls.Server(cork, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	client := tls.Client(b, &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: tls.VersionTLS13})
	errc := make(chan error, 1)
	go func() { errc <- server.Handshake() }()
	if err := client.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	return &corkedConn{Conn: server, cork: cork}, client
}

// The records of one write arrive whole and in order.
func TestCorkedConnDeliversWrites(t *testing.T) {
	c, peer := corkedPair(t)
	msg := bytes.Repeat([]byte("0123456789abcdef"), 20_000) // 320 KB: 20 records
	go func() {
		if _, err := c.Write(msg); err != nil {
			t.Error(err)
		}
		if _, err := c.Write([]byte("tail")); err != nil {
			t.Error(err)
		}
	}()
	got := make([]byte, len(msg)+4)
	if _, err := io.ReadFull(peer, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(msg)], msg) || string(got[len(msg):]) != "tail" {
		t.Fatal("the bytes read are not the bytes written")
	}
}

// Closing a connection whose write is blocked (the peer stopped reading)
// breaks the write at once, as crypto/tls does, instead of queuing a
// close_notify behind it for crypto/tls's 5 s.
func TestCorkedConnCloseBreaksABlockedFlush(t *testing.T) {
	c, _ := corkedPair(t) // the peer never reads
	written := make(chan error, 1)
	go func() {
		_, err := c.Write(make([]byte, 100_000))
		written <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !c.cork.flushing.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the write never blocked in its flush")
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	_ = c.Close()
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Close took %v with a flush blocked", took)
	}
	select {
	case err := <-written:
		if err == nil {
			t.Fatal("the blocked write reported success")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked write did not return after Close")
	}
}
