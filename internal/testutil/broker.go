package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/replicad/replicad/internal/syncbuf"
)

// StartTimeout bounds a broker's start (log recovery included) under -race on a slow machine.
const StartTimeout = 60 * time.Second

// The stderr lines that announce the address a process serves on.
const (
	listeningPrefix           = "replicad listening on "
	controllerListeningPrefix = "replicad controller listening on "
)

// BrokerOptions configure a broker process.
type BrokerOptions struct {
	ID      int32
	LogDirs []string
	Args    []string // extra flags
	Env     []string // extra environment (KEY=VALUE), on top of the test's own
}

// Broker is a running replicad process.
type Broker struct {
	Addr string // host:port it serves on
	t    testing.TB
	cmd  *exec.Cmd

	stderr   *syncBuffer
	prefix   string // of the stderr line announcing Addr
	listenC  chan string
	exited   chan struct{}
	exitCode int
}

// brokerArgs are the flags of opts on loopback port 0.
func brokerArgs(opts BrokerOptions) []string {
	args := []string{"--id", strconv.Itoa(int(opts.ID)), "--listen", "127.0.0.1:0", "--log-dirs", strings.Join(opts.LogDirs, ",")}
	return append(args, opts.Args...)
}

// StartBroker starts replicad and waits for its listening line. The test
// fails if the process exits first. The process is killed at cleanup if
// the test left it running.
func StartBroker(t testing.TB, bin string, opts BrokerOptions) *Broker {
	t.Helper()
	return startListening(t, bin, brokerArgs(opts), opts.Env, listeningPrefix)
}

// StartController starts `ctlclient controller run` with args (the test
// picks --listen, --store and the rest) and waits for its listening line.
// The process is killed at cleanup if the test left it running.
func StartController(t testing.TB, ctlclientBin string, args ...string) *Broker {
	t.Helper()
	return StartControllerEnv(t, ctlclientBin, nil, args...)
}

// StartControllerEnv is StartController with env (KEY=VALUE) added to the
// test's environment.
func StartControllerEnv(t testing.TB, ctlclientBin string, env []string, args ...string) *Broker {
	t.Helper()
	return startListening(t, ctlclientBin, append([]string{"controller", "run"}, args...), env, controllerListeningPrefix)
}

// StartServerController starts `replicad controller` (the controller from
// the server binary) with args and env, and waits for its listening line.
func StartServerController(t testing.TB, replicadBin string, env []string, args ...string) *Broker {
	t.Helper()
	return startListening(t, replicadBin, append([]string{"controller"}, args...), env, controllerListeningPrefix)
}

func startListening(t testing.TB, bin string, args, env []string, prefix string) *Broker {
	t.Helper()
	b, err := startProcess(t, bin, args, env, prefix)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case b.Addr = <-b.listenC:
		return b
	case <-b.exited:
		t.Fatalf("%s %v exited with status %d before listening; stderr:\n%s", bin, args, b.exitCode, b.Stderr())
	case <-time.After(StartTimeout):
		b.Kill()
		t.Fatalf("%s %v did not listen within %v; stderr:\n%s", bin, args, StartTimeout, b.Stderr())
	}
	return nil
}

// RunBrokerExpectingExit starts replicad with opts and waits for it to exit
// on its own (a refused start), returning its status and stderr.
func RunBrokerExpectingExit(t testing.TB, bin string, opts BrokerOptions) (int, string) {
	t.Helper()
	b, err := startProcess(t, bin, brokerArgs(opts), opts.Env, listeningPrefix)
	if err != nil {
		t.Fatal(err)
	}
	code, ok := b.Wait(StartTimeout)
	if !ok {
		b.Kill()
		t.Fatalf("replicad kept running; stderr:\n%s", b.Stderr())
	}
	return code, b.Stderr()
}

func startProcess(t testing.TB, bin string, args, env []string, prefix string) (*Broker, error) {
	b := &Broker{t: t, stderr: &syncBuffer{}, prefix: prefix, listenC: make(chan string, 1), exited: make(chan struct{})}
	b.cmd = exec.Command(bin, args...)
	if len(env) > 0 {
		b.cmd.Env = append(os.Environ(), env...)
	}
	pipe, err := b.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		b.scanStderr(pipe)
	}()
	go func() {
		// Wait only after stderr is drained: cmd.Wait closes the pipe.
		<-copied
		err := b.cmd.Wait()
		b.exitCode = ExitCode(err)
		close(b.exited)
	}()
	t.Cleanup(func() {
		if b.Running() {
			b.Kill()
		}
		if testing.Verbose() || t.Failed() {
			t.Logf("%s %v stderr:\n%s", bin, args, b.Stderr())
		}
	})
	return b, nil
}

func (b *Broker) scanStderr(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	announced := false
	for sc.Scan() {
		line := sc.Text()
		b.stderr.WriteLine(line)
		if addr, ok := strings.CutPrefix(line, b.prefix); ok && !announced {
			announced = true
			b.listenC <- strings.TrimSpace(addr)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// ExitCode is the status of a process that ended with err from cmd.Wait:
// 128+signal when a signal killed it, -1 when it could not run.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	return -1
}

// Pid is the process id (to read /proc/PID/status, say).
func (b *Broker) Pid() int { return b.cmd.Process.Pid }

// Stderr is everything the process wrote to stderr so far.
func (b *Broker) Stderr() string { return b.stderr.String() }

// StderrFrom is what the process wrote to stderr from byte off on: a
// poller copies only what is new.
func (b *Broker) StderrFrom(off int) string { return b.stderr.From(off) }

// Running reports whether the process has not exited.
func (b *Broker) Running() bool {
	select {
	case <-b.exited:
		return false
	default:
		return true
	}
}

// Wait waits up to d for the process to exit and returns its status
// (128+signal when killed by a signal).
func (b *Broker) Wait(d time.Duration) (code int, exited bool) {
	select {
	case <-b.exited:
		return b.exitCode, true
	case <-time.After(d):
		return 0, false
	}
}

// Signal sends sig to the process (SIGSTOP and SIGCONT pause and resume it).
func (b *Broker) Signal(sig syscall.Signal) {
	b.t.Helper()
	if err := b.cmd.Process.Signal(sig); err != nil {
		b.t.Fatalf("signal %v: %v", sig, err)
	}
}

// Kill sends SIGKILL (a crash: nothing is flushed or checkpointed) and waits.
func (b *Broker) Kill() {
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.exited
}

// Terminate sends SIGTERM and returns the exit status; the test fails if
// the broker does not exit within d.
func (b *Broker) Terminate(d time.Duration) int {
	b.t.Helper()
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		b.t.Fatalf("SIGTERM: %v", err)
	}
	code, ok := b.Wait(d)
	if !ok {
		b.Kill()
		b.t.Fatalf("replicad did not exit within %v of SIGTERM; stderr:\n%s", d, b.Stderr())
	}
	return code
}

// Dial returns a client connection to the broker, closed at cleanup.
func (b *Broker) Dial(t testing.TB) *grpc.ClientConn {
	t.Helper()
	return b.DialWith(t)
}

// DialWith is Dial with opts (transport credentials: TLS) after the
// default plaintext.
func (b *Broker) DialWith(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(b.Addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatalf("dial %s: %v", b.Addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// syncBuffer collects lines written by one goroutine and read by others.
type syncBuffer = syncbuf.Buffer
