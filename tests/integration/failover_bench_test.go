package integration

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// The failover benchmarks. Target: a broker leading 1,000 partitions (3
// brokers, RF 3) is fenced; all 1,000 accept produce on their new leaders
// within 1 s of the fencing. Kafka 1.1's anchor: 3 s for a controlled
// shutdown of 10,000 partitions.
//
// Each iteration starts a controller and brokers 1..3 (--log-flush os, so
// no fsync per produce), creates 3×N partitions RF 3, which round-robin
// spreads so that broker 1 leads N of them, waits until every broker hosts
// every partition in its role, and then, timed (ns/op is this span, from
// the kill or the signal to the last partition accepted):
//
//   - BenchmarkFailoverFenced: kill -9 broker 1. The fencing moment is when
//     the controller's "broker fenced" line for broker 1 arrives (read from
//     its stderr every millisecond: polling DescribeCluster would take the
//     controller's lock hundreds of times a second, and at 18,000
//     partitions each call copies them all). From then until every
//     partition broker 1 led accepted an acks=1 produce on the leader the
//     controller's DescribeCluster names: fence-to-all-producible-ms.
//   - BenchmarkFailoverControlledShutdown: SIGTERM broker 1 (it asks the
//     controller to move its leaderships before it stops). From the signal
//     until every partition it led accepted an acks=1 produce elsewhere:
//     sigterm-to-all-producible-ms.
//
// The produce sweep runs fbWorkers in parallel; a partition not yet
// accepted goes to the back of the queue, its worker pausing fbRetry. Right
// after, resweep-ms times a second sweep of the same partitions on the same
// leaders: what the sweep itself costs once no leadership change or first
// record of an epoch is involved. The breakdown comes from the controller's
// debug log, timestamped on arrival: "moved leadership" (the partition
// moves committed to the store and queued), and each "request sent"
// (LeaderAndIsr, UpdateMetadata; arrival minus its duration is when it
// left, arrival when the broker answered). loadavg-1m is the machine's
// load when the iteration ended: on a shared machine, how much of the
// figures other work may account for.
//
// Run them alone, without -race and not with -v (the harness then prints
// every process's stderr at cleanup), with the temp dirs on the project's
// disk:
//
//	mkdir -p .bench-tmp && TMPDIR=$PWD/.bench-tmp go test -run '^$' -bench Failover -benchtime 1x -timeout 60m ./tests/integration/
//
// Every broker hosts all 3×N partitions, more logs than it has descriptors
// at 10,000 (30,000 logs under a hard limit of 20,000 here): its file
// cache (--max-open-files, by default half of RLIMIT_NOFILE) keeps the
// files of the logs in use open and closes the rest. Only a hard limit
// below fbMinFdLimit skips the benchmark.
//
// FAILOVER_BENCH_PROFILE=DIR (and FAILOVER_BENCH_PROFILE_SECONDS, default 5)
// makes the brokers serve /debug/pprof and leaves a CPU profile and an
// execution trace of each surviving broker, taken from the kill or the
// SIGTERM on, in DIR. Profiling costs CPU: such a run's figures are not the
// benchmark's.

