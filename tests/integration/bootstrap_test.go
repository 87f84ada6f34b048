package integration

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/syncbuf"
	"github.com/replicad/replicad/internal/testutil"
	"github.com/replicad/replicad/internal/tlsconf"
)

// metadataMatches checks broker id's Metadata answer against the
// controller's DescribeCluster: every broker with its endpoint, the
// controller, and each partition of topic with the same leader, leader
// epoch, replicas and ISR.
func (c *ctlCluster) metadataMatches(id int32, topic string, want *replicadv1.DescribeClusterResponse) error {
	_, cl := c.broker(id)
	resp, err := cl.log.Metadata(ctx(c.t), &replicadv1.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return err
	}
	if resp.GetBrokerId() != id || resp.GetControllerEpoch() != want.GetControllerEpoch() {
		return fmt.Errorf("broker %d answers as %d at controller epoch %d, want %d", id, resp.GetBrokerId(), resp.GetControllerEpoch(), want.GetControllerEpoch())
	}
	var addrs, wantAddrs []string
	for _, b := range resp.GetBrokers() {
		addrs = append(addrs, fmt.Sprintf("%d=%s:%d", b.GetId(), b.GetHost(), b.GetPort()))
	}
	for _, b := range want.GetBrokers() {
		wantAddrs = append(wantAddrs, fmt.Sprintf("%d=%s:%d", b.GetId(), b.GetHost(), b.GetPort()))
	}
	if !slices.Equal(addrs, wantAddrs) {
		return fmt.Errorf("broker %d knows brokers %v, the controller %v", id, addrs, wantAddrs)
	}
	if len(resp.GetTopics()) != 1 || resp.GetTopics()[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return fmt.Errorf("broker %d: topic %s: %v", id, topic, resp.GetTopics())
	}
	got := resp.GetTopics()[0]
	n := 0
	for _, p := range want.GetPartitions() {
		if p.GetTopic() != topic {
			continue
		}
		n++
		i := slices.IndexFunc(got.GetPartitions(), func(m *replicadv1.MetadataPartition) bool { return m.GetPartition() == p.GetPartition() })
		if i < 0 {
			return fmt.Errorf("broker %d lacks %s-%d", id, topic, p.GetPartition())
		}
		m := got.GetPartitions()[i]
		if m.GetLeader() != p.GetLeader() || m.GetLeaderEpoch() != p.GetLeaderEpoch() || !slices.Equal(m.GetReplicas(), p.GetReplicas()) ||
			!slices.Equal(m.GetIsr(), p.GetIsr()) || len(m.GetOfflineReplicas()) != 0 || got.GetTopicId() != p.GetTopicId() {
			return fmt.Errorf("broker %d: %s-%d %v (topic ID %s), the controller %v", id, topic, p.GetPartition(), m, got.GetTopicId(), p)
		}
	}
	if n != len(got.GetPartitions()) {
		return fmt.Errorf("broker %d knows %d partitions of %s, the controller %d", id, len(got.GetPartitions()), topic, n)
	}
	return nil
}

// follow is a running `ctlclient --bootstrap ... consume --follow`.
type follow struct {
	cmd    *exec.Cmd
	stdout *syncbuf.Buffer
	stderr *syncbuf.Buffer
	done   chan error
}

func startFollow(t *testing.T, args ...string) *follow {
	t.Helper()
	f := &follow{cmd: exec.Command(bins.Ctlclient, args...), stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}, done: make(chan error, 1)}
	f.cmd.Stdout, f.cmd.Stderr = f.stdout, f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { f.done <- f.cmd.Wait() }()
	t.Cleanup(func() {
		if f.cmd.ProcessState == nil {
			_ = f.cmd.Process.Kill()
			<-f.done
		}
	})
	return f
}

// waitLines waits until the consumer printed every value of want.
func (f *follow) waitLines(t *testing.T, want ...string) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		out := f.stdout.String()
		for _, v := range want {
			if !strings.Contains(out, "\t"+v+"\n") {
				return fmt.Errorf("consumer has not printed %q yet:\n%s\nstderr:\n%s", v, out, f.stderr.String())
			}
		}
		return nil
	})
}

