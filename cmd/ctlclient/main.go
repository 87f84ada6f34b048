package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/internal/flagfile"
	"github.com/replicad/replicad/internal/telemetry"
	"github.com/replicad/replicad/internal/tlsconf"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // an RPC failed, an answer carried an error code, or not implemented yet
	exitUsage   = 2
	// exitInterrupted: Ctrl-C (or SIGTERM) stopped a wait whose work goes
	// on in the cluster; 128+SIGINT, as a shell reports it.
	exitInterrupted = 130
)

func main() {
	// Ctrl-C ends a --follow consume or a perf run; a second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}

// env is what a command runs with.
type env struct {
	g      *globals
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	tracer trace.Tracer

	ctlOnce sync.Once
	ctl     *controllerClient // the --controller addresses; nil until first needed

	// getenv is the environment the command runs in (tests give their own).
	getenv func(string) string

	tlsOnce sync.Once
	tls     *tlsconf.TLS // --tls-*, loaded at first dial; nil: plaintext
	tlsErr  error
}

// run parses the command line, runs one command under its root span and
// returns the exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	g := newGlobalsProfile(getenv, profileArg(args))
	top := flag.NewFlagSet("ctlclient", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top)
	if err := flagfile.ParseFlags(top, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printMainHelp(stdout)
			return exitOK
		}
		fmt.Fprintf(stderr, "ctlclient: %v\nRun 'ctlclient --help' for usage.\n", err)
		return exitUsage
	}
	rest := top.Args()
	if len(rest) == 0 {
		printMainHelp(stderr)
		return exitUsage
	}
	if rest[0] == "help" {
		if len(rest) == 2 && strings.HasPrefix(rest[1], "--markdown") {
			return runHelpMarkdown(rest[1], stdout, stderr)
		}
		return runHelp(rest[1:], stdout, stderr)
	}
	cmd, cmdArgs, err := findCommand(rest)
	var gerr groupError
	if errors.As(err, &gerr) && gerr.name == gerr.group && wantsHelp(rest[1:]) {
		fmt.Fprintf(stdout, "ctlclient %v\n", err)
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "ctlclient: %v\nRun 'ctlclient --help' for the commands.\n", err)
		return exitUsage
	}

	if cmd.later != "" {
		if wantsHelp(cmdArgs) {
			printCommandHelp(stdout, cmd, nil)
			return exitOK
		}
		fmt.Fprintf(stderr, "ctlclient %s: not implemented yet: arrives with %s\n", cmd.name, cmd.later)
		return exitFailure
	}

	fs := flag.NewFlagSet("ctlclient "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	g.register(fs) // global flags are accepted after the command too
	var runCmd func(ctx context.Context, e *env) error
	if cmd.flags != nil {
		runCmd = cmd.flags(fs)
	}
	if err := flagfile.ParseFlags(fs, cmdArgs); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandHelp(stdout, cmd, fs)
			return exitOK
		}
		return usageFailure(stderr, cmd, err)
	}
	if fs.NArg() > 0 && !cmd.args && takesTopicArgument(fs) {
		if err := topicArgument(fs); err != nil {
			return usageFailure(stderr, cmd, err)
		}
	}
	if fs.NArg() > 0 && !cmd.args {
		return usageFailure(stderr, cmd, fmt.Errorf("unexpected argument %q", fs.Arg(0)))
	}
	explicit := setFlags(top)
	for name := range setFlags(fs) {
		explicit[name] = true
	}
	g.brokerOnly = explicit["broker"] && !explicit["controller"] && !explicit["bootstrap"]
	g.explicit = explicit
	if err := g.validate(); err != nil {
		return usageFailure(stderr, cmd, err)
	}
	e := &env{g: g, stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	if cmd.daemon || cmd.local {
		return e.report(cmd, runCmd(ctx, e))
	}
	return e.runTraced(ctx, cmd, runCmd)
}

// otlpProbeTimeout bounds the dial that checks the OTLP endpoint listens.
const otlpProbeTimeout = 300 * time.Millisecond

// profileArg is --profile's value among args (before or after the
// command), read ahead of parsing: the profile gives the defaults of the
// other flags. "" when absent.
func profileArg(args []string) string {
	for i, a := range args {
		for _, p := range []string{"--profile", "-profile"} {
			if v, ok := strings.CutPrefix(a, p+"="); ok {
				return v
			}
			if a == p && i+1 < len(args) {
				return args[i+1]
			}
		}
		if a == "--" {
			break
		}
	}
	return ""
}