const (
	// fbSession is the controller's session timeout in the fencing
	// benchmark: a killed broker is fenced 1 s (plus at most a tenth, the
	// check period) after its last heartbeat.
	fbSession = time.Second
	// fbShutdownSession is the session timeout in the controlled-shutdown
	// benchmark, which no session expiry is part of: the default. With 1 s,
	// the controlled shutdown of 6,000 leaderships holds the controller's
	// lock for over a second (one transaction of 18,000 partition updates),
	// the heartbeats queue behind it, and the session check that gets the
	// lock first fences all three brokers.
	fbShutdownSession = 6 * time.Second
	// fbWorkers produce in parallel; fbRetry is the pause of a worker after
	// a produce that was not acknowledged.
	fbWorkers = 32
	fbRetry   = 5 * time.Millisecond
	// fbMinFdLimit is the smallest RLIMIT_NOFILE hard limit the benchmark
	// runs under: half for the file cache (whose minimum is 64), half for
	// the sockets (32 workers to each of 3 brokers), checkpoints and the
	// runtime.
	fbMinFdLimit = 1024
	// fbTopicPartitions is the size of each topic: the 3×N partitions are
	// created as topics failover-0, failover-1, ... of this many (a
	// multiple of 3, so round-robin gives broker 1 a third of every topic
	// whichever broker the assignment of that topic starts at). A single
	// CreateTopic of 18,000 partitions holds the controller's lock for over
	// a second, heartbeats wait for it, and the session check that runs
	// next fences the brokers it kept waiting (with a 1 s session). The
	// failover is the same either way: fencing moves the partitions of
	// every topic in one transaction, one LeaderAndIsr per broker (chunked
	// at 10,000 partitions by the controller's queue).
	fbTopicPartitions = 3000
)

// fbSizes are the numbers of partitions broker 1 leads: at 10,000 each
// broker hosts 30,000 logs.
var fbSizes = []int{1000, 6000, 10000}

func BenchmarkFailoverFenced(b *testing.B) {
	for _, n := range fbSizes {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) { fbRun(b, n, fbFencedOnce) })
	}
}

func BenchmarkFailoverControlledShutdown(b *testing.B) {
	for _, n := range fbSizes {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) { fbRun(b, n, fbControlledShutdownOnce) })
	}
}

// fbRun runs the scenario b.N times (once with -benchtime 1x), each on a
// fresh cluster whose setup is not timed, and reports the mean of each
// figure.
func fbRun(b *testing.B, led int, once func(*testing.B, int) map[string]float64) {
	if testing.Short() {
		b.Skip("failover benchmark: not under -short")
	}
	if raceEnabled {
		b.Skip("failover benchmark: race-detector binaries would distort the figures")
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		b.Fatal(err)
	}
	if rl.Max < fbMinFdLimit {
		msg := fmt.Sprintf("the RLIMIT_NOFILE hard limit is %d here, below the %d the brokers need (half for their file caches)",
			rl.Max, fbMinFdLimit)
		// Said here too: without -v a skipped benchmark prints nothing.
		fmt.Fprintf(os.Stderr, "%s: skipped: %s\n", b.Name(), msg)
		b.Skip(msg)
	}
	sums := map[string]float64{}
	b.StopTimer()
	for i := 0; i < b.N; i++ {
		for k, v := range once(b, led) {
			sums[k] += v
		}
	}
	for _, k := range slices.Sorted(maps.Keys(sums)) {
		b.ReportMetric(sums[k]/float64(b.N), k)
	}
}

// fbTP is one partition of one of the benchmark's topics.
type fbTP struct {
	topic     string
	partition int32
}

