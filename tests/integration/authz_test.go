package integration

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/testutil"
	"github.com/replicad/replicad/internal/tlsconf"
)

// dialAs connects to addr with the certificate name of dir (broker-2,
// client, ...).
func dialAs(t *testing.T, dir, name, addr string) *grpc.ClientConn {
	t.Helper()
	tc, err := tlsconf.New(tlsconf.Options{Cert: filepath.Join(dir, name+".crt"), Key: filepath.Join(dir, name+".key"),
		CA: filepath.Join(dir, "ca.crt")}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(addr, tc.DialOptions(tlsconf.Roles{Self: "the test as " + name})...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// wantDenied requires err to be PermissionDenied naming the principal and the method.
func wantDenied(t *testing.T, err error, principal, method string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), principal) || !strings.Contains(st.Message(), method) {
		t.Fatalf("want PermissionDenied naming %s and %s, got %v", principal, method, err)
	}
}

// snapshot is what a refused call must leave as it was: the controller's
// brokers (ids, epochs, addresses) and partitions, and every broker's
// partitions with their offsets.
func (c *ctlCluster) snapshot() string {
	c.t.Helper()
	cl, err := c.cluster()
	if err != nil {
		c.t.Fatal(err)
	}
	var b strings.Builder
	for _, br := range cl.GetBrokers() {
		fmt.Fprintf(&b, "broker %d %s:%d epoch %d alive %v\n", br.GetId(), br.GetHost(), br.GetPort(), br.GetBrokerEpoch(), br.GetAlive())
	}
	for _, tp := range cl.GetPartitions() {
		fmt.Fprintf(&b, "%s-%d leader %d epoch %d/%d isr %v replicas %v\n", tp.GetTopic(), tp.GetPartition(), tp.GetLeader(),
			tp.GetLeaderEpoch(), tp.GetPartitionEpoch(), tp.GetIsr(), tp.GetReplicas())
	}
	for _, id := range clusterIDs {
		_, client := c.broker(id)
		for _, p := range client.describe().GetPartitions() {
			fmt.Fprintf(&b, "on %d: %s-%d %v leader %d epoch %d isr %v leo %d hw %d\n", id, p.GetTopic(), p.GetPartition(), p.GetRole(),
				p.GetLeader(), p.GetLeaderEpoch(), p.GetIsr(), p.GetLogEndOffset(), p.GetHighWatermark())
		}
	}
	return b.String()
}

// With mutual TLS authorization is on: each certificate may do what its
// role allows and nothing else, and a refused call changes nothing (the
// controller's and the brokers' metadata and logs are as before). The
// refusals are logged at warn by the server that refused.
func TestAuthzRolesRefuseOverreach(t *testing.T) {
	dir := devCerts(t)
	c := newTLSCluster(t, dir, 2*time.Second)
	c.createTopic("guarded", 1, 3)
	testutil.Eventually(t, 30*time.Second, func() error { return c.produceToLeader("guarded", 0, "before") })
	p, err := c.partitionState("guarded", 0)
	if err != nil {
		t.Fatal(err)
	}
	leader := p.GetLeader()
	var follower, other int32
	for _, r := range p.GetReplicas() {
		if r != leader {
			if follower == 0 {
				follower = r
			} else {
				other = r
			}
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		p, err := c.partitionState("guarded", 0)
		if err != nil {
			return err
		}
		if len(p.GetIsr()) != 3 {
			return fmt.Errorf("ISR %v", p.GetIsr())
		}
		for _, id := range clusterIDs {
			_, cl := c.broker(id)
			d, err := cl.partition("guarded", 0)
			if err != nil {
				return err
			}
			if d.GetHighWatermark() != 1 || d.GetLogEndOffset() != 1 {
				return fmt.Errorf("broker %d: hw %d leo %d", id, d.GetHighWatermark(), d.GetLogEndOffset())
			}
		}
		return nil
	})
	leaderProc, _ := c.broker(leader)
	before := c.snapshot()
	followerCert := fmt.Sprintf("broker-%d", follower)
	followerPrincipal := tlsconf.BrokerPrincipal(int(follower))
	clientPrincipal := tlsconf.ClientPrincipal("default")

	// A broker's certificate sending a control request to another broker.
	asFollower := dialAs(t, dir, followerCert, leaderProc.Addr)
	_, err = replicadv1.NewReplicaManagerServiceClient(asFollower).LeaderAndIsr(ctx(t), &replicadv1.LeaderAndIsrRequest{
		ControllerEpoch: 1000, PartitionStates: []*replicadv1.PartitionState{{Topic: "guarded", Partition: 0, ControllerEpoch: 1000,
			Leader: follower, LeaderEpoch: 1000, Isr: []int32{follower}, Replicas: []int32{follower}}}})
	wantDenied(t, err, followerPrincipal, "ReplicaManagerService/LeaderAndIsr")

	// A follower's certificate fetching as another replica (the stream
	// opens; its request is refused).
	stream, err := replicadv1.NewFetchServiceClient(asFollower).Fetch(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&replicadv1.FetchRequest{ReplicaId: other, MaxBytes: 1 << 20, Partitions: []*replicadv1.FetchPartition{
		{Topic: "guarded", Partition: 0, FetchOffset: 0, CurrentLeaderEpoch: p.GetLeaderEpoch(), LastFetchedEpoch: -1}}}); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantDenied(t, err, followerPrincipal, "FetchService/Fetch")
	if !strings.Contains(err.Error(), fmt.Sprintf("not %d", other)) {
		t.Fatalf("the refusal does not name the replica: %v", err)
	}
	// Every message of a stream is checked, not only its first: a stream
	// that fetched as itself, then claims another replica, is refused.
	stream, err = replicadv1.NewFetchServiceClient(asFollower).Fetch(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	fetchAs := func(id int32) error {
		return stream.Send(&replicadv1.FetchRequest{ReplicaId: id, BrokerEpoch: -1, MaxBytes: 1 << 20, Partitions: []*replicadv1.FetchPartition{
			{Topic: "guarded", Partition: 0, FetchOffset: 1, CurrentLeaderEpoch: p.GetLeaderEpoch(), LastFetchedEpoch: -1}}})
	}
	if err := fetchAs(follower); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("a follower's certificate fetching as itself: %v", err)
	}
	if err := fetchAs(other); err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	wantDenied(t, err, followerPrincipal, "FetchService/Fetch")
	_, err = replicadv1.NewFetchServiceClient(asFollower).OffsetsForLeaderEpoch(ctx(t), &replicadv1.OffsetsForLeaderEpochRequest{ReplicaId: other})
	wantDenied(t, err, followerPrincipal, "FetchService/OffsetsForLeaderEpoch")

	// Broker 2's certificate registering, heartbeating and shutting down as broker 3.
	asBroker2 := replicadv1.NewControllerServiceClient(dialAs(t, dir, "broker-2", c.ctlAddr))
	_, err = asBroker2.RegisterBroker(ctx(t), &replicadv1.RegisterBrokerRequest{BrokerId: 3, Host: "127.0.0.1", Port: 1, IncarnationId: "impostor"})
	wantDenied(t, err, tlsconf.BrokerPrincipal(2), "ControllerService/RegisterBroker")
	_, err = asBroker2.ControlledShutdown(ctx(t), &replicadv1.ControlledShutdownRequest{BrokerId: 3})
	wantDenied(t, err, tlsconf.BrokerPrincipal(2), "ControllerService/ControlledShutdown")
	_, err = asBroker2.AlterPartition(ctx(t), &replicadv1.AlterPartitionRequest{BrokerId: 3})
	wantDenied(t, err, tlsconf.BrokerPrincipal(2), "ControllerService/AlterPartition")
	// Nor may a broker manage topics.
	_, err = asBroker2.DeleteTopic(ctx(t), &replicadv1.DeleteTopicRequest{Topic: "guarded"})
	wantDenied(t, err, tlsconf.BrokerPrincipal(2), "ControllerService/DeleteTopic")

	// A client certificate: no ACL, so no produce or consume; no topic management.
	asClient := dialAs(t, dir, "client", leaderProc.Addr)
	_, err = replicadv1.NewLogServiceClient(asClient).Produce(ctx(t), &replicadv1.ProduceRequest{Topic: "guarded", Acks: -1, TimeoutMs: 5000,
		Records: []*replicadv1.Record{{Value: []byte("sneaked in")}}})
	wantDenied(t, err, clientPrincipal, "LogService/Produce")
	_, err = replicadv1.NewLogServiceClient(asClient).Consume(ctx(t), &replicadv1.ConsumeRequest{Topic: "guarded"})
	wantDenied(t, err, clientPrincipal, "LogService/Consume")
	_, err = replicadv1.NewReplicaManagerServiceClient(asClient).StopReplica(ctx(t), &replicadv1.StopReplicaRequest{})
	wantDenied(t, err, clientPrincipal, "ReplicaManagerService/StopReplica")
	// Nor run retention: it deletes records, which needs the delete ACL.
	_, err = replicadv1.NewReplicaManagerServiceClient(asClient).RunRetention(ctx(t), &replicadv1.RunRetentionRequest{Topic: "guarded"})
	wantDenied(t, err, clientPrincipal, "ReplicaManagerService/RunRetention")
	clientAtCtl := dialAs(t, dir, "client", c.ctlAddr)
	_, err = replicadv1.NewControllerServiceClient(clientAtCtl).DeleteTopic(ctx(t), &replicadv1.DeleteTopicRequest{Topic: "guarded"})
	wantDenied(t, err, clientPrincipal, "ControllerService/DeleteTopic")
	// Adding partitions is Alter on the topic (Kafka's): a client without
	// that ACL, and a broker, are refused.
	_, err = replicadv1.NewControllerServiceClient(clientAtCtl).CreatePartitions(ctx(t), &replicadv1.CreatePartitionsRequest{Topic: "guarded", Count: 4})
	wantDenied(t, err, clientPrincipal, "ControllerService/CreatePartitions")
	_, err = asBroker2.CreatePartitions(ctx(t), &replicadv1.CreatePartitionsRequest{Topic: "guarded", Count: 4})
	wantDenied(t, err, tlsconf.BrokerPrincipal(2), "ControllerService/CreatePartitions")
	r := runCtlclient(t, nil, "", append([]string{"--controller", c.ctlAddr, "delete-topic", "--topic", "guarded"}, tlsFlags(dir, "client", "")...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "PermissionDenied") && !strings.Contains(r.stderr, "may not call") {
		t.Fatalf("ctlclient delete-topic as a client: exit %d\n%s", r.code, r.stderr)
	}
	// Health stays open to any certificate of the CA.
	for _, conn := range []*grpc.ClientConn{asClient, clientAtCtl} {
		h, err := healthpb.NewHealthClient(conn).Check(ctx(t), &healthpb.HealthCheckRequest{})
		if err != nil || h.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health as a client: %v %v", h, err)
		}
	}

	// Nothing changed anywhere.
	if after := c.snapshot(); after != before {
		t.Fatalf("a refused call changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The refusals were logged by the server that refused them.
	testutil.Eventually(t, 10*time.Second, func() error {
		for name, log := range map[string]string{"leader": leaderProc.Stderr(), "controller": c.ctl.Stderr()} {
			if !strings.Contains(log, "refused a call: not authorized") {
				return fmt.Errorf("the %s logged no refusal", name)
			}
		}
		return nil
	})
}
