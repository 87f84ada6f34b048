package controller

import (
	"context"
	"slices"
	"strings"
	"testing"

	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// The last ISR member of a partition comes back from an unclean shutdown
// (a power loss in os or interval flush mode, a wiped disk): it may have lost
// records it acknowledged, so it is not elected while a replica that holds
// them may still come back (issue 10, path 6; Kafka's KIP-966). With min ISR
// 2 and RF 3: 3 leaves (ISR [1 2], nothing committed needs it), 2 leaves
// (ISR [1] under min ISR: 2 joins the ELR, the HW cannot move any more), 1
// leaves (ELR [1 2]). Broker 1 returns unclean: it leaves the ELR and stays
// out; broker 2 returns clean and leads.
func TestUncleanlyReturningLastIsrMemberIsNotElected(t *testing.T) {
	h := newHarness(t)
	h.minIsr = 2
	h.start()
	for id := int32(1); id <= 3; id++ {
		h.register(id)
	}
	h.createTopic("t", 1, 3) // [1 2 3], leader 1
	h.expire(1, 2)
	wantPartition(t, h, "t", 0, 1, 1, 1, 1, 2)
	wantElr(t, h, "t", 0)
	h.expire(1)
	wantPartition(t, h, "t", 0, 1, 2, 2, 1)
	wantElr(t, h, "t", 0, 2)
	h.expire()
	wantPartition(t, h, "t", 0, store.NoLeader, 3, 3)
	wantElr(t, h, "t", 0, 1, 2)

	h.registerAfter(1, -1) // unclean
	if p := h.part("t", 0); p.Leader != store.NoLeader {
		t.Fatalf("broker 1, back from an unclean shutdown, leads %+v while broker 2 (ELR) may come back with every record", p)
	}
	wantElr(t, h, "t", 0, 2)

	h.register(2) // clean
	p := h.part("t", 0)
	if p.Leader != 2 || len(p.ISR) != 1 || p.ISR[0] != 2 || len(p.ELR) != 0 {
		t.Fatalf("after broker 2 came back clean: %+v, want it leading with ISR [2] and no ELR left", p)
	}
	waitLAI(t, h, 1, p)
}

// When every ELR member came back uncleanly and nobody else is left, the
// most caught-up of them leads rather than leave the partition down for
// good (KIP-966's balanced recovery): the records they lost are lost.
func TestLastKnownElrIsTheLastResort(t *testing.T) {
	h := startCluster(t, 2)
	h.createTopic("t", 1, 2) // [1 2], leader 1
	h.mustAlter(1, h.part("t", 0), 1)
	h.expire()
	wantPartition(t, h, "t", 0, store.NoLeader, 1, 2)
	wantElr(t, h, "t", 0, 1)
	h.fake(1).setLEO("t", 0, 7)
	h.registerAfter(1, -1)
	p := h.part("t", 0)
	if p.Leader != 1 || len(p.ISR) != 1 || len(p.ELR) != 0 || len(p.LastKnownELR) != 0 {
		t.Fatalf("%+v, want broker 1 leading alone as the last resort", p)
	}
	// Broker 2 was never in the ELR: it could not have led.
	h.registerAfter(2, -1)
	if p := h.part("t", 0); p.Leader != 1 {
		t.Fatalf("%+v, want broker 1 still leading", p)
	}
}

// Offline replicas reach the controller in the heartbeat (KIP-858) and in
// STORAGE_ERROR answers to LeaderAndIsr: they leave the ISR, their
// leaderships move to healthy ISR members, and they are neither elected nor
// let back into the ISR (issue 10, path 4).
func TestOfflineReplicasLeaveTheIsrAndAreNotElected(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 2, 3) // t-0 [1 2 3] leader 1, t-1 [2 3 1] leader 2
	ctx := context.Background()
	resp, err := h.c.BrokerHeartbeat(ctx, &replicadv1.BrokerHeartbeatRequest{BrokerId: 1, BrokerEpoch: h.epoch[1],
		OfflinePartitions: []*replicadv1.PartitionRef{{Topic: "t", Partition: 0}}})
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("heartbeat: %v %v", resp, err)
	}
	p0 := wantPartition(t, h, "t", 0, 2, 1, 1, 2, 3)
	wantPartition(t, h, "t", 1, 2, 0, 0, 2, 3, 1) // broker 1's replica of t-1 is fine
	waitLAI(t, h, 2, p0)

	// It is neither elected nor taken back into the ISR.
	one := int32(1)
	er, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0, Leader: &one})
	if err != nil || er.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA {
		t.Fatalf("elect the offline replica: %v %v, want INELIGIBLE_REPLICA", er, err)
	}
	ar := h.alter(2, h.part("t", 0), 1, 2, 3)
	if len(ar.GetPartitions()) != 1 || ar.GetPartitions()[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA {
		t.Fatalf("ISR expansion with the offline replica: %v, want INELIGIBLE_REPLICA", ar)
	}
	dc, err := h.c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range dc.GetPartitions() {
		if cp.GetPartition() == 0 && (len(cp.GetOfflineReplicas()) != 1 || cp.GetOfflineReplicas()[0] != 1) {
			t.Errorf("describe-cluster shows t-0 offline replicas %v, want [1]", cp.GetOfflineReplicas())
		}
	}

	// A STORAGE_ERROR answer does the same: broker 3's replica of t-1 fails.
	f3 := h.fake(3)
	f3.mu.Lock()
	f3.storageErrorFor = map[partitionKey]bool{{"t", 1}: true}
	f3.mu.Unlock()
	two := int32(3)
	if er, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 1, Leader: &two}); err != nil || er.GetErrorCode() != codeNone {
		t.Fatalf("elect 3 for t-1: %v %v", er, err)
	}
	waitFor(t, "t-1's leadership to move off broker 3 after its STORAGE_ERROR", func() bool {
		p := h.part("t", 1)
		return p.Leader != 3 && p.Leader != store.NoLeader && len(p.ISR) == 2
	})
}

