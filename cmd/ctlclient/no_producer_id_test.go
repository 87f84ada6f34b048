package main

import (
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/replicad/replicad/client"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// produce gives up idempotence (with a warning) only where the cluster
// gives no producer ID at all; a passing failure, when a retry may need
// idempotence most, fails the produce instead (found in review).
func TestNoProducerIDFallsBackOnlyWhereNoIDCanBeHad(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("x: %w", client.ErrIdempotenceUnsupported), true},
		{status.Error(codes.PermissionDenied, "no"), true},
		{&client.Error{Code: replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE, Message: "this broker runs without a controller (no --controller): ..."}, true},
		{&client.Error{Code: replicadv1.ErrorCode_ERROR_CODE_BROKER_NOT_AVAILABLE, Message: "broker is shutting down"}, false},
		{&client.Error{Code: replicadv1.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT}, false},
		{status.Error(codes.Unavailable, "down"), false},
	} {
		if got := noProducerID(tt.err); got != tt.want {
			t.Errorf("noProducerID(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
