package controller

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/replicad/replicad/internal/grpcx"
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

// activeCandidate is the address of the controller the store names as
// elected ("" when it does not say, or cannot within activeHintTimeout).
func (c *Controller) activeCandidate() string {
	namer, ok := c.cfg.Store.(ActiveNamer)
	if !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), activeHintTimeout)
	defer cancel()
	active, err := namer.ActiveCandidate(ctx)
	if err != nil {
		return ""
	}
	return active
}

// notActiveMessage is the message of a NOT_CONTROLLER answer: naming the
// active controller when the store says who it is, so that an operator
// (and ctlclient) pointed at a standby learns where to go.
func (c *Controller) notActiveMessage() string {
	const msg = "not the active controller"
	switch active := c.activeCandidate(); active {
	case "":
		return msg
	case c.cfg.Advertise:
		// This one was elected but is not acting yet (or any more).
		return msg + " yet: it is being elected"
	default:
		return msg + "; the active one is " + active
	}
}

// hintActive names the active controller in the trailer of a NOT_CONTROLLER
// answer (grpcx.ActiveControllerKey) for the methods whose answer has no
// error message (the brokers' RegisterBroker, BrokerHeartbeat,
// AlterPartition, ControlledShutdown and producer ID requests), so that a
// broker's controllerchannel goes straight there. Outside a gRPC call (an
// in-process caller) there is no trailer to set, and nothing happens.
func (c *Controller) hintActive(ctx context.Context) {
	if active := c.activeCandidate(); active != "" && active != c.cfg.Advertise {
		_ = grpc.SetTrailer(ctx, metadata.Pairs(grpcx.ActiveControllerKey, active))
	}
}
