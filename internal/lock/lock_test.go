package lock_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/rowq/rowq/internal/lock"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/postgres"
	"github.com/rowq/rowq/internal/testworker"
)

// newService starts a Service on a store and stops it when the test ends.
func newService(t *testing.T, st store.Store, poll time.Duration) *lock.Service {
	t.Helper()
	s := lock.New(lock.Config{Store: st, PollInterval: poll})
	s.Start(t.Context())
	t.Cleanup(func() { s.Stop(context.Background()) })
	return s
}

func mustAcquire(t *testing.T, s *lock.Service, p *lock.AcquireParams) *store.LockLease {
	t.Helper()
	l, err := s.Acquire(t.Context(), p)
	if err != nil {
		t.Fatalf("acquire %q for %q: %v", p.Name, p.Owner, err)
	}
	return l
}

type result struct {
	lease *store.LockLease
	err   error
}

// acquireAsync starts an acquire and returns where its result will arrive.
func acquireAsync(ctx context.Context, s *lock.Service, p *lock.AcquireParams) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := s.Acquire(ctx, p)
		ch <- result{l, err}
	}()
	return ch
}

// waitResult waits for an acquire's result; the acquire bounds its own wait.
func waitResult(t *testing.T, ch <-chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(2 * time.Minute):
		t.Fatal("acquire did not return within 2 minutes")
		return result{}
	}
}

// A waiter on the node that serves the release is woken by it: with a poll
// interval of an hour, nothing else could give it the lock within its wait.
func TestAcquire_WaitWokenByReleaseOnSameNode(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := newService(t, dbtest.Open(t, dialect), time.Hour)
		held := mustAcquire(t, s, &lock.AcquireParams{Name: "l", Owner: "a", TTL: time.Hour, Limit: 1})
		ch := acquireAsync(t.Context(), s, &lock.AcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1, Wait: 30 * time.Second})
		// Let the waiter make its first attempt and sleep (it is not
		// required for the test to hold: a release before it waits only
		// lets its first attempt succeed).
		time.Sleep(100 * time.Millisecond)
		if _, err := s.Release(t.Context(), &store.LockReleaseParams{Name: "l", Owner: "a", Token: held.Token}); err != nil {
			t.Fatal(err)
		}
		r := waitResult(t, ch)
		if r.err != nil || r.lease.Owner != "b" || r.lease.Token <= held.Token {
			t.Fatalf("waiter got %+v, %v; want b's lease with a token above %d", r.lease, r.err, held.Token)
		}
	})
}

// A waiter on another node is woken by NOTIFY on PostgreSQL (its poll
// interval is an hour there) and by polling elsewhere.
func TestAcquire_WaitWokenByReleaseOnOtherNode(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		poll := lock.DefaultPollInterval
		if dialect == "postgres" {
			poll = time.Hour
		}
		a := newService(t, dbtest.OpenURL(t, url), poll)
		b := newService(t, dbtest.OpenURL(t, url), poll)
		held := mustAcquire(t, a, &lock.AcquireParams{Name: "l", Owner: "a", TTL: time.Hour, Limit: 1})
		ch := acquireAsync(t.Context(), b, &lock.AcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1, Wait: 30 * time.Second})
		time.Sleep(200 * time.Millisecond) // b's first attempt fails and it listens
		if _, err := a.Release(t.Context(), &store.LockReleaseParams{Name: "l", Owner: "a", Token: held.Token}); err != nil {
			t.Fatal(err)
		}
		r := waitResult(t, ch)
		if r.err != nil || r.lease.Owner != "b" {
			t.Fatalf("waiter on the other node got %+v, %v; want b's lease", r.lease, r.err)
		}
	})
}

