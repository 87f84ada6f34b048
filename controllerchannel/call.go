package controllerchannel

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
	"github.com/replicad/replicad/internal/grpcx"
)

// Policy is a caller's retry policy for Call: the channel decides where a
// request goes, the caller how hard it tries and what it may resend.
type Policy struct {
	// AttemptTimeout bounds one attempt (and ctx all of them). 0: what is
	// left of ctx, shared among the addresses still to try in the round,
	// so that a hung address (a host gone without a reset) does not take
	// the whole budget from the others. A request that is not Idempotent
	// and has a connection at the end of its share waits on to ctx's end:
	// cut there, it would be reported possibly applied for nothing.
	AttemptTimeout time.Duration
	// Rounds is how many times at most the call goes around Addrs; 0:
	// until ctx ends, waiting Config.MinBackoff (doubling up to MaxBackoff)
	// between rounds in which no address answered as active (an election
	// under way).
	Rounds int
	// Idempotent requests go on to the next address after an attempt that
	// reached a controller and got no answer in time. Others stop there,
	// with a *NoAnswerError (ErrMaybeApplied): resending a create, a
	// reassignment or an epoch bump that was applied would fail or apply
	// it twice, so the caller must check first.
	Idempotent bool
	// AbortOnMove: see AttemptOptions.
	AbortOnMove bool
}

// Call sends one request to the active controller: first to Target, then,
// on NOT_CONTROLLER, to the controller the standby named (when it is one of
// Addrs and not tried yet in this round) or the next address, and on to the
// next address when one cannot be reached (gRPC Unavailable or a timeout
// before any connection), serves no ControllerService (Unimplemented), or,
// for an idempotent request, does not answer in time or answers
// Unavailable. It returns the first
// answer other than NOT_CONTROLLER, whatever its error code, and makes its
// address the active controller; any other gRPC error as it is. When no
// address answered as active within p.Rounds rounds or before ctx ends, the
// error is a *NoControllerError (ErrNoController). The end of ctx by
// cancellation (not by its deadline) returns ctx's error.
func Call[R Answer](ctx context.Context, c *Channel, p Policy,
	rpc func(context.Context, replicadv1.ControllerServiceClient) (R, error)) (R, error) {
	var zero R
	n := len(c.cfg.Addrs)
	nc := &NoControllerError{Addrs: c.Addrs(), Outcomes: make([]string, n)}
	backoff := c.cfg.MinBackoff
	for round := 1; ; round++ {
		tried := make([]bool, n)
		for k := 0; k < n && ctx.Err() == nil; k++ {
			idx := c.pick(tried)
			tried[idx] = true
			addr := c.cfg.Addrs[idx]
			actx, cancel := ctx, context.CancelFunc(func() {})
			switch deadline, ok := ctx.Deadline(); {
			case p.AttemptTimeout > 0:
				actx, cancel = context.WithTimeout(ctx, p.AttemptTimeout)
			case ok && n-k > 1 && !p.Idempotent:
				// A request that may not be resent gets what is left of
				// ctx once it has a connection: cut at its share after it
				// went out, it would fail ErrMaybeApplied though the
				// controller answers within the caller's budget. Only an
				// address still unconnected at its share is left for the
				// next (a host gone without a reset).
				var ccancel context.CancelFunc
				actx, ccancel = context.WithCancel(ctx)
				stop := c.cancelUnlessConnected(addr, deadline.Sub(c.cfg.Clock.Now())/time.Duration(n-k), ccancel)
				cancel = func() { stop(); ccancel() }
			case ok && n-k > 1:
				actx, cancel = context.WithTimeout(ctx, deadline.Sub(c.cfg.Clock.Now())/time.Duration(n-k))
			}
			resp, r := attemptTo(actx, c, addr, AttemptOptions{AbortOnMove: p.AbortOnMove}, rpc)
			cancel()
			code := status.Code(r.err)
			switch {
			case r.err == nil && resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NOT_CONTROLLER:
				c.answered(addr)
				return resp, nil
			case r.err == nil:
				nc.Outcomes[idx] = "NOT_CONTROLLER"
				if m, ok := any(resp).(interface{ GetErrorMessage() string }); ok && m.GetErrorMessage() != "" {
					nc.Outcomes[idx] += " (" + m.GetErrorMessage() + ")"
				}
				hint := r.hint(resp)
				nc.Hint = hint
				c.moveOn(addr, hint)
				continue
			case code == codes.Unimplemented:
				nc.Outcomes[idx] = "not a controller: it serves no ControllerService"
				c.moveOn(addr, "")
				continue
			case code == codes.Unavailable && (!r.reached() || grpcx.IsNotApplied(r.err)),
				(code == codes.DeadlineExceeded || code == codes.Canceled) && !r.sent():
				// Never sent, or refused by the controller's store before
				// anything was written (grpcx.NotApplied): safe to send on.
				nc.Outcomes[idx] = describe(r.err)
				nc.Errs = append(nc.Errs, r.err)
				if ctx.Err() == nil {
					c.moveOn(addr, "")
				}
				continue
			case code == codes.Unavailable || code == codes.DeadlineExceeded || code == codes.Canceled:
				// It went out and no answer came back in time, or the
				// controller answered Unavailable (a store write of
				// unknown outcome: controller.internalErr) or the
				// connection broke under it: the controller may have
				// applied it.
				nc.Outcomes[idx] = describe(r.err) + " (sent, no answer)"
				nc.Errs = append(nc.Errs, r.err)
				nc.MaybeApplied = true
				if ctx.Err() != nil && errors.Is(ctx.Err(), context.Canceled) {
					return zero, ctx.Err()
				}
				if !p.Idempotent {
					return zero, &NoAnswerError{Addr: addr, Err: r.err}
				}
				if ctx.Err() == nil {
					c.moveOn(addr, "")
				}
				continue
			default:
				if !final(r.err) && ctx.Err() == nil {
					c.moveOn(addr, "")
				}
				return zero, r.err
			}
		}
		if err := ctx.Err(); err != nil {
			if errors.Is(err, context.Canceled) {
				return zero, err
			}
			nc.Err = err
			return zero, nc
		}
		if p.Rounds > 0 && round >= p.Rounds {
			return zero, nc
		}
		wait := backoff
		if c.cfg.Int64N != nil {
			wait -= time.Duration(c.cfg.Int64N(int64(backoff/2) + 1))
		}
		if err := c.sleep(ctx, wait); err != nil {
			if errors.Is(err, context.Canceled) {
				return zero, err
			}
			nc.Err = err
			return zero, nc
		}
		backoff = min(2*backoff, c.cfg.MaxBackoff)
	}
}

