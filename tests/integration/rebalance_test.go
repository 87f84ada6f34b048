package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// offsetLog is what an acks=all producer over many partitions had
// acknowledged: per partition, the value acknowledged at each offset.
type offsetLog struct {
	mu    sync.Mutex
	acked map[int32]map[int64]string
	n     int
}

func (l *offsetLog) add(partition int32, offset int64, v string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.acked[partition] == nil {
		l.acked[partition] = map[int64]string{}
	}
	if old, dup := l.acked[partition][offset]; dup {
		return fmt.Errorf("partition %d: offset %d acknowledged twice, for %q and %q", partition, offset, old, v)
	}
	l.acked[partition][offset] = v
	l.n++
	return nil
}

func (l *offsetLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// runSpreadProducer writes one acks=all record at a time to each partition
// of topic in turn, to the leader the controller names (asked again after
// any failure), until stop is closed; the same value is retried until it is
// acknowledged. A broken invariant (an offset acknowledged twice) ends it
// with the error on errc.
func runSpreadProducer(c *ctlCluster, topic string, partitions int32, l *offsetLog, stop <-chan struct{}) (done <-chan struct{}, errc <-chan error) {
	d, ec := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(d)
		leaders := map[int32]int32{}
		refresh := func() {
			if resp, err := c.cluster(); err == nil {
				for _, p := range resp.GetPartitions() {
					if p.GetTopic() == topic {
						leaders[p.GetPartition()] = p.GetLeader()
					}
				}
			}
		}
		refresh()
		for n := 0; ; n++ {
			part := int32(n) % partitions
			v := fmt.Sprintf("p%d-%d", part, n)
			for {
				select {
				case <-stop:
					return
				default:
				}
				off, err := produceAcksAll(c, leaders[part], topic, part, v)
				if err == nil {
					if err := l.add(part, off, v); err != nil {
						ec <- err
						return
					}
					break
				}
				time.Sleep(20 * time.Millisecond)
				refresh()
			}
		}
	}()
	return d, ec
}

// produceAcksAll sends one acks=all record to broker id and answers its
// offset.
func produceAcksAll(c *ctlCluster, id int32, topic string, partition int32, value string) (int64, error) {
	b, cl := c.broker(id)
	if b == nil || !b.Running() {
		return 0, errNotAcked
	}
	rctx, cancel := context.WithTimeout(context.Background(), rpcTimeout)
	defer cancel()
	resp, err := cl.log.Produce(rctx, &replicadv1.ProduceRequest{Topic: topic, Partition: partition, Acks: -1, TimeoutMs: 5000,
		Records: []*replicadv1.Record{{Value: []byte(value)}}})
	if err != nil {
		return 0, fmt.Errorf("%w: %v", errNotAcked, err)
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return 0, fmt.Errorf("%w: %v", errNotAcked, resp.GetErrorCode())
	}
	return resp.GetBaseOffset(), nil
}

// notPreferred lists topic's partitions not led by their preferred replica
// (the first of the assignment), and whether every ISR is full.
func notPreferred(resp *replicadv1.DescribeClusterResponse, topic string) (off []string, isrFull bool) {
	isrFull = true
	for _, p := range resp.GetPartitions() {
		if p.GetTopic() != topic {
			continue
		}
		if p.GetLeader() != p.GetReplicas()[0] {
			off = append(off, fmt.Sprintf("%d(led by %d, prefers %d)", p.GetPartition(), p.GetLeader(), p.GetReplicas()[0]))
		}
		if len(p.GetIsr()) != len(p.GetReplicas()) {
			isrFull = false
		}
	}
	return off, isrFull
}

