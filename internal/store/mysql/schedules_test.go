package mysql_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/store/storetest"
)

func TestSchedulesDue_UsesIndexWithoutFilesort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	// Many schedules, few due, some paused: the look must not read them all.
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 300 {
		_, err := s.SchedulePut(ctx, &store.Schedule{
			Name: fmt.Sprintf("s%03d", i), Cron: "@hourly", Timezone: "UTC", Category: "c", URL: "http://w/",
			Misfire: store.MisfireOnce, MaxCatchup: 100, Overlap: store.OverlapAllow,
			Paused: i%3 == 0, NextRunAt: now.Add(time.Duration(i-5) * time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE schedules"); err != nil {
		t.Fatal(err)
	}
	checkPlan(t, s.DB(), "due look", mysql.DueSQL, "schedules_due", false, now, 100)
}

// TestScheduleFire_BehindFrozenTx: a node frozen while it fires a tick
// holds the schedule's row; the others' schedule loops skip the schedule
// at once instead of waiting for it.
func TestScheduleFire_BehindFrozenTx(t *testing.T) {
	t.Parallel()
	s := dbtest.Open(t, "mysql").(*mysql.Store)
	storetest.ScheduleFireBehindFrozenTx(t, s, func(t *testing.T, name string) func() {
		return frozenTx(t, s.DB(), func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `SELECT name FROM schedules WHERE name = ? FOR UPDATE`, name)
			return err
		})
	})
}