func fbFencedOnce(b *testing.B, led int) map[string]float64 {
	c := fbStart(b, fbSession)
	defer c.stop()
	mine := c.setup(led)

	w := fbWatch(c.ctl)
	defer w.close()
	profiled := c.profile("fenced", 2, 3)
	defer profiled()
	b.StartTimer()
	killed := time.Now()
	c.brokers[1].Kill()
	fenced, ok := w.wait(30*time.Second, func(l string) bool {
		return strings.Contains(l, "broker fenced") && fbField(l, "broker") == "1"
	})
	if !ok {
		b.StopTimer()
		b.Fatalf("broker 1 not fenced within 30 s of kill -9; controller log:\n%s", fbTail(c.ctl.Stderr(), 40))
	}
	lm := &fbLeaderMap{refresh: c.leaders, avoid: 1}
	if err := c.leaders(lm); err != nil {
		b.Fatal(err)
	}
	described := time.Now()
	sw, err := fbSweep(c.logAPI, mine, lm, time.Now().Add(5*time.Minute))
	b.StopTimer()
	if err != nil {
		b.Fatalf("after fencing: %v", err)
	}
	c.checkOthersUnfenced(w, sw.last)
	re, err := fbSweep(c.logAPI, mine, lm, time.Now().Add(5*time.Minute))
	if err != nil {
		b.Fatalf("second sweep: %v", err)
	}

	bd := fbBreakdown(w, fenced.at, "fence-to-")
	m := map[string]float64{
		"partitions":                   float64(len(mine)),
		"kill-to-fenced-ms":            fbMs(fenced.at.Sub(killed)),
		"fence-to-all-producible-ms":   fbMs(sw.last.Sub(fenced.at)),
		"fence-to-first-producible-ms": fbMs(sw.first.Sub(fenced.at)),
		"fence-to-described-ms":        fbMs(described.Sub(fenced.at)),
		"resweep-ms":                   fbMs(re.last.Sub(re.start)),
		"produce-attempts":             float64(sw.attempts),
		"loadavg-1m":                   fbLoad(),
	}
	maps.Copy(m, bd.metrics)
	b.Logf("load average %.1f; fenced, %d leaderships: kill -9 -> fenced %v (%s); from the fence: leaders described %v, first produce accepted %v, "+
		"all %v (%s; %d attempts %s); second sweep %v; controller: %s",
		m["loadavg-1m"], len(mine), fenced.at.Sub(killed).Round(time.Millisecond), fbField(fenced.text, "reason"),
		described.Sub(fenced.at).Round(time.Millisecond), sw.first.Sub(fenced.at).Round(time.Millisecond),
		sw.last.Sub(fenced.at).Round(time.Millisecond), sw.lastByLeader(fenced.at), sw.attempts, sw.codes(),
		re.last.Sub(re.start).Round(time.Millisecond), bd.text)
	return m
}

func fbControlledShutdownOnce(b *testing.B, led int) map[string]float64 {
	c := fbStart(b, fbShutdownSession)
	defer c.stop()
	mine := c.setup(led)

	w := fbWatch(c.ctl)
	defer w.close()
	profiled := c.profile("controlled", 1, 2, 3)
	defer profiled()
	b.StartTimer()
	signalled := time.Now()
	c.brokers[1].Signal(syscall.SIGTERM)
	req, ok := w.wait(60*time.Second, func(l string) bool {
		return strings.Contains(l, "controlled shutdown requested") && fbField(l, "broker") == "1"
	})
	if !ok {
		b.StopTimer()
		b.Fatalf("no controlled shutdown of broker 1 within 60 s of SIGTERM; controller log:\n%s", fbTail(c.ctl.Stderr(), 40))
	}
	// The request is logged under the controller's lock, before the moves
	// are committed: this DescribeCluster waits for them.
	lm := &fbLeaderMap{refresh: c.leaders, avoid: 1}
	if err := c.leaders(lm); err != nil {
		b.Fatal(err)
	}
	described := time.Now()
	sw, err := fbSweep(c.logAPI, mine, lm, time.Now().Add(5*time.Minute))
	b.StopTimer()
	if err != nil {
		b.Fatalf("after SIGTERM: %v", err)
	}
	code, exited := c.brokers[1].Wait(5 * time.Minute)
	if !exited || code != 0 {
		b.Fatalf("broker 1 after SIGTERM: exited %v, status %d; its log:\n%s", exited, code, fbTail(c.brokers[1].Stderr(), 40))
	}
	exitAt := time.Now() // an upper bound: Wait returned after the exit
	c.checkOthersUnfenced(w, sw.last)
	re, err := fbSweep(c.logAPI, mine, lm, time.Now().Add(5*time.Minute))
	if err != nil {
		b.Fatalf("second sweep: %v", err)
	}
	took := "?"
	for _, l := range strings.Split(c.brokers[1].Stderr(), "\n") {
		if strings.Contains(l, "controlled shutdown complete") {
			took = fbField(l, "took_ms") + " ms"
		}
	}

	bd := fbBreakdown(w, signalled, "sigterm-to-")
	m := map[string]float64{
		"partitions":                     float64(len(mine)),
		"sigterm-to-requested-ms":        fbMs(req.at.Sub(signalled)),
		"sigterm-to-described-ms":        fbMs(described.Sub(signalled)),
		"sigterm-to-all-producible-ms":   fbMs(sw.last.Sub(signalled)),
		"sigterm-to-first-producible-ms": fbMs(sw.first.Sub(signalled)),
		"sigterm-to-exit-ms":             fbMs(exitAt.Sub(signalled)),
		"resweep-ms":                     fbMs(re.last.Sub(re.start)),
		"produce-attempts":               float64(sw.attempts),
		"loadavg-1m":                     fbLoad(),
	}
	maps.Copy(m, bd.metrics)
	b.Logf("load average %.1f; controlled shutdown, %d leaderships: from SIGTERM: controller asked %v, leaders described %v, first produce accepted %v, "+
		"all %v (%s; %d attempts %s), broker 1 exited by %v (its controlled shutdown took %s); second sweep %v; controller: %s",
		m["loadavg-1m"], len(mine), req.at.Sub(signalled).Round(time.Millisecond), described.Sub(signalled).Round(time.Millisecond),
		sw.first.Sub(signalled).Round(time.Millisecond), sw.last.Sub(signalled).Round(time.Millisecond),
		sw.lastByLeader(signalled), sw.attempts, sw.codes(), exitAt.Sub(signalled).Round(time.Millisecond), took,
		re.last.Sub(re.start).Round(time.Millisecond), bd.text)
	return m
}

