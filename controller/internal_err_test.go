package controller

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/internal/grpcx"
)

// A store error that wrote nothing for certain is answered Unavailable and
// marked not applied, so that clients send even a create again; a write of
// unknown outcome is not marked: it may have been applied.
func TestInternalErrMarksWhatWasNotApplied(t *testing.T) {
	for _, tc := range []struct {
		err        error
		notApplied bool
	}{
		{fmt.Errorf("create: %w", store.ErrConflict), true},
		{store.ErrNotLeader, true},
		{fmt.Errorf("put: %w", store.ErrUnknownOutcome), false},
		{fmt.Errorf("etcd: context deadline exceeded"), false},
	} {
		got := internalErr(tc.err)
		if status.Code(got) != codes.Unavailable {
			t.Errorf("%v: code %v, want Unavailable", tc.err, status.Code(got))
		}
		if grpcx.IsNotApplied(got) != tc.notApplied {
			t.Errorf("%v: not applied %v, want %v", tc.err, grpcx.IsNotApplied(got), tc.notApplied)
		}
	}
}
