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
	for mode, p := range plans(ctx, t, conn, postgres.JobsDueSQL, []string{"q0", "q1", "q2"}) {
		if !strings.Contains(p, "jobs_list") || !strings.Contains(p, "Limit") || strings.Contains(p, "Sort") {
			t.Errorf("%s: the look does not read one jobs_list entry per queue:\n%s", mode, p)
		}
	}
}
