package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
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
// Without --bootstrap or --controller every call goes once to --broker, as
// before the controller existed. With --bootstrap the leader of a partition
// is looked up in a broker's Metadata (Kafka's bootstrap.servers): the
// listed brokers, then the ones the answers name, are asked in turn until
// one answers, so any live broker will do and the controller may be down.
// Otherwise, with --controller, it is looked up in the controller's
// DescribeCluster. --bootstrap wins over --controller for finding leaders
// (a command that also talks to the controller still uses --controller).
//
// A call answered with NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE,
// FENCED_LEADER_EPOCH or UNKNOWN_TOPIC_OR_PARTITION (a broker that has not
// heard of a partition just created), or failing with gRPC Unavailable (the
// leader is gone), is retried after a fresh lookup, with a backoff of 100ms
// doubling to 1s, until --timeout has passed since the first attempt or
// maxLeaderAttempts attempts were made. It is safe for concurrent use.
type leaderRouter struct {
	e      *env
	source leaderSource  // nil: everything goes to --broker
	budget time.Duration // retry time of one call (--timeout)

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn // by address
	leaders map[partitionKey]leaderAt   // from the last lookups
	// stale is the leader (and its epoch) that answered a call for the
	// partition as no longer its leader: a lookup answering the same is
	// behind, and a bootstrap lookup asks another broker first.
	stale map[partitionKey]leaderAt
}

// maxLeaderAttempts bounds the attempts of one call besides --timeout: a
// cluster whose answers keep contradicting each other does not hold a
// command for long.
var maxLeaderAttempts = 20

// leaderAt is a partition's leader as a lookup named it.
type leaderAt struct {
	addr  string
	id    int32
	epoch int32 // -1: not known (DescribeCluster)
}

// leaderView is one lookup's answer: the leaders of the partitions it
// covers (topics: the topics it covers, nil for every one), and the
// outcome for the partition asked about.
type leaderView struct {
	topics  []string
	leaders map[partitionKey]leaderAt
	err     error // a lookupError for the partition asked about, or nil
}

// leaderSource looks leaders up.
type leaderSource interface {
	lookup(ctx context.Context, r *leaderRouter, k partitionKey) (leaderView, error)
}

