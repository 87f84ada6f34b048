package store

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// EtcdConfig configures OpenEtcd.
type EtcdConfig struct {
	// Endpoints are the etcd client URLs, such as "http://10.0.0.1:2379".
	Endpoints []string
	// Prefix is put before every key of the store (default "/replicad/"), so
	// that several clusters can share one etcd. A "/" is added if missing.
	Prefix string
	// DialTimeout bounds OpenEtcd's first round trip (default 5s).
	DialTimeout time.Duration
	// SessionTTL is the TTL of the election lease (default 5s): how long a
	// crashed or partitioned controller keeps the leadership before another
	// one takes over. etcd counts in whole seconds (rounded up here) and
	// raises a TTL below its minimum (1.5 election timeouts, 2s by default).
	SessionTTL time.Duration
	// Advertise is the HOST:PORT clients reach this controller at: the
	// value of its election key, so that a standby can name the active
	// controller (ActiveCandidate). Empty: host and pid, for operators.
	Advertise string
	// AttemptTimeout bounds each attempt of a read or a transaction
	// (default 2s). The client spreads calls over the endpoints round
	// robin, and a call sent to a member that hangs (paused, or its link
	// holding bytes) would otherwise wait for gRPC's keepalive, at least
	// 13 s: an attempt past this deadline is sent again, to the next
	// member, within the caller's own deadline.
	AttemptTimeout time.Duration
	Logger         zerolog.Logger
}

// Defaults of EtcdConfig.
const (
	DefaultEtcdPrefix      = "/replicad/"
	DefaultEtcdDialTimeout = 5 * time.Second
	DefaultEtcdSessionTTL  = 5 * time.Second
	DefaultEtcdAttempt     = 2 * time.Second
)

// etcd's default server limits (etcd --max-txn-ops, --max-request-bytes).
// A transaction above either is refused whole; see txnErr.
const (
	etcdDefaultMaxTxnOps       = 128
	etcdDefaultMaxRequestBytes = 1.5 * 1024 * 1024
)

// etcdSchemaVersion is the key layout described below. OpenEtcd refuses a
// prefix holding another version rather than misread it.
const etcdSchemaVersion = "1"

// The key layout (schema version 1), every key under EtcdConfig.Prefix.
// Counters are decimal text and records JSON (the struct tags of Broker and
// Topic), so `etcdctl get --prefix /replicad/` is readable.
//
//	schema_version      "1"
//	controller_epoch    int32: last epoch returned by BumpControllerEpoch (absent: 0)
//	broker_epoch        int64: last epoch assigned by RegisterBroker, one counter
//	                    shared by all brokers (absent: 0)
//	brokers/<id>        JSON Broker, id in decimal
//	topics/<name>       JSON Topic: the topic with ALL its partitions
//	deleted/<topic id>  JSON DeletedTopic: its replicas that have not deleted
//	                    their logs yet (a topic is one key here too)
//	configs/<name>      JSON TopicConfig: the topic's config overrides (added to
//	                    schema 1: a topic stored before has none, version 0)
//	acls                JSON []ACL: the whole ACL set, sorted (one key, so that
//	                    a change is one compare and one put, like a topic;
//	                    thousands of ACLs fit in --max-request-bytes)
//	replication_throttle  int64: the replication throttle in bytes/s (absent: 0)
//	last_producer_id    int64: the last producer ID of the last block
//	                    AllocateProducerIDs handed out (absent: 0, none yet)
//	producer_epochs/<id>  int16: the newest epoch BumpProducerEpoch handed out
//	                    for producer ID id, in decimal (absent: 0, never bumped)
//	last_write          the write id of the last transaction (see commit): how
//	                    a write sent again knows whether its first attempt landed
//	election/<lease>    one key per candidate controller (concurrency.Election,
//	                    bound to its session lease); the oldest one leads
//
// A topic is one key, not one key per partition, because etcd caps the
// operations of a transaction (--max-txn-ops, default 128): a failover that
// moves the leadership of every partition of a topic is then one compare and
// one put, whatever the partition count. The price is that a topic's JSON
// must fit in one request (--max-request-bytes, default 1.5 MiB: roughly ten
// thousand partitions), and a batch may touch at most 127 topics (one compare
// is the election fence).
const (
	etcdKeySchemaVersion   = "schema_version"
	etcdKeyControllerEpoch = "controller_epoch"
	etcdKeyBrokerEpoch     = "broker_epoch"
	etcdDirBrokers         = "brokers/"
	etcdDirTopics          = "topics/"
	etcdDirDeleted         = "deleted/"
	etcdDirConfigs         = "configs/"
	etcdKeyACLs            = "acls"
	etcdKeyThrottle        = "replication_throttle"
	etcdKeyLastProducerID  = "last_producer_id"
	etcdDirProducerEpochs  = "producer_epochs/"
	etcdKeyLastWrite       = "last_write"
	etcdElection           = "election" // concurrency.NewElection adds the "/"
)

// EtcdStore is the Store that several controllers share through etcd, one
// of them elected (Campaign). Every write is one etcd transaction: its
// compare-and-sets are etcd Compares on the mod revisions of the keys it
// read, retried from a fresh read when another writer got in between, so
// concurrent writers are safe. Once this store has won an election, every
// write also compares the creation revision of its election key, so a
// deposed controller cannot write anything (ErrNotLeader), even before it
// notices it was deposed.
type EtcdStore struct {
	client    *clientv3.Client
	prefix    string
	ttl       int64 // election lease TTL, seconds
	attempt   time.Duration
	log       zerolog.Logger
	candidate string // the election key's value: who leads, for operators
	// writer and writes make every transaction's write id (see commit):
	// writer is random per open store, writes counts its transactions.
	writer string
	writes atomic.Uint64
	// beforeTxn, when set (tests only), runs before each transaction
	// attempt of a write.
	beforeTxn func()

	// campaigning holds one token while a Campaign runs: two campaigns of
	// one store would stand against each other.
	campaigning chan struct{}

	mu     sync.Mutex
	closed bool
	// lead is the last election won, nil before any: from the first win on,
	// writes are fenced by it, and fail once it is lost.
	lead *etcdLeadership
}

