package postgres_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/postgres"
)

// TestInspect_ListingsWalkIndexesWithoutSort checks the plans of every
// listing query: each walks its index in order and stops at the page, so
// page 1,000 costs what page 1 costs.
func TestInspect_ListingsWalkIndexesWithoutSort(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	conn := analysedBacklog(ctx, t, s, 5000, func(q string, i int) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: q, Category: "c", URL: "http://w/", Payload: json.RawMessage(`{}`),
			RunAfter: time.Duration(i%3) * time.Hour}
	}, func(conn *pgxpool.Conn) {
		// A failure log of a few queues, spread in time; q1 holds half of it.
		if _, err := conn.Exec(ctx, `INSERT INTO failed_jobs
			(job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at)
			SELECT i, 'q' || LEAST(i % 4, 1), 'c', 'http://w/', NULL, 'failure', 500, 'x', 1, now(), now() - i * interval '1 second'
			FROM generate_series(1, 20000) AS i`); err != nil {
			t.Fatal(err)
		}
	})
	now := time.Now()
	// check fails unless the plan walks one of the indexes (alternatives
	// separated by |) in order, with no sort.
	check := func(name, query, indexes string, args ...any) {
		t.Helper()
		for mode, p := range plans(ctx, t, conn, query, args...) {
			walks := false
			for _, index := range strings.Split(indexes, "|") {
				walks = walks || strings.Contains(p, "Index Scan using "+index) || strings.Contains(p, "Index Scan Backward using "+index)
			}
			if !walks || strings.Contains(p, "Sort") {
				t.Errorf("%s (%s): plan does not walk %s without a sort:\n%s", name, mode, indexes, p)
			}
		}
	}
	for _, kind := range []string{store.JobsWaiting, store.JobsDeferred} {
		for _, desc := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				args := []any{"q", "waiting", 100}
				if after {
					args = append(args, now, 1000)
				}
				check(fmt.Sprintf("jobs %s desc=%v after=%v", kind, desc, after), postgres.JobsListSQL(kind, desc, after), "jobs_list", args...)
			}
		}
	}
	// Grabbed and leased jobs (out for delivery: few) are read from two
	// ranges of an index and sorted; a sequential scan is what must not be.
	for _, desc := range []bool{false, true} {
		for _, after := range []bool{false, true} {
			args := []any{"q", "grabbed", 100}
			if after {
				args = append(args, now, 1000)
			}
			for mode, p := range plans(ctx, t, conn, postgres.JobsListSQL(store.JobsGrabbed, desc, after), args...) {
				if !strings.Contains(p, "jobs_list") && !strings.Contains(p, "jobs_fetch") || strings.Contains(p, "Seq Scan") {
					t.Errorf("jobs grabbed desc=%v after=%v (%s): plan reads no index of the queue's states:\n%s", desc, after, mode, p)
				}
			}
		}
	}
	for _, byCreated := range []bool{false, true} {
		for _, desc := range []bool{false, true} {
			for _, after := range []bool{false, true} {
				args := []any{"q1", 100}
				// By id, PostgreSQL may as well walk the primary key and
				// filter by queue when the queue is a large share of the log.
				index := "failed_jobs_queue|failed_jobs_pkey"
				if byCreated {
					index = "failed_jobs_created"
				}
				if after && byCreated {
					args = append(args, now, 10)
				} else if after {
					args = append(args, 10)
				}
				check(fmt.Sprintf("failed byCreated=%v desc=%v after=%v", byCreated, desc, after), postgres.FailedJobsListSQL(byCreated, desc, after), index, args...)
			}
		}
	}
}
