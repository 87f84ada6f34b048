package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Backoff between rounds of retries: controller rounds in which no address
// answered as the active controller, and leader lookups (leader.go).
const (
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = time.Second
)

// controllerClient makes ControllerService calls against a list of
// controller addresses (--controller a,b,c). A call goes first to the
// address that answered last and moves on to the next one when an address
// answers NOT_CONTROLLER (a standby) or cannot be reached (gRPC
// Unavailable, or no answer within its share of the budget while other
// addresses are left to try); when a whole round finds no active controller
// (an election under way) it starts another after a backoff, until the
// call's budget runs out. It is safe for concurrent use.
type controllerClient struct {
	addrs  []string
	budget time.Duration // bounds one call, every attempt and round included

	// dial connects to one controller; nil: plaintext dialAddr.
	dial func(addr string) (*grpc.ClientConn, error)

	mu     sync.Mutex
	active int // index in addrs of the address that answered last
	conns  map[string]*grpc.ClientConn
}

// newControllerClient calls the controllers at addrs, each call bounded by budget.
func newControllerClient(addrs []string, budget time.Duration) *controllerClient {
	return &controllerClient{addrs: addrs, budget: budget, conns: map[string]*grpc.ClientConn{}}
}

// controller is the client of the --controller addresses; without
// --controller it is a usage error naming the flag.
func (e *env) controller() (*controllerClient, error) {
	addrs := e.g.controllers()
	if len(addrs) == 0 {
		return nil, usagef("--controller is required: the controller's ADDR, or several as ADDR,ADDR,... (env CTLCLIENT_CONTROLLER)")
	}
	e.ctlOnce.Do(func() {
		e.ctl = newControllerClient(addrs, e.g.timeout)
		e.ctl.dial = func(addr string) (*grpc.ClientConn, error) { return e.dialPeer(addr, "controller") }
	})
	return e.ctl, nil
}

// closeController closes the controller connections, if any were opened.
func (e *env) closeController() {
	if e.ctl != nil {
		e.ctl.close()
	}
}

// activeAddr is the address that answered last (the first one before any answer).
func (c *controllerClient) activeAddr() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[c.active]
}

func (c *controllerClient) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for addr, conn := range c.conns {
		_ = conn.Close()
		delete(c.conns, addr)
	}
}

func (c *controllerClient) client(addr string) (replicadv1.ControllerServiceClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, ok := c.conns[addr]
	if !ok {
		var err error
		dial := c.dial
		if dial == nil {
			dial = func(addr string) (*grpc.ClientConn, error) { return dialAddr(addr) }
		}
		if conn, err = dial(addr); err != nil {
			return nil, err
		}
		c.conns[addr] = conn
	}
	return replicadv1.NewControllerServiceClient(conn), nil
}

// errorCoded is what every ControllerService response is.
type errorCoded interface {
	GetErrorCode() replicadv1.ErrorCode
}

// callController makes one ControllerService call on the active controller
// among c's addresses (see controllerClient). call gets a context bounded by
// c's budget and must return the RPC's answer as is. The first answer other
// than NOT_CONTROLLER is returned, whatever its error code, as is any gRPC
// error other than Unavailable. When the budget runs out first, the error
// names each address's last outcome.
func callController[R errorCoded](ctx context.Context, c *controllerClient, call func(context.Context, replicadv1.ControllerServiceClient) (R, error)) (R, error) {
	ctx, cancel := context.WithTimeout(ctx, c.budget)
	defer cancel()
	var zero R
	outcomes := make([]string, len(c.addrs)) // per address, why it was passed over
	// unanswered are the addresses a request reached (the connection was
	// up) without an answer in time: it may have been applied there.
	var unanswered []string
	noteUnanswered := func(addr string, err error) {
		if status.Code(err) == codes.DeadlineExceeded && c.reached(addr) && !slices.Contains(unanswered, addr) {
			unanswered = append(unanswered, addr)
			if a, ok := ctx.Value(attemptsKey{}).(*callAttempts); ok {
				a.unanswered = append(a.unanswered, addr)
			}
		}
	}
	backoff := retryBackoffMin
	for {
		c.mu.Lock()
		start := c.active
		c.mu.Unlock()
		for i := range c.addrs {
			idx := (start + i) % len(c.addrs)
			addr := c.addrs[idx]
			client, err := c.client(addr)
			if err != nil {
				outcomes[idx] = err.Error()
				continue
			}
			// An address that hangs (a host gone without a reset) must not
			// take the whole budget from the others: with untried addresses
			// left in the round, an attempt gets its share of what remains.
			actx, acancel := ctx, context.CancelFunc(func() {})
			if deadline, ok := ctx.Deadline(); ok && len(c.addrs)-i > 1 {
				actx, acancel = context.WithTimeout(ctx, time.Until(deadline)/time.Duration(len(c.addrs)-i))
			}
			resp, err := call(actx, client)
			acancel()
			unreachable := status.Code(err) == codes.Unavailable || status.Code(err) == codes.DeadlineExceeded
			switch {
			case err != nil && ctx.Err() == nil && unreachable:
				outcomes[idx] = status.Code(err).String() + ": " + status.Convert(err).Message()
				noteUnanswered(addr, err)
				continue
			case status.Code(err) == codes.Unimplemented:
				// A broker (or anything else) at a controller's address: say
				// so, and try the others.
				outcomes[idx] = "not a controller: it serves no ControllerService (a broker? give it as --broker)"
				continue
			case err != nil && unreachable && errors.Is(ctx.Err(), context.DeadlineExceeded):
				// The budget ran out during this attempt: say which
				// controllers were tried and why, not the bare deadline.
				outcomes[idx] = status.Code(err).String() + ": " + status.Convert(err).Message()
				noteUnanswered(addr, err)
				return zero, noControllerError{addrs: c.addrs, outcomes: outcomes, budget: c.budget, unanswered: unanswered}
			case err != nil:
				return zero, err
			case resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER:
				outcomes[idx] = codeName(resp.GetErrorCode())
				// A standby names the active controller when it knows it.
				if m, ok := any(resp).(interface{ GetErrorMessage() string }); ok && m.GetErrorMessage() != "" {
					outcomes[idx] += " (" + m.GetErrorMessage() + ")"
				}
				continue
			}
			c.mu.Lock()
			c.active = idx
			c.mu.Unlock()
			return resp, nil
		}
		trace.SpanFromContext(ctx).AddEvent("no active controller", trace.WithAttributes(
			attribute.StringSlice("replicad.controllers", c.addrs), attribute.String("replicad.backoff", backoff.String())))
		if err := sleepCtx(ctx, backoff); err != nil {
			if errors.Is(err, context.Canceled) {
				return zero, err
			}
			return zero, noControllerError{addrs: c.addrs, outcomes: outcomes, budget: c.budget, unanswered: unanswered}
		}
		backoff = min(2*backoff, retryBackoffMax)
	}
}

