package postgres_test

import (
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/store/postgres"
)

// TestJobsDue_ReadsOneEntryPerQueue checks the plan of the look for due
// jobs: per queue, one entry of jobs_list, however many jobs wait.
func TestJobsDue_ReadsOneEntryPerQueue(t *testing.T) {
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
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, "EXPLAIN "+postgres.JobsDueSQL, []string{"q0", "q1", "q2"})
		if err != nil {
			t.Fatal(err)
		}
		var plan strings.Builder
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err != nil {
				t.Fatal(err)
			}
			plan.WriteString(line + "\n")
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		if p := plan.String(); !strings.Contains(p, "jobs_list") || !strings.Contains(p, "Limit") || strings.Contains(p, "Sort") {
			t.Errorf("%s: the look does not read one jobs_list entry per queue:\n%s", mode, p)
		}
	}
}
