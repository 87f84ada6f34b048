package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	rclient "github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// TestAlterTopicAddsPartitions grows a topic of 2 partitions on 3 brokers
// to 5 with ctlclient alter-topic, as an operator would: the new
// partitions get logs under the topic's ID and leaders, every broker's
// Metadata shows them, the library's producer finds them at its next
// metadata refresh and writes to them, a consumer reads every record back,
// and they persist through a kill -9 of the controller and of a broker.
func TestAlterTopicAddsPartitions(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second)
	c.createTopic("grow", 2, 3)
	cl := c.newLibClientWith(rclient.Config{MetadataMaxAge: 200 * time.Millisecond})
	prod, err := rclient.NewProducer(cl, rclient.ProducerConfig{Linger: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(ctx(t), &rclient.Record{Topic: "grow", Value: []byte("before")}); err != nil {
		t.Fatal(err)
	}
	if n, err := cl.Partitions(ctx(t), "grow"); err != nil || n != 2 {
		t.Fatalf("the producer sees %d partitions (%v), want 2", n, err)
	}

	// --validate-only changes nothing.
	r := runCtlclient(t, nil, "", "--controller", c.ctlAddr, "alter-topic", "grow", "--partitions", "5", "--validate-only")
	if r.code != 0 || !strings.Contains(r.stdout, "3 partitions would be added") {
		t.Fatalf("alter-topic --validate-only: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if n := c.partitionCount("grow"); n != 2 {
		t.Fatalf("%d partitions after --validate-only, want 2", n)
	}

	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "alter-topic", "--topic", "grow", "--partitions", "5")
	if r.code != 0 || !regexp.MustCompile(`(?m)^grow +NONE$`).MatchString(r.stdout) {
		t.Fatalf("alter-topic: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	for p := 2; p <= 4; p++ {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^grow +%d +[1-3] `, p)).MatchString(r.stdout) {
			t.Errorf("alter-topic does not print the added partition grow-%d:\n%s", p, r.stdout)
		}
	}
	// The same count again: Kafka's INVALID_PARTITIONS, exit 1.
	again := runCtlclient(t, nil, "", "--controller", c.ctlAddr, "alter-topic", "grow", "--partitions", "5")
	if again.code != 1 || !strings.Contains(again.stderr, "INVALID_PARTITIONS") || !strings.Contains(again.stderr, "already has 5 partitions") {
		t.Fatalf("alter-topic again: exit %d\n%s%s", again.code, again.stdout, again.stderr)
	}

	before, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	states := topicStates(before, "grow")
	if len(states) != 5 {
		t.Fatalf("controller holds %d partitions of grow, want 5", len(states))
	}
	topicID := states[0].GetTopicId()
	for _, p := range states {
		if p.GetTopicId() != topicID || len(p.GetReplicas()) != 3 || p.GetLeader() != p.GetReplicas()[0] {
			t.Fatalf("new partition %v: want the topic's ID %s, 3 replicas, the first leading", p, topicID)
		}
	}
	c.waitServed("grow", states)
	// Each replica's log carries the topic's ID (partition.metadata).
	for _, p := range states[2:] {
		for _, id := range p.GetReplicas() {
			data, err := os.ReadFile(filepath.Join(c.dirs[id], fmt.Sprintf("grow-%d", p.GetPartition()), "partition.metadata"))
			if err != nil || !strings.Contains(string(data), "topic_id: "+topicID) {
				t.Fatalf("broker %d's partition.metadata of grow-%d: %q %v, want topic ID %s", id, p.GetPartition(), data, err, topicID)
			}
		}
	}
	// Every broker's Metadata shows the five partitions.
	for _, id := range clusterIDs {
		testutil.Eventually(t, 30*time.Second, func() error {
			_, bc := c.broker(id)
			md, err := bc.log.Metadata(ctx(t), &replicadv1.MetadataRequest{Topics: []string{"grow"}})
			if err != nil {
				return err
			}
			if n := len(md.GetTopics()[0].GetPartitions()); n != 5 {
				return fmt.Errorf("broker %d's Metadata shows %d partitions of grow", id, n)
			}
			return nil
		})
	}
	// The producer picks the count up at its next metadata refresh
	// (MetadataMaxAge), as Kafka's does, and spreads keyless records over
	// the new partitions too.
	testutil.Eventually(t, 30*time.Second, func() error {
		if err := prod.ProduceSync(ctx(t), &rclient.Record{Topic: "grow", Value: []byte("refresh")}); err != nil {
			return err
		}
		if n, _ := cl.Partitions(ctx(t), "grow"); n != 5 {
			return fmt.Errorf("the producer sees %d partitions", n)
		}
		return nil
	})
	var recs []*rclient.Record
	for p := int32(0); p < 5; p++ {
		for i := range 3 {
			recs = append(recs, &rclient.Record{Topic: "grow", Partition: p, ManualPartition: true, Value: []byte(fmt.Sprintf("p%d-%d", p, i))})
		}
	}
	if err := prod.ProduceSync(ctx(t), recs...); err != nil {
		t.Fatal(err)
	}
	wantAll := func(what string) {
		t.Helper()
		got := map[string]int32{}
		for _, rec := range consumeTopic(t, c.newLibClient(), "grow") {
			got[string(rec.Value)] = rec.Partition
		}
		for _, rec := range recs {
			if p, ok := got[string(rec.Value)]; !ok || p != rec.Partition {
				t.Fatalf("%s: record %s read from partition %d (found %v), want %d", what, rec.Value, p, ok, rec.Partition)
			}
		}
	}
	wantAll("after the change")

	// kill -9 of the controller: the one that starts on its store holds the
	// five partitions as they were.
	c.ctl.Kill()
	c.startController()
	var after *replicadv1.DescribeClusterResponse
	testutil.Eventually(t, 30*time.Second, func() (err error) {
		after, err = c.cluster()
		return err
	})
	if got := topicStates(after, "grow"); len(got) != 5 || !sameAssignment(got, states) {
		t.Fatalf("after the controller's restart grow is %v, was %v", got, states)
	}
	c.waitAlive(clusterIDs...)
	// kill -9 of the leader of a new partition: its logs come back.
	victim := states[3].GetLeader()
	b, _ := c.broker(victim)
	b.Kill()
	c.startBroker(victim)
	c.waitAlive(clusterIDs...)
	for _, p := range states[2:] {
		for _, id := range p.GetReplicas() {
			c.waitInIsr("grow", p.GetPartition(), id, 60*time.Second)
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("grow", 4, "after restarts") })
	wantAll("after the restarts")
}

// newLibClientWith is newLibClient with cfg's MetadataMaxAge.
func (c *ctlCluster) newLibClientWith(cfg rclient.Config) *rclient.Client {
	c.t.Helper()
	for _, id := range clusterIDs {
		b, _ := c.broker(id)
		cfg.Bootstrap = append(cfg.Bootstrap, b.Addr)
	}
	cfg.RequestTimeout, cfg.RetryTimeout = 5*time.Second, 30*time.Second
	cl, err := rclient.New(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// partitionCount is the number of partitions of topic the controller holds.
func (c *ctlCluster) partitionCount(topic string) int {
	c.t.Helper()
	resp, err := c.cluster()
	if err != nil {
		c.t.Fatal(err)
	}
	return len(topicStates(resp, topic))
}

// waitServed waits until each partition's leader serves it as leader.
func (c *ctlCluster) waitServed(topic string, parts []*replicadv1.ClusterPartition) {
	c.t.Helper()
	for _, p := range parts {
		testutil.Eventually(c.t, 30*time.Second, func() error {
			_, cl := c.broker(p.GetLeader())
			d, err := cl.partition(topic, p.GetPartition())
			if err != nil {
				return err
			}
			if d.GetRole() != replicadv1.ReplicaRole_REPLICA_ROLE_LEADER {
				return fmt.Errorf("broker %d is %v of %s-%d", p.GetLeader(), d.GetRole(), topic, p.GetPartition())
			}
			return nil
		})
	}
}

// topicStates are topic's partitions in resp, by partition.
func topicStates(resp *replicadv1.DescribeClusterResponse, topic string) []*replicadv1.ClusterPartition {
	var out []*replicadv1.ClusterPartition
	for _, p := range resp.GetPartitions() {
		if p.GetTopic() == topic {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *replicadv1.ClusterPartition) int { return int(a.GetPartition() - b.GetPartition()) })
	return out
}

// sameAssignment reports whether a and b are the same partitions with the
// same replicas and topic ID.
func sameAssignment(a, b []*replicadv1.ClusterPartition) bool {
	return slices.EqualFunc(a, b, func(x, y *replicadv1.ClusterPartition) bool {
		return x.GetPartition() == y.GetPartition() && x.GetTopicId() == y.GetTopicId() && slices.Equal(x.GetReplicas(), y.GetReplicas())
	})
}