var (
	_ Store   = (*EtcdStore)(nil)
	_ Elector = (*EtcdStore)(nil)
)

// OpenEtcd connects to etcd and checks the schema under cfg.Prefix (writing
// it if the prefix is new). It fails if etcd does not answer within ctx and
// cfg.DialTimeout.
func OpenEtcd(ctx context.Context, cfg EtcdConfig) (*EtcdStore, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("open etcd store: no endpoints: %w", ErrInvalid)
	}
	cfg = etcdDefaults(cfg)
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		// Keepalive pings find a connection to a member that went silent
		// (a partition drops packets; no reset comes), so the client moves
		// to another endpoint instead of waiting on it. 5 s is the most
		// often an etcd server accepts pings by default
		// (--grpc-keepalive-min-time); more often, it hangs up.
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		// The client's own zap logs would bypass the service's zerolog
		// output; its failures reach us as errors anyway.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("open etcd store %v: %w", cfg.Endpoints, err)
	}
	s := &EtcdStore{
		client:      client,
		prefix:      cfg.Prefix,
		ttl:         int64(math.Ceil(cfg.SessionTTL.Seconds())),
		attempt:     cfg.AttemptTimeout,
		log:         cfg.Logger,
		candidate:   cmp.Or(cfg.Advertise, candidateName()),
		writer:      rand.Text(),
		campaigning: make(chan struct{}, 1),
	}
	// clientv3.New does not dial: this first round trip is the one that
	// tells whether etcd is there.
	initCtx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	if err := s.initSchema(initCtx); err != nil {
		client.Close()
		return nil, fmt.Errorf("open etcd store %v prefix %s: %w", cfg.Endpoints, cfg.Prefix, err)
	}
	return s, nil
}

func etcdDefaults(cfg EtcdConfig) EtcdConfig {
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultEtcdPrefix
	}
	if !strings.HasSuffix(cfg.Prefix, "/") {
		cfg.Prefix += "/"
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultEtcdDialTimeout
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultEtcdSessionTTL
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = DefaultEtcdAttempt
	}
	return cfg
}

// candidateName identifies this process in its election key.
func candidateName() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d", host, os.Getpid())
}

// initSchema writes the schema version under a new prefix, or checks it.
func (s *EtcdStore) initSchema(ctx context.Context) error {
	key := s.key(etcdKeySchemaVersion)
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, etcdSchemaVersion)).
		Else(clientv3.OpGet(key)).
		Commit()
	if err != nil {
		return err
	}
	if resp.Succeeded {
		return nil
	}
	kvs := resp.Responses[0].GetResponseRange().GetKvs()
	if len(kvs) != 1 || string(kvs[0].Value) != etcdSchemaVersion {
		return fmt.Errorf("schema version %q, want %s", firstValue(kvs), etcdSchemaVersion)
	}
	return nil
}

func firstValue(kvs []*mvccpb.KeyValue) string {
	if len(kvs) == 0 {
		return ""
	}
	return string(kvs[0].Value)
}

// Prefix returns the key prefix the store was opened with, "/" included.
func (s *EtcdStore) Prefix() string { return s.prefix }

func (s *EtcdStore) key(name string) string { return s.prefix + name }

func (s *EtcdStore) brokerKey(id int32) string {
	return s.prefix + etcdDirBrokers + strconv.FormatInt(int64(id), 10)
}

func (s *EtcdStore) topicKey(name string) string { return s.prefix + etcdDirTopics + name }

// ---- plumbing ----

// begin checks, before a call starts, that ctx is live and s is open.
func (s *EtcdStore) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.isClosed() {
		return ErrClosed
	}
	return nil
}

func (s *EtcdStore) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// clientErr turns the error of a call cut short by Close into ErrClosed.
func (s *EtcdStore) clientErr(err error) error {
	if s.isClosed() {
		return ErrClosed
	}
	return err
}

// get reads one key; a nil KeyValue means it is absent.
func (s *EtcdStore) get(ctx context.Context, key string) (*mvccpb.KeyValue, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	resp, err := s.getAttempts(ctx, key)
	if err != nil {
		return nil, s.clientErr(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return resp.Kvs[0], nil
}

// list reads every key under dir.
func (s *EtcdStore) list(ctx context.Context, dir string) ([]*mvccpb.KeyValue, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	resp, err := s.getAttempts(ctx, s.prefix+dir, clientv3.WithPrefix())
	if err != nil {
		return nil, s.clientErr(err)
	}
	return resp.Kvs, nil
}

// beginWrite is begin for a write: a deposed store fails at once with
// ErrNotLeader, before reading anything (etcd may be out of reach, which
// may be why it was deposed). commit checks the fence again, in etcd.
func (s *EtcdStore) beginWrite(ctx context.Context) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	_, err := s.fence()
	return err
}

// fence returns the leadership every write must be guarded by, nil before
// this store has won an election, or ErrNotLeader once it is lost.
func (s *EtcdStore) fence() (*etcdLeadership, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClosed
	case s.lead == nil:
		return nil, nil
	case s.lead.lost():
		return nil, s.lead.notLeader()
	}
	return s.lead, nil
}

