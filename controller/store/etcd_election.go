package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Campaign stands this store's controller in the election under
// Prefix+"election" and blocks until it is elected or ctx is done. The
// candidacy is a key bound to a new session lease of SessionTTL; the oldest
// candidate leads. From the win on, every write of s is fenced by that key
// (see commit) and fails with ErrNotLeader once the leadership is lost.
//
// While s already holds a leadership, Campaign returns it: a second
// candidacy of the same store would wait behind its own key forever.
func (s *EtcdStore) Campaign(ctx context.Context) (Leadership, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	select {
	case s.campaigning <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.campaigning }()
	if l := s.leadership(); l != nil {
		if !l.lost() {
			return l, nil
		}
		// Let the lost term's session go; s stays fenced by it (writes
		// fail with ErrNotLeader) until this campaign wins.
		l.end()
	}
	for {
		l, err := s.campaignOnce(ctx)
		if err != nil {
			return nil, fmt.Errorf("campaign for controller under %s: %w", s.prefix+etcdElection, s.campaignErr(ctx, err))
		}
		if l != nil {
			return l, nil
		}
		// Our session ended before we were elected: stand again.
	}
}

// campaignErr names the cause of a failed campaign the caller can test.
func (s *EtcdStore) campaignErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return s.clientErr(err)
}

// campaignOnce runs one candidacy with a new session. It returns nil, nil
// if the session ended before the win, so the caller stands again.
func (s *EtcdStore) campaignOnce(ctx context.Context) (*etcdLeadership, error) {
	session, err := s.newSession(ctx)
	if err != nil {
		return nil, err
	}
	// Stop waiting when our own lease dies: the candidacy is void then.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(session.Ctx(), cancel)
	defer stop()

	election := concurrency.NewElection(session, s.prefix+etcdElection)
	if err := election.Campaign(cctx, s.candidate); err != nil {
		sessionEnded := session.Ctx().Err() != nil // before closeSession ends it
		s.closeSession(session)
		if ctx.Err() == nil && sessionEnded {
			return nil, nil
		}
		return nil, err
	}
	// Campaign also returns nil when the older candidates are gone but our
	// own key went with our lease meanwhile: check we hold it before
	// trusting it, and watch it from that read on.
	resp, err := s.client.Get(ctx, election.Key())
	if err != nil {
		s.closeSession(session)
		return nil, err
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != election.Rev() {
		s.log.Warn().Str("key", election.Key()).Msg("controller election key lost while campaigning; standing again")
		s.closeSession(session)
		return nil, nil
	}
	l := s.newLeadership(session, election, resp.Header.Revision)
	if !s.install(l) {
		l.end()
		return nil, ErrClosed
	}
	s.log.Info().Str("key", l.key).Int64("revision", l.rev).Msg("elected the active controller")
	return l, nil
}

// newSession grants the election lease with ctx (concurrency.NewSession
// would grant it with the client's context, deaf to ctx) and keeps it alive.
func (s *EtcdStore) newSession(ctx context.Context) (*concurrency.Session, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	lease, err := s.client.Grant(ctx, s.ttl)
	if err != nil {
		return nil, err
	}
	session, err := concurrency.NewSession(s.client, concurrency.WithLease(lease.ID), concurrency.WithTTL(int(s.ttl)))
	if err == nil && session == nil {
		err = errors.New("lease keep-alive refused")
	}
	if err != nil {
		rctx, cancel := context.WithTimeout(s.client.Ctx(), time.Duration(s.ttl)*time.Second)
		defer cancel()
		s.client.Revoke(rctx, lease.ID) // best effort: it expires anyway
		return nil, err
	}
	return session, nil
}

// closeSession stops renewing the session's lease and revokes it, which
// deletes our election key at once instead of after the TTL.
func (s *EtcdStore) closeSession(session *concurrency.Session) {
	if err := session.Close(); err != nil {
		s.log.Debug().Err(err).Msg("revoke controller election lease (it expires anyway)")
	}
}

// install makes l the leadership that fences s's writes, unless s closed.
func (s *EtcdStore) install(l *etcdLeadership) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.lead = l
	return true
}

func (s *EtcdStore) leadership() *etcdLeadership {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lead
}

// etcdLeadership is one won election: the election key and its creation
// revision, which every fenced write compares.
type etcdLeadership struct {
	key string
	rev int64
	log zerolog.Logger

	done     chan struct{}
	loseOnce sync.Once

	session   *concurrency.Session
	stopWatch context.CancelFunc
	watching  sync.WaitGroup

	mu       sync.Mutex // guards election and ended
	election *concurrency.Election
	ended    bool
}

