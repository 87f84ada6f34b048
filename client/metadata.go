package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Leader is a partition's leader as a lookup named it.
type Leader struct {
	Addr  string
	ID    int32
	Epoch int32 // -1: not known
}

// LeaderView is one lookup's answer: the leaders of the partitions of the
// topics it covers, each such topic's partition count, and the outcome for
// the partition asked about.
type LeaderView struct {
	// Topics the view covers; nil: every topic (its leaders replace all
	// the Client knew).
	Topics  []string
	Leaders map[TopicPartition]Leader
	// Partitions is each covered topic's partition count (0: not known).
	Partitions map[string]int32
	// Brokers are live brokers' addresses, for calls any broker answers.
	Brokers []string
	// Err is a *LookupError for the partition asked about, or nil.
	Err error
}

// LeaderSource looks partitions' leaders up. The Client's own asks the
// bootstrap brokers' Metadata; Config.Leaders replaces it.
type LeaderSource interface {
	Lookup(ctx context.Context, c *Client, k TopicPartition) (LeaderView, error)
}

// LookupError is a failed leader lookup; Retry tells whether another lookup
// may succeed (no leader yet, a topic just created) or not (the caller may
// not describe the topic).
type LookupError struct {
	Msg   string
	Retry bool
}

func (l *LookupError) Error() string { return l.Msg }

// leader is the partition's leader: the last lookup's answer while younger
// than MetadataMaxAge, else a new lookup's.
func (c *Client) leader(ctx context.Context, k TopicPartition) (Leader, error) {
	if c.source == nil {
		return Leader{Addr: c.cfg.Broker, ID: -1, Epoch: -1}, nil
	}
	c.mu.Lock()
	l, ok := c.leaders[k]
	c.mu.Unlock()
	if ok && time.Since(l.at) < c.cfg.MetadataMaxAge {
		return l.Leader, nil
	}
	return c.refresh(ctx, k)
}

// refresh replaces the known leaders of the topics a new lookup covers
// with its answer and returns k's leader.
func (c *Client) refresh(ctx context.Context, k TopicPartition) (Leader, error) {
	v, err := c.source.Lookup(ctx, c, k)
	if err != nil {
		return Leader{}, err
	}
	now := time.Now()
	c.mu.Lock()
	for pk := range c.leaders {
		if v.Topics == nil || contains(v.Topics, pk.Topic) {
			delete(c.leaders, pk)
		}
	}
	for pk, l := range v.Leaders {
		c.leaders[pk] = cachedLeader{l, now}
		if !contains(c.brokers, l.Addr) {
			c.brokers = append(c.brokers, l.Addr)
		}
	}
	for t, n := range v.Partitions {
		if n > 0 {
			c.partitions[t] = n
		}
	}
	for _, a := range v.Brokers {
		if !contains(c.brokers, a) {
			c.brokers = append(c.brokers, a)
		}
	}
	l, ok := c.leaders[k]
	c.mu.Unlock()
	switch {
	case v.Err != nil:
		return Leader{}, v.Err
	case !ok:
		return Leader{}, &LookupError{Msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: no leader", k), Retry: true}
	}
	trace.SpanFromContext(ctx).AddEvent("leader found", trace.WithAttributes(
		attribute.String("replicad.partition", k.String()), attribute.Int("replicad.leader", int(l.ID)),
		attribute.Int("replicad.leader_epoch", int(l.Epoch)), attribute.String("replicad.leader_addr", l.Addr)))
	return l.Leader, nil
}

// forget drops k's leader if it is still addr, so the next call looks it
// up, and notes it as stale (see Client.stale).
func (c *Client) forget(k TopicPartition, addr string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.leaders[k]; ok && l.Addr == addr {
		c.stale[k] = l.Leader
		delete(c.leaders, k)
	}
}

// Stale is the leader that last refused k (NOT_LEADER_OR_FOLLOWER, ...),
// for a LeaderSource to pass over answers that still name it.
func (c *Client) Stale(k TopicPartition) (Leader, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.stale[k]
	return l, ok
}

// Partitions is the topic's partition count, from the last lookup or a new
// one. A Config.Broker client asks that broker's Metadata.
func (c *Client) Partitions(ctx context.Context, topic string) (int32, error) {
	c.mu.Lock()
	n, ok := c.partitions[topic]
	c.mu.Unlock()
	if ok {
		return n, nil
	}
	if c.source == nil {
		conn, err := c.conn(c.cfg.Broker)
		if err != nil {
			return 0, err
		}
		rctx, cancel := c.requestContext(ctx, 0)
		defer cancel()
		resp, err := replicadv1.NewLogServiceClient(conn).Metadata(rctx, &replicadv1.MetadataRequest{Topics: []string{topic}})
		if err != nil {
			return 0, fmt.Errorf("metadata from %s: %w", c.cfg.Broker, err)
		}
		v := metadataView(resp, TopicPartition{topic, 0})
		if n := v.Partitions[topic]; n > 0 {
			c.mu.Lock()
			c.partitions[topic] = n
			c.mu.Unlock()
			return n, nil
		}
		if v.Err != nil {
			return 0, v.Err
		}
		return 0, &LookupError{Msg: fmt.Sprintf("%s: UNKNOWN_TOPIC_OR_PARTITION: broker %s knows no partitions of it", topic, c.cfg.Broker)}
	}
	// Looking partition 0 up covers the topic.
	deadline := time.Now().Add(c.cfg.RetryTimeout)
	backoff := c.cfg.RetryBackoff
	for {
		_, err := c.refresh(ctx, TopicPartition{topic, 0})
		c.mu.Lock()
		n, ok := c.partitions[topic]
		c.mu.Unlock()
		if ok {
			return n, nil
		}
		var lerr *LookupError
		if err == nil || !errors.As(err, &lerr) || !lerr.Retry || time.Now().Add(backoff).After(deadline) {
			if err == nil {
				err = &LookupError{Msg: fmt.Sprintf("%s: the lookup did not say how many partitions it has", topic)}
			}
			return 0, err
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return 0, err
		}
		backoff = min(2*backoff, c.cfg.RetryBackoffMax)
	}
}

// bootstrapSource finds leaders in brokers' Metadata answers (Bootstrap).
// It asks for k's topic only, as Kafka's clients ask for the topics they
// use. The brokers asked are the bootstrap ones, then those the answers
// name (so that the bootstrap brokers may all go once one answered), in
// turn from the one after the last asked: a broker with a stale view is
// not asked every time. An answer naming the leader that just refused the
// partition, at the same epoch, is behind: the next broker is asked, and
// the stale answer is used only when no broker knows better.
type bootstrapSource struct {
	addrs []string

	mu      sync.Mutex
	learned []string // from the last answer, not in addrs
	next    int      // index in candidates of the next broker to ask first
}

func (s *bootstrapSource) candidates() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := append(append([]string(nil), s.addrs...), s.learned...)
	return all, s.next % len(all)
}

