package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/replicad/replicad/controller/store"
	"github.com/replicad/replicad/controller/store/storetest"
	"github.com/replicad/replicad/internal/testutil"
)

// testTTL is the election lease TTL of these tests: etcd's minimum with its
// default timings (1.5 election timeouts of 1s, rounded up), so a crashed
// leader is replaced within about two seconds.
const testTTL = 2 * time.Second

// takeover bounds how long a candidate may take to be elected once the
// leader is gone: the TTL, etcd's expiry check (every 500ms), and slack for
// a loaded machine under -race.
const takeover = testTTL + 8*time.Second

// checkLeaks fails t if goroutines started during t outlive it (the etcd
// server and every store are closed by earlier cleanups).
func checkLeaks(t *testing.T) {
	t.Helper()
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
}

// startEtcd runs a one-member etcd in-process until the end of t and
// returns its client URL.
// startEtcd is a real etcd in this process, stopped at cleanup.
func startEtcd(t *testing.T) []string { return testutil.StartEtcd(t) }

var prefixes atomic.Int64

// newPrefix returns a prefix no other (sub)test uses, so that tests sharing
// one etcd never see each other's keys.
func newPrefix(t *testing.T) string {
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	return fmt.Sprintf("/test-%d-%s/", prefixes.Add(1), name)
}

func openEtcd(t *testing.T, endpoints []string, prefix string) *store.EtcdStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := store.OpenEtcd(ctx, store.EtcdConfig{Endpoints: endpoints, Prefix: prefix, SessionTTL: testTTL})
	if err != nil {
		t.Fatalf("open etcd store: %v", err)
	}
	return s
}

// openClosing opens a store that is closed at the end of t.
func openClosing(t *testing.T, endpoints []string, prefix string) *store.EtcdStore {
	t.Helper()
	s := openEtcd(t, endpoints, prefix)
	t.Cleanup(func() { s.Close() })
	return s
}

// rawClient is a plain etcd client, to look at and tamper with the keys.
func rawClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEtcd ensures the etcd store meets the shared contract and keeps its data across reopens.
func TestEtcd(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	open := func(t *testing.T) store.Store { return openEtcd(t, endpoints, newPrefix(t)) }
	storetest.RunSuite(t, open)
	t.Run("Durability", func(t *testing.T) {
		reopen := func(t *testing.T, closed store.Store) store.Store {
			return openEtcd(t, endpoints, closed.(*store.EtcdStore).Prefix())
		}
		storetest.RunDurabilitySuite(t, open, reopen)
	})
}

// ---- election ----

type campaignResult struct {
	lead store.Leadership
	err  error
}

// campaign starts s.Campaign in the background; it is canceled at the end
// of t if still waiting.
func campaign(t *testing.T, s *store.EtcdStore) <-chan campaignResult {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := s.Campaign(ctx)
		ch <- campaignResult{l, err}
	}()
	return ch
}

// elected waits up to within for a campaign to win.
func elected(t *testing.T, ch <-chan campaignResult, within time.Duration, who string) store.Leadership {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: campaign: %v", who, r.err)
		}
		return r.lead
	case <-timer.C:
		t.Fatalf("%s not elected within %v", who, within)
		return nil
	}
}

// stillWaiting fails t if a campaign has returned.
func stillWaiting(t *testing.T, ch <-chan campaignResult, who string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s's campaign returned (%v, %v) while another controller leads", who, r.lead, r.err)
	default:
	}
}

func closedWithin(t *testing.T, done <-chan struct{}, within time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s not within %v", what, within)
	}
}

// eventually polls cond until it holds or within passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// candidates returns the election keys under prefix, oldest first.
func candidates(t *testing.T, raw *clientv3.Client, prefix string) []*clientv3.GetResponse {
	t.Helper()
	resp, err := raw.Get(context.Background(), prefix+"election/", clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*clientv3.GetResponse, len(resp.Kvs))
	for i := range resp.Kvs {
		out[i] = &clientv3.GetResponse{Header: resp.Header, Kvs: resp.Kvs[i : i+1]}
	}
	return out
}

