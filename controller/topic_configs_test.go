package controller

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// stateOf is the partition state of topic-partition in states, or nil.
func stateOf(states []*replicadv1.PartitionState, topic string, partition int32) *replicadv1.PartitionState {
	for _, s := range states {
		if s.GetTopic() == topic && s.GetPartition() == partition {
			return s
		}
	}
	return nil
}

// TestTopicConfigsTravelWithPartitionStates checks that a topic's configs
// are stored with it and reach its replicas in their first LeaderAndIsr, and
// that an alter-config stores the next version and sends every live broker
// an UpdateMetadata carrying it, which is how brokers learn of a change.
func TestTopicConfigsTravelWithPartitionStates(t *testing.T) {
	h := startCluster(t, 3)
	ctx := context.Background()
	created := map[string]string{"retention.ms": "1000", "min.insync.replicas": "2"}
	resp, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "t", Partitions: 1, ReplicationFactor: 3, Configs: created})
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("CreateTopic: %v %v", resp, err)
	}
	lai := waitLAI(t, h, 1, h.part("t", 0))
	if st := stateOf(lai.GetPartitionStates(), "t", 0); !maps.Equal(st.GetTopicConfigs(), created) || st.GetTopicConfigVersion() != 1 {
		t.Fatalf("first LeaderAndIsr carries configs %v version %d, want %v version 1", st.GetTopicConfigs(), st.GetTopicConfigVersion(), created)
	}
	if c := storedConfigs(t, h)["t"]; c.Version != 1 || !maps.Equal(c.Configs, created) {
		t.Fatalf("stored %+v", c)
	}

	alter, err := h.c.AlterTopicConfig(ctx, &replicadv1.AlterTopicConfigRequest{Topic: "t",
		Set: map[string]string{"retention.bytes": "5000"}, Delete: []string{"retention.ms"}})
	want := map[string]string{"min.insync.replicas": "2", "retention.bytes": "5000"}
	if err != nil || alter.GetErrorCode() != codeNone || alter.GetVersion() != 2 || !maps.Equal(alter.GetConfigs(), want) {
		t.Fatalf("AlterTopicConfig: %v %v, want version 2 %v", alter, err, want)
	}
	if c := storedConfigs(t, h)["t"]; c.Version != 2 || !maps.Equal(c.Configs, want) {
		t.Fatalf("stored after alter %+v, want version 2 %v", c, want)
	}
	for id := int32(1); id <= 3; id++ {
		waitFor(t, "broker to receive the new configs", func() bool {
			for _, um := range h.fake(id).updateMetadatas() {
				if st := stateOf(um.GetPartitionStates(), "t", 0); st.GetTopicConfigVersion() == 2 && maps.Equal(st.GetTopicConfigs(), want) {
					return true
				}
			}
			return false
		})
	}

	// validate_only answers the result and changes nothing.
	check, err := h.c.AlterTopicConfig(ctx, &replicadv1.AlterTopicConfigRequest{Topic: "t", Set: map[string]string{"segment.ms": "60000"}, ValidateOnly: true})
	if err != nil || check.GetConfigs()["segment.ms"] != "60000" || check.GetVersion() != 2 {
		t.Fatalf("validate_only: %v %v", check, err)
	}
	if c := storedConfigs(t, h)["t"]; c.Version != 2 {
		t.Fatalf("validate_only stored version %d", c.Version)
	}

	d, err := h.c.DescribeTopicConfig(ctx, &replicadv1.DescribeTopicConfigRequest{Topic: "t"})
	if err != nil || d.GetVersion() != 2 || len(d.GetEntries()) != 6 {
		t.Fatalf("DescribeTopicConfig: %v %v", d, err)
	}
	for _, e := range d.GetEntries() {
		v, override := want[e.GetName()]
		switch {
		case override && (e.GetValue() != v || e.GetSource() != replicadv1.ConfigSource_CONFIG_SOURCE_TOPIC):
			t.Errorf("%s = %q from %v, want the override %q", e.GetName(), e.GetValue(), e.GetSource(), v)
		case !override && e.GetSource() != replicadv1.ConfigSource_CONFIG_SOURCE_BROKER_DEFAULT:
			t.Errorf("%s from %v, want the broker default", e.GetName(), e.GetSource())
		}
	}

	// Gone with the topic: created again, it starts over.
	if r, err := h.c.DeleteTopic(ctx, &replicadv1.DeleteTopicRequest{Topic: "t"}); err != nil || r.GetErrorCode() != codeNone {
		t.Fatalf("DeleteTopic: %v %v", r, err)
	}
	if r, err := h.c.AlterTopicConfig(ctx, &replicadv1.AlterTopicConfigRequest{Topic: "t", Set: map[string]string{"segment.ms": "1"}}); err != nil ||
		r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION {
		t.Fatalf("AlterTopicConfig of a deleted topic: %v %v, want UNKNOWN_TOPIC_OR_PARTITION", r, err)
	}
}

