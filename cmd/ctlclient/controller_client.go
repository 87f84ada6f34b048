package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/replicad/replicad/client"
	"github.com/replicad/replicad/controllerchannel"
	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/tlsconf"
)

// controllerClient makes ControllerService calls against the --controller
// addresses: a client.Admin, which reaches the active controller through a
// controllerchannel (a standby's NOT_CONTROLLER leads to the controller it
// names or the next address; rounds repeat with a bounded backoff until
// --timeout). The protocol is there; what is here is the flag and the
// wording of the errors.
type controllerClient = client.Admin

// controller is the client of the --controller addresses; without
// --controller it is a usage error naming the flag.
func (e *env) controller() (*controllerClient, error) {
	addrs := e.g.controllers()
	if len(addrs) == 0 {
		return nil, usagef("--controller is required: the controller's ADDR, or several as ADDR,ADDR,... (env CTLCLIENT_CONTROLLER)")
	}
	var err error
	e.ctlOnce.Do(func() {
		e.ctl, err = client.NewAdmin(client.AdminConfig{
			Controllers: addrs,
			Timeout:     e.g.timeout,
			Dial: func(addr string, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
				tc, err := e.tlsConfig()
				if err != nil {
					return nil, err
				}
				return dialAddr(addr, append(tc.DialOptions(tlsconf.Roles{Peer: "controller", Self: "ctlclient"}), extra...)...)
			},
		})
	})
	if err != nil {
		return nil, err
	}
	if e.ctl == nil {
		return nil, errors.New("no controller client (an earlier attempt to make it failed)")
	}
	return e.ctl, nil
}

// closeController closes the controller connections, if any were opened.
func (e *env) closeController() {
	if e.ctl != nil {
		_ = e.ctl.Close()
	}
}

// callController makes one ControllerService call on the active controller
// among c's addresses (client.AdminCall). call gets a context bounded by
// --timeout and must return the RPC's answer as is. The first answer other
// than NOT_CONTROLLER is returned, whatever its error code, as is any gRPC
// error the next controller would repeat. When no controller answered in
// time, the error names each address's last outcome; when a request that
// may not be sent twice went out and got no answer, it says the request may
// have been applied (errors.Is controllerchannel.ErrMaybeApplied).
func callController[R controllerchannel.Answer](ctx context.Context, c *controllerClient, call func(context.Context, replicadv1.ControllerServiceClient) (R, error)) (R, error) {
	resp, err := client.AdminCall(ctx, c, call)
	return resp, controllerError(err, c)
}

// controllerError words a controller channel's "no active controller" for
// ctlclient (with --timeout and the hint for a broker address); other
// errors stay as they are.
func controllerError(err error, c *controllerClient) error {
	var nc *controllerchannel.NoControllerError
	if errors.As(err, &nc) {
		return noControllerError{NoControllerError: nc, budget: c.Timeout()}
	}
	return err
}

// noControllerError: no address answered as the active controller in time.
type noControllerError struct {
	*controllerchannel.NoControllerError
	budget time.Duration
}

func (n noControllerError) Error() string {
	parts := make([]string, len(n.Addrs))
	for i, a := range n.Addrs {
		o := n.Outcomes[i]
		switch {
		case o == "":
			o = "not tried"
		case strings.HasPrefix(o, "not a controller"):
			o += " (a broker? give it as --broker)"
		}
		parts[i] = a + ": " + o
	}
	return fmt.Sprintf("no active controller within %s (%s)", n.budget, strings.Join(parts, "; "))
}

func (n noControllerError) Unwrap() error { return n.NoControllerError }
