package service

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	"github.com/replicad/replicad/core/record"
	"github.com/replicad/replicad/core/tp"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// sessionLeader is a real ReplicaManager leading t-0 and t-1 (replicas 1
// and 2, both in the ISR) with the given lag time, served over gRPC.
func sessionLeader(t *testing.T, lagMax time.Duration) (*core.ReplicaManager, replicadv1.FetchService_FetchClient) {
	t.Helper()
	rm, err := core.NewReplicaManager(core.Config{BrokerID: 1, LogDirs: []string{filepath.Join(t.TempDir(), "d")},
		Logger: zerolog.Nop(), ReplicaLagTimeMax: lagMax})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rm.Shutdown(context.Background()) })
	var states []core.PartitionState
	for p := range int32(2) {
		states = append(states, core.PartitionState{TopicPartition: tp.TopicPartition{Topic: "t", Partition: p}, ControllerEpoch: 1,
			Leader: 1, LeaderEpoch: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}, IsNew: true})
	}
	rm.BecomeLeaderOrFollower(context.Background(), core.LeaderAndIsrRequest{ControllerEpoch: 1, PartitionStates: states})
	_, conn := startServer(t, rm)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	stream, err := replicadv1.NewFetchServiceClient(conn).Fetch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rm, stream
}

func sessionPart(p int32, offset int64) *replicadv1.FetchPartition {
	return &replicadv1.FetchPartition{Topic: "t", Partition: p, FetchOffset: offset, CurrentLeaderEpoch: 1, LastFetchedEpoch: -1}
}

func sessionFetch(t *testing.T, stream replicadv1.FetchService_FetchClient, req *replicadv1.FetchRequest) *replicadv1.FetchResponse {
	t.Helper()
	req.ReplicaId, req.BrokerEpoch, req.MinBytes, req.Session = 2, -1, 1, true
	if req.MaxWaitMs == 0 {
		req.MaxWaitMs = 20
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !resp.GetSession() {
		t.Fatal("the answer does not keep the session")
	}
	return resp
}

func answered(resp *replicadv1.FetchResponse) []int32 {
	var out []int32
	for _, r := range resp.GetPartitions() {
		out = append(out, r.GetPartition())
	}
	return out
}

func produceOne(t *testing.T, rm *core.ReplicaManager, p int32) {
	t.Helper()
	if r := rm.Produce(context.Background(), core.ProduceRequest{TopicPartition: tp.TopicPartition{Topic: "t", Partition: p},
		Acks: core.AcksLeader, Records: []record.Record{{Value: []byte("v")}}}); r.Error != core.ErrNone {
		t.Fatalf("produce: %v", r.Error)
	}
}

func isrOf(rm *core.ReplicaManager, p int32) []int32 {
	d := rm.Describe("t", &p)
	if len(d.Partitions) == 0 {
		return nil
	}
	return d.Partitions[0].ISR
}

// TestFetchSessionAnswersOnlyWhatIsNew: the first session request lists
// every partition and is answered for all; an empty request fetches the
// session's partitions and answers none while nothing moved; an append is
// answered for its partition alone; a removed partition is no longer
// fetched.
func TestFetchSessionAnswersOnlyWhatIsNew(t *testing.T) {
	rm, stream := sessionLeader(t, 30*time.Second)
	resp := sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: 1, Partitions: []*replicadv1.FetchPartition{sessionPart(0, 0), sessionPart(1, 0)}})
	if got := answered(resp); !slices.Equal(got, []int32{0, 1}) {
		t.Fatalf("first answer carries %v, want both", got)
	}
	resp = sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: 2})
	if got := answered(resp); len(got) != 0 {
		t.Fatalf("idle answer carries %v, want none", got)
	}
	produceOne(t, rm, 1)
	resp = sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: 3})
	if got := answered(resp); !slices.Equal(got, []int32{1}) || len(resp.GetPartitions()[0].GetRecords()) == 0 {
		t.Fatalf("answer after an append to t-1 carries %v, want t-1 with records", got)
	}
	// The follower appended: it names t-1 at its new offset, which the
	// leader answers with the HW that fetch moved.
	resp = sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: 4, Partitions: []*replicadv1.FetchPartition{sessionPart(1, 1)}})
	if got := answered(resp); !slices.Equal(got, []int32{1}) || resp.GetPartitions()[0].GetHighWatermark() != 1 {
		t.Fatalf("answer to t-1 at offset 1: %v", resp.GetPartitions())
	}
	resp = sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: 5, RemovedPartitions: []*replicadv1.FetchPartitionRef{{Topic: "t", Partition: 0}}})
	if got := answered(resp); len(got) != 0 {
		t.Fatalf("answer carries %v, want none", got)
	}
	produceOne(t, rm, 0)
	resp = sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: 6})
	if got := answered(resp); len(got) != 0 {
		t.Fatalf("answer after an append to removed t-0 carries %v, want none", got)
	}
}

