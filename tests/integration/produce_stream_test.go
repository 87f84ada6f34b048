package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
	"github.com/replicad/replicad/internal/tlsconf"
)

// TestAuthzProduceStreamPerRequest: under mutual TLS and ACLs, a client's
// ProduceStream is authorized request by request as unary Produce is: a
// topic it may write to is appended (acks=all, RF 3), one it may not is
// answered PermissionDenied naming the principal and the method, and the
// stream goes on.
func TestAuthzProduceStreamPerRequest(t *testing.T) {
	dir := devCerts(t)
	c := newTLSCluster(t, dir, 2*time.Second)
	const topic = "granted"
	c.createTopic(topic, 1, 3)
	clientPrincipal := tlsconf.ClientPrincipal("default")
	mustACLCtl(t, c, dir, "acl", "add", "--principal", clientPrincipal, "--operation", "write", "--topic", topic)
	p, err := c.partitionState(topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := c.broker(p.GetLeader())
	sctx, cancel := context.WithTimeout(ctx(t), time.Minute)
	defer cancel()
	s, err := replicadv1.NewLogServiceClient(dialAs(t, dir, "client", b.Addr)).ProduceStream(sctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(topic string) *replicadv1.ProduceResponse {
		t.Helper()
		if err := s.Send(&replicadv1.ProduceRequest{Topic: topic, Partition: 0, Acks: -1, TimeoutMs: 5000,
			Records: []*replicadv1.Record{{Value: []byte("by acl")}}}); err != nil {
			t.Fatalf("send: %v", err)
		}
		r, err := s.Recv()
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		return r
	}
	// The brokers take the ACL from the controller's next UpdateMetadata.
	testutil.Eventually(t, 30*time.Second, func() error {
		if r := send(topic); r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
			return fmt.Errorf("produce to %s: %v (%s)", topic, r.GetErrorCode(), r.GetErrorMessage())
		}
		return nil
	})
	r := send("other")
	if codes.Code(r.GetStatusCode()) != codes.PermissionDenied ||
		r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED ||
		!strings.Contains(r.GetErrorMessage(), clientPrincipal) || !strings.Contains(r.GetErrorMessage(), "LogService/ProduceStream") {
		t.Fatalf("produce to a topic without an ACL: %v", r)
	}
	r = send(topic)
	if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || r.GetBaseOffset() < 1 || r.GetHighWatermark() < r.GetBaseOffset()+1 {
		t.Fatalf("after a refused request: %v", r)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
}