// runTraced runs the command under the root span "ctlclient <command>".
func (e *env) runTraced(ctx context.Context, cmd *command, runCmd func(context.Context, *env) error) int {
	// OpenTelemetry's complaints (an OTEL_* value it cannot honour, an
	// unreachable collector) go to stderr as warnings.
	otelLog := zerolog.New(zerolog.ConsoleWriter{Out: e.stderr, NoColor: true, PartsExclude: []string{zerolog.TimestampFieldName}})
	tel, err := telemetry.Setup(ctx, telemetry.Config{ServiceName: "ctlclient", InstanceID: instanceID(), AlwaysSample: true, Logger: otelLog})
	if err != nil {
		fmt.Fprintf(e.stderr, "ctlclient: %v\n", err)
		return exitFailure
	}
	// The endpoint is probed while the command runs: a flush to a collector
	// that is not there would hold the prompt until its deadline.
	var reachable <-chan bool
	if addr := telemetry.ExportAddress(); addr != "" {
		reachable = telemetry.Reachable(addr, otlpProbeTimeout)
	}
	defer func() {
		flush := 2 * time.Second
		if reachable != nil && !<-reachable {
			flush = 0 // nobody listens: drop the spans rather than wait
		}
		sctx, cancel := context.WithTimeout(context.Background(), flush)
		defer cancel()
		_ = tel.Shutdown(sctx)
	}()
	e.tracer = tel.Tracer("github.com/replicad/replicad/cmd/ctlclient")
	attrs := []attribute.KeyValue{attribute.String("replicad.broker_address", e.g.broker)}
	if e.g.controller != "" {
		attrs = append(attrs, attribute.String("replicad.controller_address", e.g.controller))
	}
	ctx, span := e.tracer.Start(ctx, "ctlclient "+cmd.name, trace.WithAttributes(attrs...))
	defer span.End()
	defer e.closeController()

	err = runCmd(ctx, e)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	return e.report(cmd, err)
}

// report prints err the way its kind asks and maps it to an exit status.
func (e *env) report(cmd *command, err error) int {
	var uerr usageError
	var ierr interruptedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &uerr):
		return usageFailure(e.stderr, cmd, err)
	case errors.As(err, &ierr):
		fmt.Fprintf(e.stderr, "ctlclient: %v\n", err)
		return exitInterrupted
	}
	if st, ok := status.FromError(err); ok {
		if svc, ok := brokerServiceMissing(st); ok {
			fmt.Fprintf(e.stderr, "ctlclient: %s is not a broker: it serves no %s (a controller? give its address as --controller)\n", e.g.broker, svc)
			return exitFailure
		}
		// An unreachable or silent broker: name the address dialed, when
		// the call went to --broker (routed calls name their leader).
		if (st.Code() == grpccodes.Unavailable || st.Code() == grpccodes.DeadlineExceeded) && !e.routed() && !strings.Contains(st.Message(), e.g.broker) {
			fmt.Fprintf(e.stderr, "ctlclient: broker %s: %s: %s\n", e.g.broker, st.Code(), st.Message())
			return exitFailure
		}
		fmt.Fprintf(e.stderr, "ctlclient: %s: %s\n", st.Code(), st.Message())
		return exitFailure
	}
	fmt.Fprintf(e.stderr, "ctlclient: %v\n", err)
	return exitFailure
}

// routed reports whether broker calls find their leader (through the
// controller or --bootstrap) rather than go to --broker.
func (e *env) routed() bool {
	return !e.g.brokerOnly && (e.g.controller != "" || e.g.bootstrap != "")
}

// brokerServiceMissing reports whether st is the answer of a server that
// does not serve a broker's service (gRPC's "unknown service"), and which.
func brokerServiceMissing(st *status.Status) (string, bool) {
	if st.Code() != grpccodes.Unimplemented {
		return "", false
	}
	for _, svc := range []string{"replicad.v1.LogService", "replicad.v1.ReplicaManagerService", "replicad.v1.FetchService"} {
		if strings.Contains(st.Message(), "unknown service "+svc) {
			return svc, true
		}
	}
	return "", false
}

func usageFailure(stderr io.Writer, cmd *command, err error) int {
	fmt.Fprintf(stderr, "ctlclient %s: %v\nRun 'ctlclient %s --help' for usage.\n", cmd.name, err, cmd.name)
	return exitUsage
}

func instanceID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// usageError is a mistake on the command line found while running.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" || a == "--h" {
			return true
		}
	}
	return false
}