// commit runs one write as one etcd transaction: if cmps (the write's own
// compare-and-sets on what it read) hold, ops are applied. Once this store
// has won an election, the creation revision of its election key is
// compared too. That compare is the fencing: etcd evaluates it atomically
// with the write, so a controller that was deposed, even one that has not
// noticed yet (a GC pause, a partition), cannot write. commit returns
// (false, nil) when cmps failed, and ErrNotLeader when the fence did. An
// error whose outcome it could not settle wraps ErrUnknownOutcome.
//
// Every transaction also puts a write id of its own under last_write. An
// attempt that hangs, or that etcd answers "request timed out" or "leader
// changed", may have been applied all the same; it is sent again, and when
// the retry's compares fail, the write id tells whether the first attempt
// was this write. Its values alone cannot: two controllers bumping the
// controller epoch both write old+1, and a deposed one whose attempt
// never landed would take its successor's write for its own.
func (s *EtcdStore) commit(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op) (bool, error) {
	if err := s.begin(ctx); err != nil {
		return false, err
	}
	lead, err := s.fence()
	if err != nil {
		return false, err
	}
	var orElse []clientv3.Op
	if lead != nil {
		cmps = append(slices.Clip(cmps), lead.cmp())
		// On failure, read the election key to tell a lost election from
		// a lost compare-and-set.
		orElse = []clientv3.Op{clientv3.OpGet(lead.key)}
	}
	id := s.writer + "/" + strconv.FormatUint(s.writes.Add(1), 10)
	ops = append(slices.Clip(ops), clientv3.OpPut(s.key(etcdKeyLastWrite), id))
	var resp *clientv3.TxnResponse
	retried := false
	for {
		if s.beforeTxn != nil {
			s.beforeTxn()
		}
		actx, cancel := context.WithTimeout(ctx, s.attempt)
		resp, err = s.client.Txn(actx).If(cmps...).Then(ops...).Else(orElse...).Commit()
		cancel()
		if err == nil || !s.attemptUnsettled(ctx, err) {
			break
		}
		// The member hung, or could not tell whether the proposal
		// committed: send it again, round robin to another. The compares
		// make a second commit impossible if the first landed.
		retried = true
		if !s.attemptTimedOut(ctx, err) {
			sleepCtx(ctx, etcdRetryPause)
		}
	}
	if err != nil {
		if isTxnTooLarge(err) {
			return false, s.txnErr(err, len(cmps), ops)
		}
		// The caller's deadline, or a failure after the request left:
		// it may have been applied.
		return false, fmt.Errorf("%w: %w", ErrUnknownOutcome, s.clientErr(err))
	}
	if resp.Succeeded {
		return true, nil
	}
	if retried {
		// An attempt that failed may have committed all the same, and
		// then its retry fails its compares: if the write id is there,
		// it was ours.
		landed, lerr := s.landed(ctx, cmps, ops, id)
		if lerr != nil {
			return false, fmt.Errorf("%w: %w", ErrUnknownOutcome, s.clientErr(lerr))
		}
		if landed {
			return true, nil
		}
	}
	if lead != nil && !lead.heldIn(resp.Responses[0].GetResponseRange()) {
		lead.lose("the election key is gone or replaced: another controller was elected")
		return false, lead.notLeader()
	}
	return false, nil
}

// etcdRetryPause spaces the retries of a transaction etcd answered with an
// unsettled error (a leader election in progress takes about that long).
const etcdRetryPause = 50 * time.Millisecond

// attemptUnsettled reports whether an attempt failed in a way worth
// sending again within the caller's deadline: it timed out (attemptTimedOut)
// or etcd could not say whether it committed (a proposal that timed out,
// a leader that changed or is missing).
func (s *EtcdStore) attemptUnsettled(ctx context.Context, err error) bool {
	if ctx.Err() != nil || s.isClosed() {
		return false
	}
	return s.attemptTimedOut(ctx, err) || errors.Is(err, rpctypes.ErrTimeout) || errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail) ||
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost) || errors.Is(err, rpctypes.ErrLeaderChanged) ||
		errors.Is(err, rpctypes.ErrNoLeader)
}

// attemptTimedOut reports whether err is an attempt's own deadline, with
// the caller's still running: the call is worth sending again.
func (s *EtcdStore) attemptTimedOut(ctx context.Context, err error) bool {
	if ctx.Err() != nil || s.isClosed() {
		return false
	}
	return errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
}

// getAttempts is client.Get in attempts of s.attempt each (see
// EtcdConfig.AttemptTimeout); a read is safe to send again.
func (s *EtcdStore) getAttempts(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, s.attempt)
		resp, err := s.client.Get(actx, key, opts...)
		cancel()
		if err == nil || !s.attemptTimedOut(ctx, err) {
			return resp, err
		}
	}
}

