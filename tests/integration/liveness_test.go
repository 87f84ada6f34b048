package integration

import (
	"slices"
	"strings"
	"testing"
	"time"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Liveness is shown the same way everywhere. A broker stopped with SIGTERM
// (a controlled shutdown) is not alive in describe-cluster as soon as it
// has stopped, long before its 30s session would expire; describe-topic
// counts its replica OFFLINE, as kafka-topics --describe does, and cluster
// health counts it down. A follower's own describe says the ISR is the
// leader's instead of showing an empty one.
func TestLivenessShownAlike(t *testing.T) {
	const session = 30 * time.Second
	c := newCtlCluster(t, session)
	const topic = "live"
	c.createTopic(topic, 1, 3)
	p, err := c.partitionState(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A follower other than broker 3, which stops.
	follower := int32(1)
	if p.GetLeader() == 1 {
		follower = 2
	}
	fb, _ := c.broker(follower)
	r := runCtlclient(t, nil, "", "--broker", fb.Addr, "describe", topic).want(t, 0)
	if !strings.Contains(r.stdout, "(leader's)") || !strings.Contains(r.stdout, "only a partition's leader tracks its ISR") ||
		!strings.Contains(r.stdout, "LOG-START") {
		t.Fatalf("a follower's describe:\n%s", r.stdout)
	}

	b3, _ := c.broker(3)
	stopped := time.Now()
	if code := b3.Terminate(20 * time.Second); code != 0 {
		t.Fatalf("broker 3 exited %d after SIGTERM", code)
	}
	resp, err := c.cluster()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(resp.GetBrokers(), func(b *replicadv1.BrokerDescription) bool { return b.GetId() == 3 })
	if i < 0 || resp.GetBrokers()[i].GetAlive() {
		t.Fatalf("broker 3 stopped %v ago after its controlled shutdown; the controller shows %v", time.Since(stopped), resp.GetBrokers())
	}
	if time.Since(stopped) >= session {
		t.Fatalf("checked only after the session timeout: proves nothing")
	}

	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "describe-topic", topic).want(t, 0)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	head, row := strings.Fields(lines[len(lines)-2]), strings.Fields(lines[len(lines)-1])
	col := slices.Index(head, "OFFLINE")
	if col < 0 || len(row) != len(head) || row[col] != "3" {
		t.Fatalf("describe-topic: OFFLINE is not broker 3's replica:\n%s", r.stdout)
	}
	r = runCtlclient(t, nil, "", "--controller", c.ctlAddr, "cluster", "health")
	if r.code != 1 || !strings.Contains(r.stdout, "Brokers down:                    3") {
		t.Fatalf("cluster health: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
