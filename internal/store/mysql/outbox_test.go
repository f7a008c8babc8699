package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/store/storetest"
)

// TestOutboxMove_AbortedBeforeCommit ends a move's connection with KILL
// while its insert of a keyed job (its last statement before the commit)
// waits for another transaction's uncommitted key: its deletes and other
// inserts are done (InnoDB counts them in the transaction's
// trx_rows_modified), its commit is not. That is
// what MariaDB sees when the mover's process dies (its socket closes).
func TestOutboxMove_AbortedBeforeCommit(t *testing.T) {
	url := dbtest.URL(t, "mysql")
	// The move waits for the held key as long as the test needs to find
	// it, however loaded the machine (not store.LockWait).
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	s := dbtest.OpenURL(t, url+sep+"innodb_lock_wait_timeout=60")
	db := dbtest.AppDB(t, url, 3)
	ctx := t.Context()
	storetest.OutboxMoveAborted(t, s, storetest.OutboxAbort{
		HoldKey: func(t *testing.T) func() {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (queue_name, category, url, state, created_at, next_try,
				timeout, max_retries, retry_delay, unique_key, grabbed_by, grabbed_until)
				VALUES ('q', 'c', 'http://x/', 'waiting', NOW(6), NOW(6), 0, 0, 0, 'k', '', NOW(6))`); err != nil {
				t.Fatal(err)
			}
			return func() { tx.Rollback() }
		},
		Abort: func(t *testing.T) {
			var id, modified int64
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				err := db.QueryRowContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST
					WHERE DB = DATABASE() AND ID <> CONNECTION_ID() AND INFO LIKE '%rowq:jobs.insert%' AND INFO LIKE '%''k''%'`).Scan(&id)
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("no move waiting for the key within 30s (%v); sessions:\n%s", err, sessions(t, db))
				}
			}
			if err := db.QueryRowContext(ctx, `SELECT trx_rows_modified FROM information_schema.INNODB_TRX
				WHERE trx_mysql_thread_id = ?`, id).Scan(&modified); err != nil {
				t.Fatal(err)
			}
			// 6 outbox rows deleted, 5 jobs inserted.
			if modified < 11 {
				t.Errorf("the waiting move had modified %d rows, want its 6 deletes and 5 inserts", modified)
			}
			if _, err := db.ExecContext(context.Background(), "KILL ?", id); err != nil {
				t.Fatal(err)
			}
		},
	})
}

// sessions lists the sessions of the test's database, for a failure.
func sessions(t *testing.T, db *sql.DB) string {
	rows, err := db.QueryContext(t.Context(), `SELECT p.ID, IFNULL(p.INFO, ''), IFNULL(t.trx_state, '')
		FROM information_schema.PROCESSLIST p LEFT JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID
		WHERE p.DB = DATABASE()`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var id int64
		var info, state string
		if err := rows.Scan(&id, &info, &state); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&b, "%d %s %q\n", id, state, info)
	}
	return b.String()
}

// TestOutboxRead_WalksThePrimaryKey: the read (the moving node's probe
// when the outbox is empty) walks the primary key and stops at its limit,
// whatever the outbox holds.
func TestOutboxRead_WalksThePrimaryKey(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	url := "http://w/"
	rows := make([]*store.OutboxRow, 2000)
	for i := range rows {
		rows[i] = &store.OutboxRow{Category: "c", URL: &url}
	}
	if err := s.OutboxInsert(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE rowq_outbox"); err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s.DB(), "outbox read", mysql.OutboxReadSQL, "PRIMARY", false, 500)
}