// A waiter sees an expired lease as free, and gives up when its wait ends,
// naming the holders.
func TestAcquire_WaitForExpiryAndDeadline(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := newService(t, dbtest.Open(t, dialect), 0)
		held := mustAcquire(t, s, &lock.AcquireParams{Name: "l", Owner: "crashed", TTL: 500 * time.Millisecond, Limit: 1})
		l := mustAcquire(t, s, &lock.AcquireParams{Name: "l", Owner: "next", TTL: time.Hour, Limit: 1, Wait: 30 * time.Second})
		if l.Token <= held.Token {
			t.Fatalf("token after expiry %d, want > %d", l.Token, held.Token)
		}

		start := time.Now()
		_, err := s.Acquire(t.Context(), &lock.AcquireParams{Name: "l", Owner: "late", TTL: time.Minute, Limit: 1, Wait: 300 * time.Millisecond})
		var he *lock.HeldError
		if !errors.As(err, &he) || len(he.Holders) != 1 || he.Holders[0].Owner != "next" {
			t.Fatalf("acquire of a held lock: err = %v, want a HeldError naming \"next\"", err)
		}
		if d := time.Since(start); d < 300*time.Millisecond {
			t.Fatalf("gave up after %v, before its wait of 300ms", d)
		}
	})
}

// A waiter whose caller goes away stops waiting, and waiters queued
// behind it on the node still get the lock.
func TestAcquire_CancelledWaiterStops(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := newService(t, dbtest.Open(t, dialect), time.Hour)
		held := mustAcquire(t, s, &lock.AcquireParams{Name: "l", Owner: "a", TTL: time.Hour, Limit: 1})
		ctx, cancel := context.WithCancel(t.Context())
		first := acquireAsync(ctx, s, &lock.AcquireParams{Name: "l", Owner: "gone", TTL: time.Minute, Limit: 1, Wait: time.Minute})
		time.Sleep(100 * time.Millisecond)
		second := acquireAsync(t.Context(), s, &lock.AcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1, Wait: time.Minute})
		cancel()
		if r := waitResult(t, first); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled waiter: %+v, %v; want context.Canceled", r.lease, r.err)
		}
		if _, err := s.Release(t.Context(), &store.LockReleaseParams{Name: "l", Owner: "a", Token: held.Token}); err != nil {
			t.Fatal(err)
		}
		if r := waitResult(t, second); r.err != nil || r.lease.Owner != "b" {
			t.Fatalf("second waiter got %+v, %v; want b's lease", r.lease, r.err)
		}
	})
}

func TestRenewRelease_NotHeld(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := newService(t, dbtest.Open(t, dialect), 0)
		l := mustAcquire(t, s, &lock.AcquireParams{Name: "l", Owner: "a", TTL: time.Hour, Limit: 1})
		if _, err := s.Renew(t.Context(), &store.LockRenewParams{Name: "l", Owner: "a", Token: l.Token + 1, TTL: time.Minute}); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("renew with a wrong token: err = %v, want ErrNotHeld", err)
		}
		if _, err := s.Release(t.Context(), &store.LockReleaseParams{Name: "l", Owner: "b", Token: l.Token}); !errors.Is(err, lock.ErrNotHeld) {
			t.Fatalf("release by another owner: err = %v, want ErrNotHeld", err)
		}
	})
}

// Stop ends waits in progress with a last attempt, so that a node shutting
// down need not wait minutes for its waiting requests.
func TestStop_EndsWaits(t *testing.T) {
	t.Parallel()
	s := lock.New(lock.Config{Store: dbtest.Open(t, "sqlite"), PollInterval: time.Hour})
	mustAcquire(t, s, &lock.AcquireParams{Name: "l", Owner: "a", TTL: time.Hour, Limit: 1})
	first := acquireAsync(t.Context(), s, &lock.AcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1, Wait: time.Hour})
	second := acquireAsync(t.Context(), s, &lock.AcquireParams{Name: "l", Owner: "c", TTL: time.Minute, Limit: 1, Wait: time.Hour})
	time.Sleep(100 * time.Millisecond)
	s.Stop(context.Background())
	s.Stop(context.Background())
	for _, ch := range []<-chan result{first, second} {
		var he *lock.HeldError
		if r := waitResult(t, ch); !errors.As(r.err, &he) {
			t.Fatalf("wait ended by Stop: %+v, %v; want a HeldError", r.lease, r.err)
		}
	}
}

