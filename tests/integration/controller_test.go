package integration

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// ackLog is what an acks=all producer had acknowledged, in order.
type ackLog struct {
	mu     sync.Mutex
	values []string
}

func (a *ackLog) add(v string) {
	a.mu.Lock()
	a.values = append(a.values, v)
	a.mu.Unlock()
}

func (a *ackLog) snapshot() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.values)
}

// runProducer sends r-0, r-1, ... one acks=all record at a time to whoever
// the controller names leader, retrying a value until it is acknowledged,
// until stop is closed.
func runProducer(c *ctlCluster, topic string, acks *ackLog, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		leader := int32(-1)
		retry := time.NewTicker(20 * time.Millisecond)
		defer retry.Stop()
		for n := 0; ; {
			select {
			case <-stop:
				return
			default:
			}
			if leader < 0 {
				if p, err := c.partitionState(topic, 0); err == nil {
					leader = p.GetLeader()
				}
			}
			v := fmt.Sprintf("r-%d", n)
			if leader < 0 || c.produceTo(leader, topic, 0, v) != nil {
				// Not acknowledged: ask the controller again after a
				// moment; the same value is sent again (a duplicate in the
				// log is allowed, a loss is not).
				leader = -1
				select {
				case <-stop:
					return
				case <-retry.C:
				}
				continue
			}
			acks.add(v)
			n++
		}
	}()
	return done
}

// waitAcks waits until more than n records are acknowledged.
func waitAcks(t *testing.T, acks *ackLog, n int, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, func() error {
		if got := len(acks.snapshot()); got <= n {
			return fmt.Errorf("%d records acknowledged, waiting for more than %d", got, n)
		}
		return nil
	})
}

// isSubsequence reports whether want appears in log in order (other
// records, such as duplicates of retried values, may sit between).
func isSubsequence(want, log []string) (bool, int) {
	i := 0
	for _, v := range log {
		if i < len(want) && v == want[i] {
			i++
		}
	}
	return i == len(want), i
}

