package authz

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

func TestParsePrincipal(t *testing.T) {
	for _, tc := range []struct {
		uri    string
		role   Role
		broker int32
		client string
	}{
		{"spiffe://replicad/controller", RoleController, 0, ""},
		{"spiffe://replicad/admin", RoleAdmin, 0, ""},
		{"spiffe://replicad/broker/7", RoleBroker, 7, ""},
		{"spiffe://replicad/broker/0", RoleBroker, 0, ""},
		{"spiffe://replicad/broker/07", RoleNone, 0, ""}, // would alias broker 7
		{"spiffe://replicad/broker/+7", RoleNone, 0, ""},
		{"spiffe://replicad/broker/x", RoleNone, 0, ""},
		{"spiffe://replicad/client/orders-app", RoleClient, 0, "orders-app"},
		{"spiffe://replicad/client/", RoleNone, 0, ""},
		{"spiffe://replicad/client/a/b", RoleNone, 0, ""},
		{"spiffe://other/admin", RoleNone, 0, ""},
		{"spiffe://replicad/admin/x", RoleNone, 0, ""},
	} {
		p := ParsePrincipal(tc.uri)
		if p.Role != tc.role || p.BrokerID != tc.broker || p.Client != tc.client || p.URI != tc.uri {
			t.Errorf("%s: %+v", tc.uri, p)
		}
	}
}

