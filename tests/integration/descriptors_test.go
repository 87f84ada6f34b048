package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// fdLimitedReplicad writes a wrapper that starts replicad with
// RLIMIT_NOFILE at limit, soft and hard (the Go runtime raises the soft
// limit to the hard one, no further), and returns its path.
func fdLimitedReplicad(t *testing.T, limit int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replicad-nofile")
	script := fmt.Sprintf("#!/bin/sh\nulimit -n %d || exit 97\nexec %q \"$@\"\n", limit, bins.Replicad)
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// openLogFiles counts the log segment and index files process pid holds open.
func openLogFiles(t *testing.T, pid int) int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if err == nil && (strings.HasSuffix(target, ".log") || strings.HasSuffix(target, ".index")) {
			n++
		}
	}
	return n
}

// TestMorePartitionsThanDescriptors ensures a broker hosts more logs than it
// has file descriptors (issue 20): with RLIMIT_NOFILE at 1,024, one
// LeaderAndIsr creating 1,100 partitions used to answer 88 of them
// STORAGE_ERROR. The file cache (--max-open-files, by default half the
// limit) closes idle logs' files instead: every partition is created,
// takes a record and gives it back, before and after a restart, and the
// broker never holds more log files open than the cache's capacity.
func TestMorePartitionsThanDescriptors(t *testing.T) {
	const limit, partitions = 1024, 1100
	bin := fdLimitedReplicad(t, limit)
	dir := t.TempDir()
	start := func() (*testutil.Broker, *client) {
		b := testutil.StartBroker(t, bin, testutil.BrokerOptions{ID: 1, LogDirs: []string{dir}, Args: []string{"--log-flush", "os"}})
		return b, newClient(t, b.Dial(t))
	}
	b, c := start()
	states := make([]*replicadv1.PartitionState, partitions)
	for p := range states {
		states[p] = leaderState("many", int32(p), 1, 0)
	}
	resp, err := c.rm.LeaderAndIsr(ctx(t), &replicadv1.LeaderAndIsrRequest{ControllerId: 0, ControllerEpoch: 1, PartitionStates: states})
	if err != nil {
		t.Fatalf("LeaderAndIsr: %v", err)
	}
	codes := map[replicadv1.ErrorCode]int{}
	for _, pe := range resp.GetPartitionErrors() {
		codes[pe.GetErrorCode()]++
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || codes[replicadv1.ErrorCode_ERROR_CODE_NONE] != partitions {
		t.Fatalf("LeaderAndIsr of %d partitions under %d descriptors: %v, partition codes %v; want NONE for all",
			partitions, limit, resp.GetErrorCode(), codes)
	}
	for p := range partitions {
		c.produce("many", int32(p), 1, fmt.Sprintf("record-%d", p))
	}
	// check reads every partition back: its one record, once its HW
	// covers it (a sole replica's HW reaches its LEO once it leads).
	check := func(c *client) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, func() error {
			for p := range partitions {
				resp, err := c.log.Consume(ctx(t), &replicadv1.ConsumeRequest{Topic: "many", Partition: int32(p)})
				if err != nil {
					return err
				}
				recs := resp.GetRecords()
				if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || len(recs) != 1 || string(recs[0].GetValue()) != fmt.Sprintf("record-%d", p) {
					return fmt.Errorf("partition %d: %v, records %v", p, resp.GetErrorCode(), recs)
				}
			}
			return nil
		})
	}
	check(c)
	if n := openLogFiles(t, b.Pid()); n > limit/2 {
		t.Fatalf("%d log files open, more than the cache's %d", n, limit/2)
	}
	if code := b.Terminate(60 * time.Second); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, b.Stderr())
	}
	b, c = start()
	// After a restart a standalone broker leads again once told.
	for p := range states {
		states[p].IsNew, states[p].LeaderEpoch = false, 1
	}
	c.becomeLeader(2, states...)
	check(c)
	if n := openLogFiles(t, b.Pid()); n > limit/2 {
		t.Fatalf("%d log files open after the restart, more than the cache's %d", n, limit/2)
	}
}