// landed reports whether the transaction with write id (its last op the
// put of last_write), guarded by cmps, was applied. last_write still
// holding id proves it. Once a later transaction replaced it, a key the
// transaction both compared and put tells: its compare let it land only as
// the very next write of that key after the mod revision it expected, so
// last_write at the revision of that next write names the one that made
// it. A value another writer put (the same next epoch, say) is never taken
// for this one's. When no such key can be read back (too many writes
// since, a compacted revision), the outcome is unknown: an error.
func (s *EtcdStore) landed(ctx context.Context, cmps []clientv3.Cmp, ops []clientv3.Op, id string) (bool, error) {
	marker := s.key(etcdKeyLastWrite)
	resp, err := s.getAttempts(ctx, marker)
	if err != nil {
		return false, err
	}
	if len(resp.Kvs) == 1 && string(resp.Kvs[0].Value) == id {
		return true, nil
	}
	expected := make(map[string]int64, len(cmps))
	for _, c := range cmps {
		pc := c.GetCompare()
		switch {
		case pc.GetResult() != etcdserverpb.Compare_EQUAL:
		case pc.GetTarget() == etcdserverpb.Compare_MOD:
			expected[string(pc.GetKey())] = pc.GetModRevision()
		case pc.GetTarget() == etcdserverpb.Compare_CREATE && pc.GetCreateRevision() == 0:
			expected[string(pc.GetKey())] = 0 // absent: its next write creates it
		}
	}
	for _, op := range ops {
		key := string(op.KeyBytes())
		floor, ok := expected[key]
		if !op.IsPut() || !ok {
			continue
		}
		// Walk the key's versions back to the first one after floor.
		kr, err := s.getAttempts(ctx, key)
		if err != nil {
			return false, err
		}
		if len(kr.Kvs) == 0 {
			break // deleted since: which writes came between is lost
		}
		next := kr.Kvs[0].ModRevision
		for range etcdLandedWalk {
			if next <= floor {
				return false, nil // nothing wrote the key after the read
			}
			pr, err := s.getAttempts(ctx, key, clientv3.WithRev(next-1))
			if err != nil {
				return false, err
			}
			if len(pr.Kvs) == 0 || pr.Kvs[0].ModRevision <= floor {
				// next is the first write after the read: the only one
				// this transaction could have been.
				mr, err := s.getAttempts(ctx, marker, clientv3.WithRev(next))
				if err != nil {
					return false, err
				}
				return len(mr.Kvs) == 1 && mr.Kvs[0].ModRevision == next && string(mr.Kvs[0].Value) == id, nil
			}
			next = pr.Kvs[0].ModRevision
		}
		break
	}
	return false, fmt.Errorf("write %s: whether it landed cannot be read back", id)
}

// etcdLandedWalk bounds how many later versions of a key landed reads to
// find the one a retried write may have made.
const etcdLandedWalk = 16

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// isTxnTooLarge reports whether etcd refused a transaction for its size.
func isTxnTooLarge(err error) bool {
	return errors.Is(err, rpctypes.ErrTooManyOps) || errors.Is(err, rpctypes.ErrRequestTooLarge) ||
		status.Code(err) == codes.ResourceExhausted
}

// txnErr explains a transaction etcd refused for its size: it is refused
// whole, and retrying cannot help.
func (s *EtcdStore) txnErr(err error, cmps int, ops []clientv3.Op) error {
	if !isTxnTooLarge(err) {
		return s.clientErr(err)
	}
	size := 0
	for _, op := range ops {
		size += len(op.KeyBytes()) + len(op.ValueBytes())
	}
	return fmt.Errorf("etcd refused the transaction (%d compares, %d operations, %d bytes of keys and values): "+
		"more than etcd's --max-txn-ops (default %d) or --max-request-bytes (default %.1f MiB) allow; "+
		"split the change or raise those limits on every etcd member: %w",
		cmps, len(ops), size, etcdDefaultMaxTxnOps, etcdDefaultMaxRequestBytes/(1024*1024), err)
}

// modRevIs compares key's mod revision with the one read (kv nil: absent).
func modRevIs(key string, kv *mvccpb.KeyValue) clientv3.Cmp {
	var rev int64
	if kv != nil {
		rev = kv.ModRevision
	}
	return clientv3.Compare(clientv3.ModRevision(key), "=", rev)
}

// parseCounter reads a decimal counter; absent is 0.
func parseCounter(kv *mvccpb.KeyValue, bits int) (int64, error) {
	if kv == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(kv.Value), 10, bits)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("key %s holds %q, not a counter", kv.Key, kv.Value)
	}
	return n, nil
}

// ---- controller epoch ----

func (s *EtcdStore) BumpControllerEpoch(ctx context.Context, past int32) (int32, error) {
	if err := s.beginWrite(ctx); err != nil {
		return 0, fmt.Errorf("bump controller epoch: %w", err)
	}
	key := s.key(etcdKeyControllerEpoch)
	for {
		kv, err := s.get(ctx, key)
		if err != nil {
			return 0, fmt.Errorf("bump controller epoch: %w", err)
		}
		old, err := parseCounter(kv, 32)
		if err != nil {
			return 0, fmt.Errorf("bump controller epoch: %w", err)
		}
		epoch, err := nextControllerEpoch(old, past)
		if err != nil {
			return 0, err
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(key, kv)},
			[]clientv3.Op{clientv3.OpPut(key, strconv.Itoa(int(epoch)))})
		if err != nil {
			return 0, fmt.Errorf("bump controller epoch: %w", err)
		}
		if ok {
			return epoch, nil
		}
		// Another bump got in between: read its epoch and go past it.
	}
}

func (s *EtcdStore) ControllerEpoch(ctx context.Context) (int32, error) {
	kv, err := s.get(ctx, s.key(etcdKeyControllerEpoch))
	if err != nil {
		return 0, fmt.Errorf("controller epoch: %w", err)
	}
	epoch, err := parseCounter(kv, 32)
	if err != nil {
		return 0, fmt.Errorf("controller epoch: %w", err)
	}
	return int32(epoch), nil
}

// ---- brokers ----

