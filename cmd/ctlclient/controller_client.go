package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/replicad/replicad/client"
	"github.com/replicad/replicad/controllerchannel"
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

// controllerError words a controller channel's "no active controller" for
// ctlclient (with --timeout and the hint for a broker address); other
// errors stay as they are. Every client.Admin call's error goes through it:
// the call itself (finding the active controller, following a standby's
// hint, not resending a change that went out without an answer) is
// client.Admin's.
func controllerError(err error, c *controllerClient) error {
	var na *controllerchannel.NoAnswerError
	if errors.As(err, &na) {
		return noAnswerError{NoAnswerError: na, budget: c.Timeout()}
	}
	var nc *controllerchannel.NoControllerError
	if errors.As(err, &nc) {
		return noControllerError{NoControllerError: nc, budget: c.Timeout()}
	}
	return err
}

// noAnswerError: a change that may not be sent twice reached a controller
// and got no answer in time, so it was not sent again. Saying "no active
// controller" here sent operators to retry into TOPIC_ALREADY_EXISTS.
type noAnswerError struct {
	*controllerchannel.NoAnswerError
	budget time.Duration
	// check says how to see whether the request was applied (the
	// command's own words, from mayBeApplied).
	check string
}

func (n noAnswerError) Error() string {
	check := n.check
	if check == "" {
		check = "check with `ctlclient describe-cluster` before retrying"
	}
	return fmt.Sprintf("the controller at %s did not answer within %s: the request reached it and may have been applied; %s",
		n.Addr, n.budget, check)
}

func (n noAnswerError) Unwrap() error { return n.NoAnswerError }

// mayBeApplied gives a timeout after the request reached a controller the
// command's way to check whether it was applied ("check with `ctlclient
// describe-topic orders`"); any other error is returned as it is.
func mayBeApplied(err error, check string) error {
	var na noAnswerError
	if errors.As(err, &na) {
		na.check = check
		return na
	}
	var nc noControllerError
	if errors.As(err, &nc) && nc.MaybeApplied {
		nc.check = check
		return nc
	}
	return err
}

// noControllerError: no address answered as the active controller in time.
type noControllerError struct {
	*controllerchannel.NoControllerError
	budget time.Duration
	check  string // as noAnswerError's, when MaybeApplied
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
	if n.MaybeApplied {
		// Reached but silent: a controller busy past the deadline (a slow
		// store, a long decision) may well have done it.
		check := n.check
		if check == "" {
			check = "check with `ctlclient describe-cluster` before retrying"
		}
		return fmt.Sprintf("no controller answered within %s, and one the request reached may have applied it; %s (%s)",
			n.budget, check, strings.Join(parts, "; "))
	}
	return fmt.Sprintf("no active controller within %s (%s)", n.budget, strings.Join(parts, "; "))
}

func (n noControllerError) Unwrap() error { return n.NoControllerError }
