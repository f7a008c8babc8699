package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
	"github.com/rowq/rowq/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return dbtest.Open(t, "mysql") })
}

// TestConformance_WithoutReturning runs the conformance tests that insert
// jobs already grabbed on the way a MySQL server takes (no INSERT …
// RETURNING: the clock read first, the ids from LAST_INSERT_ID()), on
// MariaDB, which would otherwise take RETURNING. No MySQL server is tested
// (docs/operations.md): this is what covers MySQL's own code path.
func TestConformance_WithoutReturning(t *testing.T) {
	storetest.RunJobWrites(t, func(t *testing.T) store.Store {
		s := dbtest.Open(t, "mysql").(*mysql.Store)
		s.WithoutReturning()
		return s
	})
}

func TestOpen_UnreachableServerIsUnavailable(t *testing.T) {
	t.Parallel()
	s, err := mysql.Open("root@tcp(127.0.0.1:1)/rowq?timeout=2s")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping err = %v, want ErrUnavailable", err)
	}
	// The listings of schedules map their errors too (GET /schedules
	// answered 500 instead of 503).
	if _, err := s.ScheduleList(ctx, &store.ScheduleListParams{Limit: 1}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("ScheduleList err = %v, want ErrUnavailable", err)
	}
	if _, err := s.SchedulesDue(ctx, &store.SchedulesDueParams{Before: time.Now(), Limit: 1}); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("SchedulesDue err = %v, want ErrUnavailable", err)
	}
}