func (s *EtcdStore) RegisterBroker(ctx context.Context, b Broker) (Broker, error) {
	if err := checkBroker(b); err != nil {
		return Broker{}, err
	}
	if err := s.beginWrite(ctx); err != nil {
		return Broker{}, fmt.Errorf("register broker %d: %w", b.ID, err)
	}
	b.Fenced = false
	counter := s.key(etcdKeyBrokerEpoch)
	for {
		kv, err := s.get(ctx, counter)
		if err != nil {
			return Broker{}, fmt.Errorf("register broker %d: %w", b.ID, err)
		}
		last, err := parseCounter(kv, 64)
		if err != nil {
			return Broker{}, fmt.Errorf("register broker %d: %w", b.ID, err)
		}
		b.Epoch = last + 1
		data, err := json.Marshal(b)
		if err != nil {
			return Broker{}, fmt.Errorf("register broker %d: %w", b.ID, err)
		}
		// The counter's compare makes the epoch unique: a concurrent
		// registration that took it fails this one, which reads again.
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(counter, kv)}, []clientv3.Op{
			clientv3.OpPut(counter, strconv.FormatInt(b.Epoch, 10)),
			clientv3.OpPut(s.brokerKey(b.ID), string(data)),
		})
		if err != nil {
			return Broker{}, fmt.Errorf("register broker %d: %w", b.ID, err)
		}
		if ok {
			return b, nil
		}
	}
}

func (s *EtcdStore) Brokers(ctx context.Context) ([]Broker, error) {
	kvs, err := s.list(ctx, etcdDirBrokers)
	if err != nil {
		return nil, fmt.Errorf("brokers: %w", err)
	}
	out := make([]Broker, 0, len(kvs))
	for _, kv := range kvs {
		b, err := decodeBroker(kv)
		if err != nil {
			return nil, fmt.Errorf("brokers: %w", err)
		}
		out = append(out, b)
	}
	// etcd sorts keys as strings ("10" before "9").
	slices.SortFunc(out, func(a, b Broker) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

func (s *EtcdStore) UpdateBroker(ctx context.Context, b Broker) error {
	if err := checkBroker(b); err != nil {
		return err
	}
	if err := s.beginWrite(ctx); err != nil {
		return fmt.Errorf("update broker %d: %w", b.ID, err)
	}
	key := s.brokerKey(b.ID)
	data, err := json.Marshal(b)
	if err != nil {
		return fmt.Errorf("update broker %d: %w", b.ID, err)
	}
	for {
		kv, err := s.get(ctx, key)
		if err != nil {
			return fmt.Errorf("update broker %d: %w", b.ID, err)
		}
		if kv == nil {
			return fmt.Errorf("update broker %d: %w", b.ID, ErrNotFound)
		}
		old, err := decodeBroker(kv)
		if err != nil {
			return fmt.Errorf("update broker %d: %w", b.ID, err)
		}
		if old.Epoch != b.Epoch {
			return fmt.Errorf("update broker %d: expected broker epoch %d, stored %d: %w", b.ID, b.Epoch, old.Epoch, ErrConflict)
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(key, kv)}, []clientv3.Op{clientv3.OpPut(key, string(data))})
		if err != nil {
			return fmt.Errorf("update broker %d: %w", b.ID, err)
		}
		if ok {
			return nil
		}
		// The record changed since the read: check its epoch again.
	}
}

func decodeBroker(kv *mvccpb.KeyValue) (Broker, error) {
	var b Broker
	if err := json.Unmarshal(kv.Value, &b); err != nil {
		return Broker{}, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	return b, nil
}

// ---- topics ----

func (s *EtcdStore) CreateTopic(ctx context.Context, name string, parts []Partition, configs map[string]string) error {
	t, err := newTopic(name, parts)
	if err != nil {
		return err
	}
	data, err := json.Marshal(t)
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	cdata, err := json.Marshal(TopicConfig{Version: 1, Configs: configs})
	if err != nil {
		return fmt.Errorf("create topic %s: %w", name, err)
	}
	key := s.topicKey(name)
	ok, err := s.commit(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, string(data)), clientv3.OpPut(s.configKey(name), string(cdata))})
	if err != nil {
		return fmt.Errorf("create topic %s (%d partitions): %w", name, len(t.Partitions), err)
	}
	if !ok {
		return fmt.Errorf("create topic %s: %w", name, ErrExists)
	}
	return nil
}

func (s *EtcdStore) CreatePartitions(ctx context.Context, name string, existing int32, parts []Partition) error {
	add, err := newPartitions(name, existing, parts)
	if err != nil {
		return err
	}
	if err := s.beginWrite(ctx); err != nil {
		return fmt.Errorf("create partitions of %s: %w", name, err)
	}
	key := s.topicKey(name)
	for {
		// The topic is one key: the new partitions are written with it,
		// compared at the revision read, so all land or none.
		kv, err := s.get(ctx, key)
		if err != nil {
			return fmt.Errorf("create partitions of %s: %w", name, err)
		}
		if kv == nil {
			return fmt.Errorf("create partitions of %s: %w", name, ErrNotFound)
		}
		t, err := decodeTopic(kv, name)
		if err != nil {
			return fmt.Errorf("create partitions of %s: %w", name, err)
		}
		if len(t.Partitions) == 0 {
			return fmt.Errorf("create partitions of %s: no partitions stored: %w", name, ErrInvalid)
		}
		if err := checkNewPartitions(name, t.Partitions, existing, add); err != nil {
			return err
		}
		t.Partitions = append(t.Partitions, add...)
		data, err := json.Marshal(t)
		if err != nil {
			return fmt.Errorf("create partitions of %s: %w", name, err)
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(key, kv)}, []clientv3.Op{clientv3.OpPut(key, string(data))})
		if err != nil {
			return fmt.Errorf("create partitions of %s (%d new): %w", name, len(add), err)
		}
		if ok {
			return nil
		}
		// The topic changed between the read and the write: read again.
	}
}