// TestRebalanceAfterRollingRestart: 3 brokers, 30 partitions of RF 3 (min
// ISR 2) under an acks=all producer; each broker in turn is stopped
// (SIGTERM: a controlled shutdown moves its leaderships away) and started
// again, and the next waits until every ISR is full. The controller's leader
// rebalance (a 1 s check interval) moves leadership back, so that at the
// end every partition is led by its preferred replica, and every
// acknowledged record is in the log at the offset it was acknowledged at.
// It logs the rebalance time: from the last broker back in every ISR to
// every leader back where assigned.
func TestRebalanceAfterRollingRestart(t *testing.T) {
	const (
		topic      = "rolling"
		partitions = 30
		interval   = time.Second
	)
	c := newCtlCluster(t, 3*time.Second, "--min-insync-replicas", "2")
	// The controller again, with the rebalance checks every second. The
	// percentage is 0 so that the end state is exact: with Kafka's 10%, a
	// broker whose 10 preferred partitions were moved back while one of them
	// was still catching up stays at an imbalance of 1/10, not above 10%.
	if code := c.ctl.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("controller exited %d after SIGTERM", code)
	}
	c.ctlArgs = append(c.ctlArgs, "--leader-imbalance-check-interval", interval.String(), "--leader-imbalance-per-broker-percentage", "0")
	c.startController()
	c.waitAlive(clusterIDs...)
	c.createTopic(topic, partitions, 3)
	resp, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	// The assignment spreads preferred leaders evenly, and with the replica
	// shift each broker's partitions have their second replicas on both
	// other brokers.
	seconds := map[int32]map[int32]int{}
	for _, p := range resp.GetPartitions() {
		rs := p.GetReplicas()
		if seconds[rs[0]] == nil {
			seconds[rs[0]] = map[int32]int{}
		}
		seconds[rs[0]][rs[1]]++
	}
	for _, id := range clusterIDs {
		if n := seconds[id]; len(n) != 2 || n[id%3+1] != 5 || n[(id+1)%3+1] != 5 {
			t.Errorf("broker %d prefers to lead partitions whose second replicas are %v, want 5 on each other broker", id, n)
		}
	}

	acked := &offsetLog{acked: map[int32]map[int64]string{}}
	stop := make(chan struct{})
	done, errc := runSpreadProducer(c, topic, partitions, acked, stop)
	stopProducer := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}
	defer stopProducer()
	waitCount := func(n int) {
		t.Helper()
		testutil.Eventually(t, 60*time.Second, func() error {
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
			if got := acked.count(); got < n {
				return fmt.Errorf("%d records acknowledged, waiting for %d", got, n)
			}
			return nil
		})
	}
	waitCount(2 * partitions)

	var lastBack time.Time
	for _, id := range clusterIDs {
		b, _ := c.broker(id)
		if code := b.Terminate(60 * time.Second); code != 0 {
			t.Fatalf("broker %d exited %d after SIGTERM", id, code)
		}
		// The others take the writes meanwhile.
		waitCount(acked.count() + partitions)
		c.startBroker(id)
		c.waitAlive(id)
		testutil.Eventually(t, 120*time.Second, func() error {
			resp, err := c.cluster()
			if err != nil {
				return err
			}
			if _, full := notPreferred(resp, topic); !full {
				return fmt.Errorf("broker %d not back in every ISR yet", id)
			}
			return nil
		})
		lastBack = time.Now()
		t.Logf("broker %d restarted and back in every ISR at %s", id, lastBack.UTC().Format("15:04:05.000"))
		waitCount(acked.count() + partitions)
	}
	// The rebalance puts every leader back where assigned.
	testutil.Eventually(t, 30*time.Second, func() error {
		resp, err := c.cluster()
		if err != nil {
			return err
		}
		if off, _ := notPreferred(resp, topic); len(off) > 0 {
			return fmt.Errorf("%d partitions not led by their preferred replica: %s", len(off), strings.Join(off, ", "))
		}
		return nil
	})
	took := time.Since(lastBack)
	t.Logf("FIGURE rebalance after a rolling restart: every leader preferred %v after the last broker was back in every ISR (check interval %v)",
		took.Round(time.Millisecond), interval)
	if !strings.Contains(c.ctl.Stderr(), "leader rebalance: moved leadership back to the preferred replicas") {
		t.Errorf("the controller never logged a leader rebalance:\n%s", c.ctl.Stderr())
	}
	// And the writes go on to the preferred leaders.
	waitCount(acked.count() + partitions)
	stopProducer()
	select {
	case err := <-errc:
		t.Fatal(err)
	default:
	}

	resp, err = c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range resp.GetPartitions() {
		if p.GetTopic() != topic {
			continue
		}
		_, leader := c.broker(p.GetLeader())
		at := map[int64]string{}
		for _, r := range leader.consumeAll(topic, p.GetPartition()) {
			at[r.GetOffset()] = string(r.GetValue())
		}
		offsets := make([]int64, 0, len(acked.acked[p.GetPartition()]))
		for off := range acked.acked[p.GetPartition()] {
			offsets = append(offsets, off)
		}
		slices.Sort(offsets)
		for _, off := range offsets {
			if want := acked.acked[p.GetPartition()][off]; at[off] != want {
				t.Errorf("%s-%d offset %d holds %q on leader %d, want the acknowledged %q", topic, p.GetPartition(), off, at[off], p.GetLeader(), want)
			}
			checked++
		}
	}
	if checked != acked.count() || checked < 5*partitions {
		t.Fatalf("checked %d acknowledged records, %d were acknowledged", checked, acked.count())
	}
	t.Logf("%d acknowledged records all at their offsets", checked)
}