// A cluster of a controller and 3 brokers, a topic of RF 3. Every broker's
// Metadata agrees with the controller. A consumer following partition 0
// through --bootstrap holds the leader it looked up; moving leadership
// (ctlclient elect) makes that leader answer NOT_LEADER_OR_FOLLOWER, and
// the consumer refreshes its view and goes on. Then the controller is
// killed (-9): produce with acks=all and consume through --bootstrap (a
// dead address listed first, and the environment variable) keep working on
// both partitions, with no controller to ask.
func TestBootstrapFindsLeadersWithTheControllerDown(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second)
	c.createTopic("boot", 2, 3)
	for p := int32(0); p < 2; p++ {
		for _, id := range clusterIDs {
			c.waitInIsr("boot", p, id, 30*time.Second)
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		want, err := c.cluster()
		if err != nil {
			return err
		}
		for _, id := range clusterIDs {
			if err := c.metadataMatches(id, "boot", want); err != nil {
				return err
			}
		}
		return nil
	})
	var addrs []string
	for _, id := range clusterIDs {
		b, _ := c.broker(id)
		addrs = append(addrs, b.Addr)
	}
	boot := strings.Join(addrs, ",")

	// A client holding an old view: the follower's leader moves away.
	before, err := c.partitionState("boot", 0)
	if err != nil {
		t.Fatal(err)
	}
	f := startFollow(t, "--bootstrap", boot, "consume", "--topic", "boot", "--partition", "0", "--follow", "--max-wait-ms", "200")
	runCtlclient(t, nil, "", "--bootstrap", boot, "produce", "--topic", "boot", "--partition", "0", "--value", "a-0").want(t, 0)
	f.waitLines(t, "a-0")
	next := before.GetIsr()[slices.IndexFunc(before.GetIsr(), func(id int32) bool { return id != before.GetLeader() })]
	runCtlclient(t, nil, "", "--controller", c.ctlAddr, "elect", "--topic", "boot", "--partition", "0", "--leader", itoa(int(next))).want(t, 0)
	// The old leader refuses the follower's next poll once it has the
	// LeaderAndIsr; the follower looks the leader up again.
	testutil.Eventually(t, 30*time.Second, func() error {
		want, err := c.cluster()
		if err != nil {
			return err
		}
		return c.metadataMatches(before.GetLeader(), "boot", want)
	})
	runCtlclient(t, nil, "", "--bootstrap", boot, "produce", "--topic", "boot", "--partition", "0", "--value", "a-1").want(t, 0)
	f.waitLines(t, "a-1")
	if err := f.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if err := <-f.done; err != nil {
		t.Fatalf("the follower: %v\nstderr:\n%s", err, f.stderr.String())
	}
	if out := f.stdout.String(); out != "0\ta-0\n1\ta-1\n" {
		t.Fatalf("the follower printed %q, want a-0 at 0 and a-1 at 1", out)
	}
	after, err := c.partitionState("boot", 0)
	if err != nil || after.GetLeader() != next {
		t.Fatalf("leader of boot-0 after the election: %v %v, want %d", after, err, next)
	}

	// The controller goes.
	c.ctl.Kill()
	if _, exited := c.ctl.Wait(10 * time.Second); !exited {
		t.Fatal("the controller did not exit after kill -9")
	}
	withDead := freeAddr(t) + "," + boot
	for i := range 3 {
		for p := range 2 {
			v := fmt.Sprintf("down-%d-%d", p, i)
			r := runCtlclient(t, nil, "", "--bootstrap", withDead, "produce", "--acks", "all", "--topic", "boot", "--partition", itoa(p), "--value", v)
			r.want(t, 0)
		}
	}
	// Partition 1 through one broker only, named by the environment: the
	// leader may be another, found in its answer.
	r := runCtlclient(t, []string{"CTLCLIENT_BOOTSTRAP=" + addrs[2]}, "", "consume", "--topic", "boot", "--partition", "1").want(t, 0)
	if r.stdout != "0\tdown-1-0\n1\tdown-1-1\n2\tdown-1-2\n" {
		t.Fatalf("consume boot-1 with the controller down: %q", r.stdout)
	}
	r = runCtlclient(t, nil, "", "--bootstrap", withDead, "consume", "--topic", "boot", "--partition", "0").want(t, 0)
	if r.stdout != "0\ta-0\n1\ta-1\n2\tdown-0-0\n3\tdown-0-1\n4\tdown-0-2\n" {
		t.Fatalf("consume boot-0 with the controller down: %q", r.stdout)
	}
	// perf produce too.
	runCtlclient(t, nil, "", "--bootstrap", withDead, "perf", "produce", "--topic", "boot", "--partitions", "2", "--records", "200",
		"--batch", "20", "--acks", "all").want(t, 0)
	// With --controller alone nothing can be found now.
	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "--timeout", "2s", "produce", "--topic", "boot", "--partition", "0", "--value", "x")
	if r.code == 0 {
		t.Fatalf("produce through the dead controller succeeded:\n%s", r.stdout)
	}
}