// TestBadTopicConfigsAreRefusedAndChangeNothing checks that an unknown key,
// a bad value, or a key both set and deleted is InvalidArgument naming it,
// and that nothing is created or stored.
func TestBadTopicConfigsAreRefusedAndChangeNothing(t *testing.T) {
	h := startCluster(t, 3)
	ctx := context.Background()
	for _, tc := range []struct {
		configs map[string]string
		field   string
	}{
		{map[string]string{"retention.mss": "1"}, "configs[retention.mss]"},
		{map[string]string{"retention.ms": "-2"}, "configs[retention.ms]"},
		{map[string]string{"segment.bytes": "12"}, "configs[segment.bytes]"},
		{map[string]string{"min.insync.replicas": "0"}, "configs[min.insync.replicas]"},
		{map[string]string{"cleanup.policy": "compact"}, "configs[cleanup.policy]"},
	} {
		_, err := h.c.CreateTopic(ctx, &replicadv1.CreateTopicRequest{Topic: "bad", Partitions: 1, ReplicationFactor: 1, Configs: tc.configs})
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.field) {
			t.Errorf("CreateTopic with %v: %v, want InvalidArgument naming %s", tc.configs, err, tc.field)
		}
	}
	if _, err := h.st.Topic(ctx, "bad"); err == nil {
		t.Fatal("a refused CreateTopic created the topic")
	}

	h.createTopic("t", 1, 3)
	for _, tc := range []struct {
		req   *replicadv1.AlterTopicConfigRequest
		field string
	}{
		{&replicadv1.AlterTopicConfigRequest{Topic: "t", Set: map[string]string{"segment.ms": "0"}}, "set[segment.ms]"},
		{&replicadv1.AlterTopicConfigRequest{Topic: "t", Delete: []string{"retention"}}, "delete[0]"},
		{&replicadv1.AlterTopicConfigRequest{Topic: "t", Set: map[string]string{"retention.ms": "1"}, Delete: []string{"retention.ms"}}, "delete[0]"},
		{&replicadv1.AlterTopicConfigRequest{Topic: "t"}, "set"},
		{&replicadv1.AlterTopicConfigRequest{Topic: "t/", Set: map[string]string{"retention.ms": "1"}}, "topic"},
	} {
		_, err := h.c.AlterTopicConfig(ctx, tc.req)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), tc.field) {
			t.Errorf("AlterTopicConfig %v: %v, want InvalidArgument naming %s", tc.req, err, tc.field)
		}
	}
	if c := storedConfigs(t, h)["t"]; c.Version != 1 || len(c.Configs) != 0 {
		t.Fatalf("refused alters stored %+v", c)
	}
}

// TestTopicMinIsrDrivesTheELR checks that a topic's min.insync.replicas,
// not the brokers' flag (1 here), decides who becomes an eligible leader:
// with 2, the replica that leaves an ISR of 2 is kept as an ELR member,
// because the leader does not move the HW without it; a topic without the
// override keeps none.
func TestTopicMinIsrDrivesTheELR(t *testing.T) {
	for _, tc := range []struct {
		configs map[string]string
		elr     bool
	}{{map[string]string{"min.insync.replicas": "2"}, true}, {nil, false}} {
		h := startCluster(t, 3)
		if r, err := h.c.CreateTopic(context.Background(), &replicadv1.CreateTopicRequest{Topic: "t", Partitions: 1, ReplicationFactor: 3,
			Configs: tc.configs}); err != nil || r.GetErrorCode() != codeNone {
			t.Fatalf("CreateTopic: %v %v", r, err)
		}
		p := h.part("t", 0)
		leader, second := p.Replicas[0], p.Replicas[1]
		h.expire(leader, second) // the third replica leaves: an ISR of 2, at min ISR
		h.expire(leader)         // second leaves an ISR of 2
		p = h.part("t", 0)
		if tc.elr && (len(p.ISR) != 1 || len(p.ELR) != 1 || p.ELR[0] != second) {
			t.Errorf("with configs %v: %+v, want ISR [%d] and ELR [%d]", tc.configs, p, leader, second)
		}
		if !tc.elr && len(p.ELR) != 0 {
			t.Errorf("with configs %v (brokers' min ISR 1): ELR %v, want none", tc.configs, p.ELR)
		}
	}
}

func storedConfigs(t *testing.T, h *harness) map[string]store.TopicConfig {
	t.Helper()
	c, err := h.st.TopicConfigs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A raise of a topic's min.insync.replicas that has not reached every
// broker yet does not count for the ELR: a leader that has not heard still
// moves the HW under the old minimum, so a replica leaving an ISR of 2 is
// not kept as an eligible leader until the raise was delivered everywhere
// (here one broker is unreachable, and it never is).
func TestMinIsrRaiseInFlightKeepsTheOldValueForTheELR(t *testing.T) {
	h := startCluster(t, 3, withSendTimeout(300*time.Millisecond))
	h.createTopic("t", 1, 3)
	p := h.part("t", 0)
	leader, second, third := p.Replicas[0], p.Replicas[1], p.Replicas[2]
	h.fake(third).mu.Lock()
	h.fake(third).failUpdateMetadata = true
	h.fake(third).mu.Unlock()
	r, err := h.c.AlterTopicConfig(context.Background(), &replicadv1.AlterTopicConfigRequest{Topic: "t",
		Set: map[string]string{"min.insync.replicas": "2"}})
	if err != nil || r.GetErrorCode() != codeNone {
		t.Fatalf("AlterTopicConfig: %v %v", r, err)
	}
	h.expire(leader, second) // the third replica leaves: an ISR of 2
	h.expire(leader)         // the second leaves an ISR of 2
	if p := h.part("t", 0); len(p.ELR) != 0 {
		t.Fatalf("ELR %v while the raise to 2 has not reached broker %d: a leader may still commit under min ISR 1", p.ELR, third)
	}
}