func (s *EtcdStore) DeleteTopic(ctx context.Context, name string) error {
	if err := s.beginWrite(ctx); err != nil {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	key := s.topicKey(name)
	for {
		kv, err := s.get(ctx, key)
		if err != nil {
			return fmt.Errorf("delete topic %s: %w", name, err)
		}
		if kv == nil {
			return fmt.Errorf("delete topic %s: %w", name, ErrNotFound)
		}
		t, err := decodeTopic(kv, name)
		if err != nil {
			return fmt.Errorf("delete topic %s: %w", name, err)
		}
		ops := []clientv3.Op{clientv3.OpDelete(key), clientv3.OpDelete(s.configKey(name))}
		if d, ok := NewDeletedTopic(t); ok {
			data, err := json.Marshal(d)
			if err != nil {
				return fmt.Errorf("delete topic %s: %w", name, err)
			}
			ops = append(ops, clientv3.OpPut(s.deletedKey(d.ID), string(data)))
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(key, kv)}, ops)
		if err != nil {
			return fmt.Errorf("delete topic %s: %w", name, err)
		}
		if ok {
			return nil
		}
		// The topic changed between the read and the write: read again.
	}
}

func (s *EtcdStore) deletedKey(topicID string) string { return s.prefix + etcdDirDeleted + topicID }

func (s *EtcdStore) configKey(name string) string { return s.prefix + etcdDirConfigs + name }

func (s *EtcdStore) TopicConfigs(ctx context.Context) (map[string]TopicConfig, error) {
	kvs, err := s.list(ctx, etcdDirConfigs)
	if err != nil {
		return nil, fmt.Errorf("topic configs: %w", err)
	}
	out := make(map[string]TopicConfig, len(kvs))
	for _, kv := range kvs {
		var c TopicConfig
		if err := json.Unmarshal(kv.Value, &c); err != nil {
			return nil, fmt.Errorf("topic configs: decode %s: %w", kv.Key, err)
		}
		out[strings.TrimPrefix(string(kv.Key), s.prefix+etcdDirConfigs)] = c
	}
	return out, nil
}

func (s *EtcdStore) SetTopicConfig(ctx context.Context, name string, expected int64, configs map[string]string) (TopicConfig, error) {
	if err := s.beginWrite(ctx); err != nil {
		return TopicConfig{}, fmt.Errorf("set topic config %s: %w", name, err)
	}
	next := TopicConfig{Version: expected + 1, Configs: maps.Clone(configs)}
	tkey, ckey := s.topicKey(name), s.configKey(name)
	topic, err := s.get(ctx, tkey)
	if err != nil {
		return TopicConfig{}, fmt.Errorf("set topic config %s: %w", name, err)
	}
	if topic == nil {
		return TopicConfig{}, fmt.Errorf("set topic config %s: %w", name, ErrNotFound)
	}
	kv, err := s.get(ctx, ckey)
	if err != nil {
		return TopicConfig{}, fmt.Errorf("set topic config %s: %w", name, err)
	}
	var cur TopicConfig
	if kv != nil {
		if err := json.Unmarshal(kv.Value, &cur); err != nil {
			return TopicConfig{}, fmt.Errorf("set topic config %s: decode: %w", name, err)
		}
	}
	if cur.Version != expected {
		return TopicConfig{}, fmt.Errorf("set topic config %s: version %d, expected %d: %w", name, cur.Version, expected, ErrConflict)
	}
	next.MinIsrFloor = cur.MinIsrFloor
	data, err := json.Marshal(next)
	if err != nil {
		return TopicConfig{}, fmt.Errorf("set topic config %s: %w", name, err)
	}
	// The topic must be the one read (not deleted and created again since:
	// its creation revision, as its partitions change at every election)
	// and the config unchanged: otherwise another writer got in between.
	ok, err := s.commit(ctx, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(tkey), "=", topic.CreateRevision), modRevIs(ckey, kv)},
		[]clientv3.Op{clientv3.OpPut(ckey, string(data))})
	if err != nil {
		return TopicConfig{}, fmt.Errorf("set topic config %s: %w", name, err)
	}
	if !ok {
		return TopicConfig{}, fmt.Errorf("set topic config %s: changed concurrently: %w", name, ErrConflict)
	}
	return next, nil
}

func (s *EtcdStore) AlterTopicConfig(ctx context.Context, name string, expected int64, next TopicConfig, updates []PartitionUpdate) error {
	if err := checkAlterTopicConfig(name, expected, next, updates); err != nil {
		return err
	}
	if err := s.beginWrite(ctx); err != nil {
		return fmt.Errorf("alter topic config %s: %w", name, err)
	}
	data, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("alter topic config %s: %w", name, err)
	}
	ckey := s.configKey(name)
	for {
		// The topic (its partitions) and its config, each compared at the
		// revision read: another writer in between makes the commit fail,
		// and it is decided again on what is stored then.
		read, err := s.readTopics(ctx, []string{name})
		if err != nil {
			return fmt.Errorf("alter topic config %s: %w", name, err)
		}
		if read[name] == nil {
			return fmt.Errorf("alter topic config %s: %w", name, ErrNotFound)
		}
		kv, err := s.get(ctx, ckey)
		if err != nil {
			return fmt.Errorf("alter topic config %s: %w", name, err)
		}
		var cur TopicConfig
		if kv != nil {
			if err := json.Unmarshal(kv.Value, &cur); err != nil {
				return fmt.Errorf("alter topic config %s: decode: %w", name, err)
			}
		}
		if err := checkConfigVersion(name, cur, expected, next); err != nil {
			return err
		}
		r := read[name]
		cmps := []clientv3.Cmp{modRevIs(ckey, kv), clientv3.Compare(clientv3.ModRevision(r.key), "=", r.modRev)}
		ops := []clientv3.Op{clientv3.OpPut(ckey, string(data))}
		if len(updates) > 0 {
			// planUpdates compares the topic key itself (a key is put
			// once per transaction).
			pc, po, err := planUpdates(read, updates)
			if err != nil {
				return err
			}
			cmps, ops = append(cmps[:1], pc...), append(ops, po...)
		}
		ok, err := s.commit(ctx, cmps, ops)
		if err != nil {
			return fmt.Errorf("alter topic config %s: %w", name, err)
		}
		if ok {
			return nil
		}
	}
}

