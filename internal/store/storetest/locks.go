package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// lockTests are the conformance tests of store.LockStore.
var lockTests = []conformanceTest{
	{"Lock_AcquireIdempotentAndExclusive", testLockAcquire},
	{"Lock_TokensGrowAcrossReleaseAndExpiry", testLockTokens},
	{"Lock_RenewAndReleaseCheckTheLease", testLockRenewRelease},
	{"Lock_ExpiryFreesTheLock", testLockExpiry},
	{"Lock_Semaphore", testLockSemaphore},
	{"Lock_ConcurrentAcquireOneHolder", testLockConcurrent},
	{"Lock_GetAndListPages", testLockList},
	{"Lock_ListenHearsReleasesOrIsUnsupported", testLockListen},
}

// testLockListen: LockListen either says at once that the dialect cannot
// announce releases (errors.ErrUnsupported), or calls ready and then hears
// a release made through the store.
func testLockListen(t *testing.T, s store.Store) {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	ready, heard, ended := make(chan struct{}), make(chan string, 16), make(chan error, 1)
	go func() { ended <- s.LockListen(ctx, func() { close(ready) }, func(name string) { heard <- name }) }()
	select {
	case err := <-ended:
		if !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("LockListen ended before it listened: %v, want errors.ErrUnsupported or to listen", err)
		}
		return
	case <-ready:
	}
	l := mustHold(t, acquire(t, s, "heard", "o", time.Minute, 1), "o")
	if _, err := s.LockRelease(ctx, &store.LockReleaseParams{Name: l.Name, Owner: l.Owner, Token: l.Token}); err != nil {
		t.Fatal(err)
	}
	select {
	case name := <-heard:
		if name != "heard" {
			t.Errorf("heard the release of %q, want \"heard\"", name)
		}
	case <-ctx.Done():
		t.Fatal("the release was not heard")
	}
	cancel()
	<-ended
}

func acquire(t *testing.T, s store.Store, name, owner string, ttl time.Duration, limit int) *store.LockAcquireResult {
	t.Helper()
	return must(s.LockAcquire(ctxT(t), &store.LockAcquireParams{Name: name, Owner: owner, TTL: ttl, Limit: limit}))(t)
}

func mustHold(t *testing.T, res *store.LockAcquireResult, owner string) *store.LockLease {
	t.Helper()
	if res.Lease == nil {
		t.Fatalf("%s did not get the lock; holders %v", owner, owners(res.Holders))
	}
	if res.Lease.Owner != owner {
		t.Fatalf("lease owner = %q, want %q", res.Lease.Owner, owner)
	}
	return res.Lease
}

func owners(ls []*store.LockLease) []string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%s#%d", l.Owner, l.Token))
	}
	return out
}

func testLockAcquire(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	now := must(s.Now(ctx))(t)
	a := mustHold(t, acquire(t, s, "job:nightly", "host-a:1", 90*time.Second+1500*time.Microsecond, 1), "host-a:1")
	if a.Name != "job:nightly" || a.Token != 1 || a.Limit != 1 {
		t.Fatalf("first lease = %+v, want token 1, limit 1", a)
	}
	if d := a.AcquiredAt.Sub(now); d < -time.Second || d > 30*time.Second {
		t.Fatalf("acquired_at %v is %v from the database's now %v", a.AcquiredAt, d, now)
	}
	if got, want := a.ExpiresAt.Sub(a.AcquiredAt), 90*time.Second+1500*time.Microsecond; got != want {
		t.Fatalf("expires_at - acquired_at = %v, want %v (to the microsecond)", got, want)
	}
	// The same owner again gets the same lease back: a retried acquire.
	again := mustHold(t, acquire(t, s, "job:nightly", "host-a:1", time.Minute, 1), "host-a:1")
	if again.Token != a.Token || !again.ExpiresAt.Equal(a.ExpiresAt) {
		t.Fatalf("repeated acquire = %+v, want the first lease %+v", again, a)
	}
	// Someone else is refused and told who holds it.
	res := acquire(t, s, "job:nightly", "host-b:2", time.Minute, 1)
	if res.Lease != nil || len(res.Holders) != 1 || res.Holders[0].Owner != "host-a:1" || res.Holders[0].Token != 1 {
		t.Fatalf("second owner got lease %+v, holders %v; want refused, holder host-a:1#1", res.Lease, owners(res.Holders))
	}
	// Another name is independent.
	if b := mustHold(t, acquire(t, s, "job:other", "host-b:2", time.Minute, 1), "host-b:2"); b.Token != 1 {
		t.Fatalf("token of a new name = %d, want 1", b.Token)
	}
}

