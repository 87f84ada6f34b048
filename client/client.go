package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	replicadv1 "github.com/replicad/replicad/gen/replicad/v1"
)

// Config configures a Client. Exactly one of Bootstrap, Broker or Leaders
// says how partitions' leaders are found.
type Config struct {
	// Bootstrap lists brokers (host:port) whose Metadata RPC names
	// partitions' leaders (Kafka's bootstrap.servers): any live one will
	// do, and the brokers their answers name are asked too, so the listed
	// ones may all go once one answered. The controller may be down.
	Bootstrap []string
	// Broker sends every call to this one broker, without lookups: a
	// partition it does not lead fails with NOT_LEADER_OR_FOLLOWER at once
	// (ctlclient --broker). Retries go to the same broker.
	Broker string
	// Leaders finds leaders some other way (ctlclient --controller asks
	// the controller). It wins over Bootstrap.
	Leaders LeaderSource

	// Dial connects to a broker. nil: grpc.NewClient with DialOptions (or,
	// without any, plaintext) and a 256 MiB message limit. The Client
	// keeps one connection per broker address.
	Dial        func(addr string) (*grpc.ClientConn, error)
	DialOptions []grpc.DialOption

	// RequestTimeout bounds one RPC (a broker may hold a produce for its
	// acks or a consume for its max wait on top of it); 0: 10s.
	RequestTimeout time.Duration
	// RetryTimeout bounds the retries of one Call through leader changes;
	// 0: RequestTimeout. The Producer has its own DeliveryTimeout.
	RetryTimeout time.Duration
	// MaxAttempts bounds the attempts of one Call besides RetryTimeout
	// (a cluster whose answers keep contradicting each other does not hold
	// a caller for long); 0: 20.
	MaxAttempts int
	// RetryBackoff is the first wait before a retry, doubling up to
	// RetryBackoffMax; 0: 100ms and 1s.
	RetryBackoff, RetryBackoffMax time.Duration
	// MetadataMaxAge refreshes a partition's leader that long after it was
	// looked up even when nothing failed (Kafka's metadata.max.age.ms), so
	// a leader moved back by a preferred election is found; 0: 5 minutes.
	MetadataMaxAge time.Duration
}

// Client finds partitions' leaders and keeps one connection per broker.
// It is safe for concurrent use; Producers and Consumers share one.
type Client struct {
	cfg    Config
	source LeaderSource // nil: everything goes to cfg.Broker

	mu      sync.Mutex
	closed  bool
	conns   map[string]*grpc.ClientConn // by address
	leaders map[TopicPartition]cachedLeader
	// partitions: each topic's partition count from the last lookup
	// covering it.
	partitions map[string]int32
	// stale is the leader (and its epoch) that answered a call for the
	// partition as no longer its leader: a lookup answering the same is
	// behind, and a bootstrap lookup asks another broker first.
	stale map[TopicPartition]Leader
	// brokers: addresses learned from lookups, for calls any broker
	// answers (InitProducerId).
	brokers []string
}

type cachedLeader struct {
	Leader
	at time.Time
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (k TopicPartition) String() string { return fmt.Sprintf("%s-%d", k.Topic, k.Partition) }

// maxRecvMsgSize admits consume answers far above gRPC's 4 MiB default.
const maxRecvMsgSize = 256 << 20

// New makes a Client. It dials lazily: an unreachable broker shows at the
// first call.
func New(cfg Config) (*Client, error) {
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	if cfg.RetryTimeout <= 0 {
		cfg.RetryTimeout = cfg.RequestTimeout
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 20
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 100 * time.Millisecond
	}
	if cfg.RetryBackoffMax <= 0 {
		cfg.RetryBackoffMax = time.Second
	}
	if cfg.MetadataMaxAge <= 0 {
		cfg.MetadataMaxAge = 5 * time.Minute
	}
	c := &Client{cfg: cfg, conns: map[string]*grpc.ClientConn{}, leaders: map[TopicPartition]cachedLeader{},
		partitions: map[string]int32{}, stale: map[TopicPartition]Leader{}}
	switch {
	case cfg.Leaders != nil:
		c.source = cfg.Leaders
	case len(cfg.Bootstrap) > 0:
		c.source = &bootstrapSource{addrs: dedup(cfg.Bootstrap)}
	case cfg.Broker != "":
		// Dial now, so a bad address fails before any work starts.
		if _, err := c.conn(cfg.Broker); err != nil {
			return nil, err
		}
	default:
		return nil, errors.New("client: no Bootstrap, Broker or Leaders in the Config")
	}
	return c, nil
}

func dedup(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if a != "" && !contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// Close closes the connections. Close Producers and Consumers first.
func (c *Client) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for addr, conn := range c.conns {
		_ = conn.Close()
		delete(c.conns, addr)
	}
	return nil
}

// Conn is the connection to a broker address, dialed at first use.
func (c *Client) Conn(addr string) (*grpc.ClientConn, error) { return c.conn(addr) }

func (c *Client) conn(addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if cc, ok := c.conns[addr]; ok {
		return cc, nil
	}
	var cc *grpc.ClientConn
	var err error
	if c.cfg.Dial != nil {
		cc, err = c.cfg.Dial(addr)
	} else {
		opts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxRecvMsgSize), grpc.MaxCallSendMsgSize(maxRecvMsgSize))}
		if len(c.cfg.DialOptions) == 0 {
			opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
		}
		cc, err = grpc.NewClient(addr, append(opts, c.cfg.DialOptions...)...)
		if err != nil {
			err = fmt.Errorf("dial %s: %w", addr, err)
		}
	}
	if err != nil {
		return nil, err
	}
	c.conns[addr] = cc
	return cc, nil
}