func (s *EtcdStore) DeletedTopics(ctx context.Context) ([]DeletedTopic, error) {
	kvs, err := s.list(ctx, etcdDirDeleted)
	if err != nil {
		return nil, fmt.Errorf("deleted topics: %w", err)
	}
	out := make([]DeletedTopic, 0, len(kvs))
	for _, kv := range kvs {
		var d DeletedTopic
		if err := json.Unmarshal(kv.Value, &d); err != nil {
			return nil, fmt.Errorf("deleted topics: decode %s: %w", kv.Key, err)
		}
		out = append(out, d)
	}
	sortDeleted(out)
	return out, nil
}

func (s *EtcdStore) CompleteDeletions(ctx context.Context, topicID string, done []Replica) error {
	if err := s.beginWrite(ctx); err != nil {
		return fmt.Errorf("complete deletions of topic %s: %w", topicID, err)
	}
	key := s.deletedKey(topicID)
	for {
		kv, err := s.get(ctx, key)
		if err != nil || kv == nil {
			if err != nil {
				err = fmt.Errorf("complete deletions of topic %s: %w", topicID, err)
			}
			return err
		}
		var d DeletedTopic
		if err := json.Unmarshal(kv.Value, &d); err != nil {
			return fmt.Errorf("complete deletions of topic %s: decode: %w", topicID, err)
		}
		op := clientv3.OpDelete(key)
		if next, left := completeDeletions(d, done); left {
			data, err := json.Marshal(next)
			if err != nil {
				return fmt.Errorf("complete deletions of topic %s: %w", topicID, err)
			}
			op = clientv3.OpPut(key, string(data))
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(key, kv)}, []clientv3.Op{op})
		if err != nil {
			return fmt.Errorf("complete deletions of topic %s: %w", topicID, err)
		}
		if ok {
			return nil
		}
	}
}

func (s *EtcdStore) Topic(ctx context.Context, name string) (Topic, error) {
	kv, err := s.get(ctx, s.topicKey(name))
	if err != nil {
		return Topic{}, fmt.Errorf("topic %s: %w", name, err)
	}
	if kv == nil {
		return Topic{}, fmt.Errorf("topic %s: %w", name, ErrNotFound)
	}
	return decodeTopic(kv, name)
}

func (s *EtcdStore) Partitions(ctx context.Context) ([]Partition, error) {
	kvs, err := s.list(ctx, etcdDirTopics)
	if err != nil {
		return nil, fmt.Errorf("partitions: %w", err)
	}
	var out []Partition
	for _, kv := range kvs {
		t, err := decodeTopic(kv, strings.TrimPrefix(string(kv.Key), s.prefix+etcdDirTopics))
		if err != nil {
			return nil, fmt.Errorf("partitions: %w", err)
		}
		out = append(out, t.Partitions...)
	}
	slices.SortFunc(out, comparePartitions)
	return out, nil
}

func (s *EtcdStore) Partition(ctx context.Context, topic string, partition int32) (Partition, error) {
	t, err := s.Topic(ctx, topic)
	if errors.Is(err, ErrNotFound) {
		return Partition{}, partitionNotFound(topic, partition)
	}
	if err != nil {
		return Partition{}, err
	}
	if partition < 0 || int(partition) >= len(t.Partitions) {
		return Partition{}, partitionNotFound(topic, partition)
	}
	return t.Partitions[partition], nil
}

// decodeTopic decodes the topic stored under kv and checks it is the one
// named and numbered 0..n-1, as every lookup by index relies on.
func decodeTopic(kv *mvccpb.KeyValue, name string) (Topic, error) {
	var t Topic
	if err := json.Unmarshal(kv.Value, &t); err != nil {
		return Topic{}, fmt.Errorf("decode topic %s: %w", name, err)
	}
	if t.Name != name {
		return Topic{}, fmt.Errorf("decode topic %s: key holds topic %q", name, t.Name)
	}
	for i, p := range t.Partitions {
		if p.Topic != name || p.Partition != int32(i) {
			return Topic{}, fmt.Errorf("decode topic %s: partition %d is stored as %s-%d", name, i, p.Topic, p.Partition)
		}
	}
	return t, nil
}

// ---- partition updates ----

// topicRead is a topic as read for an update, with the mod revision its
// write compares.
type topicRead struct {
	key    string
	modRev int64
	topic  Topic
}

func (s *EtcdStore) UpdatePartitions(ctx context.Context, updates []PartitionUpdate) error {
	if err := checkUpdates(updates); err != nil {
		return err
	}
	if err := s.beginWrite(ctx); err != nil {
		return fmt.Errorf("update partitions: %w", err)
	}
	if len(updates) == 0 {
		return nil
	}
	for {
		read, err := s.readTopics(ctx, touchedTopics(updates))
		if err != nil {
			return fmt.Errorf("update partitions: %w", err)
		}
		cmps, ops, err := planUpdates(read, updates)
		if err != nil {
			return err
		}
		ok, err := s.commit(ctx, cmps, ops)
		if err != nil {
			return fmt.Errorf("update %d partitions of topics %s: %w", len(updates), strings.Join(touchedTopics(updates), ","), err)
		}
		if ok {
			return nil
		}
		// A touched topic changed since the read (maybe another of its
		// partitions): read again and check every expected epoch again.
	}
}