// waitCandidates waits until n controllers stand in the election.
func waitCandidates(t *testing.T, raw *clientv3.Client, prefix string, n int) {
	t.Helper()
	eventually(t, 10*time.Second, fmt.Sprintf("%d candidates", n), func() bool { return len(candidates(t, raw, prefix)) == n })
}

// revokeLeader revokes the lease of the elected controller's session, as
// etcd does when the session expires.
func revokeLeader(t *testing.T, raw *clientv3.Client, prefix string) {
	t.Helper()
	c := candidates(t, raw, prefix)
	if len(c) == 0 {
		t.Fatal("no election key to revoke")
	}
	if _, err := raw.Revoke(context.Background(), clientv3.LeaseID(c[0].Kvs[0].Lease)); err != nil {
		t.Fatalf("revoke leader lease: %v", err)
	}
}

// metadata is everything a store holds, to check that a refused write
// changed nothing.
type metadata struct {
	epoch      int32
	brokers    []store.Broker
	partitions []store.Partition
}

func readAll(t *testing.T, s store.Store) metadata {
	t.Helper()
	ctx := context.Background()
	var m metadata
	var err error
	if m.epoch, err = s.ControllerEpoch(ctx); err != nil {
		t.Fatal(err)
	}
	if m.brokers, err = s.Brokers(ctx); err != nil {
		t.Fatal(err)
	}
	if m.partitions, err = s.Partitions(ctx); err != nil {
		t.Fatal(err)
	}
	return m
}

// seed writes a broker (id 1) and a topic "t" with one partition.
func seed(t *testing.T, s store.Store) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.RegisterBroker(ctx, store.Broker{ID: 1, Host: "h1", Port: 9092}); err != nil {
		t.Fatalf("register: %v", err)
	}
	if err := s.CreateTopic(ctx, "t", []store.Partition{{Partition: 0, Leader: 1, ISR: []int32{1}, Replicas: []int32{1}}}, nil); err != nil {
		t.Fatalf("create topic: %v", err)
	}
}

// checkDeposed ensures every write of the deposed store fails with
// ErrNotLeader and that none reached etcd, as the leader's reads show.
func checkDeposed(t *testing.T, deposed, leader store.Store) {
	t.Helper()
	ctx := context.Background()
	before := readAll(t, leader)
	if len(before.brokers) == 0 || len(before.partitions) == 0 {
		t.Fatal("checkDeposed needs a seeded store")
	}
	b := before.brokers[0]
	b.Fenced = true
	p := before.partitions[0]
	next := p.Clone()
	next.Leader, next.LeaderEpoch, next.PartitionEpoch = -1, p.LeaderEpoch+1, p.PartitionEpoch+1
	writes := map[string]func() error{
		"BumpControllerEpoch": func() error { _, err := deposed.BumpControllerEpoch(ctx, 0); return err },
		"RegisterBroker": func() error {
			_, err := deposed.RegisterBroker(ctx, store.Broker{ID: 7, Host: "h7", Port: 1})
			return err
		},
		"UpdateBroker": func() error { return deposed.UpdateBroker(ctx, b) },
		"CreateTopic": func() error {
			return deposed.CreateTopic(ctx, "new", []store.Partition{{Partition: 0, Replicas: []int32{1}}}, nil)
		},
		"DeleteTopic": func() error { return deposed.DeleteTopic(ctx, p.Topic) },
		"CreatePartitions": func() error {
			t, err := leader.Topic(ctx, p.Topic)
			if err != nil {
				return err
			}
			n := int32(len(t.Partitions))
			return deposed.CreatePartitions(ctx, p.Topic, n, []store.Partition{{Partition: n, TopicID: p.TopicID, Replicas: []int32{1}}})
		},
		"UpdatePartitions": func() error {
			return deposed.UpdatePartitions(ctx, []store.PartitionUpdate{{Expected: p.PartitionEpoch, New: next}})
		},
		"CreateAcls": func() error {
			_, err := deposed.CreateAcls(ctx, []store.ACL{{Principal: "p", Operation: "read", ResourceType: "topic", PatternType: "literal", Name: "t"}})
			return err
		},
	}
	for name, write := range writes {
		if err := write(); !errors.Is(err, store.ErrNotLeader) {
			t.Errorf("deposed %s: %v, want ErrNotLeader", name, err)
		}
	}
	if after := readAll(t, leader); !reflect.DeepEqual(after, before) {
		t.Fatalf("a deposed controller's write reached etcd:\n got %+v\nwant %+v", after, before)
	}
	if _, err := leader.Topic(ctx, "new"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("topic created by the deposed controller: %v, want ErrNotFound", err)
	}
	if acls, err := leader.Acls(ctx); err != nil || len(acls) != 0 {
		t.Fatalf("ACLs after the deposed controller's CreateAcls: %+v, %v; want none", acls, err)
	}
}