// TestOpen_ForcesSessionSettings checks that DSN parameters cannot undo
// what rowq relies on.
func TestOpen_ForcesSessionSettings(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn, err := mysql.DSNFromURL(dbtest.URL(t, "mysql"))
	if err != nil {
		t.Fatal(err)
	}
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	s, err := mysql.Open(dsn + sep + "loc=Local&parseTime=false&time_zone=%27%2B05%3A00%27")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	now, err := s.Now(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(now); now.Location() != time.UTC || d > time.Minute || d < -time.Minute {
		t.Fatalf("Now = %v, %v away from this host's clock", now, d)
	}
	// The isolation variable is tx_isolation on MariaDB before 11.1 and
	// transaction_isolation on MySQL 8.
	vars := queryMaps(t, s.DB(), "SHOW SESSION VARIABLES WHERE Variable_name IN ('tx_isolation', 'transaction_isolation', 'time_zone')")
	if len(vars) < 2 {
		t.Fatalf("session variables: %v", vars)
	}
	for _, v := range vars {
		want := "READ-COMMITTED"
		if v["Variable_name"] == "time_zone" {
			want = "+00:00"
		}
		if v["Value"] != want {
			t.Errorf("session %s = %q, want %q", v["Variable_name"], v["Value"], want)
		}
	}
}

// TestJobsInsert_LargeBatch inserts more jobs than one INSERT statement
// takes and checks that each returned id names its own job.
func TestJobsInsert_LargeBatch(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := dbtest.Open(t, "mysql")
	ps := make([]*store.JobInsertParams, 2500)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://w/", Payload: []byte(fmt.Sprintf(`{"i":%d}`, i))}
	}
	ids, err := s.JobsInsert(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != len(ps) {
		t.Fatalf("got %d ids, want %d", len(ids), len(ps))
	}
	for i := 0; i < len(ids); i += 97 {
		j, err := s.JobGet(ctx, "q", ids[i])
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(j.Payload), string(ps[i].Payload); got != want {
			t.Fatalf("job %d (#%d) has payload %s, want %s", ids[i], i, got, want)
		}
	}
}

// TestGrab_UsesFetchIndexWithoutFilesort checks the plan of the exact grab
// SELECT: it must walk jobs_fetch and read the rows in index order, so that
// its cost does not grow with the backlog.
func TestGrab_UsesFetchIndexWithoutFilesort(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	// A backlog over a few queues, due and deferred, so that the optimizer
	// has a choice to make.
	for i := range 4 {
		ps := make([]*store.JobInsertParams, 500)
		for k := range ps {
			ps[k] = &store.JobInsertParams{Queue: fmt.Sprintf("q%d", i), Category: "c", URL: "http://w/", RunAfter: time.Duration(k%3-1) * time.Hour,
				JobOptions: store.JobOptions{Priority: k % 4}}
		}
		if _, err := s.JobsInsert(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DB().ExecContext(ctx, "ANALYZE TABLE jobs"); err != nil {
		t.Fatal(err)
	}

	checkPlan(t, s.DB(), "grab", mysql.GrabSQL, "jobs_fetch", false, int64(time.Minute/time.Microsecond), "q1", 100)
}

// TestExplain_Finished: the history's listing (newest first, after a
// cursor, filtered) and the prune's find walk finished_jobs_queue in its
// order, without a sort, however large the history.
func TestExplain_Finished(t *testing.T) {
	ctx := t.Context()
	s := openMigrated(ctx, t)
	at := time.Now()
	checkPlan(t, s.DB(), "finished list", mysql.FinishedListSQL("queue_name = ?"), "finished_jobs_queue", false, "q", 100)
	checkPlan(t, s.DB(), "finished list after a cursor, filtered", mysql.FinishedListSQL("queue_name = ? AND status = ? AND finished_at >= ? AND (finished_at, id) < (?, ?)"),
		"finished_jobs_queue", false, "q", "failed", at.Add(-time.Hour), at, 5, 100)
	checkPlan(t, s.DB(), "finished prune", mysql.FinishedPruneFindSQL, "finished_jobs_queue", false, "q", int64(time.Hour/time.Microsecond), 1000)
}

// checkPlan runs EXPLAIN query and fails t unless the plan is one row that
// uses the index key, with a filesort if and only if sorts: a walk of the
// right index in its order costs the same however large the table.
func checkPlan(t *testing.T, db *sql.DB, what, query, key string, sorts bool, args ...any) {
	t.Helper()
	plan := queryMaps(t, db, "EXPLAIN "+query, args...)
	if len(plan) != 1 {
		t.Fatalf("%s: plan has %d rows, want 1: %v", what, len(plan), plan)
	}
	if got := plan[0]["key"]; got != key {
		t.Errorf("%s: uses key %q, want %q (plan %v)", what, got, key, plan[0])
	}
	if got := plan[0]["Extra"]; strings.Contains(got, "filesort") != sorts {
		t.Errorf("%s: Extra = %q, want a filesort: %v", what, got, sorts)
	}
}

// queryMaps runs a query such as an EXPLAIN and returns its rows as
// column → value maps (the columns differ between MySQL and MariaDB).
func queryMaps(t *testing.T, db *sql.DB, query string, args ...any) []map[string]string {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var plan []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		plan = append(plan, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return plan
}

// BenchmarkJobs_InsertGrabComplete measures one job's round trip through
// the store in batches of 100: insert, grab, complete.
func BenchmarkJobs_InsertGrabComplete(b *testing.B) {
	ctx := context.Background()
	s := dbtest.Open(b, "mysql")
	const batch = 100
	ps := make([]*store.JobInsertParams, batch)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://w/", Payload: []byte(`{"n":1}`)}
	}
	b.ResetTimer()
	for done := 0; done < b.N; done += batch {
		if _, err := s.JobsInsert(ctx, ps); err != nil {
			b.Fatal(err)
		}
		jobs, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: batch, Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]int64, len(jobs))
		for i, j := range jobs {
			ids[i] = j.ID
		}
		if _, err := s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n", IDs: ids}); err != nil {
			b.Fatal(err)
		}
	}
}

// openMigrated opens a MySQL store (not the store interface: the EXPLAIN
// tests need its DB) on a fresh, migrated database, closed when t ends.
func openMigrated(ctx context.Context, t testing.TB) *mysql.Store {
	t.Helper()
	dsn, err := mysql.DSNFromURL(dbtest.URL(t, "mysql"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := mysql.Open(dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestServer_PlainMariaDB checks what the store finds a single MariaDB
// server to be: RETURNING, no Galera (galera_test.go checks a member).
func TestServer_PlainMariaDB(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := openMigrated(ctx, t)
	returning, galera, err := s.Server(ctx)
	if err != nil || !returning || galera {
		t.Fatalf("returning %t, galera %t, %v; want RETURNING and no Galera", returning, galera, err)
	}
	s.WithoutReturning()
	if returning, _, err := s.Server(ctx); err != nil || returning {
		t.Fatalf("WithoutReturning: returning %t, %v", returning, err)
	}
}
