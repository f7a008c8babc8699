package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/store/storetest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestOutboxMove_AbortedBeforeCommit ends a move's connection with KILL
// while its insert of a keyed job waits for another transaction's
// uncommitted key: its deletes and other inserts are done (InnoDB counts
// them in the transaction's trx_rows_modified), its commit is not. That is
// what MariaDB sees when the mover's process dies (its socket closes).
func TestOutboxMove_AbortedBeforeCommit(t *testing.T) {
	url := dbtest.URL(t, "mysql")
	s := dbtest.OpenURL(t, url)
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
			testworker.WaitFor(t, 1500*time.Millisecond, "the move waiting for the key", func() bool {
				err := db.QueryRowContext(ctx, `SELECT p.ID, t.trx_rows_modified FROM information_schema.PROCESSLIST p
					JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID
					WHERE p.DB = DATABASE() AND p.INFO LIKE '%rowq:jobs.insert%' AND t.trx_state = 'LOCK WAIT'`).Scan(&id, &modified)
				return err == nil
			})
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
	plan := queryMaps(t, s.DB(), "EXPLAIN "+mysql.OutboxReadSQL, 500)
	if len(plan) != 1 || plan[0]["key"] != "PRIMARY" || strings.Contains(plan[0]["Extra"], "filesort") {
		t.Errorf("outbox read plan = %v, want a walk of PRIMARY without a filesort", plan)
	}
}