func bumpEpoch(t *testing.T, s store.Store) int32 {
	t.Helper()
	e, err := s.BumpControllerEpoch(context.Background(), 0)
	if err != nil {
		t.Fatalf("bump controller epoch: %v", err)
	}
	return e
}

// TestEtcdElectionResign ensures that of two controllers exactly one is elected, that the other takes over as soon as it resigns, that the resigned one can no longer write, and that controller epochs rise across the change and a reopen.
func TestEtcdElectionResign(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	raw := rawClient(t, endpoints)
	prefix := newPrefix(t)
	stores := []*store.EtcdStore{openClosing(t, endpoints, prefix), openClosing(t, endpoints, prefix)}
	chans := []<-chan campaignResult{campaign(t, stores[0]), campaign(t, stores[1])}

	var first store.Leadership
	var w int // index of the winner
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case r := <-chans[0]:
		first, w = r.lead, 0
		if r.err != nil {
			t.Fatalf("campaign 0: %v", r.err)
		}
	case r := <-chans[1]:
		first, w = r.lead, 1
		if r.err != nil {
			t.Fatalf("campaign 1: %v", r.err)
		}
	case <-timer.C:
		t.Fatal("nobody elected within 10s")
	}
	winner, loser, loserCh := stores[w], stores[1-w], chans[1-w]
	// Once the loser's key exists it waits behind the winner's: it must not
	// be elected while the winner leads.
	waitCandidates(t, raw, prefix, 2)
	stillWaiting(t, loserCh, "the loser")

	e1 := bumpEpoch(t, winner)
	seed(t, winner)
	stillWaiting(t, loserCh, "the loser")

	if err := first.Resign(context.Background()); err != nil {
		t.Fatalf("resign: %v", err)
	}
	closedWithin(t, first.Done(), time.Second, "Done closed by Resign")
	second := elected(t, loserCh, takeover, "the loser after the winner resigned")
	e2 := bumpEpoch(t, loser)
	if e2 <= e1 {
		t.Fatalf("second leader's controller epoch %d, not above the first's %d", e2, e1)
	}
	checkDeposed(t, winner, loser)
	select {
	case <-second.Done():
		t.Fatal("the new leadership ended")
	default:
	}

	// The epoch is in etcd: a controller started afresh reads it and goes
	// past it when elected.
	if err := loser.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	closedWithin(t, second.Done(), time.Second, "Done closed by Close")
	again := openClosing(t, endpoints, prefix)
	if got, err := again.ControllerEpoch(context.Background()); err != nil || got != e2 {
		t.Fatalf("controller epoch after reopen = %d, %v; want %d", got, err, e2)
	}
	elected(t, campaign(t, again), takeover, "a reopened store")
	if e3 := bumpEpoch(t, again); e3 <= e2 {
		t.Fatalf("third leader's controller epoch %d, not above %d", e3, e2)
	}
}