// fbCluster is a controller and brokers 1..3 for one iteration.
type fbCluster struct {
	b       *testing.B
	ctl     *testutil.Broker
	ctlAPI  replicadv1.ControllerServiceClient
	brokers map[int32]*testutil.Broker
	rm      map[int32]replicadv1.ReplicaManagerServiceClient
	logAPI  map[int32]replicadv1.LogServiceClient
	pprof   map[int32]string // --metrics-listen of each broker, when profiling
}

func fbStart(b *testing.B, session time.Duration) *fbCluster {
	b.Helper()
	c := &fbCluster{b: b, brokers: map[int32]*testutil.Broker{}, rm: map[int32]replicadv1.ReplicaManagerServiceClient{},
		logAPI: map[int32]replicadv1.LogServiceClient{}, pprof: map[int32]string{}}
	// Debug: the broker queue logs each request it delivered, with its duration.
	c.ctl = testutil.StartController(b, bins.Ctlclient, "--listen", fbFreeAddr(b), "--store", b.TempDir(),
		"--session-timeout", session.String(), "--log-level", "debug")
	c.ctlAPI = replicadv1.NewControllerServiceClient(fbDial(b, c.ctl.Addr))
	for _, id := range clusterIDs {
		args := []string{"--controller", c.ctl.Addr, "--log-flush", "os"}
		if fbProfileDir() != "" {
			c.pprof[id] = fbFreeAddr(b)
			args = append(args, "--metrics-listen", c.pprof[id], "--pprof")
		}
		br := testutil.StartBroker(b, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: []string{b.TempDir()}, Args: args})
		conn := fbDial(b, br.Addr)
		c.brokers[id], c.rm[id], c.logAPI[id] = br, replicadv1.NewReplicaManagerServiceClient(conn), replicadv1.NewLogServiceClient(conn)
	}
	testutil.Eventually(b, 30*time.Second, func() error {
		resp, err := c.describe()
		if err != nil {
			return err
		}
		alive := 0
		for _, br := range resp.GetBrokers() {
			if br.GetAlive() {
				alive++
			}
		}
		if alive != len(clusterIDs) {
			return fmt.Errorf("%d brokers alive: %v", alive, resp.GetBrokers())
		}
		return nil
	})
	return c
}

// fbDial is a client connection closed at cleanup, which accepts the large
// answers of DescribeCluster and DescribePartitions.
func fbDial(b *testing.B, addr string) *grpc.ClientConn {
	b.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	return conn
}

