package chaos

import (
	"os"
	"path/filepath"
	"testing"
)

// portTaken reads only the last run of a member's log: an etcd member
// that lost its listen port to another process is started again on fresh
// ports, one that failed otherwise is not (a CI run lost etcd-1's peer
// port to a parallel test package).
func TestPortTakenReadsTheLastRun(t *testing.T) {
	p := filepath.Join(t.TempDir(), "etcd-1.log")
	write := func(s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("=== t1 start etcdmember\nlisten tcp 127.0.0.1:1: bind: address already in use\n=== t2 exit status 1\n=== t3 start etcdmember\ncorrupt data dir\n=== t4 exit status 1\n")
	if portTaken(p) {
		t.Fatal("the last run failed otherwise, but portTaken says its port was taken")
	}
	write("=== t3 start etcdmember\nlisten tcp 127.0.0.1:1: bind: address already in use\n=== t4 exit status 1\n")
	if !portTaken(p) {
		t.Fatal("the last run lost its port, but portTaken says not")
	}
	if portTaken(filepath.Join(t.TempDir(), "missing.log")) {
		t.Fatal("no log: portTaken says the port was taken")
	}
}
