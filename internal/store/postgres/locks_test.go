package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/postgres"
	"github.com/rowq/rowq/internal/store/storetest"
)

// A release on one store is heard by LockListen on another store of the
// same database, as another node would hear it; a failed release is not.
func TestLockListen_HearsReleasesOfOtherStores(t *testing.T) {
	t.Parallel()
	url := dbtest.URL(t, "postgres")
	a := dbtest.OpenURL(t, url)
	b := dbtest.OpenURL(t, url).(*postgres.Store)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	heard := make(chan string, 10)
	listening := make(chan error, 1)
	lctx, stop := context.WithCancel(ctx)
	ready := make(chan struct{})
	go func() { listening <- b.LockListen(lctx, func() { close(ready) }, func(name string) { heard <- name }) }()
	select {
	case <-ready:
	case err := <-listening:
		t.Fatalf("LockListen: %v", err)
	case <-ctx.Done():
		t.Fatal("not listening within a minute")
	}

	res, err := a.LockAcquire(ctx, &store.LockAcquireParams{Name: "n", Owner: "o", TTL: time.Minute, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.LockRelease(ctx, &store.LockReleaseParams{Name: "n", Owner: "o", Token: res.Lease.Token + 1}); err == nil {
		t.Fatal("release with a wrong token succeeded")
	}
	// Release (again, should a notification be lost) until one is heard.
	for token := res.Lease.Token; ; {
		if token != 0 {
			if _, err := a.LockRelease(ctx, &store.LockReleaseParams{Name: "n", Owner: "o", Token: token}); err != nil {
				t.Fatal(err)
			}
		}
		select {
		case name := <-heard:
			if name != "n" {
				t.Fatalf("heard %q, want \"n\" (and nothing for the failed release)", name)
			}
			stop()
			if err := <-listening; err != nil {
				t.Fatalf("LockListen after its context ended: %v", err)
			}
			return
		case <-time.After(200 * time.Millisecond):
			r, err := a.LockAcquire(ctx, &store.LockAcquireParams{Name: "n", Owner: "o", TTL: time.Minute, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			token = r.Lease.Token
		case <-ctx.Done():
			t.Fatal("no release heard within a minute")
		}
	}
}

// TestLockAcquire_BehindFrozenTx: an acquire of a node frozen inside its
// transaction holds the name's row; the others' acquires answer within
// store.LockWait that the lock is taken (PostgreSQL's own wait is endless).
func TestLockAcquire_BehindFrozenTx(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	storetest.LockAcquireBehindFrozenTx(t, s, func(t *testing.T, name string) func() {
		return frozenTx(t, s, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT last_token FROM locks WHERE name = $1 FOR UPDATE`, name)
			return err
		})
	})
}

// frozenTx runs fn in a transaction that it leaves open, as a node frozen
// half-way through it would, and returns the function that rolls it back.
func frozenTx(t *testing.T, s *postgres.Store, fn func(ctx context.Context, tx pgx.Tx) error) (rollback func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := postgres.Pool(s).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rollback = func() { tx.Rollback(ctx) } // a second call does nothing
	t.Cleanup(rollback)
	if err := fn(ctx, tx); err != nil {
		rollback()
		t.Fatal(err)
	}
	return rollback
}
