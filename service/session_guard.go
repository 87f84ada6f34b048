package service

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/replicad/replicad/brokersession"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// SessionGuard is the ControllerGuard of a broker with a controller: its
// broker session decides which controller the broker follows. session is
// set once the broker registered; before that nothing can be judged and
// the controller retries.
func SessionGuard(session *atomic.Pointer[brokersession.Session]) ControllerGuard {
	return sessionGuard{session}
}

type sessionGuard struct {
	session *atomic.Pointer[brokersession.Session]
}

func (g sessionGuard) CheckController(ctx context.Context, id, epoch int32) (ControllerCheck, error) {
	s := g.session.Load()
	if s == nil {
		return ControllerCheck{}, errors.New("this broker has not registered with the controller yet")
	}
	verdict, active, err := s.CheckController(ctx, id, epoch)
	if err != nil {
		return ControllerCheck{}, err
	}
	check := ControllerCheck{FollowedEpoch: active.Epoch}
	followed := fmt.Sprintf("controller %d at controller epoch %d (%s)", active.ID, active.Epoch, active.Addr)
	switch verdict {
	case brokersession.ControllerActive:
	case brokersession.ControllerStale:
		check.Code = replicadv1.ErrorCode_ERROR_CODE_STALE_CONTROLLER_EPOCH
		check.Message = fmt.Sprintf("controller epoch %d is older than the one this broker follows: %s", epoch, followed)
	default:
		check.Code = replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER
		check.Message = fmt.Sprintf("controller %d at controller epoch %d is not the controller this broker follows: %s; "+
			"a broker registered with a controller takes control requests only from it", id, epoch, followed)
	}
	return check, nil
}