// touchedTopics returns the topics updates name, sorted, each once.
func touchedTopics(updates []PartitionUpdate) []string {
	names := make([]string, 0, len(updates))
	for _, u := range updates {
		names = append(names, u.New.Topic)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// readTopics reads the named topics at one revision (one read-only
// transaction). An absent topic is missing from the map.
func (s *EtcdStore) readTopics(ctx context.Context, names []string) (map[string]*topicRead, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	gets := make([]clientv3.Op, len(names))
	for i, name := range names {
		gets[i] = clientv3.OpGet(s.topicKey(name))
	}
	resp, err := s.client.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return nil, s.txnErr(err, 0, gets)
	}
	read := make(map[string]*topicRead, len(names))
	for i, name := range names {
		kvs := resp.Responses[i].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			continue
		}
		t, err := decodeTopic(kvs[0], name)
		if err != nil {
			return nil, err
		}
		read[name] = &topicRead{key: s.topicKey(name), modRev: kvs[0].ModRevision, topic: t}
	}
	return read, nil
}

// planUpdates checks every update against the topics read, in order, and
// returns the transaction writing them: all touched topics, each guarded by
// its mod revision. read is modified.
func planUpdates(read map[string]*topicRead, updates []PartitionUpdate) ([]clientv3.Cmp, []clientv3.Op, error) {
	for _, u := range updates {
		r := read[u.New.Topic]
		if r == nil || u.New.Partition < 0 || int(u.New.Partition) >= len(r.topic.Partitions) {
			return nil, nil, partitionNotFound(u.New.Topic, u.New.Partition)
		}
		if stored := r.topic.Partitions[u.New.Partition].PartitionEpoch; stored != u.Expected {
			return nil, nil, conflict(u.New, u.Expected, stored)
		}
		r.topic.Partitions[u.New.Partition] = u.New.Clone()
	}
	names := touchedTopics(updates)
	cmps := make([]clientv3.Cmp, 0, len(names))
	ops := make([]clientv3.Op, 0, len(names))
	for _, name := range names {
		r := read[name]
		data, err := json.Marshal(r.topic)
		if err != nil {
			return nil, nil, fmt.Errorf("update topic %s: %w", name, err)
		}
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(r.key), "=", r.modRev))
		ops = append(ops, clientv3.OpPut(r.key, string(data)))
	}
	return cmps, ops, nil
}

// ---- close ----

// Close ends the leadership, if any, revoking its lease so that another
// controller is elected at once rather than after the TTL, and closes the
// client. Later calls fail with ErrClosed.
func (s *EtcdStore) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	lead := s.lead
	s.mu.Unlock()
	if lead != nil {
		lead.lose("store closed")
		lead.end()
	}
	if err := s.client.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("close etcd store: %w", err)
	}
	return nil
}

// ---- ACLs ----

// readACLs reads the ACL set and its key (nil: none stored yet).
func (s *EtcdStore) readACLs(ctx context.Context) ([]ACL, *mvccpb.KeyValue, error) {
	kv, err := s.get(ctx, s.key(etcdKeyACLs))
	if err != nil || kv == nil {
		return nil, nil, err
	}
	var acls []ACL
	if err := json.Unmarshal(kv.Value, &acls); err != nil {
		return nil, nil, fmt.Errorf("decode %s: %w", kv.Key, err)
	}
	return acls, kv, nil
}

func (s *EtcdStore) Acls(ctx context.Context) ([]ACL, error) {
	acls, _, err := s.readACLs(ctx)
	if err != nil {
		return nil, fmt.Errorf("acls: %w", err)
	}
	return acls, nil
}

func (s *EtcdStore) CreateAcls(ctx context.Context, acls []ACL) ([]ACL, error) {
	if err := checkACLs(acls); err != nil {
		return nil, err
	}
	created, err := s.rewriteACLs(ctx, func(stored []ACL) ([]ACL, []ACL) { return mergeACLs(stored, acls) })
	if err != nil {
		return nil, fmt.Errorf("create acls: %w", err)
	}
	return created, nil
}

func (s *EtcdStore) DeleteAcls(ctx context.Context, filters []ACLFilter) ([]ACL, error) {
	deleted, err := s.rewriteACLs(ctx, func(stored []ACL) ([]ACL, []ACL) { return removeACLs(stored, filters) })
	if err != nil {
		return nil, fmt.Errorf("delete acls: %w", err)
	}
	return deleted, nil
}

// rewriteACLs replaces the ACL set by change's first result, compared on
// the key's mod revision and fenced by the election like every write, and
// returns change's second (the ACLs created or deleted). A write that lost
// the compare is done again from a fresh read. Nothing changed: no write.
func (s *EtcdStore) rewriteACLs(ctx context.Context, change func(stored []ACL) (next, changed []ACL)) ([]ACL, error) {
	if err := s.beginWrite(ctx); err != nil {
		return nil, err
	}
	key := s.key(etcdKeyACLs)
	for {
		stored, kv, err := s.readACLs(ctx)
		if err != nil {
			return nil, err
		}
		next, changed := change(stored)
		if len(changed) == 0 {
			return nil, nil
		}
		data, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		ok, err := s.commit(ctx, []clientv3.Cmp{modRevIs(key, kv)}, []clientv3.Op{clientv3.OpPut(key, string(data))})
		if err != nil {
			return nil, err
		}
		if ok {
			return changed, nil
		}
		// Another write got in between: apply the change to its set.
	}
}
