package service

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/core"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func sampleView() core.MetadataView {
	return core.MetadataView{BrokerID: 2, ControllerID: 100, ControllerEpoch: 4,
		Brokers: []core.Broker{{ID: 1, Host: "b1", Port: 9091, Epoch: 11}, {ID: 2, Host: "b2", Port: 9092, Epoch: 12}},
		Topics: []core.TopicMetadata{
			{Topic: "orders", TopicID: "idOrders", Partitions: []core.PartitionMetadata{
				{Partition: 0, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}, OfflineReplicas: []int32{3}},
				{Partition: 1, Error: core.ErrLeaderNotAvailable, Leader: -1, LeaderEpoch: 2, Replicas: []int32{3}, ISR: []int32{3}, OfflineReplicas: []int32{3}},
			}},
			{Topic: "secret", TopicID: "idSecret", Partitions: []core.PartitionMetadata{{Partition: 0, Leader: 2, Replicas: []int32{2}, ISR: []int32{2}}}},
		}}
}

// The view reaches the client field for field; broker epochs (they fence
// replicas) stay on the broker.
func TestMetadataAnswersTheBrokersView(t *testing.T) {
	rm := &fakeRM{metadata: sampleView()}
	_, conn := startServer(t, rm)
	resp, err := replicadv1.NewLogServiceClient(conn).Metadata(context.Background(), &replicadv1.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	mustProtoEqual(t, "every topic", resp, &replicadv1.MetadataResponse{BrokerId: 2, ControllerId: 100, ControllerEpoch: 4,
		Brokers: []*replicadv1.Broker{{Id: 1, Host: "b1", Port: 9091}, {Id: 2, Host: "b2", Port: 9092}},
		Topics: []*replicadv1.MetadataTopic{
			{Topic: "orders", TopicId: "idOrders", Partitions: []*replicadv1.MetadataPartition{
				{Partition: 0, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2, 3}, Isr: []int32{1, 2}, OfflineReplicas: []int32{3}},
				{Partition: 1, ErrorCode: replicadv1.ErrorCode_ERROR_CODE_LEADER_NOT_AVAILABLE, Leader: -1, LeaderEpoch: 2,
					Replicas: []int32{3}, Isr: []int32{3}, OfflineReplicas: []int32{3}},
			}},
			{Topic: "secret", TopicId: "idSecret", Partitions: []*replicadv1.MetadataPartition{{Partition: 0, Leader: 2, Replicas: []int32{2}, Isr: []int32{2}}}},
		}})
	mustEqual(t, "core asked", rm.Calls(), []any{metadataCall{nil}})

	// Topics named: in request order, once each, an unknown one with its code.
	resp, err = replicadv1.NewLogServiceClient(conn).Metadata(context.Background(), &replicadv1.MetadataRequest{Topics: []string{"nope", "orders", "nope"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 || resp.Topics[0].GetTopic() != "nope" || resp.Topics[1].GetTopic() != "orders" ||
		resp.Topics[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION || resp.Topics[0].GetErrorMessage() == "" ||
		len(resp.Topics[1].GetPartitions()) != 2 {
		t.Fatalf("topics nope, orders, nope: %v, want nope UNKNOWN_TOPIC_OR_PARTITION then orders with its 2 partitions", resp.Topics)
	}
	mustEqual(t, "core asked", rm.Calls()[1], metadataCall{[]string{"nope", "orders"}})
}

// With a describe filter (the broker's authorizer), a topic the caller may
// not describe is answered TOPIC_AUTHORIZATION_FAILED when named, without
// being looked up (an unknown one and a forbidden one look alike to a
// caller without rights only in Kafka's way: the forbidden one says so),
// and left out of an answer for every topic. The brokers are still shown.
func TestMetadataShowsOnlyTopicsTheCallerMayDescribe(t *testing.T) {
	rm := &fakeRM{metadata: sampleView()}
	var filtered int
	filter := func(context.Context) func(string) bool {
		filtered++
		return func(topic string) bool { return topic != "secret" }
	}
	_, conn := startServerWith(t, Options{ReplicaManager: rm, DescribeFilter: filter})
	c := replicadv1.NewLogServiceClient(conn)
	resp, err := c.Metadata(context.Background(), &replicadv1.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].GetTopic() != "orders" || len(resp.Brokers) != 2 {
		t.Fatalf("every topic: %v, want orders alone (secret left out) and both brokers", resp)
	}
	resp, err = c.Metadata(context.Background(), &replicadv1.MetadataRequest{Topics: []string{"secret", "orders"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 2 || resp.Topics[0].GetTopic() != "secret" ||
		resp.Topics[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED || len(resp.Topics[0].GetPartitions()) != 0 ||
		resp.Topics[1].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("secret, orders: %v, want secret TOPIC_AUTHORIZATION_FAILED without partitions, orders answered", resp.Topics)
	}
	mustEqual(t, "core asked", rm.Calls()[1], metadataCall{[]string{"orders"}})
	// Only forbidden topics: core looks none up, the brokers still come.
	resp, err = c.Metadata(context.Background(), &replicadv1.MetadataRequest{Topics: []string{"secret"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || resp.Topics[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED || len(resp.Brokers) != 2 {
		t.Fatalf("secret alone: %v, want TOPIC_AUTHORIZATION_FAILED and the brokers", resp)
	}
	mustEqual(t, "core asked", rm.Calls()[2], metadataCall{[]string{}})
	if filtered != 3 {
		t.Fatalf("filter asked for %d calls, want 3 (once a call)", filtered)
	}
}

// A bad topic name is refused InvalidArgument naming it by its index, and
// so is a request naming too many topics; neither reaches core. A request
// over the bulk size limit is refused ResourceExhausted before validation.
func TestMetadataRefusesBadTopics(t *testing.T) {
	rm := &fakeRM{metadata: sampleView()}
	_, conn := startServer(t, rm)
	c := replicadv1.NewLogServiceClient(conn)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		topics []string
		want   string
	}{
		{"empty name", []string{"orders", ""}, "topics[1]"},
		{"bad character", []string{"a/b"}, "topics[0]"},
		{"too long", []string{strings.Repeat("x", 250)}, "topics[0]"},
		{"too many", make([]string, MaxMetadataTopics+1), "topics: 10001 topics, over the limit"},
	} {
		_, err := c.Metadata(ctx, &replicadv1.MetadataRequest{Topics: tc.topics})
		if st, _ := status.FromError(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.want) {
			t.Errorf("%s: %v, want InvalidArgument containing %q", tc.name, err, tc.want)
		}
	}
	huge := make([]string, 20000)
	for i := range huge {
		huge[i] = strings.Repeat("t", 249)
	}
	_, err := c.Metadata(ctx, &replicadv1.MetadataRequest{Topics: huge}, grpc.MaxCallSendMsgSize(16<<20))
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted {
		t.Errorf("a 5 MB request: %v, want ResourceExhausted", err)
	}
	if n := len(rm.Calls()); n != 0 {
		t.Fatalf("%d bad requests reached core", n)
	}
}