// TestEtcdElectionSessionRevoked ensures that when the leader's session lease is revoked (as when it expires) the leader learns it, the other controller is elected, the old leader's writes are refused, and it can win again later.
func TestEtcdElectionSessionRevoked(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	raw := rawClient(t, endpoints)
	prefix := newPrefix(t)
	a, b := openClosing(t, endpoints, prefix), openClosing(t, endpoints, prefix)
	la := elected(t, campaign(t, a), 10*time.Second, "a")
	bCh := campaign(t, b)
	waitCandidates(t, raw, prefix, 2)
	e1 := bumpEpoch(t, a)
	seed(t, a)

	revokeLeader(t, raw, prefix)
	closedWithin(t, la.Done(), takeover, "a's Done closed after its lease was revoked")
	lb := elected(t, bCh, takeover, "b after a's lease was revoked")
	if e2 := bumpEpoch(t, b); e2 <= e1 {
		t.Fatalf("b's controller epoch %d, not above a's %d", e2, e1)
	}
	checkDeposed(t, a, b)

	// a stands again and wins when b resigns: its writes work again.
	aCh := campaign(t, a)
	waitCandidates(t, raw, prefix, 2)
	stillWaiting(t, aCh, "a")
	if err := lb.Resign(context.Background()); err != nil {
		t.Fatalf("b resigns: %v", err)
	}
	elected(t, aCh, takeover, "a after b resigned")
	bumpEpoch(t, a)
	checkDeposed(t, b, a)
}

// TestEtcdElectionCrash ensures a leader that dies without resigning is replaced once its lease's TTL runs out.
func TestEtcdElectionCrash(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	raw := rawClient(t, endpoints)
	prefix := newPrefix(t)
	a, b := openClosing(t, endpoints, prefix), openClosing(t, endpoints, prefix)
	la := elected(t, campaign(t, a), 10*time.Second, "a")
	e1 := bumpEpoch(t, a)
	seed(t, a)
	bCh := campaign(t, b)
	waitCandidates(t, raw, prefix, 2)

	store.CrashEtcdForTest(a)
	closedWithin(t, la.Done(), takeover, "a's Done closed after its client died")
	elected(t, bCh, takeover, "b after a crashed")
	if e2 := bumpEpoch(t, b); e2 <= e1 {
		t.Fatalf("b's controller epoch %d, not above a's %d", e2, e1)
	}
	checkDeposed(t, a, b)
}

// TestEtcdFencingIsInTheTransaction ensures a deposed controller that has not noticed its loss still cannot write: etcd itself refuses the write because the election key's revision moved, and the leadership then reports the loss.
func TestEtcdFencingIsInTheTransaction(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	raw := rawClient(t, endpoints)
	prefix := newPrefix(t)
	a, b := openClosing(t, endpoints, prefix), openClosing(t, endpoints, prefix)
	la := elected(t, campaign(t, a), 10*time.Second, "a")
	seed(t, a)
	bCh := campaign(t, b)
	waitCandidates(t, raw, prefix, 2)
	revokeLeader(t, raw, prefix)
	elected(t, bCh, takeover, "b after a's lease was revoked")

	stale := store.KeepStaleLeadershipForTest(a, la)
	checkDeposed(t, a, b)
	closedWithin(t, stale.Done(), time.Second, "the stale leadership's Done closed by a refused write")
}

// TestEtcdCampaignCanceled ensures a campaign given up by its context returns the context's error and withdraws its candidacy, and that closing the leader's store elects the next one.
func TestEtcdCampaignCanceled(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	raw := rawClient(t, endpoints)
	prefix := newPrefix(t)
	a, b := openClosing(t, endpoints, prefix), openClosing(t, endpoints, prefix)
	la := elected(t, campaign(t, a), 10*time.Second, "a")

	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if l, err := b.Campaign(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("campaign with an expiring context: (%v, %v), want context.DeadlineExceeded", l, err)
	}
	waitCandidates(t, raw, prefix, 1)

	// Campaigning again while elected returns the leadership held.
	if l, err := a.Campaign(context.Background()); err != nil || l != la {
		t.Fatalf("second campaign of the leader: (%v, %v), want the leadership held", l, err)
	}

	bCh := campaign(t, b)
	waitCandidates(t, raw, prefix, 2)
	if err := a.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	closedWithin(t, la.Done(), time.Second, "Done closed by Close")
	elected(t, bCh, takeover, "b after a closed")
	if _, err := a.Campaign(context.Background()); !errors.Is(err, store.ErrClosed) {
		t.Fatalf("campaign on a closed store: %v, want ErrClosed", err)
	}
}