func TestMappingRule(t *testing.T) {
	r, err := ParseMappingRule("CN=(.*)->spiffe://replicad/client/$1")
	if err != nil {
		t.Fatal(err)
	}
	c := &x509.Certificate{Subject: pkix.Name{CommonName: "billing"}}
	if got, ok := r.Apply(c); !ok || got != "spiffe://replicad/client/billing" {
		t.Fatalf("CN rule: %q %v", got, ok)
	}
	dns, _ := ParseMappingRule("DNS=broker-([0-9]+)\\.kafka\\.example->spiffe://replicad/broker/$1")
	if got, ok := dns.Apply(&x509.Certificate{DNSNames: []string{"x.example", "broker-3.kafka.example"}}); !ok || got != "spiffe://replicad/broker/3" {
		t.Fatalf("DNS rule: %q %v", got, ok)
	}
	// Anchored: a partial match does not count.
	if _, ok := dns.Apply(&x509.Certificate{DNSNames: []string{"evil-broker-3.kafka.example.com"}}); ok {
		t.Fatal("an unanchored match")
	}
	// The spiffe:// SAN wins over the rules.
	u, _ := url.Parse("spiffe://replicad/broker/2")
	rules := MappingRules{r}
	if got, _ := rules.Principal(&x509.Certificate{Subject: pkix.Name{CommonName: "admin"}, URIs: []*url.URL{u}}); got != u.String() {
		t.Fatalf("SAN lost to a rule: %s", got)
	}
	if _, ok := (MappingRules{dns}).Principal(c); ok {
		t.Fatal("no rule matches, yet a principal")
	}
	for _, bad := range []string{"CN=(.*)", "OU=(.*)->x", "CN=(->x", "CN=.*->"} {
		if _, err := ParseMappingRule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestAuthorizeRoles(t *testing.T) {
	a := New([]string{"spiffe://replicad/client/root"})
	const (
		lai       = replicadv1.ReplicaManagerService_LeaderAndIsr_FullMethodName
		um        = replicadv1.ReplicaManagerService_UpdateMetadata_FullMethodName
		ckpt      = replicadv1.ReplicaManagerService_CheckpointHighWatermarks_FullMethodName
		retention = replicadv1.ReplicaManagerService_RunRetention_FullMethodName
		describe  = replicadv1.ReplicaManagerService_DescribePartitions_FullMethodName
		fetch     = replicadv1.FetchService_Fetch_FullMethodName
		ofle      = replicadv1.FetchService_OffsetsForLeaderEpoch_FullMethodName
		register  = replicadv1.ControllerService_RegisterBroker_FullMethodName
		hb        = replicadv1.ControllerService_BrokerHeartbeat_FullMethodName
		alter     = replicadv1.ControllerService_AlterPartition_FullMethodName
		cs        = replicadv1.ControllerService_ControlledShutdown_FullMethodName
		allocIDs  = replicadv1.ControllerService_AllocateProducerIds_FullMethodName
		bumpPID   = replicadv1.ControllerService_BumpProducerEpoch_FullMethodName
		initPID   = replicadv1.LogService_InitProducerId_FullMethodName
		create    = replicadv1.ControllerService_CreateTopic_FullMethodName
		del       = replicadv1.ControllerService_DeleteTopic_FullMethodName
		cluster   = replicadv1.ControllerService_DescribeCluster_FullMethodName
		addACL    = replicadv1.ControllerService_CreateAcls_FullMethodName
		delACL    = replicadv1.ControllerService_DeleteAcls_FullMethodName
		listACL   = replicadv1.ControllerService_DescribeAcls_FullMethodName
		produce   = replicadv1.LogService_Produce_FullMethodName
		consume   = replicadv1.LogService_Consume_FullMethodName
		health    = "/grpc.health.v1.Health/Check"
		refl      = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
	)
	ctl, adm, b2 := "spiffe://replicad/controller", "spiffe://replicad/admin", "spiffe://replicad/broker/2"
	cl, other := "spiffe://replicad/client/app", "spiffe://elsewhere/x"
	for _, tc := range []struct {
		who, method string
		req         any
		allow       bool
	}{
		{ctl, lai, &replicadv1.LeaderAndIsrRequest{}, true},
		{ctl, um, &replicadv1.UpdateMetadataRequest{}, true},
		{ctl, describe, &replicadv1.DescribePartitionsRequest{}, true},
		{ctl, ckpt, &replicadv1.CheckpointHighWatermarksRequest{}, false},
		{ctl, retention, &replicadv1.RunRetentionRequest{Topic: "t"}, false},
		{adm, retention, &replicadv1.RunRetentionRequest{Topic: "t"}, true},
		{b2, retention, &replicadv1.RunRetentionRequest{Topic: "t"}, false},
		{cl, retention, &replicadv1.RunRetentionRequest{Topic: "t"}, false}, // no ACLs
		{ctl, produce, &replicadv1.ProduceRequest{Topic: "t"}, false},
		{ctl, create, &replicadv1.CreateTopicRequest{}, false},
		{ctl, fetch, &replicadv1.FetchRequest{ReplicaId: 2}, false},

		{b2, fetch, nil, true}, // a stream's start
		{b2, fetch, &replicadv1.FetchRequest{ReplicaId: 2}, true},
		{b2, fetch, &replicadv1.FetchRequest{ReplicaId: 3}, false},
		{b2, ofle, &replicadv1.OffsetsForLeaderEpochRequest{ReplicaId: 2}, true},
		{b2, ofle, &replicadv1.OffsetsForLeaderEpochRequest{ReplicaId: 1}, false},
		{b2, register, &replicadv1.RegisterBrokerRequest{BrokerId: 2}, true},
		{b2, register, &replicadv1.RegisterBrokerRequest{BrokerId: 3}, false},
		{b2, hb, &replicadv1.BrokerHeartbeatRequest{BrokerId: 2}, true},
		{b2, hb, &replicadv1.BrokerHeartbeatRequest{BrokerId: 1}, false},
		{b2, alter, &replicadv1.AlterPartitionRequest{BrokerId: 2}, true},
		{b2, alter, &replicadv1.AlterPartitionRequest{BrokerId: 1}, false},
		{b2, cs, &replicadv1.ControlledShutdownRequest{BrokerId: 2}, true},
		{b2, cs, &replicadv1.ControlledShutdownRequest{BrokerId: 3}, false},
		{b2, allocIDs, &replicadv1.AllocateProducerIdsRequest{BrokerId: 2}, true},
		{b2, allocIDs, &replicadv1.AllocateProducerIdsRequest{BrokerId: 1}, false},
		{b2, bumpPID, &replicadv1.BumpProducerEpochRequest{BrokerId: 2}, true},
		{b2, bumpPID, &replicadv1.BumpProducerEpochRequest{BrokerId: 3}, false},
		{b2, initPID, &replicadv1.InitProducerIdRequest{}, false},
		{adm, allocIDs, &replicadv1.AllocateProducerIdsRequest{BrokerId: 1}, false},
		{adm, initPID, &replicadv1.InitProducerIdRequest{}, false}, // admin does not produce
		{ctl, bumpPID, &replicadv1.BumpProducerEpochRequest{BrokerId: 1}, false},
		{cl, allocIDs, &replicadv1.AllocateProducerIdsRequest{BrokerId: 1}, false},
		{cl, initPID, &replicadv1.InitProducerIdRequest{}, false}, // no ACLs yet
		{"spiffe://replicad/client/root", initPID, &replicadv1.InitProducerIdRequest{}, true},
		{b2, lai, &replicadv1.LeaderAndIsrRequest{}, false},
		{b2, create, &replicadv1.CreateTopicRequest{}, false},
		{b2, produce, &replicadv1.ProduceRequest{Topic: "t"}, false},

		{adm, create, &replicadv1.CreateTopicRequest{}, true},
		{adm, del, &replicadv1.DeleteTopicRequest{}, true},
		{adm, cluster, &replicadv1.DescribeClusterRequest{}, true},
		{adm, describe, &replicadv1.DescribePartitionsRequest{}, true},
		{adm, ckpt, &replicadv1.CheckpointHighWatermarksRequest{}, true},
		{adm, lai, &replicadv1.LeaderAndIsrRequest{}, false},
		{adm, addACL, &replicadv1.CreateAclsRequest{}, true},
		{adm, delACL, &replicadv1.DeleteAclsRequest{}, true},
		{adm, listACL, &replicadv1.DescribeAclsRequest{}, true},
		{cl, addACL, &replicadv1.CreateAclsRequest{}, false}, // a client may not grant itself
		{cl, delACL, &replicadv1.DeleteAclsRequest{}, false},
		{cl, listACL, &replicadv1.DescribeAclsRequest{}, false},
		{b2, addACL, &replicadv1.CreateAclsRequest{}, false},
		{ctl, addACL, &replicadv1.CreateAclsRequest{}, false},
		{adm, register, &replicadv1.RegisterBrokerRequest{BrokerId: 1}, false},
		{adm, produce, &replicadv1.ProduceRequest{Topic: "t"}, false},

		{cl, produce, &replicadv1.ProduceRequest{Topic: "t"}, false}, // no ACLs yet
		{cl, del, &replicadv1.DeleteTopicRequest{}, false},
		{cl, cluster, &replicadv1.DescribeClusterRequest{}, false},
		{cl, health, nil, true},
		{cl, refl, nil, true},
		{other, health, nil, true},
		{other, lai, &replicadv1.LeaderAndIsrRequest{}, false},

		{"spiffe://replicad/client/root", lai, &replicadv1.LeaderAndIsrRequest{}, true}, // a superuser
		{"spiffe://replicad/client/root", del, &replicadv1.DeleteTopicRequest{}, true},
	} {
		err := a.Authorize(ParsePrincipal(tc.who), tc.method, tc.req)
		if (err == nil) != tc.allow {
			t.Errorf("%s %s %v: allow=%v, got %v", tc.who, tc.method, tc.req, tc.allow, err)
		}
		var d *Denial
		if err != nil && (!errors.As(err, &d) || !strings.Contains(err.Error(), tc.who) || !strings.Contains(err.Error(), strings.TrimPrefix(tc.method, "/"))) {
			t.Errorf("the refusal does not name the principal and the method: %v", err)
		}
	}
}

// InitProducerId names no topic: a client may call it when some ACL lets
// it write to some topic (Kafka's IdempotentWrite, implied by Write on any
// topic); read alone, or write granted to another principal, is not enough.
func TestAuthorizeInitProducerId(t *testing.T) {
	a := New(nil)
	initPID := func(who string) error {
		return a.Authorize(ParsePrincipal(who), replicadv1.LogService_InitProducerId_FullMethodName, &replicadv1.InitProducerIdRequest{})
	}
	writer, reader, anyone := "spiffe://replicad/client/writer", "spiffe://replicad/client/reader", "spiffe://replicad/client/x"
	a.SetACLs(NewACLSet([]ACL{
		{Principal: writer, Operation: OpWrite, Resource: ResourceTopic, PatternType: PatternPrefix, Name: "orders-"},
		{Principal: reader, Operation: OpRead, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "*"},
	}))
	if err := initPID(writer); err != nil {
		t.Fatalf("a principal with write on a prefix: %v", err)
	}
	for _, who := range []string{reader, anyone} {
		if err := initPID(who); err == nil || !strings.Contains(err.Error(), "write on at least one") {
			t.Fatalf("%s: %v, want a refusal saying write on some topic is needed", who, err)
		}
	}
	a.SetACLs(NewACLSet([]ACL{{Principal: "*", Operation: OpWrite, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "public"}}))
	if err := initPID(anyone); err != nil {
		t.Fatalf("write granted to every principal: %v", err)
	}
}

func TestAuthorizeACLs(t *testing.T) {
	a := New(nil)
	app := ParsePrincipal("spiffe://replicad/client/app")
	produce := func(topic string) error {
		return a.Authorize(app, replicadv1.LogService_Produce_FullMethodName, &replicadv1.ProduceRequest{Topic: topic})
	}
	consume := func(topic string) error {
		return a.Authorize(app, replicadv1.LogService_Consume_FullMethodName, &replicadv1.ConsumeRequest{Topic: topic})
	}
	if err := produce("orders"); err == nil || !strings.Contains(err.Error(), "no ACLs from the controller yet") {
		t.Fatalf("before any ACL: %v", err)
	}
	a.SetACLs(NewACLSet([]ACL{
		{Principal: app.URI, Operation: OpWrite, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "orders"},
		{Principal: app.URI, Operation: OpRead, Resource: ResourceTopic, PatternType: PatternPrefix, Name: "logs-"},
		{Principal: "*", Operation: OpRead, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "public"},
		{Principal: app.URI, Operation: OpDelete, Resource: ResourceTopic, PatternType: PatternPrefix, Name: "logs-"},
	}))
	deleteRecords := func(topics ...string) error {
		req := &replicadv1.DeleteRecordsRequest{}
		for _, t := range topics {
			req.Partitions = append(req.Partitions, &replicadv1.DeleteRecordsPartition{Topic: t})
		}
		return a.Authorize(app, replicadv1.LogService_DeleteRecords_FullMethodName, req)
	}
	for _, tc := range []struct {
		err   error
		allow bool
	}{
		{produce("orders"), true},
		{consume("orders"), false}, // write is not read
		{produce("orders2"), false},
		{consume("logs-a"), true},
		{produce("logs-a"), false},
		{consume("public"), true},
		{deleteRecords("logs-a", "logs-b"), true},
		{deleteRecords("logs-a", "orders"), false}, // every topic needs delete
		{deleteRecords("orders"), false},           // write is not delete
		{deleteRecords(), false},
		// RunRetention deletes records: delete on its topic, as DeleteRecords.
		{a.Authorize(app, replicadv1.ReplicaManagerService_RunRetention_FullMethodName, &replicadv1.RunRetentionRequest{Topic: "logs-a"}), true},
		{a.Authorize(app, replicadv1.ReplicaManagerService_RunRetention_FullMethodName, &replicadv1.RunRetentionRequest{Topic: "orders"}), false},
		{a.Authorize(app, replicadv1.ReplicaManagerService_RunRetention_FullMethodName, &replicadv1.RunRetentionRequest{}), false},
		{a.Authorize(app, replicadv1.ReplicaManagerService_DescribePartitions_FullMethodName, &replicadv1.DescribePartitionsRequest{Topic: "orders"}), true},
		{a.Authorize(app, replicadv1.ReplicaManagerService_DescribePartitions_FullMethodName, &replicadv1.DescribePartitionsRequest{Topic: "other"}), false},
		{a.Authorize(app, replicadv1.ReplicaManagerService_DescribePartitions_FullMethodName, &replicadv1.DescribePartitionsRequest{}), false},
	} {
		if (tc.err == nil) != tc.allow {
			t.Errorf("allow=%v, got %v", tc.allow, tc.err)
		}
	}
}

func TestNewEnforcerSecureByDefault(t *testing.T) {
	var buf strings.Builder
	logger := zerolog.New(&buf)
	for _, tc := range []struct {
		cfg  Config
		on   bool
		logs string
	}{
		{Config{MutualTLS: true}, true, "authorization is on"},
		{Config{MutualTLS: true, SuperUsers: "spiffe://replicad/admin"}, true, "authorization is on"},
		{Config{MutualTLS: true, Disabled: true}, false, `"level":"error","message":"AUTHORIZATION IS OFF`},
		{Config{}, false, "authorization is off: no mutual TLS"},
		{Config{SuperUsers: "spiffe://replicad/admin"}, false, "are ignored"},
	} {
		buf.Reset()
		e, err := NewEnforcer(tc.cfg, logger, nil)
		if err != nil || (e != nil) != tc.on || !strings.Contains(buf.String(), tc.logs) {
			t.Errorf("%+v: enforcer %v err %v, log %s", tc.cfg, e != nil, err, buf.String())
		}
	}
	for _, bad := range []Config{{MutualTLS: true, SuperUsers: "admin"}, {MutualTLS: true, Rules: []string{"CN=x"}}} {
		if _, err := NewEnforcer(bad, logger, nil); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

// TestACLProtoRoundTrip ensures every ACL survives its wire form, and that
// a set from the wire leaves out (and reports) what this version cannot read.
func TestACLProtoRoundTrip(t *testing.T) {
	for _, op := range Operations {
		for _, pt := range []PatternType{PatternLiteral, PatternPrefix} {
			a := ACL{Principal: "spiffe://replicad/client/a", Operation: op, Resource: ResourceTopic, PatternType: pt, Name: "t"}
			got, err := ACLFromProto(ACLToProto(a))
			if err != nil || got != a {
				t.Fatalf("%v: round trip %v, %v", a, got, err)
			}
		}
	}
	good := ACLToProto(ACL{Principal: "p://x", Operation: OpRead, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "t"})
	bad := &replicadv1.Acl{Principal: "p://x", Operation: 99, ResourceType: 1, PatternType: 1, ResourceName: "t"}
	set, skipped := ACLSetFromProto([]*replicadv1.Acl{good, bad})
	if set.Len() != 1 || len(skipped) != 1 || !set.Allows("p://x", OpRead, "t") {
		t.Fatalf("set of len %d, skipped %v", set.Len(), skipped)
	}
}

// Every principal may call Metadata, even a client before any ACL: what the
// answer shows is MayDescribe's, per topic. Clients see the topics an ACL
// lets them use (any operation but CLUSTER_ACTION implies describe); the
// cluster's roles and superusers see every topic.
func TestMetadataIsOpenAndItsTopicsFollowDescribe(t *testing.T) {
	a := New([]string{"spiffe://replicad/client/root"})
	app := ParsePrincipal("spiffe://replicad/client/app")
	other := ParsePrincipal("spiffe://replicad/client/other")
	for _, who := range []Principal{app, ParsePrincipal("spiffe://elsewhere/x"), ParsePrincipal("spiffe://replicad/broker/2"),
		ParsePrincipal("spiffe://replicad/controller"), ParsePrincipal("spiffe://replicad/admin")} {
		if err := a.Authorize(who, replicadv1.LogService_Metadata_FullMethodName, &replicadv1.MetadataRequest{Topics: []string{"x"}}); err != nil {
			t.Errorf("%s may not call Metadata: %v", who, err)
		}
	}
	if a.MayDescribe(app, "orders") {
		t.Fatal("a client describes orders without any ACL")
	}
	a.SetACLs(NewACLSet([]ACL{
		{Principal: app.URI, Operation: OpWrite, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "orders"},
		{Principal: app.URI, Operation: OpRead, Resource: ResourceTopic, PatternType: PatternPrefix, Name: "logs-"},
		{Principal: app.URI, Operation: OpClusterAction, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "ops"},
	}))
	for _, tc := range []struct {
		who   Principal
		topic string
		want  bool
	}{
		{app, "orders", true}, // write implies describe
		{app, "logs-a", true}, // read implies describe
		{app, "ops", false},   // cluster action does not
		{app, "secret", false},
		{other, "orders", false},
		{ParsePrincipal("spiffe://replicad/client/root"), "secret", true},
		{ParsePrincipal("spiffe://replicad/admin"), "secret", true},
		{ParsePrincipal("spiffe://replicad/broker/3"), "secret", true},
		{ParsePrincipal("spiffe://replicad/controller"), "secret", true},
	} {
		if got := a.MayDescribe(tc.who, tc.topic); got != tc.want {
			t.Errorf("%s describes %q: %v, want %v", tc.who, tc.topic, got, tc.want)
		}
	}
}

// recvStream is a server stream that receives one ProduceRequest for topic.
type recvStream struct {
	grpc.ServerStream
	topic string
}

func (s recvStream) Context() context.Context { return context.Background() }
func (s recvStream) RecvMsg(m any) error {
	m.(*replicadv1.ProduceRequest).Topic = s.topic
	return nil
}

// A ProduceStream opens for any client and each request is authorized as a
// unary Produce; a refused one comes back from Recv as a refusal the stream
// survives (RefusedOnStream, PermissionDenied), while a Fetch stream's
// refusal stays a plain error that ends it.
func TestProduceStreamAuthorizedPerRequest(t *testing.T) {
	a := New(nil)
	app := ParsePrincipal("spiffe://replicad/client/app")
	a.SetACLs(NewACLSet([]ACL{{Principal: app.URI, Operation: OpWrite, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "orders"}}))
	const method = replicadv1.LogService_ProduceStream_FullMethodName
	if err := a.Authorize(app, method, nil); err != nil {
		t.Fatalf("opening the stream: %v", err)
	}
	for topic, allow := range map[string]bool{"orders": true, "other": false} {
		unary := a.Authorize(app, replicadv1.LogService_Produce_FullMethodName, &replicadv1.ProduceRequest{Topic: topic})
		onStream := a.Authorize(app, method, &replicadv1.ProduceRequest{Topic: topic})
		if (unary == nil) != allow || (onStream == nil) != allow {
			t.Fatalf("%s: unary %v, on the stream %v, want allowed=%v", topic, unary, onStream, allow)
		}
	}
	adm := ParsePrincipal("spiffe://replicad/admin")
	if err := a.Authorize(adm, method, nil); err == nil {
		t.Fatal("the admin role opened a ProduceStream (it may not produce)")
	}

	e := &Enforcer{Authorizer: a}
	cs := &checkedStream{ServerStream: recvStream{topic: "other"}, e: e, p: app, method: method}
	err := cs.RecvMsg(&replicadv1.ProduceRequest{})
	var refused *RefusedOnStream
	if !errors.As(err, &refused) || !refused.StreamContinues() || status.Code(err) != codes.PermissionDenied ||
		!strings.Contains(err.Error(), "LogService/ProduceStream") {
		t.Fatalf("refused request: %v (%T)", err, err)
	}
	cs.ServerStream = recvStream{topic: "orders"}
	if err := cs.RecvMsg(&replicadv1.ProduceRequest{}); err != nil {
		t.Fatalf("allowed request: %v", err)
	}
}

// CreatePartitions is Kafka's: the admin role may, and a client may grow a
// topic its ACLs let it alter, not one it may only write or describe.
func TestAuthorizeCreatePartitions(t *testing.T) {
	a := New(nil)
	method := replicadv1.ControllerService_CreatePartitions_FullMethodName
	grow := func(who, topic string) error {
		return a.Authorize(ParsePrincipal(who), method, &replicadv1.CreatePartitionsRequest{Topic: topic, Count: 4})
	}
	app, other := "spiffe://replicad/client/app", "spiffe://replicad/client/other"
	if err := grow(app, "orders"); err == nil {
		t.Fatal("a client with no ACLs at all may add partitions")
	}
	a.SetACLs(NewACLSet([]ACL{
		{Principal: app, Operation: OpAlter, Resource: ResourceTopic, PatternType: PatternPrefix, Name: "orders"},
		{Principal: other, Operation: OpWrite, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "orders"},
		{Principal: other, Operation: OpDescribe, Resource: ResourceTopic, PatternType: PatternLiteral, Name: "orders"},
	}))
	for _, tc := range []struct {
		who, topic string
		allow      bool
	}{
		{app, "orders", true},
		{app, "orders-eu", true},
		{app, "logs", false},
		{other, "orders", false}, // write and describe are not alter
		{"spiffe://replicad/admin", "logs", true},
		{"spiffe://replicad/broker/1", "orders", false},
		{"spiffe://replicad/controller", "orders", false},
	} {
		err := grow(tc.who, tc.topic)
		if (err == nil) != tc.allow {
			t.Errorf("%s adding partitions to %s: allow=%v, got %v", tc.who, tc.topic, tc.allow, err)
		}
		if err != nil && !strings.Contains(err.Error(), "CreatePartitions") {
			t.Errorf("the refusal does not name the method: %v", err)
		}
	}
}
