package chaos

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/replicad/replicad/internal/testutil"
)

// startTimeout bounds a process's start, log recovery included.
const startTimeout = 60 * time.Second

// proc is one run of a cluster process: its stderr goes to a log file
// (appended to across restarts, so one file tells a node's whole story),
// and lines that show a crash of the program itself are kept for the
// checker.
type proc struct {
	name   string
	cmd    *exec.Cmd
	addr   string // the address it announced
	exited chan struct{}
	status int
	// expectedExit is set before the nemesis kills the process, so its
	// exit is not reported as unexpected.
	mu           sync.Mutex
	expectedExit bool
}

// crashMarkers are stderr prefixes of a Go program failing by itself.
var crashMarkers = []string{"panic:", "fatal error:", "WARNING: DATA RACE", "SIGSEGV"}

// startProc runs bin with args, appends its stderr to logPath, and waits
// for the line starting with announce, whose rest is the address it
// serves on. problems receives every crash marker line, watch every line.
// started is called with the process id as soon as it runs (before it
// announces), so connections it opens meanwhile are attributed to it.
func startProc(name, bin string, args []string, logPath, announce string, problems, watch func(string), started func(pid int)) (*proc, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(logf, "=== %s start %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	p := &proc{name: name, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	started(p.cmd.Process.Pid)
	announced := make(chan string, 1)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logf, line)
			watch(line)
			if rest, ok := strings.CutPrefix(line, announce); ok && !sent {
				sent = true
				announced <- strings.TrimSpace(rest)
			}
			for _, m := range crashMarkers {
				if strings.Contains(line, m) {
					problems(fmt.Sprintf("%s: %s", name, line))
				}
			}
		}
		_, _ = io.Copy(io.Discard, pipe)
	}()
	go func() {
		<-copied
		err := p.cmd.Wait()
		p.status = testutil.ExitCode(err)
		fmt.Fprintf(logf, "=== %s exit status %d\n", time.Now().Format(time.RFC3339Nano), p.status)
		logf.Close()
		p.mu.Lock()
		expected := p.expectedExit
		p.mu.Unlock()
		if !expected {
			problems(fmt.Sprintf("%s: exited by itself with status %d", name, p.status))
		}
		close(p.exited)
	}()
	select {
	case p.addr = <-announced:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s exited with status %d before listening (log %s)", name, p.status, logPath)
	case <-time.After(startTimeout):
		p.kill()
		return nil, fmt.Errorf("%s did not listen within %v (log %s)", name, startTimeout, logPath)
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// kill is kill -9, waited for.
func (p *proc) kill() {
	p.mu.Lock()
	p.expectedExit = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process dies too, but be sure it is not left stopped
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// terminate is SIGTERM, waited for up to d, then kill -9.
func (p *proc) terminate(d time.Duration) {
	p.mu.Lock()
	p.expectedExit = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(d):
		p.kill()
	}
}

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}
