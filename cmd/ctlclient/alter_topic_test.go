package main

import (
	"context"
	"strings"
	"testing"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// partitionsController is the fake controller answering CreatePartitions
// with resp.
type partitionsController struct {
	*fakeController
	resp *replicadv1.CreatePartitionsResponse
}

func (f *partitionsController) CreatePartitions(_ context.Context, req *replicadv1.CreatePartitionsRequest) (*replicadv1.CreatePartitionsResponse, error) {
	if _, standby := f.note("CreatePartitions", req); standby {
		return &replicadv1.CreatePartitionsResponse{ErrorCode: notController}, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return orEmpty(f.resp), nil
}

// TestAlterTopic ensures alter-topic takes the topic as the argument or
// --topic, sends the count and --validate-only, prints the partitions
// added like create-topic (or the answer as json), and exits 1 with the
// code and message of a refusal, 2 on bad usage.
func TestAlterTopic(t *testing.T) {
	f := &partitionsController{fakeController: newFakeController(),
		resp: &replicadv1.CreatePartitionsResponse{Partitions: []*replicadv1.ClusterPartition{orders(2, 3, 3, 1, 2), orders(3, 1, 1, 3, 2)}}}
	addr := startController(t, f)

	r := ctl(t, "", "", "--controller", addr, "alter-topic", "orders", "--partitions", "4")
	wantCode(t, r, 0)
	wantRequest(t, f.lastRequest(), &replicadv1.CreatePartitionsRequest{Topic: "orders", Count: 4})
	want := []string{
		"TOPIC   ERROR",
		"orders  NONE",
		"",
		"TOPIC   PARTITION  LEADER  EPOCH  P-EPOCH  ISR    REPLICAS",
		"orders  2          3       1      2        3,1,2  3,1,2",
		"orders  3          1       1      2        1,3,2  1,3,2",
	}
	if got := strings.Join(lines(r.stdout), "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("table:\n%s\nwant:\n%s", r.stdout, strings.Join(want, "\n"))
	}

	r = ctl(t, "", "", "alter-topic", "--topic", "orders", "--partitions", "4", "--validate-only", "--controller", addr)
	wantCode(t, r, 0)
	wantRequest(t, f.lastRequest(), &replicadv1.CreatePartitionsRequest{Topic: "orders", Count: 4, ValidateOnly: true})
	wantContains(t, "stdout", r.stdout, "validate only: 2 partitions would be added; nothing changed")

	r = ctl(t, "", "", "--controller", addr, "alter-topic", "orders", "--partitions", "4", "-o", "json")
	wantCode(t, r, 0)
	wantJSON(t, r.stdout, &replicadv1.CreatePartitionsResponse{}, f.resp)

	f.mu.Lock()
	f.resp = &replicadv1.CreatePartitionsResponse{ErrorCode: replicadv1.ErrorCode_ERROR_CODE_INVALID_PARTITIONS,
		ErrorMessage: `topic "orders" already has 4 partitions`}
	f.mu.Unlock()
	r = ctl(t, "", "", "--controller", addr, "alter-topic", "orders", "--partitions", "4")
	wantCode(t, r, 1)
	wantContains(t, "stdout", r.stdout, "orders  INVALID_PARTITIONS")
	wantContains(t, "stderr", r.stderr, `alter-topic orders: INVALID_PARTITIONS: topic "orders" already has 4 partitions`)

	calls := f.callCount("CreatePartitions")
	for _, args := range [][]string{
		{"alter-topic", "orders"},                                      // no --partitions
		{"alter-topic", "--partitions", "4"},                           // no topic
		{"alter-topic", "orders", "other", "--partitions", "4"},        // two topics
		{"alter-topic", "orders", "--topic", "x", "--partitions", "4"}, // both forms
		{"alter-topic", "orders", "--partitions", "0"},
		{"alter-topic", "bad/name", "--partitions", "4"},
		{"alter-topic", "orders", "--partitions", "many"},
	} {
		r := ctl(t, "", "", append([]string{"--controller", addr}, args...)...)
		if r.code != 2 || r.stderr == "" {
			t.Errorf("%v: exit %d, stderr %q; want a usage error (2)", args, r.code, r.stderr)
		}
	}
	if n := f.callCount("CreatePartitions"); n != calls {
		t.Errorf("bad usage reached the controller %d times", n-calls)
	}

	r = ctl(t, "", "", "alter-topic", "--help")
	wantCode(t, r, 0)
	wantContains(t, "help", r.stdout+r.stderr, "kafka-topics --alter --partitions", "--validate-only", "INVALID_PARTITIONS")
}