// Kill -9 the leader of a partition under an acks=all producer (min ISR 2)
// three times in a row: each time the controller names a new leader within
// the session timeout + 2 s, the producer goes on, the killed broker comes
// back and rejoins the ISR; at the end every acknowledged record is
// readable, in acknowledgment order.
func TestControllerFailoverUnderAcksAll(t *testing.T) {
	const session = 2 * time.Second
	c := newCtlCluster(t, session, "--min-insync-replicas", "2")
	c.createTopic("orders", 1, 3)

	var acks ackLog
	stop := make(chan struct{})
	done := runProducer(c, "orders", &acks, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()

	for round := 1; round <= 3; round++ {
		waitAcks(t, &acks, len(acks.snapshot())+10, 30*time.Second)
		p, err := c.partitionState("orders", 0)
		if err != nil {
			t.Fatal(err)
		}
		old := p.GetLeader()
		b, _ := c.broker(old)
		killed := time.Now()
		b.Kill()
		np := c.waitNewLeader("orders", 0, old, session+2*time.Second)
		t.Logf("round %d: killed leader %d; broker %d leads at epoch %d after %v (ISR %v)",
			round, old, np.GetLeader(), np.GetLeaderEpoch(), time.Since(killed).Round(time.Millisecond), np.GetIsr())
		if slices.Contains(np.GetIsr(), old) {
			t.Fatalf("round %d: ISR %v still holds the fenced broker %d", round, np.GetIsr(), old)
		}
		// The new leader takes acks=all writes (ISR of two, min ISR 2).
		waitAcks(t, &acks, len(acks.snapshot())+10, 30*time.Second)
		c.startBroker(old)
		c.waitInIsr("orders", 0, old, 60*time.Second)
	}
	close(stop)
	<-done

	want := acks.snapshot()
	p, err := c.partitionState("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	_, leader := c.broker(p.GetLeader())
	var got []string
	for _, r := range leader.consumeAll("orders", 0) {
		got = append(got, string(r.GetValue()))
	}
	if ok, n := isSubsequence(want, got); !ok {
		t.Fatalf("%d acknowledged records, only the first %d found in order among the %d in the log of leader %d",
			len(want), n, len(got), p.GetLeader())
	}
	t.Logf("%d acknowledged records all readable in order (%d records in the log)", len(want), len(got))
}

// Controller kill -9 and restart on the same store: the state is intact,
// the controller epoch rose, the brokers follow the new epoch, and the
// restarted controller acts (an election goes through).
func TestControllerRestartKeepsStateAndBumpsEpoch(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second)
	c.createTopic("events", 3, 3)
	before, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	c.ctl.Kill()
	c.startController()
	var after *replicadv1.DescribeClusterResponse
	testutil.Eventually(t, 30*time.Second, func() (err error) {
		after, err = c.cluster()
		return err
	})
	if after.GetControllerEpoch() <= before.GetControllerEpoch() {
		t.Fatalf("controller epoch %d after restart, was %d", after.GetControllerEpoch(), before.GetControllerEpoch())
	}
	if len(after.GetPartitions()) != len(before.GetPartitions()) {
		t.Fatalf("partitions after restart %v, before %v", after.GetPartitions(), before.GetPartitions())
	}
	for i, p := range after.GetPartitions() {
		q := before.GetPartitions()[i]
		if p.GetLeader() != q.GetLeader() || p.GetLeaderEpoch() != q.GetLeaderEpoch() || !slices.Equal(p.GetIsr(), q.GetIsr()) ||
			!slices.Equal(p.GetReplicas(), q.GetReplicas()) {
			t.Fatalf("partition %s-%d after restart %v, before %v", p.GetTopic(), p.GetPartition(), p, q)
		}
	}
	// Every broker learns the new controller epoch (its full state is resent).
	for _, id := range clusterIDs {
		testutil.Eventually(t, 30*time.Second, func() error {
			_, cl := c.broker(id)
			if got := cl.describe().GetControllerEpoch(); got != after.GetControllerEpoch() {
				return fmt.Errorf("broker %d at controller epoch %d, want %d", id, got, after.GetControllerEpoch())
			}
			return nil
		})
	}
	c.waitAlive(clusterIDs...)
	// And it acts: move events-0 to another ISR member.
	p := after.GetPartitions()[0]
	target := p.GetIsr()[0]
	if target == p.GetLeader() {
		target = p.GetIsr()[1]
	}
	resp, err := c.ctlAPI.ElectLeader(ctx(t), &replicadv1.ElectLeaderRequest{Topic: p.GetTopic(), Partition: p.GetPartition(), Leader: &target})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("ElectLeader after restart: %v %v", resp, err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		_, cl := c.broker(target)
		d, err := cl.partition(p.GetTopic(), p.GetPartition())
		if err != nil {
			return err
		}
		if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER {
			return fmt.Errorf("broker %d is %v", target, d.GetRole())
		}
		return nil
	})
}

// SIGTERM on a leader: the broker asks the controller to move its
// leaderships before it exits, so they have moved by the time it is gone,
// long before its session (30 s) could have expired.
func TestControlledShutdownMovesLeadership(t *testing.T) {
	c := newCtlCluster(t, 30*time.Second)
	c.createTopic("cs", 3, 3)
	resp, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	var led []*replicadv1.ClusterPartition
	for _, p := range resp.GetPartitions() {
		if p.GetLeader() == 1 {
			led = append(led, p)
		}
	}
	if len(led) == 0 {
		t.Fatalf("broker 1 leads nothing: %v", resp.GetPartitions())
	}
	b, _ := c.broker(1)
	start := time.Now()
	if code := b.Terminate(60 * time.Second); code != 0 {
		t.Fatalf("broker 1 exited %d after SIGTERM", code)
	}
	stopped := time.Since(start)
	if stopped >= 30*time.Second {
		t.Fatalf("broker 1 took %v to stop", stopped)
	}
	for _, p := range led {
		now, err := c.partitionState(p.GetTopic(), p.GetPartition())
		if err != nil {
			t.Fatal(err)
		}
		if now.GetLeader() == 1 || now.GetLeader() < 0 {
			t.Fatalf("%s-%d: leader %d after broker 1 stopped (in %v)", p.GetTopic(), p.GetPartition(), now.GetLeader(), stopped)
		}
		if slices.Contains(now.GetIsr(), 1) {
			t.Fatalf("%s-%d: ISR %v still holds the stopped broker", p.GetTopic(), p.GetPartition(), now.GetIsr())
		}
		_, cl := c.broker(now.GetLeader())
		cl.produce(p.GetTopic(), p.GetPartition(), -1, "after-shutdown")
	}
	t.Logf("broker 1 stopped in %v with its %d leaderships moved", stopped.Round(time.Millisecond), len(led))
}
