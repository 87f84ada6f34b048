package sdnotify

import (
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func read(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 4096)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	return string(buf[:n])
}

func TestNotifyPathSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notify")
	c := listen(t, path)
	t.Setenv("NOTIFY_SOCKET", path)
	sent, err := Notify(Ready + "\nSTATUS=serving")
	if err != nil || !sent {
		t.Fatalf("Notify: %v %v", sent, err)
	}
	if got := read(t, c); got != "READY=1\nSTATUS=serving" {
		t.Fatalf("datagram %q", got)
	}
}

func TestNotifyAbstractSocket(t *testing.T) {
	name := "@replicad-sdnotify-test-" + strings.ReplaceAll(t.Name(), "/", "-")
	c := listen(t, name)
	if sent, err := notify(name, Stopping); err != nil || !sent {
		t.Fatalf("notify: %v %v", sent, err)
	}
	if got := read(t, c); got != Stopping {
		t.Fatalf("datagram %q", got)
	}
}

func TestNotifyWithoutSocket(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	if sent, err := Notify(Ready); sent || err != nil {
		t.Fatalf("without NOTIFY_SOCKET: %v %v, want nothing sent and no error", sent, err)
	}
	if _, err := notify("relative/path", Ready); err == nil {
		t.Fatal("a relative NOTIFY_SOCKET was accepted")
	}
	if _, err := notify(filepath.Join(t.TempDir(), "nobody"), Ready); err == nil {
		t.Fatal("a socket nobody listens on gave no error")
	}
}