// cancelUnlessConnected calls cancel after d unless the client of addr
// is connected then (a gRPC ClientConn in state Ready: the request went
// out, and waiting on costs no other address anything it could give). A
// client that does not tell its state (a test's Dial) is cancelled, as
// any attempt past its share. stop ends the wait.
func (c *Channel) cancelUnlessConnected(addr string, d time.Duration, cancel context.CancelFunc) (stop func() bool) {
	// The wall clock, as the context deadlines that bound attempts.
	t := time.AfterFunc(d, func() {
		c.mu.Lock()
		closer := c.clients[addr].closer
		c.mu.Unlock()
		if s, ok := closer.(interface{ GetState() connectivity.State }); ok && s.GetState() == connectivity.Ready {
			return
		}
		cancel()
	})
	return t.Stop
}

// pick is the index of the next address to try in a round: the target, or
// when that was tried already, the first untried one after it.
func (c *Channel) pick(tried []bool) int {
	c.mu.Lock()
	t := c.target
	c.mu.Unlock()
	for i := range tried {
		if idx := (t + i) % len(tried); !tried[idx] {
			return idx
		}
	}
	return t
}

// sleep waits d on the clock, or returns ctx's error when ctx ends first.
func (c *Channel) sleep(ctx context.Context, d time.Duration) error {
	fired := make(chan struct{})
	t := c.cfg.Clock.AfterFunc(d, func() { close(fired) })
	defer t.Stop()
	select {
	case <-fired:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func describe(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Code().String() + ": " + s.Message()
	}
	return err.Error()
}

// NoControllerError: no address answered as the active controller. It is
// ErrNoController; with MaybeApplied also ErrMaybeApplied.
type NoControllerError struct {
	// Addrs and Outcomes: each address and why it was passed over ("" if
	// it was not tried).
	Addrs, Outcomes []string
	// Hint is the active controller the last standby named, if any (it
	// may not be one of Addrs: see the message).
	Hint string
	// MaybeApplied: some attempt went out and got no answer in time.
	MaybeApplied bool
	// Err is ctx's error when ctx ended the call; Errs the attempts' own.
	Err  error
	Errs []error
}

func (e *NoControllerError) Error() string {
	parts := make([]string, len(e.Addrs))
	for i, a := range e.Addrs {
		o := e.Outcomes[i]
		if o == "" {
			o = "not tried"
		}
		parts[i] = a + ": " + o
	}
	return fmt.Sprintf("%v (%s)", ErrNoController, strings.Join(parts, "; "))
}

func (e *NoControllerError) Unwrap() []error {
	errs := []error{ErrNoController}
	if e.MaybeApplied {
		errs = append(errs, ErrMaybeApplied)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return append(errs, e.Errs...)
}

// NoAnswerError: a request that is not idempotent went to Addr and no
// answer came back in time. It is ErrMaybeApplied.
type NoAnswerError struct {
	Addr string
	Err  error
}

func (e *NoAnswerError) Error() string {
	return fmt.Sprintf("controller %s: %v (%s)", e.Addr, ErrMaybeApplied, describe(e.Err))
}

func (e *NoAnswerError) Unwrap() []error { return []error{ErrMaybeApplied, e.Err} }
