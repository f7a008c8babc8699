package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/postgres"
	"github.com/rowq/rowq/internal/store/storetest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestOutboxMove_AbortedBeforeCommit ends a move's backend with
// pg_terminate_backend while its insert of a keyed job waits for another
// transaction's uncommitted key, after its delete and its other inserts:
// what PostgreSQL sees when the mover's process dies (its socket closes).
func TestOutboxMove_AbortedBeforeCommit(t *testing.T) {
	url := dbtest.URL(t, "postgres")
	// The move waits for the held key as long as the test needs to find
	// it, however loaded the machine (not store.LockWait).
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s := dbtest.OpenURL(t, url+sep+"lock_timeout=60s")
	db := dbtest.AppDB(t, url, 3)
	ctx := t.Context()
	storetest.OutboxMoveAborted(t, s, storetest.OutboxAbort{
		HoldKey: func(t *testing.T) func() {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (queue_name, category, url, state, created_at, next_try,
				timeout, max_retries, retry_delay, unique_key)
				VALUES ('q', 'c', 'http://x/', 'waiting', now(), now(), 0, 0, 0, 'k')`); err != nil {
				t.Fatal(err)
			}
			return func() { tx.Rollback() }
		},
		Abort: func(t *testing.T) {
			var pid int64
			testworker.WaitFor(t, 30*time.Second, "the move waiting for the key", func() bool {
				err := db.QueryRowContext(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()
					AND pid <> pg_backend_pid() AND wait_event_type = 'Lock' AND query LIKE '%rowq:jobs.insert%'`).Scan(&pid)
				return err == nil
			})
			if _, err := db.ExecContext(context.Background(), "SELECT pg_terminate_backend($1)", pid); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// TestOutboxRead_WalksThePrimaryKey: the read (the moving node's probe)
// walks the primary key and stops at its limit, with no sort, whatever the
// outbox holds.
func TestOutboxRead_WalksThePrimaryKey(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	url := "http://w/"
	rows := make([]*store.OutboxRow, 2000)
	for i := range rows {
		rows[i] = &store.OutboxRow{Category: "c", URL: &url}
	}
	if err := s.OutboxInsert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	conn, err := postgres.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "ANALYZE rowq_outbox"); err != nil {
		t.Fatal(err)
	}
	for mode, p := range plans(ctx, t, conn, postgres.OutboxReadSQL, 500) {
		if !strings.Contains(p, "rowq_outbox_pkey") || strings.Contains(p, "Sort") {
			t.Errorf("%s: outbox read does not walk the primary key without a sort:\n%s", mode, p)
		}
	}
}
