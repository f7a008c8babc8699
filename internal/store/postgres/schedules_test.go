package postgres_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store/postgres"
	"github.com/rowq/rowq/internal/store/storetest"
)

func TestSchedulesDue_UsesIndexWithoutSort(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	conn, err := postgres.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Many schedules, few due, a third paused: the look must not read them all.
	_, err = conn.Exec(ctx, `INSERT INTO schedules (name, cron, timezone, category, url, max_retries, retry_delay, timeout,
			misfire, max_catchup, overlap, paused, next_run_at, created_at, updated_at)
		SELECT 's' || i, '@hourly', 'UTC', 'c', 'http://w/', 0, 0, 0, 'once', 100, 'allow', i % 3 = 0,
			now() + (i - 10) * interval '1 minute', now(), now()
		FROM generate_series(1, 20000) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ANALYZE schedules"); err != nil {
		t.Fatal(err)
	}
	for mode, p := range plans(ctx, t, conn, postgres.DueSQL, time.Now(), 100) {
		if !strings.Contains(p, "schedules_due") || strings.Contains(p, "Sort") {
			t.Errorf("%s: due plan does not walk schedules_due without a sort:\n%s", mode, p)
		}
	}
}

// TestScheduleFire_BehindFrozenTx: a node frozen while it fires a tick
// holds the schedule's row; the others' schedule loops skip the schedule
// at once instead of waiting for it.
func TestScheduleFire_BehindFrozenTx(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	storetest.ScheduleFireBehindFrozenTx(t, s, func(t *testing.T, name string) func() {
		return frozenTx(t, s, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT name FROM schedules WHERE name = $1 FOR UPDATE`, name)
			return err
		})
	})
}