// TestElectPreferredCtlclient runs `ctlclient elect --preferred` against a
// real controller and brokers (automatic rebalance off): leaders moved by
// hand go back to the preferred replicas, which then lead on the brokers
// too; already preferred is a no-op (exit 0); a preferred replica that is
// down answers PREFERRED_LEADER_NOT_AVAILABLE (exit 1).
func TestElectPreferredCtlclient(t *testing.T) {
	const topic = "pref"
	c := newCtlCluster(t, 3*time.Second)
	if code := c.ctl.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("controller exited %d after SIGTERM", code)
	}
	c.ctlArgs = append(c.ctlArgs, "--auto-leader-rebalance-enable=false")
	c.startController()
	c.waitAlive(clusterIDs...)
	c.createTopic(topic, 6, 3)
	resp, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetPartitions() {
		second := p.GetReplicas()[1]
		er, err := c.ctlAPI.ElectLeader(ctx(t), &replicadv1.ElectLeaderRequest{Topic: topic, Partition: p.GetPartition(), Leader: &second})
		if err != nil || er.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			t.Fatalf("ElectLeader(%d) of %s-%d: %v %v", second, topic, p.GetPartition(), er, err)
		}
	}
	elect := func(args ...string) ctlResult {
		return runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr}, args...)...)
	}
	elect("elect", "--preferred", "--topic", topic, "--partition", "0").want(t, 0)
	r := elect("elect", "--preferred", "--topic", topic, "--partition", "0").want(t, 0)
	if !strings.Contains(r.stderr, "nothing to do") || !strings.Contains(r.stdout, "ELECTION_NOT_NEEDED") {
		t.Errorf("a second preferred election of %s-0: stdout %q stderr %q, want a no-op", topic, r.stdout, r.stderr)
	}
	r = elect("-o", "json", "elect", "--preferred", "--all").want(t, 0)
	var got replicadv1.ElectLeadersResponse
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("stdout of elect --preferred --all -o json: %v\n%s", err, r.stdout)
	}
	var codes []string
	for _, res := range got.GetResults() {
		codes = append(codes, fmt.Sprintf("%d:%v", res.GetPartition(), res.GetErrorCode()))
	}
	want := "0:ERROR_CODE_ELECTION_NOT_NEEDED 1:ERROR_CODE_NONE 2:ERROR_CODE_NONE 3:ERROR_CODE_NONE 4:ERROR_CODE_NONE 5:ERROR_CODE_NONE"
	if strings.Join(codes, " ") != want {
		t.Errorf("elect --preferred --all: %v, want %s", codes, want)
	}
	if !strings.Contains(r.stderr, "[6/6]") || !strings.Contains(r.stderr, "5 elected, 1 already led") {
		t.Errorf("elect --preferred --all progress on stderr: %q", r.stderr)
	}
	// The brokers know: each preferred replica leads on its broker.
	resp, err = c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range resp.GetPartitions() {
		if p.GetLeader() != p.GetReplicas()[0] {
			t.Errorf("%s-%d led by %d after elect --preferred --all, want %d", topic, p.GetPartition(), p.GetLeader(), p.GetReplicas()[0])
		}
		_, cl := c.broker(p.GetReplicas()[0])
		d, err := cl.partition(topic, p.GetPartition())
		if err != nil || d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER {
			t.Errorf("broker %d's replica of %s-%d after the election: %v %v, want the leader", p.GetReplicas()[0], topic, p.GetPartition(), d, err)
		}
	}

	// Broker 2 stops: the partitions it prefers to lead cannot go back.
	b, _ := c.broker(2)
	if code := b.Terminate(60 * time.Second); code != 0 {
		t.Fatalf("broker 2 exited %d after SIGTERM", code)
	}
	r = elect("elect", "--preferred", "--topic", topic).want(t, 1)
	if !strings.Contains(r.stderr, "2 of 6 partitions not elected") || !strings.Contains(r.stderr, "PREFERRED_LEADER_NOT_AVAILABLE") {
		t.Errorf("elect --preferred with broker 2 down: stderr %q", r.stderr)
	}
}