// fbFreeAddr is a loopback address with a port free right now.
func fbFreeAddr(b *testing.B) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// stop kills every process of the iteration (the next one starts afresh).
func (c *fbCluster) stop() {
	for _, br := range c.brokers {
		if br.Running() {
			br.Kill()
		}
	}
	if c.ctl.Running() {
		c.ctl.Kill()
	}
}

// setup creates 3×led partitions and waits until every broker hosts all of
// them in the role the controller gave it. It returns the partitions broker
// 1 leads.
//
// Nothing is produced before the failover: the first record of a leader
// epoch costs the same whether or not the log had records of earlier
// epochs, while replicating a first record to 2×N follower logs keeps the
// followers busy for long (a fsynced epoch checkpoint per log) and, at
// 6,000, past the 30 s replica lag (ISR shrinks, AlterPartition storm).
func (c *fbCluster) setup(led int) []fbTP {
	b := c.b
	b.Helper()
	total := 3 * led
	began := time.Now()
	var mine []fbTP
	leaderOf := make(map[fbTP]int32, total)
	for i := 0; i*fbTopicPartitions < total; i++ {
		n := min(fbTopicPartitions, total-i*fbTopicPartitions)
		topic := fmt.Sprintf("failover-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		resp, err := c.ctlAPI.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: topic, Partitions: int32(n), ReplicationFactor: 3})
		cancel()
		if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			b.Fatalf("CreateTopic %s of %d partitions: %v %v", topic, n, resp.GetErrorCode(), err)
		}
		for _, p := range resp.GetPartitions() {
			tp := fbTP{topic, p.GetPartition()}
			leaderOf[tp] = p.GetLeader()
			if p.GetLeader() == 1 {
				mine = append(mine, tp)
			}
		}
		c.checkNoFence("creating the topics")
	}
	if len(mine) != led {
		b.Fatalf("broker 1 leads %d of the %d partitions, want %d (round-robin)", len(mine), total, led)
	}
	created := time.Since(began)
	testutil.Eventually(b, 10*time.Minute, func() error {
		c.checkNoFence("waiting for the brokers to create the logs")
		for _, id := range clusterIDs {
			d, err := c.describeBroker(id)
			if err != nil {
				return err
			}
			ok := 0
			for _, p := range d.GetPartitions() {
				want := replicadv1.ReplicaRole_REPLICA_ROLE_FOLLOWER
				if leaderOf[fbTP{p.GetTopic(), p.GetPartition()}] == id {
					want = replicadv1.ReplicaRole_REPLICA_ROLE_LEADER
				}
				if p.GetRole() == want {
					ok++
				}
			}
			if ok != total {
				return fmt.Errorf("broker %d: %d of %d partitions in their role", id, ok, total)
			}
		}
		return nil
	})
	b.Logf("setup: %d partitions (broker 1 leads %d) created in %v, all in their roles after %v",
		total, led, created.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))
	return mine
}

// checkNoFence fails the benchmark if the controller fenced a broker while
// the cluster was being set up: the figures would be those of a cluster
// recovering from it.
func (c *fbCluster) checkNoFence(while string) {
	c.b.Helper()
	if s := c.ctl.Stderr(); strings.Contains(s, "broker fenced") {
		c.b.Fatalf("a broker was fenced while %s; controller log:\n%s",
			while, fbTail(fbGrep(s, "broker fenced", "moved leadership", "topic created", "broker registered"), 20))
	}
}

// checkOthersUnfenced fails the benchmark if broker 2 or 3 was fenced
// before until (a cluster that lost two brokers measures nothing useful).
func (c *fbCluster) checkOthersUnfenced(w *fbLog, until time.Time) {
	c.b.Helper()
	for _, l := range w.all() {
		if l.at.Before(until) && strings.Contains(l.text, "broker fenced") && fbField(l.text, "broker") != "1" {
			c.b.Fatalf("broker %s was fenced too during the measurement: %s", fbField(l.text, "broker"), l.text)
		}
	}
}

