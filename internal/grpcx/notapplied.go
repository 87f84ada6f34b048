package grpcx

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// NotAppliedReason marks an Unavailable answer whose request was certainly
// not applied: the controller's store refused the write before writing
// (a conflict, a lost election), as opposed to a write of unknown outcome.
// A client may send such a request again, even one that must never be
// applied twice (a create, a reassignment); an Unavailable without the mark
// may have been applied, and such a request is checked first.
const NotAppliedReason = "NOT_APPLIED"

const errorDomain = "replicad"

// NotApplied is an Unavailable status that says its request was not
// applied (an errdetails.ErrorInfo with NotAppliedReason).
func NotApplied(msg string) error {
	st := status.New(codes.Unavailable, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: NotAppliedReason, Domain: errorDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// IsNotApplied reports whether err is an answer made by NotApplied.
func IsNotApplied(err error) bool {
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		return false
	}
	for _, d := range se.GRPCStatus().Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == NotAppliedReason && info.GetDomain() == errorDomain {
			return true
		}
	}
	return false
}
