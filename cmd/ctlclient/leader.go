package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// partitionKey names one partition.
type partitionKey struct {
	topic     string
	partition int32
}

func (k partitionKey) String() string { return fmt.Sprintf("%s-%d", k.topic, k.partition) }

// leaderRouter sends LogService calls (produce, consume) to partitions'
// leaders.
//
// Without --controller every call goes once to --broker, as before the
// controller existed. With --controller the leader of a partition is looked
// up in the controller's DescribeCluster, and a call answered with
// NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH or
// UNKNOWN_TOPIC_OR_PARTITION (a broker that has not heard of a partition
// the controller knows: just created), or failing with gRPC Unavailable
// (the leader is gone), is retried after a fresh lookup, with a backoff of
// 100ms doubling to 1s, until --timeout has passed since the first attempt.
// It is safe for concurrent use.
type leaderRouter struct {
	e      *env
	ctl    *controllerClient // nil: everything goes to --broker
	budget time.Duration     // retry time of one call (--timeout)

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn // by address
	leaders map[partitionKey]string     // the leader's address, from the last lookup
}

// newLeaderRouter routes by the controller when --controller is given, else
// to --broker.
func (e *env) newLeaderRouter() (*leaderRouter, error) {
	r := &leaderRouter{e: e, budget: e.g.timeout, conns: map[string]*grpc.ClientConn{}, leaders: map[partitionKey]string{}}
	if e.g.controller == "" {
		// Dial now, so a bad --broker fails before any work starts.
		if _, err := r.conn(e.g.broker); err != nil {
			return nil, err
		}
		return r, nil
	}
	ctl, err := e.controller()
	if err != nil {
		return nil, err
	}
	r.ctl = ctl
	return r, nil
}

func (r *leaderRouter) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for addr, conn := range r.conns {
		_ = conn.Close()
		delete(r.conns, addr)
	}
}

func (r *leaderRouter) conn(addr string) (*grpc.ClientConn, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.conns[addr]; ok {
		return c, nil
	}
	c, err := r.e.dialPeer(addr, "broker")
	if err != nil {
		return nil, err
	}
	r.conns[addr] = c
	return c, nil
}

// lookupError is a failed leader lookup; retry tells whether another lookup
// may succeed (no leader yet) or not (the controller does not know the partition).
type lookupError struct {
	msg   string
	retry bool
}

func (l lookupError) Error() string { return l.msg }

// leaderAddr is the address of the partition's leader: --broker without a
// controller, else the last lookup's answer, or a new lookup's.
func (r *leaderRouter) leaderAddr(ctx context.Context, k partitionKey) (string, error) {
	if r.ctl == nil {
		return r.e.g.broker, nil
	}
	r.mu.Lock()
	addr, ok := r.leaders[k]
	r.mu.Unlock()
	if ok {
		return addr, nil
	}
	return r.refresh(ctx, k)
}

// refresh replaces the known leaders with the controller's view and returns
// k's leader. A partition the controller does not list is an error that no
// retry mends; one without a (known) leader is one that a retry may.
func (r *leaderRouter) refresh(ctx context.Context, k partitionKey) (string, error) {
	resp, err := callController(ctx, r.ctl, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeClusterResponse, error) {
		return c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	})
	if err != nil {
		return "", err
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return "", lookupError{msg: "describe-cluster: " + codeName(resp.GetErrorCode()), retry: true}
	}
	addrs := map[int32]string{}
	for _, b := range resp.GetBrokers() {
		addrs[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
	}
	leaders := map[partitionKey]string{}
	var found *replicadv1.ClusterPartition
	for _, p := range resp.GetPartitions() {
		pk := partitionKey{p.GetTopic(), p.GetPartition()}
		if pk == k {
			found = p
		}
		if addr, ok := addrs[p.GetLeader()]; ok && p.GetLeader() >= 0 {
			leaders[pk] = addr
		}
	}
	r.mu.Lock()
	r.leaders = leaders
	r.mu.Unlock()
	switch addr, ok := leaders[k]; {
	case found == nil:
		return "", lookupError{msg: fmt.Sprintf("%s: UNKNOWN_TOPIC_OR_PARTITION: the controller does not know it", k)}
	case found.GetLeader() < 0:
		return "", lookupError{msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: no leader", k), retry: true}
	case !ok:
		return "", lookupError{msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: leader %d is not among the brokers", k, found.GetLeader()), retry: true}
	default:
		trace.SpanFromContext(ctx).AddEvent("leader found", trace.WithAttributes(
			attribute.String("replicad.partition", k.String()), attribute.Int("replicad.leader", int(found.GetLeader())),
			attribute.String("replicad.leader_addr", addr)))
		return addr, nil
	}
}

// forget drops k's leader if it is still addr, so the next call looks it up.
func (r *leaderRouter) forget(k partitionKey, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.leaders[k] == addr {
		delete(r.leaders, k)
	}
}

// retryableCode is an answer telling that the partition's leader is
// elsewhere or not there yet.
func retryableCode(c replicadv1.ErrorCode) bool {
	switch c {
	case replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER,
		replicadv1.ErrorCode_ERROR_CODE_LEADER_NOT_AVAILABLE,
		replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH,
		replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION:
		return true
	}
	return false
}

// do makes one LogService call for partition k on its leader. call makes
// the RPC (bounding it itself) and returns the answer's error code. Without
// a controller it runs once against --broker. With one, retryable outcomes
// (see leaderRouter) are retried until the budget is spent; do then returns
// nil when the last attempt had an answer (whose code the caller reports) and
// the error otherwise. Any other outcome returns at once: nil with an answer,
// else the error.
func (r *leaderRouter) do(ctx context.Context, k partitionKey, call func(context.Context, replicadv1.LogServiceClient) (replicadv1.ErrorCode, error)) error {
	if r.ctl == nil {
		conn, err := r.conn(r.e.g.broker)
		if err != nil {
			return err
		}
		_, err = call(ctx, replicadv1.NewLogServiceClient(conn))
		return err
	}
	deadline := time.Now().Add(r.budget)
	backoff := retryBackoffMin
	for {
		var lastErr error
		addr, err := r.leaderAddr(ctx, k)
		var lerr lookupError
		switch {
		case errors.As(err, &lerr) && lerr.retry:
			lastErr = err
		case err != nil:
			return err
		default:
			conn, err := r.conn(addr)
			if err != nil {
				return err
			}
			code, err := call(ctx, replicadv1.NewLogServiceClient(conn))
			switch {
			case err == nil && !retryableCode(code):
				return nil
			case err != nil && (status.Code(err) != codes.Unavailable || ctx.Err() != nil):
				return err
			}
			// The leader moved, is not there yet, or is gone: look it up again.
			r.forget(k, addr)
			if err != nil {
				// Should that broker come back, reconnect at the next attempt
				// rather than after gRPC's reconnect backoff.
				conn.ResetConnectBackoff()
				lastErr = err
			} else {
				lastErr = nil // the answer stands if no retry follows
			}
			trace.SpanFromContext(ctx).AddEvent("leader retry", trace.WithAttributes(
				attribute.String("replicad.partition", k.String()), attribute.String("replicad.leader_addr", addr),
				attribute.String("replicad.outcome", outcome(code, err))))
		}
		if time.Now().Add(backoff).After(deadline) {
			return lastErr
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, retryBackoffMax)
	}
}

func outcome(code replicadv1.ErrorCode, err error) string {
	if err != nil {
		return status.Code(err).String()
	}
	return codeName(code)
}