// ErrClosed: the Client, Producer or Consumer was closed.
var ErrClosed = errors.New("client: closed")

// requestContext bounds one RPC the broker may hold for wait.
func (c *Client) requestContext(ctx context.Context, wait time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.cfg.RequestTimeout+wait)
}

// Call makes one LogService call for a partition on its leader. call makes
// the RPC (bounding it itself, or with the context it is given) and returns
// the answer's error code. Without a lookup (Config.Broker) it runs once.
// Otherwise an answer telling the leader moved (NOT_LEADER_OR_FOLLOWER,
// LEADER_NOT_AVAILABLE, FENCED_LEADER_EPOCH, UNKNOWN_TOPIC_OR_PARTITION) or
// a leader that cannot be reached (gRPC Unavailable) is retried after a
// fresh lookup, with backoff, for up to Config.RetryTimeout and
// MaxAttempts; Call then returns nil when the last attempt had an answer
// (whose code the caller reports) and the error otherwise. Any other
// outcome returns at once: nil with an answer, else the error. Only calls
// that may be repeated safely belong here (consume, delete records): a
// produce goes through a Producer.
func (c *Client) Call(ctx context.Context, topic string, partition int32, call func(context.Context, replicadv1.LogServiceClient) (replicadv1.ErrorCode, error)) error {
	return c.CallConn(ctx, TopicPartition{topic, partition}, func(ctx context.Context, conn *grpc.ClientConn) (replicadv1.ErrorCode, error) {
		return call(ctx, replicadv1.NewLogServiceClient(conn))
	})
}

// CallConn is Call, giving call the leader's connection itself.
func (c *Client) CallConn(ctx context.Context, k TopicPartition, call func(context.Context, *grpc.ClientConn) (replicadv1.ErrorCode, error)) error {
	if c.source == nil {
		conn, err := c.conn(c.cfg.Broker)
		if err != nil {
			return err
		}
		_, err = call(ctx, conn)
		return err
	}
	deadline := time.Now().Add(c.cfg.RetryTimeout)
	backoff := c.cfg.RetryBackoff
	for attempt := 1; ; attempt++ {
		var lastErr error
		l, err := c.leader(ctx, k)
		var lerr *LookupError
		switch {
		case errors.As(err, &lerr) && lerr.Retry:
			lastErr = err
		case err != nil:
			return err
		default:
			conn, err := c.conn(l.Addr)
			if err != nil {
				return err
			}
			code, err := call(ctx, conn)
			switch {
			case err == nil && !leaderMoved(code):
				return nil
			case err != nil && (!unreachable(err) || ctx.Err() != nil):
				return err
			}
			// The leader moved, is not there yet, or is gone: look it up again.
			c.forget(k, l.Addr)
			if err != nil {
				// Should that broker come back, reconnect at the next attempt
				// rather than after gRPC's reconnect backoff.
				conn.ResetConnectBackoff()
				lastErr = err
			} else {
				lastErr = nil // the answer stands if no retry follows
			}
			traceRetry(ctx, k, l.Addr, code, err)
		}
		if attempt >= c.cfg.MaxAttempts || time.Now().Add(backoff).After(deadline) {
			return lastErr
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, c.cfg.RetryBackoffMax)
	}
}

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