// findCommand resolves the command name. A group word ("perf",
// "controller", "certs", "acl", "cluster": the first word of a two-word
// command) takes the next word as its subcommand; alone, or followed by an
// unknown word, it is a groupError listing the group's commands.
func findCommand(args []string) (*command, []string, error) {
	name := args[0]
	group := isGroup(name)
	if group && len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		name += " " + args[1]
		args = args[1:]
	}
	for _, c := range commands() {
		if c.name == name {
			return c, args[1:], nil
		}
	}
	if group {
		return nil, nil, groupError{group: strings.Fields(name)[0], name: name}
	}
	if near := nearestCommand(name); near != "" {
		return nil, nil, fmt.Errorf("unknown command %q; did you mean %q?", name, near)
	}
	return nil, nil, fmt.Errorf("unknown command %q", name)
}

// nearestCommand is the command (or group word) nearest to name by edit
// distance, if near enough to be a typo: at most 2 edits, and fewer than
// half of name's letters.
func nearestCommand(name string) string {
	best, bestD := "", 3
	seen := map[string]bool{}
	for _, c := range commands() {
		for _, cand := range []string{c.name, strings.Fields(c.name)[0]} {
			if seen[cand] {
				continue
			}
			seen[cand] = true
			if d := editDistance(name, cand); d < bestD && 2*d < len(name) {
				best, bestD = cand, d
			}
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// isGroup reports whether word is the first word of a two-word command.
func isGroup(word string) bool {
	for _, c := range commands() {
		if first, _, ok := strings.Cut(c.name, " "); ok && first == word {
			return true
		}
	}
	return false
}

// groupError is a group word without a known subcommand: `ctlclient
// cluster` or `ctlclient cluster nope`.
type groupError struct{ group, name string }

func (g groupError) Error() string {
	var b strings.Builder
	if g.name != g.group {
		fmt.Fprintf(&b, "unknown command %q; ", g.name)
	}
	fmt.Fprintf(&b, "%q takes a subcommand:", g.group)
	for _, c := range commands() {
		if strings.HasPrefix(c.name, g.group+" ") {
			fmt.Fprintf(&b, "\n  %-16s %s", c.name, c.summary)
		}
	}
	return b.String()
}

// takesTopicArgument: every command with a --topic flag takes the topic as
// its argument too (`produce orders ...` as `produce --topic orders ...`),
// so no one has to remember which of them is which.
func takesTopicArgument(fs *flag.FlagSet) bool { return fs.Lookup("topic") != nil }

// topicArgument moves the one positional argument into --topic, parsing the
// flags after it (the flag package stops at the first argument). A second
// argument, or a --topic naming another topic, is a usage error.
// topicOperand is the topic of a command that takes its arguments itself
// (args): the TOPIC argument or --topic (topicFlag, read once the flags
// between the arguments are parsed), with topicArgument's rules, so every
// command takes a topic alike.
func topicOperand(fs *flag.FlagSet, e *env, topicFlag *string) (string, error) {
	pos, err := interspersedArgs(fs, e.g)
	if err != nil {
		return "", err
	}
	flagValue := *topicFlag
	set := setFlags(fs)["topic"]
	switch {
	case len(pos) > 1:
		return "", usagef("want one TOPIC argument, got %d: %s", len(pos), strings.Join(pos, " "))
	case len(pos) == 1 && set && flagValue != pos[0]:
		return "", usagef("the TOPIC argument %q and --topic %q disagree: give one of them", pos[0], flagValue)
	case len(pos) == 0 && !set:
		return "", usagef("want exactly one TOPIC, as the argument or --topic")
	}
	topic := flagValue
	if len(pos) == 1 {
		topic = pos[0]
	}
	return topic, checkTopicName(topic)
}

func topicArgument(fs *flag.FlagSet) error {
	var pos []string
	for fs.NArg() > 0 {
		pos = append(pos, fs.Arg(0))
		if err := fs.Parse(fs.Args()[1:]); err != nil {
			return err
		}
	}
	if len(pos) > 1 {
		return fmt.Errorf("want one TOPIC argument, got %d: %s", len(pos), strings.Join(pos, " "))
	}
	if f := fs.Lookup("topic"); setFlags(fs)["topic"] && f.Value.String() != pos[0] {
		return fmt.Errorf("the TOPIC argument %q and --topic %q disagree: give one of them", pos[0], f.Value.String())
	}
	return fs.Set("topic", pos[0])
}
