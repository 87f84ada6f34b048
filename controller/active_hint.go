package controller

import (
	"context"
	"time"
)

// ActiveNamer is implemented by stores that know which controller is the
// active one (etcd: its election key names it).
type ActiveNamer interface {
	ActiveCandidate(ctx context.Context) (string, error)
}

// activeHintTimeout bounds the store read that names the active controller
// in a standby's NOT_CONTROLLER answer: the answer must stay fast when the
// store is slow.
const activeHintTimeout = 300 * time.Millisecond

// notActiveMessage is the message of a NOT_CONTROLLER answer: naming the
// active controller when the store says who it is, so that an operator
// (and ctlclient) pointed at a standby learns where to go.
func (c *Controller) notActiveMessage() string {
	const msg = "not the active controller"
	namer, ok := c.cfg.Store.(ActiveNamer)
	if !ok {
		return msg
	}
	ctx, cancel := context.WithTimeout(context.Background(), activeHintTimeout)
	defer cancel()
	active, err := namer.ActiveCandidate(ctx)
	switch {
	case err != nil || active == "":
		return msg
	case active == c.cfg.Advertise:
		// This one was elected but is not acting yet (or any more).
		return msg + " yet: it is being elected"
	}
	return msg + "; the active one is " + active
}
