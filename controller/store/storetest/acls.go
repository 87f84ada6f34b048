package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/replicad/replicad/controller/store"
)

func acl(principal, op, pattern, name string) store.ACL {
	return store.ACL{Principal: principal, Operation: op, ResourceType: "topic", PatternType: pattern, Name: name}
}

func wantACLs(t *testing.T, what string, got []store.ACL, want ...store.ACL) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: %+v, want %+v", what, got, want)
	}
}

// testACLs ensures ACLs are created once, listed sorted, and deleted by
// filters whose empty fields match anything.
func testACLs(t *testing.T, s store.Store) {
	ctx := context.Background()
	wantACLs(t, "empty store", must(s.Acls(ctx))(t))
	alice := "spiffe://replicad/client/alice"
	bob := "spiffe://replicad/client/bob"
	w := acl(alice, "write", "literal", "orders")
	r := acl(alice, "read", "literal", "orders")
	p := acl(bob, "read", "prefix", "ord")
	created := must(s.CreateAcls(ctx, []store.ACL{w, r, w}))(t)
	wantACLs(t, "created", created, r, w)
	created = must(s.CreateAcls(ctx, []store.ACL{p, r}))(t)
	wantACLs(t, "created again", created, p)
	wantACLs(t, "stored", must(s.Acls(ctx))(t), r, w, p)

	deleted := must(s.DeleteAcls(ctx, []store.ACLFilter{{Principal: "nobody"}}))(t)
	wantACLs(t, "deleted by a filter matching none", deleted)
	deleted = must(s.DeleteAcls(ctx, nil))(t)
	wantACLs(t, "deleted without filters", deleted)
	deleted = must(s.DeleteAcls(ctx, []store.ACLFilter{{Principal: alice, Operation: "write"}, {PatternType: "prefix"}}))(t)
	wantACLs(t, "deleted", deleted, w, p)
	wantACLs(t, "left", must(s.Acls(ctx))(t), r)
	deleted = must(s.DeleteAcls(ctx, []store.ACLFilter{{}}))(t)
	wantACLs(t, "deleted by the match-all filter", deleted, r)
	wantACLs(t, "left at the end", must(s.Acls(ctx))(t))
}

// testACLsInvalid ensures an ACL with an empty field is refused with
// ErrInvalid and nothing of its batch is stored.
func testACLsInvalid(t *testing.T, s store.Store) {
	ctx := context.Background()
	good := acl("spiffe://replicad/client/a", "read", "literal", "t")
	for _, bad := range []store.ACL{
		acl("", "read", "literal", "t"),
		acl("p", "", "literal", "t"),
		acl("p", "read", "", "t"),
		acl("p", "read", "literal", ""),
		{Principal: "p", Operation: "read", PatternType: "literal", Name: "t"},
		acl("p\x00q", "read", "literal", "t"),
	} {
		if _, err := s.CreateAcls(ctx, []store.ACL{good, bad}); !errors.Is(err, store.ErrInvalid) {
			t.Fatalf("create %+v: err %v, want ErrInvalid", bad, err)
		}
	}
	wantACLs(t, "after refused creates", must(s.Acls(ctx))(t))
}

// testConcurrentACLs ensures concurrent creates and deletes lose nothing:
// each is applied to the set the other left.
func testConcurrentACLs(t *testing.T, s store.Store) {
	ctx := context.Background()
	const n = 8
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.CreateAcls(ctx, []store.ACL{acl(fmt.Sprintf("p%d", i), "read", "literal", "t")})
		}()
	}
	wg.Wait()
	noErrors(t, errs)
	if got := must(s.Acls(ctx))(t); len(got) != n {
		t.Fatalf("%d ACLs after %d concurrent creates: %+v", len(got), n, got)
	}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.DeleteAcls(ctx, []store.ACLFilter{{Principal: fmt.Sprintf("p%d", i)}})
		}()
	}
	wg.Wait()
	noErrors(t, errs)
	wantACLs(t, "after concurrent deletes", must(s.Acls(ctx))(t))
}

// testACLsPersist ensures ACLs survive a restart.
func testACLsPersist(t *testing.T, s store.Store, restart func(store.Store) store.Store) {
	ctx := context.Background()
	a := acl("spiffe://replicad/client/a", "write", "prefix", "logs-")
	if _, err := s.CreateAcls(ctx, []store.ACL{a}); err != nil {
		t.Fatal(err)
	}
	s = restart(s)
	wantACLs(t, "after restart", must(s.Acls(ctx))(t), a)
}