// InitProducerID asks a broker for a producer ID and epoch (Kafka's
// InitProducerId): id 0 for a new one, else the ID and epoch last held, to
// bump the epoch. Any broker answers; the known ones are asked in turn.
func (c *Client) InitProducerID(ctx context.Context, id int64, epoch int16) (int64, int16, error) {
	// InitProducerId may wait on the controller's store (a new ID block,
	// an epoch bump): it gets InitProducerIDTimeout, not the request
	// timeout. A bump whose answer is lost to an impatient deadline has
	// still been carried out, and its retry is refused: the ID is then
	// given up (see Producer.bumpEpoch), so waiting is worth it, as
	// Kafka's producer waits max.block.ms for its ID.
	initTimeout := max(c.cfg.RequestTimeout, InitProducerIDTimeout)
	req := &replicadv1.InitProducerIdRequest{ProducerId: id, ProducerEpoch: int32(epoch), TimeoutMs: int32(initTimeout.Milliseconds())}
	addrs := c.anyBrokers()
	if len(addrs) == 0 && c.source != nil {
		// No lookup yet named a broker: one for no partition lists them
		// (and what leaders it names stay known).
		_, err := c.refresh(ctx, TopicPartition{})
		var lerr *LookupError
		if err != nil && !errors.As(err, &lerr) {
			return 0, 0, fmt.Errorf("init producer id: find a broker: %w", err)
		}
		addrs = c.anyBrokers()
		if len(addrs) == 0 && err != nil {
			// The lookup failed and named nobody: its reason is the
			// answer (it said "no broker answered: <nil>" before).
			return 0, 0, fmt.Errorf("init producer id: find a broker: %w", err)
		}
	}
	if len(addrs) == 0 {
		return 0, 0, errors.New("init producer id: no broker known to ask")
	}
	var errs []error
	for _, addr := range addrs {
		conn, err := c.conn(addr)
		if err != nil {
			return 0, 0, err
		}
		rctx, cancel := context.WithTimeout(ctx, initTimeout+time.Second)
		resp, err := replicadv1.NewLogServiceClient(conn).InitProducerId(rctx, req)
		cancel()
		switch {
		case err == nil && resp.GetErrorCode() == replicadv1.ErrorCode_ERROR_CODE_NONE:
			return resp.GetProducerId(), int16(resp.GetProducerEpoch()), nil
		case err == nil:
			return 0, 0, &Error{Code: resp.GetErrorCode(), Message: resp.GetErrorMessage(), Op: "init producer id"}
		case isUnimplemented(err) && !strings.Contains(status.Convert(err).Message(), "unknown service"):
			// The broker serves LogService without this method (a server
			// that serves no LogService at all is no broker: that error
			// passes through as it is).
			return 0, 0, fmt.Errorf("%w: broker %s answers InitProducerId with Unimplemented (an older replicad); produce with idempotence off", ErrIdempotenceUnsupported, addr)
		case ctx.Err() != nil || !unreachable(err):
			return 0, 0, fmt.Errorf("init producer id on %s: %w", addr, err)
		}
		conn.ResetConnectBackoff()
		errs = append(errs, fmt.Errorf("%s: %w", addr, err))
	}
	return 0, 0, fmt.Errorf("init producer id: no broker answered: %w", errors.Join(errs...))
}

// InitProducerIDTimeout bounds an InitProducerId, which may wait on the
// controller (the broker's own default wait is 30 s).
const InitProducerIDTimeout = 30 * time.Second

// ErrIdempotenceUnsupported: the cluster does not hand out producer IDs
// (its brokers predate idempotent produce).
var ErrIdempotenceUnsupported = errors.New("client: idempotent produce not supported by the broker")

// anyBrokers lists the addresses to ask a question any broker answers.
func (c *Client) anyBrokers() []string {
	if c.source == nil {
		return []string{c.cfg.Broker}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	if bs, ok := c.source.(*bootstrapSource); ok {
		all, start := bs.candidates()
		for i := range all {
			out = append(out, all[(start+i)%len(all)])
		}
	}
	for _, a := range c.brokers {
		if !contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// cachedPartitions is topic's partition count if a lookup gave it; 0 if not.
func (c *Client) cachedPartitions(topic string) int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.partitions[topic]
}
