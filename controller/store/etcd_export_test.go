package store

// Test hooks for the external etcd tests (package store_test): they stage
// what the public API cannot, a crash and a deposed controller that has not
// noticed yet.

// CrashEtcdForTest closes s's etcd client the way a crash would: the
// election lease is neither revoked nor renewed any more, so etcd deletes
// the election key only when the TTL runs out.
func CrashEtcdForTest(s *EtcdStore) { s.client.Close() }

// KeepStaleLeadershipForTest makes s act on lead, a leadership it won and
// has since lost, as if it had not noticed: lead's fence is back on s's
// writes and nothing reports the loss locally, so only etcd's compare of
// the election key can refuse them. It returns the stale Leadership.
func KeepStaleLeadershipForTest(s *EtcdStore, lead Leadership) Leadership {
	old := lead.(*etcdLeadership)
	old.lose("replaced by a stale copy for a test")
	old.end()
	stale := &etcdLeadership{
		key:      old.key,
		rev:      old.rev,
		log:      old.log,
		done:     make(chan struct{}),
		session:  old.session,
		election: old.election,
		ended:    true, // old already closed the session
	}
	s.mu.Lock()
	s.lead = stale
	s.mu.Unlock()
	return stale
}

// BeforeTxnForTest makes s call f before each transaction attempt of a
// write, so a test can hold the link at that moment. Set it before the
// write starts.
func BeforeTxnForTest(s *EtcdStore, f func()) { s.beforeTxn = f }