// When PostgreSQL drops the listening connection, the node listens again
// and cross-node wake-ups keep working (the waiter's poll interval is an
// hour, so only a notification can serve it in time).
func TestStart_ListensAgainAfterConnectionLoss(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, "postgres")
	a := newService(t, dbtest.OpenURL(t, url), time.Hour)
	b := newService(t, dbtest.OpenURL(t, url), time.Hour)
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()

	listeners := func() []int32 {
		rows, err := admin.QueryContext(ctx, `SELECT pid FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE '%LISTEN `+postgres.LockChannel+`'`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var pids []int32
		for rows.Next() {
			var pid int32
			if err := rows.Scan(&pid); err != nil {
				t.Fatal(err)
			}
			pids = append(pids, pid)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return pids
	}
	old := listeners()
	if len(old) != 2 {
		t.Fatalf("%d listening connections, want 2 (one per node)", len(old))
	}
	for _, pid := range old {
		if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
			t.Fatal(err)
		}
	}
	testworker.WaitFor(t, 30*time.Second, "both nodes listening again", func() bool {
		now := listeners()
		return len(now) == 2 && !slices.Contains(old, now[0]) && !slices.Contains(old, now[1])
	})

	held := mustAcquire(t, a, &lock.AcquireParams{Name: "l", Owner: "a", TTL: time.Hour, Limit: 1})
	ch := acquireAsync(ctx, b, &lock.AcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1, Wait: 30 * time.Second})
	time.Sleep(200 * time.Millisecond)
	if _, err := a.Release(ctx, &store.LockReleaseParams{Name: "l", Owner: "a", Token: held.Token}); err != nil {
		t.Fatal(err)
	}
	if r := waitResult(t, ch); r.err != nil || r.lease.Owner != "b" {
		t.Fatalf("waiter on the other node got %+v, %v; want b's lease", r.lease, r.err)
	}
}

// An acquire whose name another node keeps locked, frozen half-way through
// its own acquire, gives up at the end of its wait (each attempt waits at
// most store.LockWait), saying that the name is being taken; once that
// transaction ends, the lock is had.
func TestAcquire_BehindFrozenTxGivesUp(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, "postgres")
	s := newService(t, dbtest.OpenURL(t, url), 0)
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	l := mustAcquire(t, s, &lock.AcquireParams{Name: "l", Owner: "a", TTL: time.Minute, Limit: 1})
	if _, err := s.Release(ctx, &store.LockReleaseParams{Name: "l", Owner: "a", Token: l.Token}); err != nil {
		t.Fatal(err)
	}
	frozen, err := admin.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer frozen.Rollback()
	if _, err := frozen.ExecContext(ctx, `SELECT last_token FROM locks WHERE name = 'l' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}

	start := time.Now()
	_, err = s.Acquire(ctx, &lock.AcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1, Wait: 500 * time.Millisecond})
	var he *lock.HeldError
	if !errors.As(err, &he) || len(he.Holders) != 0 || !strings.Contains(err.Error(), "being acquired or released") {
		t.Fatalf("acquire behind a frozen transaction: err = %v, want a HeldError naming no holder", err)
	}
	// The attempt under way at the deadline may wait store.LockWait.
	if took, most := time.Since(start), 500*time.Millisecond+store.LockWait+time.Second; took > most {
		t.Errorf("acquire took %v behind a frozen transaction, want at most %v", took, most)
	}
	frozen.Rollback()
	if l := mustAcquire(t, s, &lock.AcquireParams{Name: "l", Owner: "b", TTL: time.Minute, Limit: 1}); l.Token <= 1 {
		t.Errorf("token %d after the frozen transaction, want above the first", l.Token)
	}
}
