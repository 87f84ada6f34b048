package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
)

// TestTopicConfigsReachTheBrokers runs a controller and three brokers whose
// flags keep a week of records, and checks with the ctlclient binary that a
// topic's own configs rule its replicas: retention.ms=1500 from
// create-topic deletes the old segments on the leader and both followers;
// min.insync.replicas=3 refuses acks=all once a broker is down, and
// alter-config lowering it to 2 lets produces through again on the same
// leader; describe-config shows the overrides; bad keys and values are
// refused with the key named and change nothing.
func TestTopicConfigsReachTheBrokers(t *testing.T) {
	c := newCtlCluster(t, 3*time.Second, "--segment-bytes", "4096", "--max-batch-bytes", "2048",
		"--log-retention-check-interval", "200ms", "--replica-lag-time-max", "2s")
	ctl := func(args ...string) ctlResult {
		return runCtlclientEnv(t, nil, append([]string{"--controller", c.ctlAddr}, args...)...)
	}
	bad := ctl("create-topic", "--topic", "orders", "--partitions", "1", "--replication-factor", "3", "--config", "retention.mss=1")
	if bad.code != 2 || !strings.Contains(bad.stderr, "retention.mss") {
		t.Fatalf("create-topic with an unknown config key: exit %d, stderr %q; want 2 naming the key", bad.code, bad.stderr)
	}
	ctl("create-topic", "--topic", "orders", "--partitions", "1", "--replication-factor", "3",
		"--config", "retention.ms=1500", "--config", "min.insync.replicas=3").want(t, 0)
	p, err := c.partitionState("orders", 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := p.GetLeader()
	for _, id := range clusterIDs {
		_, cl := c.broker(id)
		testutil.Eventually(t, 15*time.Second, func() error {
			d, err := cl.partition("orders", 0)
			if err != nil {
				return err
			}
			if cfg := d.GetTopicConfig(); cfg["retention.ms"] != "1500" || cfg["min.insync.replicas"] != "3" || d.GetTopicConfigVersion() != 1 {
				return fmt.Errorf("broker %d applies %v at version %d", id, cfg, d.GetTopicConfigVersion())
			}
			return nil
		})
	}

	_, lc := c.broker(leader)
	value := func(i int) string { return fmt.Sprintf("%03d-%s", i, strings.Repeat("r", 300)) }
	testutil.Eventually(t, 15*time.Second, func() error { // the followers join the ISR of the new topic
		st, err := c.partitionState("orders", 0)
		if err != nil || len(st.GetIsr()) != 3 {
			return fmt.Errorf("ISR %v %v", st.GetIsr(), err)
		}
		return nil
	})
	for i := range 40 {
		lc.produce("orders", 0, -1, value(i))
	}
	segs := segmentBases(t, filepath.Join(c.dirs[leader], "orders-0"))
	if len(segs) < 3 {
		t.Fatalf("segments %v: want several", segs)
	}
	last := segs[len(segs)-1]
	for _, id := range clusterIDs {
		_, cl := c.broker(id)
		testutil.Eventually(t, 15*time.Second, func() error {
			d, err := cl.partition("orders", 0)
			if err != nil {
				return err
			}
			if d.GetLogStartOffset() != last {
				return fmt.Errorf("broker %d log start %d, want %d: the topic's 1.5 s retention, not the brokers' week", id, d.GetLogStartOffset(), last)
			}
			return nil
		})
	}

	describe := ctl("describe-config", "--topic", "orders").want(t, 0)
	for _, want := range []string{"retention.ms  1500  TOPIC", "min.insync.replicas  3  TOPIC", "retention.bytes  -1  BROKER_DEFAULT"} {
		if !strings.Contains(strings.Join(strings.Fields(describe.stdout), "  "), strings.Join(strings.Fields(want), "  ")) {
			t.Errorf("describe-config lacks %q:\n%s", want, describe.stdout)
		}
	}

	// A follower goes: the ISR of 2 is below the topic's min ISR of 3.
	follower := p.GetReplicas()[0]
	if follower == leader {
		follower = p.GetReplicas()[1]
	}
	fb, _ := c.broker(follower)
	fb.Kill()
	produceCode := func(want replicadv1.ErrorCode, why string) func() error {
		return func() error {
			resp, err := lc.log.Produce(ctx(t), &replicadv1.ProduceRequest{Topic: "orders", Partition: 0, Acks: -1, TimeoutMs: 2000,
				Records: []*replicadv1.Record{{Value: []byte(why)}}})
			if err != nil {
				return err
			}
			if resp.GetErrorCode() != want {
				return fmt.Errorf("acks=all %s: %v, want %v", why, resp.GetErrorCode(), want)
			}
			return nil
		}
	}
	testutil.Eventually(t, 20*time.Second, produceCode(replicadv1.ErrorCode_ERROR_CODE_NOT_ENOUGH_REPLICAS, "with a follower down"))
	ctl("alter-config", "--topic", "orders", "--set", "segment.bytes=12").want(t, 2)
	ctl("alter-config", "--topic", "orders", "--set", "min.insync.replicas=2").want(t, 0)
	testutil.Eventually(t, 15*time.Second, produceCode(replicadv1.ErrorCode_ERROR_CODE_NONE, "after min.insync.replicas=2"))
	if d, err := lc.partition("orders", 0); err != nil || d.GetTopicConfigVersion() != 2 || d.GetTopicConfig()["segment.bytes"] != "4096" {
		t.Fatalf("leader after alter-config: %v %v; want version 2 and the refused segment.bytes not applied", d, err)
	}
	// Every live broker's Metadata answer carries the overrides, at the new version.
	for _, id := range clusterIDs {
		if id == follower {
			continue
		}
		_, cl := c.broker(id)
		testutil.Eventually(t, 10*time.Second, func() error {
			md, err := cl.log.Metadata(ctx(t), &replicadv1.MetadataRequest{Topics: []string{"orders"}})
			if err != nil {
				return err
			}
			if len(md.GetTopics()) != 1 || md.GetTopics()[0].GetConfigVersion() != 2 ||
				md.GetTopics()[0].GetConfigs()["min.insync.replicas"] != "2" || md.GetTopics()[0].GetConfigs()["retention.ms"] != "1500" {
				return fmt.Errorf("broker %d Metadata: %v", id, md.GetTopics())
			}
			return nil
		})
	}
}
