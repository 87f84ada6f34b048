package integration

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/syncbuf"
	"github.com/replicad/replicad/internal/testutil"
)

// bgCtlclient is a ctlclient process running in the background.
type bgCtlclient struct {
	cmd         *exec.Cmd
	out, errOut *syncbuf.Buffer
	done        chan struct{}
	code        int
}

// startCtlclient starts the built ctlclient with args; it is killed at
// cleanup if still running.
func startCtlclient(t *testing.T, args ...string) *bgCtlclient {
	t.Helper()
	b := &bgCtlclient{cmd: exec.Command(bins.Ctlclient, args...), out: &syncbuf.Buffer{}, errOut: &syncbuf.Buffer{}, done: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.errOut
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := b.cmd.Wait()
		b.code = 0
		if ee, ok := err.(*exec.ExitError); ok {
			b.code = ee.ExitCode()
		} else if err != nil {
			b.code = -1
		}
		close(b.done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// wait waits up to d for the process to exit and returns its result.
func (b *bgCtlclient) wait(t *testing.T, d time.Duration) ctlResult {
	t.Helper()
	select {
	case <-b.done:
		return ctlResult{b.code, b.out.String(), b.errOut.String()}
	case <-time.After(d):
		t.Fatalf("ctlclient %v still running after %s\nstdout:\n%s\nstderr:\n%s", b.cmd.Args[1:], d, b.out.String(), b.errOut.String())
		return ctlResult{}
	}
}

func (b *bgCtlclient) running() bool {
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

// The everyday commands against a real controller and 3 brokers: list-topics
// and describe-topic show the controller's state; after broker 3 is killed,
// describe-cluster's filters name exactly the partitions the state says are
// under-replicated, unavailable or under min ISR, and cluster health says
// unhealthy (exit 1); cluster health --watch --exit-when-healthy and
// delete-topic --wait (of a topic with a replica on broker 3) run meanwhile
// and exit 0 once broker 3 is back.
func TestEverydayCommandsAroundABrokerFailure(t *testing.T) {
	c := newCtlCluster(t, 2*time.Second, "--min-insync-replicas", "2")
	ctl := func(args ...string) ctlResult {
		t.Helper()
		return runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr}, args...)...)
	}
	// orders: RF 3 (stays writable with one broker down); pairs: RF 2
	// (drops under min ISR); solo: RF 1 (loses its leader).
	for _, tp := range []struct {
		name   string
		parts  int32
		factor int32
	}{{"orders", 3, 3}, {"pairs", 3, 2}, {"solo", 3, 1}} {
		ctl("create-topic", "--topic", tp.name, "--partitions", itoa(int(tp.parts)), "--replication-factor", itoa(int(tp.factor))).want(t, 0)
	}
	r := ctl("create-topic", "--topic", "orders", "--partitions", "3", "--replication-factor", "3", "--if-not-exists").want(t, 0)
	if !strings.Contains(r.stdout, "already exists") {
		t.Fatalf("--if-not-exists on an existing topic: %q", r.stdout)
	}
	ctl("delete-topic", "--topic", "nope", "--if-exists").want(t, 0)
	ctl("cluster", "health", "--watch", "--interval", "200ms", "--exit-when-healthy", "--wait-timeout", "30s").want(t, 0)

	st, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	r = ctl("list-topics", "-o", "json").want(t, 0)
	var list struct {
		Topics []struct {
			Topic, TopicID                string
			Partitions, ReplicationFactor int
		}
	}
	if err := json.Unmarshal([]byte(r.stdout), &list); err != nil {
		t.Fatalf("%v in %s", err, r.stdout)
	}
	idOf := map[string]string{}
	for _, p := range st.GetPartitions() {
		idOf[p.GetTopic()] = p.GetTopicId()
	}
	got := fmt.Sprint(list.Topics)
	if want := fmt.Sprintf("[{orders %s 3 3} {pairs %s 3 2} {solo %s 3 1}]", idOf["orders"], idOf["pairs"], idOf["solo"]); got != want || idOf["orders"] == "" {
		t.Fatalf("list-topics %s, want %s", got, want)
	}
	r = ctl("list-topics").want(t, 0)
	if !strings.Contains(r.stdout, "pairs   "+idOf["pairs"]+"  3           2") {
		t.Fatalf("list-topics table:\n%s", r.stdout)
	}

	r = ctl("describe-topic", "orders", "-o", "json").want(t, 0)
	var desc struct {
		Topic           string
		PartitionStates []json.RawMessage
	}
	if err := json.Unmarshal([]byte(r.stdout), &desc); err != nil || len(desc.PartitionStates) != 3 {
		t.Fatalf("describe-topic json %v:\n%s", err, r.stdout)
	}
	for i, raw := range desc.PartitionStates {
		var p replicadv1.ClusterPartition
		if err := protojson.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		want, _ := c.partitionState("orders", int32(i))
		if p.GetLeader() != want.GetLeader() || !slices.Equal(p.GetIsr(), want.GetIsr()) || p.GetMinInsyncReplicas() != 2 || len(p.GetReplicas()) != 3 {
			t.Fatalf("describe-topic orders-%d %v, controller %v", i, &p, want)
		}
	}
	r = ctl("describe-topic", "orders").want(t, 0)
	if !strings.Contains(r.stdout, "3 partitions, replication factor 3") || !strings.Contains(r.stdout, "MIN-ISR") {
		t.Fatalf("describe-topic table:\n%s", r.stdout)
	}
	r = ctl("describe-topic", "nope").want(t, 1)
	if !strings.Contains(r.stderr, `topic "nope" does not exist`) {
		t.Fatalf("describe-topic nope: %q", r.stderr)
	}

	// Broker 3 crashes; the controller fences it and moves everything off it.
	b3, _ := c.broker(3)
	b3.Kill()
	c.waitFenced(3)
	testutil.Eventually(t, 30*time.Second, func() error {
		st, err = c.cluster()
		if err != nil {
			return err
		}
		for _, p := range st.GetPartitions() {
			if p.GetLeader() == 3 || slices.Contains(p.GetIsr(), 3) {
				return fmt.Errorf("%s-%d still has broker 3: %v", p.GetTopic(), p.GetPartition(), p)
			}
		}
		return nil
	})
	// What each filter must name, from the controller's state itself.
	var wantUnder, wantUnavail, wantMin []string
	for _, p := range st.GetPartitions() {
		name := fmt.Sprintf("%s-%d", p.GetTopic(), p.GetPartition())
		if slices.Contains(p.GetReplicas(), 3) {
			wantUnder = append(wantUnder, name) // every replica set with 3 has lost it from its ISR
		}
		if p.GetTopic() == "solo" && slices.Contains(p.GetReplicas(), 3) {
			wantUnavail = append(wantUnavail, name)
			wantMin = append(wantMin, name)
		}
		if p.GetTopic() == "pairs" && slices.Contains(p.GetReplicas(), 3) {
			wantMin = append(wantMin, name)
		}
	}
	for _, w := range [][]string{wantUnder, wantUnavail, wantMin} {
		slices.Sort(w)
	}
	if len(wantUnder) != 3+2+1 || len(wantUnavail) != 1 || len(wantMin) != 2+1 {
		t.Fatalf("the round-robin assignment should give broker 3 every orders partition, 2 of pairs and 1 of solo: %v", st.GetPartitions())
	}
	filtered := func(flag string) []string {
		r := ctl("describe-cluster", flag, "-o", "json").want(t, 0)
		var resp replicadv1.DescribeClusterResponse
		if err := protojson.Unmarshal([]byte(r.stdout), &resp); err != nil {
			t.Fatalf("%s: %v in %s", flag, err, r.stdout)
		}
		var names []string
		for _, p := range resp.GetPartitions() {
			names = append(names, fmt.Sprintf("%s-%d", p.GetTopic(), p.GetPartition()))
		}
		slices.Sort(names)
		return names
	}
	for _, f := range []struct {
		flag string
		want []string
	}{{"--under-replicated", wantUnder}, {"--unavailable", wantUnavail}, {"--under-min-isr", wantMin}} {
		if got := filtered(f.flag); !slices.Equal(got, f.want) {
			t.Errorf("describe-cluster %s: %v, want %v", f.flag, got, f.want)
		}
	}
	r = ctl("describe-cluster", "--unavailable").want(t, 0)
	if l := strings.Split(strings.TrimSpace(r.stdout), "\n"); len(l) != 2 || !strings.HasPrefix(l[1], "solo ") || !strings.Contains(l[1], "none") {
		t.Fatalf("describe-cluster --unavailable table:\n%s", r.stdout)
	}
	r = ctl("describe-cluster", "--unavailable", "--topic", "orders").want(t, 0)
	if strings.TrimSpace(r.stdout) != "no unavailable partitions in topic orders" {
		t.Fatalf("--unavailable --topic orders: %q", r.stdout)
	}
	r = ctl("cluster", "health").want(t, 1)
	t.Logf("cluster health with broker 3 down:\n%s", r.stdout)
	for _, s := range []string{"Healthy:                         false", "brokers_down", "Brokers down:                    3",
		"Leaderless partitions (1):       " + wantUnavail[0], "Under-replicated partitions (6):"} {
		if !strings.Contains(r.stdout, s) {
			t.Fatalf("cluster health lacks %q:\n%s", s, r.stdout)
		}
	}

	// While broker 3 is down: a watch waiting for health, and the deletion
	// of pairs waiting for broker 3 to delete its logs.
	watch := startCtlclient(t, "--controller", c.ctlAddr, "cluster", "health", "--watch", "--interval", "200ms", "--exit-when-healthy", "--wait-timeout", "90s", "-o", "json")
	del := startCtlclient(t, "--controller", c.ctlAddr, "delete-topic", "--topic", "pairs", "--wait", "--wait-timeout", "90s")
	testutil.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(del.out.String(), "on 3") {
			return fmt.Errorf("delete-topic --wait printed %q", del.out.String())
		}
		return nil
	})
	if !watch.running() || !del.running() {
		t.Fatalf("a command ended with broker 3 down: watch %v, delete %v", watch.running(), del.running())
	}
	c.startBroker(3)
	r = watch.wait(t, 90*time.Second).want(t, 0)
	var rep struct {
		Healthy     bool
		BrokersDown []int32
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || !rep.Healthy || len(rep.BrokersDown) != 0 {
		t.Fatalf("cluster health --watch json %q: %v", r.stdout, err)
	}
	r = del.wait(t, 90*time.Second).want(t, 0)
	t.Logf("delete-topic --wait:\n%s", r.stdout)
	if !strings.Contains(r.stdout, "waiting for") || !strings.HasSuffix(r.stdout, "done: every replica of pairs deleted its log\n") {
		t.Fatalf("delete-topic --wait:\n%s", r.stdout)
	}
	ctl("cluster", "health").want(t, 0)
	r = ctl("list-topics").want(t, 0)
	if strings.Contains(r.stdout, "pairs") {
		t.Fatalf("pairs still listed:\n%s", r.stdout)
	}
}