func (c *fbCluster) describe() (*replicadv1.DescribeClusterResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := c.ctlAPI.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	if err != nil {
		return nil, err
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return nil, fmt.Errorf("DescribeCluster: %v", resp.GetErrorCode())
	}
	return resp, nil
}

func (c *fbCluster) describeBroker(id int32) (*replicadv1.DescribePartitionsResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.rm[id].DescribePartitions(ctx, &replicadv1.DescribePartitionsRequest{})
}

// leaders loads lm with the controller's leader of every partition.
func (c *fbCluster) leaders(lm *fbLeaderMap) error {
	resp, err := c.describe()
	if err != nil {
		return err
	}
	m := make(map[fbTP]int32, len(resp.GetPartitions()))
	for _, p := range resp.GetPartitions() {
		m[fbTP{p.GetTopic(), p.GetPartition()}] = p.GetLeader()
	}
	lm.set(m)
	return nil
}

func fbProfileDir() string { return os.Getenv("FAILOVER_BENCH_PROFILE") }

// profile starts, when profiling, a CPU profile and an execution trace of
// each broker in ids; the returned func waits until they are written.
func (c *fbCluster) profile(phase string, ids ...int32) func() {
	dir := fbProfileDir()
	if dir == "" {
		return func() {}
	}
	secs := 5
	if v, err := strconv.Atoi(os.Getenv("FAILOVER_BENCH_PROFILE_SECONDS")); err == nil && v > 0 {
		secs = v
	}
	var wg sync.WaitGroup
	for _, id := range ids {
		for kind, path := range map[string]string{"cpu": "profile", "trace": "trace"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				url := fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", c.pprof[id], path, secs)
				file := filepath.Join(dir, fmt.Sprintf("%s-%s-broker%d.%s", strings.ReplaceAll(c.b.Name(), "/", "_"), phase, id, kind))
				resp, err := http.Get(url)
				if err != nil {
					c.b.Logf("profile %s: %v", url, err)
					return
				}
				defer resp.Body.Close()
				f, err := os.Create(file)
				if err != nil {
					c.b.Logf("profile: %v", err)
					return
				}
				defer f.Close()
				if _, err := io.Copy(f, resp.Body); err != nil {
					c.b.Logf("profile %s: %v", url, err)
				}
			}()
		}
	}
	// Let the profilers start before the phase does.
	time.Sleep(100 * time.Millisecond)
	return wg.Wait
}

// fbBD is the controller's side of a failover, from its log.
type fbBD struct {
	metrics map[string]float64
	text    string
}

// fbBreakdown reads the controller's log lines from w relative to from:
// "moved leadership" (after a fencing: the moves committed and queued) and
// the broker queue's "request sent" lines, whose duration says when each
// request left (arrival - duration) and arrival when the broker answered.
func fbBreakdown(w *fbLog, from time.Time, prefix string) fbBD {
	// The answers to the last requests may be logged just after the sweep.
	time.Sleep(500 * time.Millisecond)
	out := fbBD{metrics: map[string]float64{}}
	var parts []string
	for _, l := range w.all() {
		if strings.Contains(l.text, "moved leadership") {
			parts = append(parts, fmt.Sprintf("moves committed %v", l.at.Sub(from).Round(time.Millisecond)))
			out.metrics[prefix+"moved-ms"] = fbMs(l.at.Sub(from))
			continue
		}
		if !strings.Contains(l.text, "request sent") {
			continue
		}
		kind, broker, n := fbField(l.text, "kind"), fbField(l.text, "broker"), fbField(l.text, "partitions")
		d, err := strconv.ParseFloat(fbField(l.text, "duration_ms"), 64) // zerolog: milliseconds
		if err != nil {
			continue
		}
		sent := l.at.Add(-time.Duration(d * float64(time.Millisecond)))
		parts = append(parts, fmt.Sprintf("%s of %s to %s sent %v answered %v",
			kind, n, broker, sent.Sub(from).Round(time.Millisecond), l.at.Sub(from).Round(time.Millisecond)))
		if kind == "LeaderAndIsr" {
			// A request of more than 10,000 partitions goes in chunks:
			// the first left, the last answered.
			k := prefix + "LeaderAndIsr" + broker
			if v, ok := out.metrics[k+"-sent-ms"]; !ok || fbMs(sent.Sub(from)) < v {
				out.metrics[k+"-sent-ms"] = fbMs(sent.Sub(from))
			}
			out.metrics[k+"-answered-ms"] = max(out.metrics[k+"-answered-ms"], fbMs(l.at.Sub(from)))
		}
	}
	out.text = strings.Join(parts, "; ")
	return out
}

