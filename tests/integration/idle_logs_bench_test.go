package integration

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// BenchmarkIdleLogs measures what idle partitions cost a broker: a
// controller and brokers 1..3 (--log-flush os) with 3×N partitions RF 3,
// so that each broker hosts 3×N logs (30,000 at N=10,000, more than its
// 20,000 descriptors here: its file cache keeps half of them). Once every
// broker hosts every partition in its role and the cluster had idleSettle
// to settle, it reports per broker, averaged over the three:
//
//   - rss-bytes/log: VmRSS growth from the broker's start, per log;
//   - heap-bytes/log: the Go heap in use (HeapInuse, after a GC, from
//     /debug/pprof/heap?debug=1&gc=1) growth, per log;
//   - idle-cpu-pct: user+system CPU over idleWindow, percent of one core
//     (every follower fetching, nothing produced);
//   - open-fds: the descriptors the broker holds.
//
// FAILOVER_BENCH_PROFILE=DIR leaves a CPU profile of broker 1's idle
// window in DIR (FAILOVER_BENCH_PROFILE_SECONDS long); such a run's
// figures are not the benchmark's.
//
// Run it alone, without -race:
//
//	mkdir -p .bench-tmp && TMPDIR=$PWD/.bench-tmp go test -run '^$' -bench IdleLogs -benchtime 1x -timeout 60m ./tests/integration/
func BenchmarkIdleLogs(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("logs-per-broker=%d", 3*n), func(b *testing.B) {
			if raceEnabled {
				b.Skip("race-detector binaries would distort the figures")
			}
			var rl syscall.Rlimit
			if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
				b.Fatal(err)
			}
			if rl.Max < fbMinFdLimit {
				b.Skipf("the RLIMIT_NOFILE hard limit is %d here, below %d", rl.Max, fbMinFdLimit)
			}
			b.StopTimer()
			for range b.N {
				idleLogsOnce(b, n)
			}
		})
	}
}

const (
	idleSettle = 10 * time.Second
	idleWindow = 30 * time.Second
)

func idleLogsOnce(b *testing.B, led int) {
	c := &fbCluster{b: b, brokers: map[int32]*testutil.Broker{}, rm: map[int32]replicadv1.ReplicaManagerServiceClient{},
		logAPI: map[int32]replicadv1.LogServiceClient{}, pprof: map[int32]string{}}
	c.ctl = testutil.StartController(b, bins.Ctlclient, "--listen", fbFreeAddr(b), "--store", b.TempDir(),
		"--session-timeout", fbShutdownSession.String())
	defer c.stop()
	c.ctlAPI = replicadv1.NewControllerServiceClient(fbDial(b, c.ctl.Addr))
	for _, id := range clusterIDs {
		c.pprof[id] = fbFreeAddr(b)
		args := []string{"--controller", c.ctl.Addr, "--log-flush", "os", "--metrics-listen", c.pprof[id], "--pprof"}
		br := testutil.StartBroker(b, bins.Replicad, testutil.BrokerOptions{ID: id, LogDirs: []string{b.TempDir()}, Args: args})
		conn := fbDial(b, br.Addr)
		c.brokers[id], c.rm[id], c.logAPI[id] = br, replicadv1.NewReplicaManagerServiceClient(conn), replicadv1.NewLogServiceClient(conn)
	}
	testutil.Eventually(b, 30*time.Second, func() error {
		resp, err := c.describe()
		if err != nil {
			return err
		}
		for _, br := range resp.GetBrokers() {
			if !br.GetAlive() {
				return fmt.Errorf("broker %d not alive", br.GetId())
			}
		}
		if len(resp.GetBrokers()) != len(clusterIDs) {
			return fmt.Errorf("%d brokers registered", len(resp.GetBrokers()))
		}
		return nil
	})
	rss0, heap0 := map[int32]int64{}, map[int32]int64{}
	for _, id := range clusterIDs {
		rss0[id], heap0[id] = idleRSS(b, c.brokers[id].Pid()), idleHeap(b, c.pprof[id])
	}
	c.setup(led)
	time.Sleep(idleSettle) // the measurement is of an idle cluster: let the creation's work end
	logs := float64(3 * led)
	var rss, heap, cpu, fds float64
	// FAILOVER_BENCH_PROFILE profiles broker 1 over the window too (see
	// the failover benchmarks): what an idle broker spends its CPU on.
	profiled := c.profile("idle", 1)
	defer profiled()
	ticks0 := map[int32]int64{}
	for _, id := range clusterIDs {
		ticks0[id] = idleTicks(b, c.brokers[id].Pid())
	}
	start := time.Now()
	time.Sleep(idleWindow)
	elapsed := time.Since(start).Seconds()
	for _, id := range clusterIDs {
		pid := c.brokers[id].Pid()
		cpu += float64(idleTicks(b, pid)-ticks0[id]) / 100 / elapsed * 100 // USER_HZ is 100 on Linux
		rss += float64(idleRSS(b, pid)-rss0[id]) / logs
		heap += float64(idleHeap(b, c.pprof[id])-heap0[id]) / logs
		if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
			fds += float64(len(ents))
		}
	}
	k := float64(len(clusterIDs))
	b.ReportMetric(rss/k, "rss-bytes/log")
	b.ReportMetric(heap/k, "heap-bytes/log")
	b.ReportMetric(cpu/k, "idle-cpu-pct")
	b.ReportMetric(fds/k, "open-fds")
	b.ReportMetric(fbLoad(), "loadavg-1m")
	b.Logf("%d logs per broker: RSS %.0f B/log, Go heap %.0f B/log, idle CPU %.1f%% of a core, %.0f descriptors (per broker, mean of 3); load %.1f",
		3*led, rss/k, heap/k, cpu/k, fds/k, fbLoad())
}

// idleRSS is the process's VmRSS in bytes.
func idleRSS(b *testing.B, pid int) int64 {
	b.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb << 10
		}
	}
	b.Fatalf("no VmRSS for %d", pid)
	return 0
}

// idleTicks is the process's user+system CPU time in clock ticks.
func idleTicks(b *testing.B, pid int) int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the command name (which may hold spaces), from field 3.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}

// idleHeap is the broker's HeapInuse after a GC, from its heap profile.
func idleHeap(b *testing.B, addr string) int64 {
	b.Helper()
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1&gc=1")
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(l, "# HeapInuse = "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no HeapInuse in the heap profile of %s", addr)
	return 0
}
