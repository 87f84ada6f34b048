package testutil

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// StartEtcd runs a real single-node etcd inside the test process (embed) on
// loopback ports and returns its client endpoints. It stops at cleanup.
func StartEtcd(t testing.TB) []string {
	t.Helper()
	var err error
	// A port found free may be taken again before etcd binds it: retry.
	for range 3 {
		var e *embed.Etcd
		client, peer := FreeURL(t), FreeURL(t)
		cfg := embed.NewConfig()
		cfg.Name = "replicad-test"
		cfg.Dir = t.TempDir()
		// Even at level error, etcd logs its listeners' "server closed" at
		// every shutdown: keep its log in a file, shown if it fails.
		cfg.LogLevel = "error"
		logFile := filepath.Join(t.TempDir(), "etcd.log")
		cfg.LogOutputs = []string{logFile}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{client}, []url.URL{client}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peer}, []url.URL{peer}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		e, err = embed.StartEtcd(cfg)
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, readEtcdLog(logFile))
			continue
		}
		t.Cleanup(e.Close)
		deadline := time.NewTimer(30 * time.Second)
		defer deadline.Stop()
		select {
		case <-e.Server.ReadyNotify():
			return []string{client.String()}
		case err := <-e.Err():
			t.Fatalf("etcd failed while starting: %v\n%s", err, readEtcdLog(logFile))
		case <-deadline.C:
			t.Fatalf("etcd not ready within 30s\n%s", readEtcdLog(logFile))
		}
	}
	t.Fatalf("start etcd: %v", err)
	return nil
}

func readEtcdLog(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no etcd log: %v)", err)
	}
	return "etcd log:\n" + string(data)
}

// FreeURL returns an http URL on a 127.0.0.1 port that was free a moment
// ago: embed cannot listen on port 0 and report the port it got.
func FreeURL(t testing.TB) url.URL {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}
