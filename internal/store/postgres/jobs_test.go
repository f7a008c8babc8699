package postgres_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store/postgres"
	"github.com/rowq/rowq/internal/store/storetest"
)

// TestJobsNextDue_ReadsOneEntryPerQueue checks the plan of the look at
// idle queues: per queue, one entry of jobs_list, however many jobs wait.
func TestJobsNextDue_ReadsOneEntryPerQueue(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	conn, err := postgres.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, `INSERT INTO jobs (queue_name, category, url, state, created_at, next_try, timeout, max_retries, retry_delay)
		SELECT 'q' || (i % 3), 'c', 'http://w/', 'waiting', now(), now() + (i % 2) * interval '1 hour', 0, 0, 0
		FROM generate_series(1, 20000) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE jobs"); err != nil {
		t.Fatal(err)
	}
	for mode, p := range plans(ctx, t, conn, postgres.JobsNextDueSQL, []string{"q0", "q1", "q2"}) {
		if !strings.Contains(p, "jobs_list") || !strings.Contains(p, "Limit") || strings.Contains(p, "Sort") {
			t.Errorf("%s: the look does not read one jobs_list entry per queue:\n%s", mode, p)
		}
	}
}

// TestJobsRescue_ReadsGrabsOnly checks the plans of the rescue and the look
// for expired grabs: a queue's grabs from an index on (queue_name, state)
// (its deliveries in flight, few), and their nodes in a subplan: by
// primary key, or hashed (nodes, the registered rowq processes, is read
// once per statement).
func TestJobsRescue_ReadsGrabsOnly(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	conn, err := postgres.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	_, err = conn.Exec(ctx, `INSERT INTO jobs (queue_name, category, url, state, created_at, next_try, timeout, max_retries, retry_delay, grabbed_by, grabbed_until)
		SELECT 'q' || (i % 3), 'c', 'http://w/', CASE WHEN i % 100 = 0 THEN 'grabbed' ELSE 'waiting' END, now(), now(), 0, 0, 0,
			CASE WHEN i % 100 = 0 THEN 'n' || (i % 7) END, CASE WHEN i % 100 = 0 THEN now() + interval '1 minute' END
		FROM generate_series(1, 20000) AS i;
		INSERT INTO nodes (id, host, started_at, expires_at) SELECT 'n' || i, 'h', now(), now() FROM generate_series(1, 200) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE jobs; ANALYZE nodes"); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		query string
		arg   any
	}{
		"rescue":  {postgres.RescueSQL, "q1"},
		"expired": {postgres.JobsExpiredSQL, []string{"q0", "q1", "q2"}},
	} {
		for mode, p := range plans(ctx, t, conn, c.query, c.arg) {
			grabs := strings.Contains(p, "state = 'grabbed'::text))") && strings.Contains(p, "Index Cond: ((queue_name = ") &&
				!strings.Contains(p, "Seq Scan on jobs")
			nodes := strings.Contains(p, "nodes_pkey") || strings.Contains(p, "hashed SubPlan")
			if !grabs || !nodes {
				t.Errorf("%s, %s: the plan does not read grabs by index and their nodes by key:\n%s", name, mode, p)
			}
		}
	}
}

// TestJobs_BehindFrozenTx: a node frozen inside a transaction that changed
// or locked jobs stalls no other node's extension, rescue or grab.
func TestJobs_BehindFrozenTx(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	storetest.JobsBehindFrozenTx(t, s, func(t *testing.T, grab, lock int64) func() {
		return frozenTx(t, s, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT id FROM jobs WHERE id = $1 FOR UPDATE`, lock); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE jobs SET state = 'grabbed', grabbed_by = 'frozen',
				grabbed_until = now() + interval '1 minute' WHERE id = $1`, grab)
			return err
		})
	})
}
