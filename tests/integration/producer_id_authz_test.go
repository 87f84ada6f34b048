package integration

import (
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
	"github.com/replicad/replicad/internal/tlsconf"
)

// With mutual TLS: a client certificate gets a producer ID only once an ACL
// lets it write to some topic (read is not enough), and the broker then
// asks the controller for its block as itself over TLS; a broker's
// certificate may not ask for a block, or bump an epoch, as another broker.
func TestInitProducerIdAuthorization(t *testing.T) {
	dir := devCerts(t)
	c := newTLSCluster(t, dir, 2*time.Second)
	clientPrincipal := tlsconf.ClientPrincipal("default")
	b1, _ := c.broker(1)
	asClient := replicadv1.NewLogServiceClient(dialAs(t, dir, "client", b1.Addr))
	initPID := func() (*replicadv1.InitProducerIdResponse, error) {
		return asClient.InitProducerId(ctx(t), &replicadv1.InitProducerIdRequest{TimeoutMs: 5000})
	}
	_, err := initPID()
	wantDenied(t, err, clientPrincipal, "LogService/InitProducerId")

	mustACLCtl(t, c, dir, "acl", "add", "--principal", clientPrincipal, "--operation", "read", "--topic", "*")
	// Wait for the broker to hold the read ACL (consume is allowed), then
	// InitProducerId is still refused.
	testutil.Eventually(t, 30*time.Second, func() error {
		_, err := asClient.Consume(ctx(t), &replicadv1.ConsumeRequest{Topic: "nothing"})
		if status.Code(err) == codes.PermissionDenied {
			return err
		}
		return nil
	})
	_, err = initPID()
	wantDenied(t, err, clientPrincipal, "LogService/InitProducerId")

	mustACLCtl(t, c, dir, "acl", "add", "--principal", clientPrincipal, "--operation", "write", "--topic", "app-", "--prefix")
	testutil.Eventually(t, 30*time.Second, func() error {
		r, err := initPID()
		if err != nil {
			return err
		}
		if r.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE || r.GetProducerId() <= 0 {
			return fmt.Errorf("InitProducerId: %v", r)
		}
		return nil
	})

	asBroker2 := replicadv1.NewControllerServiceClient(dialAs(t, dir, "broker-2", c.ctlAddr))
	_, err = asBroker2.AllocateProducerIds(ctx(t), &replicadv1.AllocateProducerIdsRequest{BrokerId: 3})
	wantDenied(t, err, tlsconf.BrokerPrincipal(2), "ControllerService/AllocateProducerIds")
	_, err = asBroker2.BumpProducerEpoch(ctx(t), &replicadv1.BumpProducerEpochRequest{BrokerId: 3, ProducerId: 1})
	wantDenied(t, err, tlsconf.BrokerPrincipal(2), "ControllerService/BumpProducerEpoch")
	asClientAtCtl := replicadv1.NewControllerServiceClient(dialAs(t, dir, "client", c.ctlAddr))
	_, err = asClientAtCtl.AllocateProducerIds(ctx(t), &replicadv1.AllocateProducerIdsRequest{BrokerId: 1})
	wantDenied(t, err, clientPrincipal, "ControllerService/AllocateProducerIds")
}
