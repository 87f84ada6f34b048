package chaos

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// childEnv makes the test binary a client process: it dials the address in
// the variable, writes each line of its stdin there and prints each line
// it reads back.
const childEnv = "CHAOS_PROXY_TEST_DIAL"

func TestMain(m *testing.M) {
	if addr := os.Getenv(childEnv); addr != "" {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go func() {
			_, _ = io.Copy(os.Stdout, conn)
			os.Exit(0) // the connection ended (closed or reset)
		}()
		_, _ = io.Copy(conn, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A connection from another process is attributed to the node that
// process is, and each direction of a link is cut and healed on its own;
// held bytes arrive after the heal.
func TestNetworkAttributesAndCutsOneDirection(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	n := NewNetwork()
	defer n.Close()
	addr, err := n.Listen("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("a"); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+addr)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	n.SetTarget("a", "", cmd.Process.Pid) // the child is node a
	n.SetTarget("b", echo.Addr().String(), 0)
	lines := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	roundTrip := func(msg string, want bool) {
		t.Helper()
		fmt.Fprintln(stdin, msg)
		select {
		case got := <-lines:
			if !want {
				t.Fatalf("%q came back through a cut link", got)
			}
			if got != msg {
				t.Fatalf("echo %q, want %q", got, msg)
			}
		case <-time.After(map[bool]time.Duration{true: 10 * time.Second, false: 300 * time.Millisecond}[want]):
			if want {
				t.Fatalf("%q did not come back", msg)
			}
		}
	}
	roundTrip("one", true)
	if got := n.Accepted()["a->b"]; got != 1 {
		t.Fatalf("connections %v, want one from a to b", n.Accepted())
	}
	n.Cut("b", "a") // the answers are held
	roundTrip("two", false)
	n.Heal()
	if got := <-lines; got != "two" {
		t.Fatalf("after the heal %q, want the held answer", got)
	}
	n.Cut("a", "b") // the requests are held
	roundTrip("three", false)
	n.Heal()
	if got := <-lines; got != "three" {
		t.Fatalf("after the heal %q, want the held request's answer", got)
	}
	n.Slow("a", "b", 400*time.Millisecond)
	start := time.Now()
	roundTrip("four", true)
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("a round trip over a 400ms link took %v", d)
	}
	if strings.Contains(fmt.Sprint(n.Accepted()), Client) {
		t.Fatalf("the child was taken for a client: %v", n.Accepted())
	}
}

// A refused link resets the connections open between the two nodes and
// every new one from the refused side, at once (not held, as a cut holds
// them); after the heal, connections work again.
func TestNetworkRefuseResets(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	n := NewNetwork()
	defer n.Close()
	addr, err := n.Listen("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Listen("a"); err != nil {
		t.Fatal(err)
	}
	n.SetTarget("b", echo.Addr().String(), 0)
	// child dials b as node a; it exits once its connection fails (its
	// stdout, lines, then closes).
	child := func() (io.WriteCloser, <-chan string) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+addr)
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
		n.SetTarget("a", "", cmd.Process.Pid)
		lines := make(chan string, 10)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		return stdin, lines
	}
	// expect reads the next line (ok false: the child's connection ended).
	expect := func(lines <-chan string) (string, bool) {
		t.Helper()
		select {
		case l, ok := <-lines:
			return l, ok
		case <-time.After(10 * time.Second):
			t.Fatal("no answer and no reset within 10s")
			return "", false
		}
	}
	in, lines := child()
	fmt.Fprintln(in, "one")
	if got, ok := expect(lines); !ok || got != "one" {
		t.Fatalf("echo %q (%v), want one", got, ok)
	}
	n.Refuse("a", "b")
	for range 3 { // writes on a reset connection fail: the child exits
		fmt.Fprintln(in, "two")
	}
	if got, ok := expect(lines); ok {
		t.Fatalf("%q came back over a refused link", got)
	}
	in, lines = child() // a new connection is reset at once
	for range 3 {
		fmt.Fprintln(in, "three")
	}
	if got, ok := expect(lines); ok {
		t.Fatalf("%q came back over a refused link", got)
	}
	n.Heal()
	in, lines = child()
	fmt.Fprintln(in, "four")
	if got, ok := expect(lines); !ok || got != "four" {
		t.Fatalf("after the heal: echo %q (%v), want four", got, ok)
	}
}