// noControllerError: no address answered as the active controller in time.
type noControllerError struct {
	addrs, outcomes []string
	budget          time.Duration
	// unanswered: addresses the request reached that did not answer in
	// time. Empty: no controller was reached, nothing was applied.
	unanswered []string
	// check says how to see whether the request was applied (the
	// command's own words, from mayBeApplied).
	check string
}

func (n noControllerError) Error() string {
	parts := make([]string, len(n.addrs))
	for i, a := range n.addrs {
		parts[i] = a + ": " + n.outcomes[i]
	}
	if len(n.unanswered) == 0 {
		return fmt.Sprintf("no active controller within %s (%s)", n.budget, strings.Join(parts, "; "))
	}
	// Reached but silent: a controller busy past the deadline (a slow
	// store, a long decision) may well have done it. Saying "no active
	// controller" here sent operators to retry into TOPIC_ALREADY_EXISTS.
	check := n.check
	if check == "" {
		check = "check with `ctlclient describe-cluster` before retrying"
	}
	return fmt.Sprintf("the controller at %s did not answer within %s: the request reached it and may have been applied; %s (%s)",
		strings.Join(n.unanswered, " and "), n.budget, check, strings.Join(parts, "; "))
}

// mayBeApplied gives a timeout after the request reached a controller the
// command's way to check whether it was applied ("check with `ctlclient
// describe-topic orders`"); any other error is returned as it is.
func mayBeApplied(err error, check string) error {
	var n noControllerError
	if errors.As(err, &n) && len(n.unanswered) > 0 {
		n.check = check
		return n
	}
	return err
}

// callAttempts collects, through a call's context (withAttempts), the
// addresses a request reached without an answer before another attempt of
// the same call was answered: create-topic's TOPIC_ALREADY_EXISTS is then
// most likely its own first attempt's doing.
type callAttempts struct{ unanswered []string }

type attemptsKey struct{}

func withAttempts(ctx context.Context, a *callAttempts) context.Context {
	return context.WithValue(ctx, attemptsKey{}, a)
}

// ownDoing is a command's answer error when code is what its own earlier,
// unanswered attempt would cause (TOPIC_ALREADY_EXISTS for a create): it
// says so, and how to check, instead of leaving the operator to think
// somebody else got there first.
func ownDoing(err error, a *callAttempts, code, expected replicadv1.ErrorCode, check string) error {
	if err == nil || code != expected || len(a.unanswered) == 0 {
		return err
	}
	return answerError{fmt.Sprintf("%v: most likely this command's own earlier attempt, which reached the controller at %s and got no answer in time; %s",
		err, strings.Join(a.unanswered, " and "), check)}
}

// reached says whether the connection to addr is up: a request that then
// timed out was sent, not lost on the way.
func (c *controllerClient) reached(addr string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	conn, ok := c.conns[addr]
	return ok && conn.GetState() == connectivity.Ready
}

// sleepCtx waits d, or returns ctx's error when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