// fbLeaderMap is the leader a sweep produces to: the controller's, of each
// partition, reloaded (at most every 20 ms) while a partition has none but
// avoid or -1.
type fbLeaderMap struct {
	avoid   int32
	refresh func(*fbLeaderMap) error

	mu   sync.RWMutex
	m    map[fbTP]int32
	rmu  sync.Mutex
	last time.Time
}

func (lm *fbLeaderMap) set(m map[fbTP]int32) {
	lm.mu.Lock()
	lm.m = m
	lm.mu.Unlock()
}

func (lm *fbLeaderMap) leader(p fbTP) (int32, bool) {
	lm.mu.RLock()
	l, ok := lm.m[p]
	lm.mu.RUnlock()
	if ok && l >= 0 && l != lm.avoid {
		return l, true
	}
	if lm.rmu.TryLock() {
		if time.Since(lm.last) >= 20*time.Millisecond {
			_ = lm.refresh(lm)
			lm.last = time.Now()
		}
		lm.rmu.Unlock()
	}
	return 0, false
}

// fbSweepResult is one produce sweep: when it started, when the first and
// the last partition were accepted, the last per leader, and what the
// refusals were.
type fbSweepResult struct {
	start, first, last time.Time
	attempts           int64

	mu       sync.Mutex
	lastBy   map[int32]time.Time
	failures map[string]int
}

func (r *fbSweepResult) codes() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.failures) == 0 {
		return "none refused"
	}
	var s []string
	for _, k := range slices.Sorted(maps.Keys(r.failures)) {
		s = append(s, fmt.Sprintf("%s: %d", k, r.failures[k]))
	}
	return "refused: " + strings.Join(s, ", ")
}

func (r *fbSweepResult) lastByLeader(from time.Time) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var s []string
	for _, id := range slices.Sorted(maps.Keys(r.lastBy)) {
		s = append(s, fmt.Sprintf("last on broker %d at %v", id, r.lastBy[id].Sub(from).Round(time.Millisecond)))
	}
	return strings.Join(s, ", ")
}

// fbSweep sends one acks=1 record to each of parts on its leader, with
// fbWorkers in parallel. A partition not accepted goes to the back of the
// queue, its worker pausing fbRetry, until it is, or deadline passes.
func fbSweep(clients map[int32]replicadv1.LogServiceClient, parts []fbTP, lm *fbLeaderMap, deadline time.Time) (*fbSweepResult, error) {
	r := &fbSweepResult{start: time.Now(), lastBy: map[int32]time.Time{}, failures: map[string]int{}}
	queue := make(chan fbTP, len(parts))
	for _, p := range parts {
		queue <- p
	}
	var remaining atomic.Int64
	remaining.Store(int64(len(parts)))
	var timedOut atomic.Bool
	done := func() {
		if remaining.Add(-1) == 0 {
			close(queue)
		}
	}
	record := []*replicadv1.Record{{Value: []byte("failover")}}
	var wg sync.WaitGroup
	for range fbWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range queue {
				if timedOut.Load() {
					done()
					continue
				}
				code := "NO_LEADER_KNOWN"
				id, ok := lm.leader(p)
				if ok {
					atomic.AddInt64(&r.attempts, 1)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					resp, err := clients[id].Produce(ctx, &replicadv1.ProduceRequest{Topic: p.topic, Partition: p.partition, Acks: 1,
						TimeoutMs: 5000, Records: record})
					cancel()
					switch {
					case err != nil:
						code = "rpc error"
					case resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
						code = strings.TrimPrefix(resp.GetErrorCode().String(), "ERROR_CODE_")
					default:
						code = ""
					}
				}
				now := time.Now()
				r.mu.Lock()
				if code == "" {
					if r.first.IsZero() || now.Before(r.first) {
						r.first = now
					}
					if now.After(r.last) {
						r.last = now
					}
					if now.After(r.lastBy[id]) {
						r.lastBy[id] = now
					}
				} else {
					r.failures[code]++
				}
				r.mu.Unlock()
				if code == "" {
					done()
					continue
				}
				if now.After(deadline) {
					timedOut.Store(true)
					done()
					continue
				}
				time.Sleep(fbRetry)
				queue <- p
			}
		}()
	}
	wg.Wait()
	if timedOut.Load() {
		return r, fmt.Errorf("not every partition accepted a produce by the deadline (%s)", r.codes())
	}
	return r, nil
}