// Under mutual TLS a client certificate's Metadata shows only the topics an
// ACL lets it use: none before any ACL (the brokers still), a topic named
// that it may not describe TOPIC_AUTHORIZATION_FAILED; the admin sees every
// topic. Through --bootstrap the client then produces where it may write,
// and is refused at once where it may not describe.
func TestMetadataShowsOnlyDescribableTopicsUnderMutualTLS(t *testing.T) {
	dir := devCerts(t)
	c := newTLSCluster(t, dir, 2*time.Second)
	c.createTopic("seen", 1, 3)
	c.createTopic("hidden", 1, 3)
	b, _ := c.broker(1)
	asClient := replicadv1.NewLogServiceClient(dialAs(t, dir, "client", b.Addr))
	asAdmin := replicadv1.NewLogServiceClient(dialAs(t, dir, "admin", b.Addr))
	topicsOf := func(lc replicadv1.LogServiceClient, req *replicadv1.MetadataRequest) ([]string, *replicadv1.MetadataResponse) {
		t.Helper()
		resp, err := lc.Metadata(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tm := range resp.GetTopics() {
			names = append(names, tm.GetTopic()+"="+metaCodeName(tm.GetErrorCode()))
		}
		return names, resp
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if got, _ := topicsOf(asAdmin, &replicadv1.MetadataRequest{}); !slices.Equal(got, []string{"hidden=NONE", "seen=NONE"}) {
			return fmt.Errorf("the admin sees %v, want both topics", got)
		}
		return nil
	})
	got, resp := topicsOf(asClient, &replicadv1.MetadataRequest{})
	if len(got) != 0 || len(resp.GetBrokers()) != 3 {
		t.Fatalf("a client without ACLs sees %v and %d brokers, want no topic and the 3 brokers", got, len(resp.GetBrokers()))
	}
	if got, _ := topicsOf(asClient, &replicadv1.MetadataRequest{Topics: []string{"seen"}}); !slices.Equal(got, []string{"seen=TOPIC_AUTHORIZATION_FAILED"}) {
		t.Fatalf("a client without ACLs asking for seen: %v", got)
	}
	mustACLCtl(t, c, dir, "acl", "add", "--principal", tlsconf.ClientPrincipal("default"), "--operation", "write", "--topic", "seen")
	testutil.Eventually(t, 30*time.Second, func() error {
		if got, _ := topicsOf(asClient, &replicadv1.MetadataRequest{}); !slices.Equal(got, []string{"seen=NONE"}) {
			return fmt.Errorf("the client with write on seen sees %v", got)
		}
		return nil
	})
	if got, _ := topicsOf(asClient, &replicadv1.MetadataRequest{Topics: []string{"hidden", "seen"}}); !slices.Equal(got, []string{"hidden=TOPIC_AUTHORIZATION_FAILED", "seen=NONE"}) {
		t.Fatalf("the client asking for hidden, seen: %v", got)
	}
	args := append(tlsFlags(dir, "client", ""), "--bootstrap", b.Addr, "produce", "--topic", "seen", "--partition", "0", "--value", "v")
	runCtlclient(t, nil, "", args...).want(t, 0)
	args = append(tlsFlags(dir, "client", ""), "--bootstrap", b.Addr, "produce", "--topic", "hidden", "--partition", "0", "--value", "v")
	r := runCtlclient(t, nil, "", args...).want(t, 1)
	if !strings.Contains(r.stderr, "hidden-0: TOPIC_AUTHORIZATION_FAILED") {
		t.Fatalf("produce to hidden: stderr %s", r.stderr)
	}
}

func metaCodeName(c replicadv1.ErrorCode) string {
	return strings.TrimPrefix(c.String(), "ERROR_CODE_")
}