// TestFetchSessionKeepsIdleFollowerInISR: a caught-up follower whose session
// requests name no partition for many lag times stays in the ISR (the leader
// fetches the session's partitions each round, so the follower's caught-up
// time moves), and one that does not fetch the records appended since drops
// out (its fetch offset, the last it sent, stays behind).
func TestFetchSessionKeepsIdleFollowerInISR(t *testing.T) {
	const lagMax = 400 * time.Millisecond
	rm, stream := sessionLeader(t, lagMax)
	sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: 1, Partitions: []*replicadv1.FetchPartition{sessionPart(0, 0), sessionPart(1, 0)}})
	corr := int64(2)
	for end := time.Now().Add(5 * lagMax); time.Now().Before(end); corr++ {
		sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: corr})
		for p := range int32(2) {
			if isr := isrOf(rm, p); !slices.Equal(isr, []int32{1, 2}) {
				t.Fatalf("idle t-%d: ISR %v, want [1 2]", p, isr)
			}
		}
	}
	// A record comes while the follower is busy for most of a lag time
	// (it has not asked again): it was caught up at its last round, which
	// named no partition, so the shrink checks meanwhile keep it. Were the
	// unnamed partitions not fetched, its caught-up time would be five lag
	// times old and the first check would drop it.
	produceOne(t, rm, 0)
	time.Sleep(lagMax * 7 / 10) // the busy follower; shrink checks run every lagMax/2
	if isr := isrOf(rm, 0); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("t-0, caught up at the last round: ISR %v, want [1 2]", isr)
	}
	sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: corr, Partitions: []*replicadv1.FetchPartition{sessionPart(0, 1)}})
	corr++
	produceOne(t, rm, 1)
	deadline := time.Now().Add(10 * time.Second)
	for ; ; corr++ {
		// The follower keeps its session alive but never takes t-1's record.
		sessionFetch(t, stream, &replicadv1.FetchRequest{CorrelationId: corr})
		if slices.Equal(isrOf(rm, 1), []int32{1}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("t-1's ISR is %v 10 s after its follower stopped taking records, want [1]", isrOf(rm, 1))
		}
	}
	if isr := isrOf(rm, 0); !slices.Equal(isr, []int32{1, 2}) {
		t.Fatalf("idle t-0: ISR %v, want [1 2]", isr)
	}
}

// TestFetchSessionRejectsBadRemovals: removed_partitions only in a session,
// and never also fetched.
func TestFetchSessionRejectsBadRemovals(t *testing.T) {
	for name, req := range map[string]*replicadv1.FetchRequest{
		"without session": {ReplicaId: 2, RemovedPartitions: []*replicadv1.FetchPartitionRef{{Topic: "t", Partition: 0}}},
		"also fetched": {ReplicaId: 2, Session: true, Partitions: []*replicadv1.FetchPartition{sessionPart(0, 0)},
			RemovedPartitions: []*replicadv1.FetchPartitionRef{{Topic: "t", Partition: 0}}},
		"bad topic": {ReplicaId: 2, Session: true, RemovedPartitions: []*replicadv1.FetchPartitionRef{{Topic: "", Partition: 0}}},
	} {
		t.Run(name, func(t *testing.T) {
			err := validateFetch(req)
			if status.Code(err) != codes.InvalidArgument || !containsField(err, "removed_partitions") {
				t.Fatalf("got %v, want InvalidArgument naming removed_partitions", err)
			}
		})
	}
}

// TestFetchSessionIsBounded: a stream that names ever more partitions is
// refused once its session would pass MaxFetchSessionPartitions.
func TestFetchSessionIsBounded(t *testing.T) {
	s := NewFetchSession()
	req := &replicadv1.FetchRequest{ReplicaId: 2, Session: true}
	for i := range MaxFetchSessionPartitions {
		req.Partitions = append(req.Partitions, sessionPart(int32(i), 0))
	}
	if _, err := s.Apply(req); err != nil {
		t.Fatalf("a session at the limit: %v", err)
	}
	_, err := s.Apply(&replicadv1.FetchRequest{ReplicaId: 2, Session: true, Partitions: []*replicadv1.FetchPartition{sessionPart(MaxFetchSessionPartitions, 0)}})
	if status.Code(err) != codes.InvalidArgument || !containsField(err, "partitions") {
		t.Fatalf("one partition over the limit: %v, want InvalidArgument naming partitions", err)
	}
}

func containsField(err error, field string) bool {
	return err != nil && len(status.Convert(err).Message()) > 0 && strings.Contains(status.Convert(err).Message(), field)
}