var _ Leadership = (*etcdLeadership)(nil)

// newLeadership starts watching the leadership won at revision atRev.
func (s *EtcdStore) newLeadership(session *concurrency.Session, election *concurrency.Election, atRev int64) *etcdLeadership {
	// Not derived from the client's context: when the client dies (a
	// crash, CrashEtcdForTest) the watch must end as a loss, not as a stop.
	ctx, cancel := context.WithCancel(context.Background())
	l := &etcdLeadership{
		key:       election.Key(),
		rev:       election.Rev(),
		log:       s.log,
		done:      make(chan struct{}),
		session:   session,
		stopWatch: cancel,
		election:  election,
	}
	events := s.client.Watch(ctx, l.key, clientv3.WithRev(atRev+1))
	l.watching.Go(func() { l.watch(ctx, events) })
	return l
}

// watch closes Done when the leadership ends under us: the session's lease
// could not be renewed or expired, or the election key was deleted (by
// etcd with the lease, or by an operator). Resign and Close end it by
// canceling ctx.
func (l *etcdLeadership) watch(ctx context.Context, events clientv3.WatchChan) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.session.Done():
			l.lose("the election session expired or could not be renewed")
			return
		case wr, ok := <-events:
			if ctx.Err() != nil {
				return
			}
			if !ok || wr.Err() != nil {
				// We can no longer tell whether we lead: assume not.
				l.lose(fmt.Sprintf("the watch on the election key failed: %v", wr.Err()))
				return
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					l.lose("the election key was deleted")
					return
				}
			}
		}
	}
}

func (l *etcdLeadership) Done() <-chan struct{} { return l.done }

func (l *etcdLeadership) lost() bool {
	select {
	case <-l.done:
		return true
	default:
		return false
	}
}

// lose marks the leadership lost, once: Done closes and fenced writes fail
// without asking etcd.
func (l *etcdLeadership) lose(why string) {
	l.loseOnce.Do(func() {
		l.log.Warn().Str("key", l.key).Int64("revision", l.rev).Str("reason", why).Msg("no longer the active controller")
		close(l.done)
	})
}

// cmp is the fencing compare: our election key still has the creation
// revision it had when we won. A key deleted (expired lease, resign) or
// created again by someone else fails it.
func (l *etcdLeadership) cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

// heldIn tells whether a read of the election key shows it still ours.
func (l *etcdLeadership) heldIn(r interface {
	GetKvs() []*mvccpb.KeyValue
}) bool {
	kvs := r.GetKvs()
	return len(kvs) == 1 && kvs[0].CreateRevision == l.rev
}

func (l *etcdLeadership) notLeader() error {
	return fmt.Errorf("leadership of election key %s (revision %d) lost: %w", l.key, l.rev, ErrNotLeader)
}

// Resign gives the leadership up: fenced writes fail from now on, the
// election key is deleted so that the next candidate is elected at once,
// and the session's lease is revoked.
func (l *etcdLeadership) Resign(ctx context.Context) error {
	l.lose("resigned")
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return nil // already given up with the store's Close
	}
	err := l.election.Resign(ctx)
	l.mu.Unlock()
	// Even if the delete failed, revoking the lease deletes the key.
	l.end()
	if err != nil {
		return fmt.Errorf("resign election key %s: %w", l.key, err)
	}
	return nil
}

// end stops the watch and closes the session, revoking its lease. Done must
// be closed first, so no write relies on l meanwhile.
func (l *etcdLeadership) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return
	}
	l.ended = true
	if l.stopWatch != nil {
		l.stopWatch()
		l.watching.Wait()
	}
	if err := l.session.Close(); err != nil {
		l.log.Debug().Err(err).Msg("revoke controller election lease (it expires anyway)")
	}
}

// ActiveCandidate is the election key's value of the elected controller
// (its EtcdConfig.Advertise address, or host and pid): the oldest
// candidate's key, as concurrency.Election decides. "" when none campaigns.
func (s *EtcdStore) ActiveCandidate(ctx context.Context) (string, error) {
	if err := s.begin(ctx); err != nil {
		return "", err
	}
	resp, err := s.client.Get(ctx, s.prefix+etcdElection+"/", append(clientv3.WithFirstCreate(), clientv3.WithPrefix())...)
	if err != nil {
		return "", s.clientErr(err)
	}
	if len(resp.Kvs) == 0 {
		return "", nil
	}
	return string(resp.Kvs[0].Value), nil
}
