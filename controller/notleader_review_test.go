package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/controller/store/storetest"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// An admin write the store refused because this controller lost its
// election (ErrNotLeader: nothing written) is answered NOT_CONTROLLER, for
// the client to go on to the next controller, not gRPC Unavailable, which
// the controller channel must take as "may have been applied" (it also
// answers a write of unknown outcome) and so would stop a create there.
func TestAdminWriteAfterLostElectionIsNotController(t *testing.T) {
	h, f := faultyCluster(t, 3)
	ctx := context.Background()
	h.createTopic("a", 2, 3)
	f.Inject(storetest.Fault{Op: storetest.OpCreatePartitions, Kind: storetest.FailBefore,
		Err: fmt.Errorf("create partitions of a: %w", store.ErrNotLeader)})
	resp, err := h.c.CreatePartitions(ctx, &replicadv1.CreatePartitionsRequest{Topic: "a", Count: 3})
	if err != nil || resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER {
		t.Fatalf("CreatePartitions after a lost election: %v, %v; want NOT_CONTROLLER", resp, err)
	}
	if n := len(h.stored("a")); n != 2 {
		t.Fatalf("%d partitions stored, want 2", n)
	}
}
