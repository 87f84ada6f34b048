package integration

import (
	"crypto/sha256"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// dirContents is every file under dir by relative path, as a hash of its
// content.
func dirContents(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	out := map[string][32]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = sha256.Sum256(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// brokerDescription is the controller's view of broker id.
func (c *ctlCluster) brokerDescription(id int32) (*replicadv1.BrokerDescription, error) {
	resp, err := c.cluster()
	if err != nil {
		return nil, err
	}
	for _, b := range resp.GetBrokers() {
		if b.GetId() == id {
			return b, nil
		}
	}
	return nil, fmt.Errorf("broker %d unknown to the controller", id)
}

// Two processes never run as one broker (issue 19, path 13). A second
// replicad on broker 2's log dir exits at once, naming the holder of the
// dir's lock, having written nothing there. A second replicad with broker
// 2's id on a fresh dir is refused (DUPLICATE_BROKER_REGISTRATION) while
// the first lives: nothing is fenced, no leader epoch moves. Once the first
// dies, the second gets in well within a session timeout of its death.
func TestTwoProcessesNeverRunAsOneBroker(t *testing.T) {
	const session = 2 * time.Second
	c := newCtlCluster(t, session)
	c.createTopic("dup", 3, 3)
	for i := range 3 {
		for p := range int32(3) {
			v := fmt.Sprintf("v-%d-%d", p, i)
			testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("dup", p, v) })
		}
	}
	first, _ := c.broker(2)

	// The same dir: refused at once, the holder named, nothing written.
	before := dirContents(t, c.dirs[2])
	code, stderr := testutil.RunBrokerExpectingExit(t, bins.Replicad, testutil.BrokerOptions{ID: 2, LogDirs: []string{c.dirs[2]},
		Args: []string{"--controller", c.ctlAddr}})
	holder := fmt.Sprintf("pid=%d broker.id=2", first.Pid())
	// 1, a start-up failure (a crash, such as a panic, exits 2).
	if code != 1 || !strings.Contains(stderr, holder) || !strings.Contains(stderr, "locked by another process") {
		t.Fatalf("second replicad on broker 2's dir exited %d; want 1 and a failure naming %q:\n%s", code, holder, stderr)
	}
	if after := dirContents(t, c.dirs[2]); !maps.Equal(before, after) {
		t.Fatalf("broker 2's dir changed under the refused process:\nbefore %v\nafter  %v", slices.Sorted(maps.Keys(before)), slices.Sorted(maps.Keys(after)))
	}

	// The same id on a fresh dir: refused while the first lives.
	reg, err := c.brokerDescription(2)
	if err != nil {
		t.Fatal(err)
	}
	parts := func() map[int32][2]int32 {
		out := map[int32][2]int32{}
		for p := range int32(3) {
			st, err := c.partitionState("dup", p)
			if err != nil {
				t.Fatal(err)
			}
			out[p] = [2]int32{st.GetLeader(), st.GetLeaderEpoch()}
		}
		return out
	}
	epochs := parts()
	second := testutil.StartBroker(t, bins.Replicad, testutil.BrokerOptions{ID: 2, LogDirs: []string{t.TempDir()},
		Args: []string{"--controller", c.ctlAddr}})
	testutil.Eventually(t, 30*time.Second, func() error {
		if n := strings.Count(second.Stderr(), "DUPLICATE_BROKER_REGISTRATION"); n < 3 {
			return fmt.Errorf("%d refusals logged by the second process", n)
		}
		return nil
	})
	// Over two session timeouts (a live duplicate used to fence the first
	// every couple of seconds), the first stays registered and nothing moves.
	for end := time.Now().Add(2 * session); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		now, err := c.brokerDescription(2)
		if err != nil {
			t.Fatal(err)
		}
		if now.GetBrokerEpoch() != reg.GetBrokerEpoch() || now.GetPort() != reg.GetPort() || !now.GetAlive() {
			t.Fatalf("broker 2 registered as %v while the first process lives, was %v", now, reg)
		}
		if got := parts(); !maps.Equal(got, epochs) {
			t.Fatalf("leaders and leader epochs moved from %v to %v", epochs, got)
		}
	}

	// The first dies: the second takes the id over.
	_, port, _ := net.SplitHostPort(second.Addr)
	first.Kill()
	killed := time.Now()
	testutil.Eventually(t, 30*time.Second, func() error {
		now, err := c.brokerDescription(2)
		if err != nil {
			return err
		}
		if !now.GetAlive() || strconv.Itoa(int(now.GetPort())) != port {
			return fmt.Errorf("broker 2 registered as %v, want the second process (port %s)", now, port)
		}
		return nil
	})
	took := time.Since(killed)
	t.Logf("the second process registered %v after the first was killed (session timeout %v)", took.Round(time.Millisecond), session)
	if took > 3*session {
		t.Errorf("the second process took %v to get in after the first died", took)
	}
}
