package main

import (
	"bytes"
	"strings"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// TestDescribeFollowerISR ensures a follower's row in describe does not show
// an empty ISR as if the partition had none: the cell says the ISR is the
// leader's, and a note under the table says where to ask; a leader's row
// shows its ISR and the log start offset is headed LOG-START, not LSO.
func TestDescribeFollowerISR(t *testing.T) {
	var out bytes.Buffer
	e := &env{stdout: &out}
	resp := &replicadv1.DescribePartitionsResponse{Partitions: []*replicadv1.PartitionDescription{
		{Topic: "orders", Partition: 0, Role: replicadv1.ReplicaRole_REPLICA_ROLE_LEADER, Leader: 1, Replicas: []int32{1, 2}, Isr: []int32{1, 2}},
		{Topic: "orders", Partition: 1, Role: replicadv1.ReplicaRole_REPLICA_ROLE_FOLLOWER, Leader: 2, Replicas: []int32{2, 1}},
	}}
	if err := printDescription(e, resp); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if !strings.Contains(lines[0], "LOG-START") || strings.Contains(lines[0], "LSO") {
		t.Errorf("header %q", lines[0])
	}
	if f := strings.Fields(lines[1]); f[7] != "1,2" {
		t.Errorf("leader row %q: ISR %q", lines[1], f[7])
	}
	if f := strings.Fields(lines[2]); f[7] != followerISR {
		t.Errorf("follower row %q: ISR %q, want %q", lines[2], f[7], followerISR)
	}
	if !strings.Contains(out.String(), followerISRNote) {
		t.Errorf("no note on the follower's ISR:\n%s", out.String())
	}
	// Only leaders: no note.
	out.Reset()
	resp.Partitions = resp.Partitions[:1]
	if err := printDescription(e, resp); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), followerISRNote) {
		t.Errorf("a note without a follower:\n%s", out.String())
	}
}