// TestEtcdTxnLimits ensures a write over etcd's transaction limits fails whole, with an error naming the etcd setting to raise.
func TestEtcdTxnLimits(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	s := openClosing(t, endpoints, newPrefix(t))
	ctx := context.Background()
	// Fenced, a batch over 128 topics has 129 compares: one too many for
	// etcd's default --max-txn-ops.
	elected(t, campaign(t, s), 10*time.Second, "s")
	const topics = 128
	var batch []store.PartitionUpdate
	for i := range topics {
		name := fmt.Sprintf("t%03d", i)
		if err := s.CreateTopic(ctx, name, []store.Partition{{Partition: 0, Leader: 1, Replicas: []int32{1}}}, nil); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		batch = append(batch, store.PartitionUpdate{Expected: 0, New: store.Partition{Topic: name, Leader: 2, PartitionEpoch: 1, Replicas: []int32{1}}})
	}
	before := readAll(t, s)
	err := s.UpdatePartitions(ctx, batch)
	if err == nil || !strings.Contains(err.Error(), "--max-txn-ops") {
		t.Fatalf("update of %d topics at once: %v, want an error naming --max-txn-ops", topics, err)
	}
	if after := readAll(t, s); !reflect.DeepEqual(after, before) {
		t.Fatal("a refused batch changed the store")
	}

	// About 1.7 MB of JSON: over etcd's default --max-request-bytes.
	big := make([]store.Partition, 15000)
	for i := range big {
		big[i] = store.Partition{Partition: int32(i), Leader: 1, ISR: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}}
	}
	err = s.CreateTopic(ctx, "big", big, nil)
	if err == nil || !strings.Contains(err.Error(), "--max-request-bytes") || !strings.Contains(err.Error(), "big") {
		t.Fatalf("create a topic of %d partitions: %v, want an error naming the topic and --max-request-bytes", len(big), err)
	}
	if _, err := s.Topic(ctx, "big"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("refused topic: %v, want ErrNotFound", err)
	}
}

// TestEtcdOpen ensures OpenEtcd refuses a missing endpoint list and an unreachable etcd within its dial timeout.
func TestEtcdOpen(t *testing.T) {
	checkLeaks(t)
	if _, err := store.OpenEtcd(context.Background(), store.EtcdConfig{}); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("open without endpoints: %v, want ErrInvalid", err)
	}
	dead := testutil.FreeURL(t) // nobody listens there any more
	start := time.Now()
	s, err := store.OpenEtcd(context.Background(), store.EtcdConfig{Endpoints: []string{dead.String()}, DialTimeout: 300 * time.Millisecond})
	if err == nil {
		s.Close()
		t.Fatal("opened a store on an unreachable etcd")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("open on an unreachable etcd took %v, dial timeout 300ms", d)
	}
}

// TestEtcdConcurrentUpdatesOfOneTopic ensures updates of different partitions of one topic, which share one etcd key, do not fail each other: a writer whose key moved reads again and still finds its expected epoch.
func TestEtcdConcurrentUpdatesOfOneTopic(t *testing.T) {
	checkLeaks(t)
	endpoints := startEtcd(t)
	s := openClosing(t, endpoints, newPrefix(t))
	ctx := context.Background()
	const n = 8
	parts := make([]store.Partition, n)
	for i := range parts {
		parts[i] = store.Partition{Partition: int32(i), Leader: 1, Replicas: []int32{1, 2}}
	}
	if err := s.CreateTopic(ctx, "t", parts, nil); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		go func() {
			<-start
			next := store.Partition{Topic: "t", Partition: int32(i), Leader: 2, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2}}
			errs <- s.UpdatePartitions(ctx, []store.PartitionUpdate{{Expected: 0, New: next}})
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("update of its own partition: %v, want success", err)
		}
	}
	got, err := s.Topic(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range got.Partitions {
		if p.PartitionEpoch != 1 || p.Leader != 2 {
			t.Errorf("partition %d = %+v, want leader 2 at partition epoch 1", p.Partition, p)
		}
	}
}
