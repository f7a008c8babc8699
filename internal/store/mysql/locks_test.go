package mysql_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/store/storetest"
)

// TestLockAcquire_BehindFrozenTx: an acquire of a node frozen inside its
// transaction holds the name's row; the others' acquires answer within
// store.LockWait that the lock is taken (the server's own wait is 50 s).
func TestLockAcquire_BehindFrozenTx(t *testing.T) {
	t.Parallel()
	s := dbtest.Open(t, "mysql").(*mysql.Store)
	storetest.LockAcquireBehindFrozenTx(t, s, func(t *testing.T, name string) func() {
		return frozenTx(t, s.DB(), func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `SELECT last_token FROM locks WHERE name = ? FOR UPDATE`, name)
			return err
		})
	})
}

// frozenTx runs fn in a transaction that it leaves open, as a node frozen
// half-way through it would, and returns the function that rolls it back.
func frozenTx(t *testing.T, db *sql.DB, fn func(ctx context.Context, tx *sql.Tx) error) (rollback func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	rollback = func() { tx.Rollback() } // a second call does nothing
	t.Cleanup(rollback)
	if err := fn(ctx, tx); err != nil {
		rollback()
		t.Fatal(err)
	}
	return rollback
}