// A replica that refused a LeaderAndIsr with STORAGE_ERROR (a broker whose
// log is damaged refuses to lead) is offline only until it takes one: once
// it answers NONE (it followed, and repaired its log), its leader may bring
// it back into the ISR (issue 10, path 9).
func TestStorageErrorEndsWhenTheReplicaTakesALeaderAndIsr(t *testing.T) {
	h := startCluster(t, 3)
	h.createTopic("t", 2, 3) // t-1 [2 3 1] leader 2
	ctx := context.Background()
	f3 := h.fake(3)
	f3.mu.Lock()
	f3.storageErrorFor = map[partitionKey]bool{{"t", 1}: true}
	f3.mu.Unlock()
	three := int32(3)
	if er, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 1, Leader: &three}); err != nil || er.GetErrorCode() != codeNone {
		t.Fatalf("elect 3 for t-1: %v %v", er, err)
	}
	waitFor(t, "t-1's leadership to move off broker 3 after its STORAGE_ERROR", func() bool {
		p := h.part("t", 1)
		return p.Leader != 3 && p.Leader != store.NoLeader && !slices.Contains(p.ISR, 3)
	})
	p := h.part("t", 1)
	if ar := h.alter(p.Leader, p, append(slices.Clone(p.ISR), 3)...); ar.GetPartitions()[0].GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA {
		t.Fatalf("ISR expansion with the refusing replica: %v, want INELIGIBLE_REPLICA", ar)
	}

	// Broker 3 follows now: the next LeaderAndIsr for t-1 is answered NONE.
	f3.mu.Lock()
	f3.storageErrorFor = nil
	f3.mu.Unlock()
	other := p.ISR[0]
	if other == p.Leader {
		other = p.ISR[1]
	}
	if er, err := h.c.ElectLeader(ctx, &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 1, Leader: &other}); err != nil || er.GetErrorCode() != codeNone {
		t.Fatalf("elect %d for t-1: %v %v", other, er, err)
	}
	p = h.part("t", 1)
	waitLAI(t, h, 3, p)
	waitFor(t, "broker 3 back in t-1's ISR", func() bool {
		p := h.part("t", 1)
		ar := h.alter(p.Leader, p, append(slices.Clone(p.ISR), 3)...)
		return ar.GetPartitions()[0].GetErrorCode() == codeNone
	})
}

// A broker fenced while a log dir of its had failed registers again in the
// same process: its registration says which replicas are offline, so none
// of them is elected on its word that nothing was lost (it sends its last
// broker epoch as a clean previous life). Before, the registration cleared
// what the heartbeats had said and elected the failed replica as the
// partition's last ISR member (issue 19, path 9).
func TestRegistrationAgainCarriesOfflineReplicas(t *testing.T) {
	h := startCluster(t, 2)
	h.createTopic("t", 1, 2) // [1 2], leader 1
	h.expire(1)              // 2 goes: ISR [1]
	h.expire()               // 1 goes too, its dir failed meanwhile
	before := h.part("t", 0)
	if before.Leader != store.NoLeader {
		t.Fatalf("%+v, want the partition leaderless", before)
	}
	resp, err := h.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{
		BrokerId: 1, Host: brokerHost(1), Port: brokerPort(1), PreviousBrokerEpoch: h.epoch[1], MinInsyncReplicas: h.minIsr,
		OfflinePartitions: []*replicadv1.PartitionRef{{Topic: "t", Partition: 0}}})
	if err != nil || resp.GetErrorCode() != codeNone {
		t.Fatalf("RegisterBroker: %v %v", resp, err)
	}
	h.epoch[1] = resp.GetBrokerEpoch()
	if p := h.part("t", 0); p.Leader == 1 {
		t.Fatalf("%+v: broker 1 elected for a replica its registration says is offline", p)
	}
	one := int32(1)
	er, err := h.c.ElectLeader(context.Background(), &replicadv1.ElectLeaderRequest{Topic: "t", Partition: 0, Leader: &one})
	if err != nil || er.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_INELIGIBLE_REPLICA {
		t.Fatalf("elect the offline replica: %v %v, want INELIGIBLE_REPLICA", er, err)
	}
	// A bad entry is refused, naming the field.
	_, err = h.c.RegisterBroker(context.Background(), &replicadv1.RegisterBrokerRequest{
		BrokerId: 1, Host: brokerHost(1), Port: brokerPort(1), PreviousBrokerEpoch: h.epoch[1],
		OfflinePartitions: []*replicadv1.PartitionRef{{Topic: "t", Partition: -1}}})
	if status.Code(err) != grpccodes.InvalidArgument || !strings.Contains(err.Error(), "offline_partitions[0].partition") {
		t.Fatalf("negative partition: %v, want InvalidArgument naming offline_partitions[0].partition", err)
	}
}
