package integration

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `make demo | tee demo.log`, then Ctrl-C: the Ctrl-C kills tee too, the
// demo's next write raised SIGPIPE, which killed the script before its
// cleanup, and the cluster (in process groups of its own) ran on with the
// ports taken. Here the demo runs on real binaries with its stdout on a
// pipe; once the cluster is up the reader goes away and the demo's process
// group gets SIGINT, as a terminal sends it. The demo must exit, every
// process it started must be gone and its ports free, in bounded time.
func TestDemoCtrlCThroughDeadPipe(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	demoDir := filepath.Join(t.TempDir(), "demo")
	port := freePortBlock(t, 4)
	pidsOf := func() []int {
		var pids []int
		files, _ := filepath.Glob(filepath.Join(demoDir, "pids", "*"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	// Whatever happens, nothing the demo started outlives the test.
	t.Cleanup(func() {
		for _, pid := range pidsOf() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})

	stderrFile, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderrFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "scripts/demo.sh")
	cmd.Dir = root
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "DEMO_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "DEMO_BIN="+filepath.Dir(bins.Replicad), "DEMO_DIR="+demoDir, "DEMO_PORT="+strconv.Itoa(port),
		"DEMO_PLAINTEXT=1", "DEMO_RECORDS=400")
	cmd.Stdin = nil
	cmd.Stdout = w
	cmd.Stderr = stderrFile
	// Its own process group, as a terminal's foreground job: the SIGINT
	// below goes to the group, as Ctrl-C does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	logs := func() string {
		b, _ := os.ReadFile(stderrFile.Name())
		return string(b)
	}

	// The reader: until the cluster is left running (step 7).
	running := make(chan struct{})
	var stdout strings.Builder
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			stdout.WriteString(sc.Text() + "\n")
			// The last line the demo prints before it waits for Ctrl-C.
			if strings.Contains(sc.Text(), "Ctrl-C stops everything") {
				close(running)
				return
			}
		}
	}()
	select {
	case <-running:
	case err := <-exited:
		t.Fatalf("the demo exited (%v) before the cluster was left running\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), logs())
	case <-time.After(4 * time.Minute):
		t.Fatalf("the cluster was not left running within 4m\nstdout:\n%s\nstderr:\n%s", stdout.String(), logs())
	}
	started := pidsOf()
	if len(started) < 4 {
		t.Fatalf("want the pids of a controller and 3 brokers, got %v", started)
	}
	// The reader exits (tee killed by the Ctrl-C), then the Ctrl-C.
	r.Close()
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		// 0: the Ctrl-C came while the cluster ran; 130: a moment
		// before, while the script still wrote its last lines (a race a
		// person pressing Ctrl-C does not run). Either way it exited,
		// rather than dying of the signal.
		var ee *exec.ExitError
		if err != nil && (!errors.As(err, &ee) || ee.ExitCode() != 130) {
			t.Errorf("demo exited: %v, want status 0 (or 130)\nstderr:\n%s", err, logs())
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the demo did not exit within 90s of Ctrl-C\nstderr:\n%s", logs())
	}
	// Every process the demo started is gone (a clean stop: the script
	// waited for each), and every port is free for the next `make demo`.
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range started {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still runs after the demo exited\nstderr:\n%s", pid, logs())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for p := port; p < port+4; p++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("port %d is still taken: %v\nstderr:\n%s", p, err, logs())
		}
		l.Close()
	}
	if !strings.Contains(logs(), "stopped") {
		t.Errorf("the cleanup's report did not reach stderr:\n%s", logs())
	}
}

// freePortBlock finds n consecutive free loopback ports (the demo takes
// its controller's and puts the brokers on the next ones).
func freePortBlock(t *testing.T, n int) int {
	t.Helper()
	for range 100 {
		base := 20000 + rand.IntN(30000)
		var ls []net.Listener
		ok := true
		for p := base; p < base+n; p++ {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				ok = false
				break
			}
			ls = append(ls, l)
		}
		for _, l := range ls {
			l.Close()
		}
		if ok {
			return base
		}
	}
	t.Fatal(errors.New("no block of free ports"))
	return 0
}