// newLeaderRouter routes by brokers' Metadata with --bootstrap, by the
// controller with --controller, else to --broker.
func (e *env) newLeaderRouter() (*leaderRouter, error) {
	r := &leaderRouter{e: e, budget: e.g.timeout, conns: map[string]*grpc.ClientConn{},
		leaders: map[partitionKey]leaderAt{}, stale: map[partitionKey]leaderAt{}}
	switch {
	case e.g.brokerOnly:
		if _, err := r.conn(e.g.broker); err != nil {
			return nil, err
		}
	case e.g.bootstrap != "":
		r.source = &bootstrapSource{addrs: e.g.bootstrapAddrs()}
	case e.g.controller != "":
		ctl, err := e.controller()
		if err != nil {
			return nil, err
		}
		r.source = controllerSource{ctl}
	default:
		// Dial now, so a bad --broker fails before any work starts.
		if _, err := r.conn(e.g.broker); err != nil {
			return nil, err
		}
	}
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
// may succeed (no leader yet) or not (the partition is not known).
type lookupError struct {
	msg   string
	retry bool
}

func (l lookupError) Error() string { return l.msg }

// leaderAddr is the address of the partition's leader: --broker without a
// lookup source, else the last lookup's answer, or a new lookup's.
func (r *leaderRouter) leaderAddr(ctx context.Context, k partitionKey) (string, error) {
	if r.source == nil {
		return r.e.g.broker, nil
	}
	r.mu.Lock()
	l, ok := r.leaders[k]
	r.mu.Unlock()
	if ok {
		return l.addr, nil
	}
	return r.refresh(ctx, k)
}

// refresh replaces the known leaders of the topics a new lookup covers
// with its answer and returns k's leader.
func (r *leaderRouter) refresh(ctx context.Context, k partitionKey) (string, error) {
	v, err := r.source.lookup(ctx, r, k)
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	for pk := range r.leaders {
		if v.topics == nil || slices.Contains(v.topics, pk.topic) {
			delete(r.leaders, pk)
		}
	}
	maps.Copy(r.leaders, v.leaders)
	l, ok := r.leaders[k]
	r.mu.Unlock()
	switch {
	case v.err != nil:
		return "", v.err
	case !ok:
		return "", lookupError{msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: no leader", k), retry: true}
	}
	trace.SpanFromContext(ctx).AddEvent("leader found", trace.WithAttributes(
		attribute.String("replicad.partition", k.String()), attribute.Int("replicad.leader", int(l.id)),
		attribute.Int("replicad.leader_epoch", int(l.epoch)), attribute.String("replicad.leader_addr", l.addr)))
	return l.addr, nil
}

// controllerSource finds leaders in the controller's DescribeCluster. A
// partition the controller does not list is an error that no retry mends;
// one without a (known) leader is one that a retry may.
type controllerSource struct{ ctl *controllerClient }

func (s controllerSource) lookup(ctx context.Context, _ *leaderRouter, k partitionKey) (leaderView, error) {
	resp, err := callController(ctx, s.ctl, func(ctx context.Context, c replicadv1.ControllerServiceClient) (*replicadv1.DescribeClusterResponse, error) {
		return c.DescribeCluster(ctx, &replicadv1.DescribeClusterRequest{})
	})
	if err != nil {
		return leaderView{}, err
	}
	if resp.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE {
		return leaderView{}, lookupError{msg: "describe-cluster: " + codeName(resp.GetErrorCode()), retry: true}
	}
	addrs := map[int32]string{}
	for _, b := range resp.GetBrokers() {
		addrs[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
	}
	v := leaderView{leaders: map[partitionKey]leaderAt{}}
	var found *replicadv1.ClusterPartition
	for _, p := range resp.GetPartitions() {
		pk := partitionKey{p.GetTopic(), p.GetPartition()}
		if pk == k {
			found = p
		}
		if addr, ok := addrs[p.GetLeader()]; ok && p.GetLeader() >= 0 {
			v.leaders[pk] = leaderAt{addr: addr, id: p.GetLeader(), epoch: -1}
		}
	}
	_, ok := v.leaders[k]
	switch {
	case found == nil:
		v.err = lookupError{msg: fmt.Sprintf("%s: UNKNOWN_TOPIC_OR_PARTITION: the controller does not know it", k)}
	case found.GetLeader() < 0:
		v.err = lookupError{msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: no leader", k), retry: true}
	case !ok:
		v.err = lookupError{msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: leader %d is not among the brokers", k, found.GetLeader()), retry: true}
	}
	return v, nil
}

// bootstrapSource finds leaders in brokers' Metadata answers (--bootstrap).
// It asks for k's topic only, as Kafka's clients ask for the topics they
// use. The brokers asked are the --bootstrap ones, then those the answers
// name (so that the bootstrap brokers may all go once one answered), in
// turn from the one after the last asked: a broker with a stale view is
// not asked every time. An answer naming the leader that just refused the
// partition, at the same epoch, is behind: the next broker is asked, and
// the stale answer is used only when no broker knows better.
type bootstrapSource struct {
	addrs []string // --bootstrap

	mu      sync.Mutex
	learned []string // from the last answer, not in addrs
	next    int      // index in candidates of the next broker to ask first
}

func (s *bootstrapSource) candidates() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := append(slices.Clone(s.addrs), s.learned...)
	return all, s.next % len(all)
}

func (s *bootstrapSource) answered(idx int, brokers []*replicadv1.Broker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = idx + 1
	s.learned = s.learned[:0]
	for _, b := range brokers {
		addr := net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
		if !slices.Contains(s.addrs, addr) && !slices.Contains(s.learned, addr) {
			s.learned = append(s.learned, addr)
		}
	}
}

func (s *bootstrapSource) lookup(ctx context.Context, r *leaderRouter, k partitionKey) (leaderView, error) {
	r.mu.Lock()
	stale, hasStale := r.stale[k]
	r.mu.Unlock()
	addrs, start := s.candidates()
	var outcomes []string
	// The answers passed over, kept in case no broker knows better: one
	// naming the stale leader (it knows the partition) before one that
	// does not know it.
	type passed struct {
		v       leaderView
		idx     int
		brokers []*replicadv1.Broker
	}
	var behind, lacking *passed
	for i := range addrs {
		idx := (start + i) % len(addrs)
		addr := addrs[idx]
		resp, err := r.metadata(ctx, addr, k.topic, len(addrs)-i)
		if err != nil {
			if ctx.Err() != nil || (status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded) {
				return leaderView{}, fmt.Errorf("metadata from %s: %w", addr, err)
			}
			outcomes = append(outcomes, fmt.Sprintf("%s: %s", addr, status.Code(err)))
			continue
		}
		v := metadataView(resp, k)
		var lerr lookupError
		switch l, ok := v.leaders[k]; {
		case errors.As(v.err, &lerr) && !lerr.retry:
			s.answered(idx, resp.GetBrokers())
			return v, nil // no broker will say otherwise (not authorized)
		case v.err != nil:
			// A topic just created may not have reached this broker yet.
			outcomes = append(outcomes, fmt.Sprintf("%s: %s", addr, v.err))
			if lacking == nil {
				lacking = &passed{v, idx, resp.GetBrokers()}
			}
			continue
		case ok && hasStale && l.addr == stale.addr && l.epoch <= stale.epoch:
			outcomes = append(outcomes, fmt.Sprintf("%s: names leader %d at epoch %d, which refused", addr, l.id, l.epoch))
			if behind == nil {
				behind = &passed{v, idx, resp.GetBrokers()}
			}
			continue
		}
		s.answered(idx, resp.GetBrokers())
		return v, nil
	}
	for _, p := range []*passed{behind, lacking} {
		if p != nil {
			s.answered(p.idx, p.brokers)
			return p.v, nil
		}
	}
	return leaderView{}, lookupError{msg: fmt.Sprintf("%s: no --bootstrap broker answered Metadata (%s)", k, strings.Join(outcomes, "; ")), retry: true}
}

// metadata asks addr for topic's metadata. An address that hangs (a host
// gone without a reset) must not take the whole budget from the others:
// with untried addresses left (left counts this one), an attempt gets its
// share of what remains of --timeout.
func (r *leaderRouter) metadata(ctx context.Context, addr, topic string, left int) (*replicadv1.MetadataResponse, error) {
	conn, err := r.conn(addr)
	if err != nil {
		return nil, err
	}
	actx, cancel := r.e.rpcContext(ctx)
	defer cancel()
	if deadline, ok := actx.Deadline(); ok && left > 1 {
		var c2 context.CancelFunc
		actx, c2 = context.WithTimeout(actx, time.Until(deadline)/time.Duration(left))
		defer c2()
	}
	resp, err := replicadv1.NewLogServiceClient(conn).Metadata(actx, &replicadv1.MetadataRequest{Topics: []string{topic}})
	if err != nil && status.Code(err) == codes.Unavailable {
		conn.ResetConnectBackoff() // should it come back, try it at once next time
	}
	return resp, err
}

// metadataView reads a Metadata answer: the leaders of its topics and k's
// outcome. A topic the caller may not describe is not retried. An unknown
// topic or partition is, as Kafka's clients wait for a topic's metadata (up
// to max.block.ms): a broker hears of a topic just created a moment after
// the controller made it.
func metadataView(resp *replicadv1.MetadataResponse, k partitionKey) leaderView {
	addrs := map[int32]string{}
	for _, b := range resp.GetBrokers() {
		addrs[b.GetId()] = net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
	}
	v := leaderView{leaders: map[partitionKey]leaderAt{}}
	var topic *replicadv1.MetadataTopic
	var found *replicadv1.MetadataPartition
	for _, t := range resp.GetTopics() {
		v.topics = append(v.topics, t.GetTopic())
		if t.GetTopic() == k.topic {
			topic = t
		}
		for _, p := range t.GetPartitions() {
			pk := partitionKey{t.GetTopic(), p.GetPartition()}
			if pk == k {
				found = p
			}
			if addr, ok := addrs[p.GetLeader()]; ok && p.GetLeader() >= 0 && p.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
				v.leaders[pk] = leaderAt{addr: addr, id: p.GetLeader(), epoch: p.GetLeaderEpoch()}
			}
		}
	}
	_, ok := v.leaders[k]
	switch {
	case topic == nil:
		v.err = lookupError{msg: fmt.Sprintf("%s: the broker's Metadata answer leaves the topic out", k), retry: true}
	case topic.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
		v.err = lookupError{msg: fmt.Sprintf("%s: %s: broker %d: %s", k, codeName(topic.GetErrorCode()), resp.GetBrokerId(), topic.GetErrorMessage()),
			retry: topic.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED}
	case found == nil:
		v.err = lookupError{msg: fmt.Sprintf("%s: UNKNOWN_TOPIC_OR_PARTITION: broker %d knows %d partitions of the topic", k, resp.GetBrokerId(), len(topic.GetPartitions())), retry: true}
	case found.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
		v.err = lookupError{msg: fmt.Sprintf("%s: %s", k, codeName(found.GetErrorCode())), retry: true}
	case !ok:
		v.err = lookupError{msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: leader %d is not among the brokers", k, found.GetLeader()), retry: true}
	}
	return v
}

// forget drops k's leader if it is still addr, so the next call looks it
// up, and notes it as stale (see leaderRouter.stale).
func (r *leaderRouter) forget(k partitionKey, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if l, ok := r.leaders[k]; ok && l.addr == addr {
		r.stale[k] = l
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
// a lookup source it runs once against --broker. With one, retryable outcomes
// (see leaderRouter) are retried until the budget is spent; do then returns
// nil when the last attempt had an answer (whose code the caller reports) and
// the error otherwise. Any other outcome returns at once: nil with an answer,
// else the error.
func (r *leaderRouter) do(ctx context.Context, k partitionKey, call func(context.Context, replicadv1.LogServiceClient) (replicadv1.ErrorCode, error)) error {
	return r.doConn(ctx, k, func(ctx context.Context, conn *grpc.ClientConn) (replicadv1.ErrorCode, error) {
		return call(ctx, replicadv1.NewLogServiceClient(conn))
	})
}

// doConn is do, giving call the leader's connection itself: a caller that
// keeps a stream per broker (perf produce --stream) finds it by it.
func (r *leaderRouter) doConn(ctx context.Context, k partitionKey, call func(context.Context, *grpc.ClientConn) (replicadv1.ErrorCode, error)) error {
	if r.source == nil {
		conn, err := r.conn(r.e.g.broker)
		if err != nil {
			return err
		}
		_, err = call(ctx, conn)
		return err
	}
	deadline := time.Now().Add(r.budget)
	backoff := retryBackoffMin
	for attempt := 1; ; attempt++ {
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
			code, err := call(ctx, conn)
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
		if attempt >= maxLeaderAttempts || time.Now().Add(backoff).After(deadline) {
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