func (s *bootstrapSource) answered(idx int, brokers []*replicadv1.Broker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = idx + 1
	s.learned = s.learned[:0]
	for _, b := range brokers {
		addr := brokerAddr(b)
		if !contains(s.addrs, addr) && !contains(s.learned, addr) {
			s.learned = append(s.learned, addr)
		}
	}
}

func brokerAddr(b *replicadv1.Broker) string {
	return net.JoinHostPort(b.GetHost(), strconv.Itoa(int(b.GetPort())))
}

func (s *bootstrapSource) Lookup(ctx context.Context, c *Client, k TopicPartition) (LeaderView, error) {
	stale, hasStale := c.Stale(k)
	addrs, start := s.candidates()
	var outcomes []string
	// The answers passed over, kept in case no broker knows better: one
	// naming the stale leader (it knows the partition) before one that
	// does not know it.
	type passed struct {
		v       LeaderView
		idx     int
		brokers []*replicadv1.Broker
	}
	var behind, lacking *passed
	for i := range addrs {
		idx := (start + i) % len(addrs)
		addr := addrs[idx]
		resp, err := c.metadata(ctx, addr, k.Topic, len(addrs)-i)
		if err != nil {
			if ctx.Err() != nil || (status.Code(err) != codes.Unavailable && status.Code(err) != codes.DeadlineExceeded) {
				return LeaderView{}, fmt.Errorf("metadata from %s: %w", addr, err)
			}
			outcomes = append(outcomes, fmt.Sprintf("%s: %s", addr, status.Code(err)))
			continue
		}
		v := metadataView(resp, k)
		var lerr *LookupError
		switch l, ok := v.Leaders[k]; {
		case errors.As(v.Err, &lerr) && !lerr.Retry:
			s.answered(idx, resp.GetBrokers())
			return v, nil // no broker will say otherwise (not authorized)
		case v.Err != nil:
			// A topic just created may not have reached this broker yet.
			outcomes = append(outcomes, fmt.Sprintf("%s: %s", addr, v.Err))
			if lacking == nil {
				lacking = &passed{v, idx, resp.GetBrokers()}
			}
			continue
		case ok && hasStale && l.Addr == stale.Addr && l.Epoch <= stale.Epoch:
			outcomes = append(outcomes, fmt.Sprintf("%s: names leader %d at epoch %d, which refused", addr, l.ID, l.Epoch))
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
	return LeaderView{}, &LookupError{Msg: fmt.Sprintf("%s: no bootstrap broker answered Metadata (%s)", k, strings.Join(outcomes, "; ")), Retry: true}
}

// metadata asks addr for topic's metadata. An address that hangs (a host
// gone without a reset) must not take the whole budget from the others:
// with untried addresses left (left counts this one), an attempt gets its
// share of what remains of the retry budget.
func (c *Client) metadata(ctx context.Context, addr, topic string, left int) (*replicadv1.MetadataResponse, error) {
	conn, err := c.conn(addr)
	if err != nil {
		return nil, err
	}
	actx, cancel := c.requestContext(ctx, 0)
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
func metadataView(resp *replicadv1.MetadataResponse, k TopicPartition) LeaderView {
	addrs := map[int32]string{}
	v := LeaderView{Leaders: map[TopicPartition]Leader{}, Partitions: map[string]int32{}}
	for _, b := range resp.GetBrokers() {
		addrs[b.GetId()] = brokerAddr(b)
		v.Brokers = append(v.Brokers, brokerAddr(b))
	}
	var topic *replicadv1.MetadataTopic
	var found *replicadv1.MetadataPartition
	for _, t := range resp.GetTopics() {
		v.Topics = append(v.Topics, t.GetTopic())
		if t.GetTopic() == k.Topic {
			topic = t
		}
		if t.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
			v.Partitions[t.GetTopic()] = int32(len(t.GetPartitions()))
		}
		for _, p := range t.GetPartitions() {
			pk := TopicPartition{t.GetTopic(), p.GetPartition()}
			if pk == k {
				found = p
			}
			if addr, ok := addrs[p.GetLeader()]; ok && p.GetLeader() >= 0 && p.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE {
				v.Leaders[pk] = Leader{Addr: addr, ID: p.GetLeader(), Epoch: p.GetLeaderEpoch()}
			}
		}
	}
	_, ok := v.Leaders[k]
	switch {
	case topic == nil:
		v.Err = &LookupError{Msg: fmt.Sprintf("%s: the broker's Metadata answer leaves the topic out", k), Retry: true}
	case topic.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
		v.Err = &LookupError{Msg: fmt.Sprintf("%s: %s: broker %d: %s", k, CodeName(topic.GetErrorCode()), resp.GetBrokerId(), topic.GetErrorMessage()),
			Retry: topic.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_TOPIC_AUTHORIZATION_FAILED}
	case found == nil:
		v.Err = &LookupError{Msg: fmt.Sprintf("%s: UNKNOWN_TOPIC_OR_PARTITION: broker %d knows %d partitions of the topic", k, resp.GetBrokerId(), len(topic.GetPartitions())), Retry: true}
	case found.GetErrorCode() != replicadv1.ErrorCode_ERROR_CODE_NONE:
		v.Err = &LookupError{Msg: fmt.Sprintf("%s: %s", k, CodeName(found.GetErrorCode())), Retry: true}
	case !ok:
		v.Err = &LookupError{Msg: fmt.Sprintf("%s: LEADER_NOT_AVAILABLE: leader %d is not among the brokers", k, found.GetLeader()), Retry: true}
	}
	return v
}

// leaderMoved is an answer telling that the partition's leader is
// elsewhere or not there yet: a fresh lookup may mend it.
func leaderMoved(c replicadv1.ErrorCode) bool {
	switch c {
	case replicadv1.ErrorCode_ERROR_CODE_NOT_LEADER_OR_FOLLOWER,
		replicadv1.ErrorCode_ERROR_CODE_LEADER_NOT_AVAILABLE,
		replicadv1.ErrorCode_ERROR_CODE_FENCED_LEADER_EPOCH,
		replicadv1.ErrorCode_ERROR_CODE_UNKNOWN_TOPIC_OR_PARTITION:
		return true
	}
	return false
}

// unreachable: the broker could not be reached or the call broke with it.
func unreachable(err error) bool { return status.Code(err) == codes.Unavailable }

func isUnimplemented(err error) bool { return status.Code(err) == codes.Unimplemented }

func traceRetry(ctx context.Context, k TopicPartition, addr string, code replicadv1.ErrorCode, err error) {
	outcome := CodeName(code)
	if err != nil {
		outcome = status.Code(err).String()
	}
	trace.SpanFromContext(ctx).AddEvent("leader retry", trace.WithAttributes(
		attribute.String("replicad.partition", k.String()), attribute.String("replicad.leader_addr", addr),
		attribute.String("replicad.outcome", outcome)))
}

// CodeName is an error code's Kafka name: NONE, NOT_LEADER_OR_FOLLOWER, ...
func CodeName(c replicadv1.ErrorCode) string {
	return strings.TrimPrefix(c.String(), "ERROR_CODE_")
}

// Error is an answer carrying an error code.
type Error struct {
	Code    replicadv1.ErrorCode
	Message string
	// Op and Partition say what was answered ("produce orders-0").
	Op        string
	Partition TopicPartition
}

func (e *Error) Error() string {
	s := CodeName(e.Code)
	if e.Op != "" {
		s = e.Op + ": " + s
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}