// fbLog timestamps the lines a process writes to stderr as they arrive
// (the processes' own timestamps have whole seconds only): it polls the
// harness's copy every millisecond, from the moment it is made.
type fbLog struct {
	proc   *testutil.Broker
	stop   chan struct{}
	done   chan struct{}
	off    int // of the harness's copy, read so far (the poller's own)
	mu     sync.Mutex
	lines  []fbLine
	notify chan struct{} // closed and replaced when lines are added
}

type fbLine struct {
	at   time.Time
	text string
}

func fbWatch(proc *testutil.Broker) *fbLog {
	w := &fbLog{proc: proc, stop: make(chan struct{}), done: make(chan struct{}), off: len(proc.Stderr()), notify: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.stop:
				w.poll()
				return
			case <-tick.C:
				w.poll()
			}
		}
	}()
	return w
}

func (w *fbLog) poll() {
	// Only what is new: copying the whole log every millisecond (megabytes
	// at debug level) took a share of the two cores the figures need.
	s := w.proc.StderrFrom(w.off)
	end := strings.LastIndexByte(s, '\n')
	if end < 0 {
		return
	}
	now := time.Now()
	chunk := s[:end]
	w.off += end + 1
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range strings.Split(chunk, "\n") {
		w.lines = append(w.lines, fbLine{at: now, text: l})
	}
	close(w.notify)
	w.notify = make(chan struct{})
}

func (w *fbLog) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func (w *fbLog) all() []fbLine {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.lines)
}

// wait returns the first line pred accepts, waiting up to timeout.
func (w *fbLog) wait(timeout time.Duration, pred func(string) bool) (fbLine, bool) {
	deadline := time.After(timeout)
	seen := 0
	for {
		w.mu.Lock()
		lines, notify := w.lines[seen:], w.notify
		w.mu.Unlock()
		for _, l := range lines {
			if pred(l.text) {
				return l, true
			}
		}
		seen += len(lines)
		select {
		case <-notify:
		case <-deadline:
			return fbLine{}, false
		}
	}
}

// fbField is the value of key=value in a console log line ("" if absent);
// a quoted value is unquoted.
func fbField(line, key string) string {
	i := strings.Index(line, " "+key+"=")
	if i < 0 {
		return ""
	}
	v := line[i+len(key)+2:]
	if strings.HasPrefix(v, `"`) {
		if q, err := strconv.QuotedPrefix(v); err == nil {
			u, _ := strconv.Unquote(q)
			return u
		}
	}
	if j := strings.IndexByte(v, ' '); j >= 0 {
		v = v[:j]
	}
	return v
}

// fbGrep keeps the lines of s holding one of words.
func fbGrep(s string, words ...string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		for _, w := range words {
			if strings.Contains(l, w) {
				out = append(out, l)
				break
			}
		}
	}
	return strings.Join(out, "\n")
}

func fbTail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func fbMs(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// fbLoad is the 1-minute load average (-1 if unknown): on a shared machine
// it says how much the figures of a run owe to other work.
func fbLoad() float64 {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(data))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}