func testLockTokens(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	var last int64
	for i := range 4 {
		owner := fmt.Sprintf("o%d", i)
		// Even turns release the lease (a long TTL, so that a loaded
		// machine cannot expire it first); odd ones let it expire.
		ttl := time.Minute
		if i%2 == 1 {
			ttl = 200 * time.Millisecond
		}
		l := mustHold(t, acquire(t, s, "n", owner, ttl, 1), owner)
		if l.Token <= last {
			t.Fatalf("token %d after %d: not increasing", l.Token, last)
		}
		last = l.Token
		if i%2 == 0 {
			must(s.LockRelease(ctx, &store.LockReleaseParams{Name: "n", Owner: owner, Token: l.Token}))(t)
		} else {
			waitFree(t, s, "n")
		}
	}
}

// waitFree waits until the lock has no live holder.
func waitFree(t *testing.T, s store.Store, name string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(must(s.LockGet(ctxT(t), name))(t)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("lock %q still held after 30s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testLockRenewRelease(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	l := mustHold(t, acquire(t, s, "r", "me", time.Minute, 1), "me")
	bad := []struct {
		what  string
		owner string
		token int64
	}{
		{"wrong token", "me", l.Token + 1},
		{"stale token", "me", l.Token - 1},
		{"wrong owner", "you", l.Token},
	}
	for _, b := range bad {
		if _, err := s.LockRenew(ctx, &store.LockRenewParams{Name: "r", Owner: b.owner, Token: b.token, TTL: time.Hour}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("renew with %s: err = %v, want ErrNotFound", b.what, err)
		}
		if _, err := s.LockRelease(ctx, &store.LockReleaseParams{Name: "r", Owner: b.owner, Token: b.token}); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("release with %s: err = %v, want ErrNotFound", b.what, err)
		}
	}
	if _, err := s.LockRelease(ctx, &store.LockReleaseParams{Name: "other", Owner: "me", Token: l.Token}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("release of another name: err = %v, want ErrNotFound", err)
	}
	// Nothing changed.
	hs := must(s.LockGet(ctx, "r"))(t)
	if len(hs) != 1 || hs[0].Token != l.Token || !hs[0].ExpiresAt.Equal(l.ExpiresAt) {
		t.Fatalf("after bad renews and releases holders = %+v, want the lease %+v unchanged", hs, l)
	}
	r := must(s.LockRenew(ctx, &store.LockRenewParams{Name: "r", Owner: "me", Token: l.Token, TTL: time.Hour}))(t)
	if r.Token != l.Token || !r.ExpiresAt.After(l.ExpiresAt) || !r.AcquiredAt.Equal(l.AcquiredAt) {
		t.Fatalf("renewed lease = %+v, want the same lease expiring later than %v", r, l.ExpiresAt)
	}
	rel := must(s.LockRelease(ctx, &store.LockReleaseParams{Name: "r", Owner: "me", Token: l.Token}))(t)
	if rel.Token != l.Token || rel.Owner != "me" {
		t.Fatalf("released lease = %+v", rel)
	}
	if _, err := s.LockRelease(ctx, &store.LockReleaseParams{Name: "r", Owner: "me", Token: l.Token}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second release: err = %v, want ErrNotFound", err)
	}
	if _, err := s.LockRenew(ctx, &store.LockRenewParams{Name: "r", Owner: "me", Token: l.Token, TTL: time.Hour}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renew after release: err = %v, want ErrNotFound", err)
	}
	if hs := must(s.LockGet(ctx, "r"))(t); len(hs) != 0 {
		t.Fatalf("holders after release = %v", owners(hs))
	}
}

func testLockExpiry(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	l := mustHold(t, acquire(t, s, "e", "gone", 1500*time.Millisecond, 1), "gone")
	if res := acquire(t, s, "e", "next", time.Minute, 1); res.Lease != nil {
		t.Fatalf("acquired a lock held for 1.5s: %+v", res.Lease)
	}
	waitFree(t, s, "e")
	// An expired lease can no longer be renewed or released, even before
	// anyone else takes the lock.
	if _, err := s.LockRenew(ctx, &store.LockRenewParams{Name: "e", Owner: "gone", Token: l.Token, TTL: time.Hour}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renew of an expired lease: err = %v, want ErrNotFound", err)
	}
	if _, err := s.LockRelease(ctx, &store.LockReleaseParams{Name: "e", Owner: "gone", Token: l.Token}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("release of an expired lease: err = %v, want ErrNotFound", err)
	}
	n := mustHold(t, acquire(t, s, "e", "next", time.Minute, 1), "next")
	if n.Token <= l.Token {
		t.Fatalf("token after expiry = %d, want > %d", n.Token, l.Token)
	}
	// The old holder acquiring again is a newcomer now.
	if res := acquire(t, s, "e", "gone", time.Minute, 1); res.Lease != nil {
		t.Fatalf("expired holder got the lock back while held: %+v", res.Lease)
	}
}

func testLockSemaphore(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	seen := map[int64]bool{}
	for i := range 3 {
		owner := fmt.Sprintf("w%d", i)
		l := mustHold(t, acquire(t, s, "sem", owner, time.Minute, 3), owner)
		if seen[l.Token] {
			t.Fatalf("token %d handed out twice", l.Token)
		}
		seen[l.Token] = true
	}
	res := acquire(t, s, "sem", "w3", time.Minute, 3)
	if res.Lease != nil || len(res.Holders) != 3 {
		t.Fatalf("fourth holder of a 3-semaphore: lease %+v, holders %v", res.Lease, owners(res.Holders))
	}
	// A newcomer asking for a larger limit does not push past the limit
	// the holders accepted.
	if res := acquire(t, s, "sem", "w3", time.Minute, 10); res.Lease != nil {
		t.Fatalf("limit 10 joined holders that accepted 3: %+v", res.Lease)
	}
	l0 := must(s.LockGet(ctx, "sem"))(t)[0]
	must(s.LockRelease(ctx, &store.LockReleaseParams{Name: "sem", Owner: l0.Owner, Token: l0.Token}))(t)
	// An exclusive request is refused while others hold the semaphore.
	if res := acquire(t, s, "sem", "x", time.Minute, 1); res.Lease != nil {
		t.Fatalf("limit 1 acquired beside 2 holders: %+v", res.Lease)
	}
	mustHold(t, acquire(t, s, "sem", "w3", time.Minute, 3), "w3")

	// An exclusive holder is never joined, whatever limit others ask for.
	mustHold(t, acquire(t, s, "excl", "only", time.Minute, 1), "only")
	if res := acquire(t, s, "excl", "other", time.Minute, 5); res.Lease != nil {
		t.Fatalf("limit 5 joined an exclusive holder: %+v", res.Lease)
	}
}

func testLockConcurrent(t *testing.T, s store.Store) {
	const n = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		leases []*store.LockLease
		errs   []error
	)
	for i := range n {
		wg.Go(func() {
			res, err := s.LockAcquire(ctxT(t), &store.LockAcquireParams{Name: "hot", Owner: fmt.Sprintf("c%d", i), TTL: time.Minute, Limit: 1})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else if res.Lease != nil {
				leases = append(leases, res.Lease)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(leases) != 1 || leases[0].Token != 1 {
		t.Fatalf("%d concurrent acquires gave leases %v, want exactly one with token 1", n, owners(leases))
	}
}

func testLockList(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if ls := must(s.LockList(ctx, &store.LockListParams{Limit: 10}))(t); len(ls) != 0 {
		t.Fatalf("list of no locks = %v", owners(ls))
	}
	mustHold(t, acquire(t, s, "b", "b1", time.Minute, 2), "b1")
	mustHold(t, acquire(t, s, "b", "b2", time.Minute, 2), "b2")
	mustHold(t, acquire(t, s, "a", "a1", time.Minute, 1), "a1")
	mustHold(t, acquire(t, s, "c", "c1", time.Minute, 1), "c1")
	l := mustHold(t, acquire(t, s, "d", "d1", time.Minute, 1), "d1")
	must(s.LockRelease(ctx, &store.LockReleaseParams{Name: "d", Owner: "d1", Token: l.Token}))(t)

	hs := must(s.LockGet(ctx, "b"))(t)
	if got := fmt.Sprint(owners(hs)); got != "[b1#1 b2#2]" {
		t.Fatalf("LockGet(b) = %s, want [b1#1 b2#2]", got)
	}
	if hs := must(s.LockGet(ctx, "never"))(t); len(hs) != 0 {
		t.Fatalf("LockGet of an unknown name = %v", owners(hs))
	}
	page1 := must(s.LockList(ctx, &store.LockListParams{Limit: 2}))(t)
	if got := fmt.Sprint(owners(page1)); got != "[a1#1 b1#1 b2#2]" {
		t.Fatalf("first page = %s, want [a1#1 b1#1 b2#2]", got)
	}
	page2 := must(s.LockList(ctx, &store.LockListParams{After: "b", Limit: 2}))(t)
	if got := fmt.Sprint(owners(page2)); got != "[c1#1]" {
		t.Fatalf("second page = %s, want [c1#1] (d was released)", got)
	}
}

// LockAcquireBehindFrozenTx checks that an acquire of a name whose row
// another transaction keeps locked (an acquire or release of a node frozen
// half-way: SIGSTOP, a stalled VM) waits for it no longer than
// store.LockWait, and then answers that it cannot have the lock, naming the
// holders as last committed. freeze opens a transaction on s's database
// that locks the name's row in locks, and returns the function that rolls
// it back. It is for the dialects whose transactions lock rows (MySQL,
// PostgreSQL).
func LockAcquireBehindFrozenTx(t *testing.T, s store.Store, freeze func(t *testing.T, name string) (rollback func())) {
	ctx := ctxT(t)
	a := must(s.LockAcquire(ctx, &store.LockAcquireParams{Name: "l", Owner: "a", TTL: time.Minute, Limit: 1}))(t).Lease
	rollback := freeze(t, "l")
	defer rollback()
	start := time.Now()
	res := must(s.LockAcquire(ctx, &store.LockAcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1}))(t)
	if took := time.Since(start); took > store.LockWait+time.Second {
		t.Errorf("acquire took %v behind a frozen transaction, want about store.LockWait (%v)", took, store.LockWait)
	}
	if res.Lease != nil || len(res.Holders) != 1 || res.Holders[0].Owner != "a" {
		t.Fatalf("acquire behind a frozen transaction: lease %+v, holders %+v; want none, and holder a", res.Lease, res.Holders)
	}
	rollback()
	must(s.LockRelease(ctx, &store.LockReleaseParams{Name: "l", Owner: "a", Token: a.Token}))(t)
	b := must(s.LockAcquire(ctx, &store.LockAcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1}))(t).Lease
	if b == nil || b.Token <= a.Token {
		t.Fatalf("acquire after the frozen transaction ended: %+v, want a lease with a token above %d", b, a.Token)
	}
}
