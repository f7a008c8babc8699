package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/postgres"
	"github.com/rowq/rowq/internal/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return dbtest.Open(t, "postgres") })
}

func setup(t *testing.T) (*postgres.Store, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return dbtest.Open(t, "postgres").(*postgres.Store), ctx
}

func TestJobsInsert_OrderAndBytes(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	ps := make([]*store.JobInsertParams, 1000)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Queue: "q", Category: "c", URL: fmt.Sprintf("http://w/%d", i),
			Payload: json.RawMessage(fmt.Sprintf(`{ "i" : %d ,"s":"\u00e9"}`, i)), RunAfter: time.Duration(i%7) * time.Second}
	}
	ids, err := s.JobsInsert(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(ids), len(ps); got != want {
		t.Fatalf("got %d ids, want %d", got, want)
	}
	for i, id := range ids {
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("ids not increasing at %d: %d after %d", i, id, ids[i-1])
		}
		if i%97 != 0 {
			continue
		}
		j, err := s.JobGet(ctx, "q", id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := j.URL, ps[i].URL; got != want {
			t.Errorf("job %d url = %q, want %q", id, got, want)
		}
		if got, want := string(j.Payload), string(ps[i].Payload); got != want {
			t.Errorf("job %d payload = %s, want %s", id, got, want)
		}
	}
}

// The grab must walk jobs_fetch in order and stop at the limit: its cost
// must not grow with the backlog.
func TestJobsGrab_UsesFetchIndex(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	conn := analysedBacklog(ctx, t, s, 20000, func(q string, i int) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: q, Category: "c", URL: "http://w/", Payload: json.RawMessage(`{}`),
			RunAfter: time.Duration(i%3) * time.Hour, JobOptions: store.JobOptions{Priority: i % 4}}
	}, func(*pgxpool.Conn) {
		if _, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 1000, Lease: time.Minute}); err != nil {
			t.Fatal(err)
		}
	})
	for mode, p := range plans(ctx, t, conn, postgres.GrabSelectSQL, "q", 10) {
		if !strings.Contains(p, "jobs_fetch") || strings.Contains(p, "Sort") {
			t.Errorf("%s: grab plan does not walk jobs_fetch without a sort:\n%s", mode, p)
		}
	}
}

// analysedBacklog inserts n jobs, job(q, i) for i in [0, n), into each of
// the queues q and other, runs more (if not nil) to add to them, and
// analyses the tables the plans read: the planner then chooses as it would
// for a large backlog. It returns a connection for plans, released when t
// ends.
func analysedBacklog(ctx context.Context, t *testing.T, s *postgres.Store, n int, job func(q string, i int) *store.JobInsertParams, more func(conn *pgxpool.Conn)) *pgxpool.Conn {
	t.Helper()
	for _, q := range []string{"q", "other"} {
		ps := make([]*store.JobInsertParams, n)
		for i := range ps {
			ps[i] = job(q, i)
		}
		if _, err := s.JobsInsert(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	conn, err := postgres.Pool(s).Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	if more != nil {
		more(conn)
	}
	if _, err := conn.Exec(ctx, "ANALYZE jobs, failed_jobs"); err != nil {
		t.Fatal(err)
	}
	return conn
}

// plans returns the EXPLAIN of query by plan_cache_mode: as a custom plan
// for these arguments, and as the generic plan a prepared statement may
// settle on.
func plans(ctx context.Context, t *testing.T, conn *pgxpool.Conn, query string, args ...any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		rows, err := conn.Query(ctx, "EXPLAIN "+query, args...)
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
		out[mode] = plan.String()
	}
	return out
}

// A claim that waits on another node's uncommitted claim must not take the
// queue once that claim commits.
func TestQueuesClaim_RaceOneLeader(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	if _, err := s.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 1}); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b"} {
		if err := s.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: n, Host: n, TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
	}
	pool := postgres.Pool(s)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, postgres.ClaimSQL, "a", 1000); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "b"}) }()
	// Wait until b's claim is blocked on a's row lock.
	for {
		var waiting int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	leader, err := s.QueueLeader(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := leader.ID, "a"; got != want {
		t.Fatalf("leader after racing claims = %q, want %q", got, want)
	}
}

func TestOpen_Unavailable(t *testing.T) {
	t.Parallel()
	s, err := postgres.Open("postgres://postgres@127.0.0.1:1/test?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping err = %v, want ErrUnavailable", err)
	}
	if _, err := s.QueueGet(ctx, "q"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("QueueGet err = %v, want ErrUnavailable", err)
	}
}

// TestOpen_NoConnectionLeft: a server that has no connection left for
// rowq (max_connections reached; here a role limited to none) is
// unavailable, so that the API answers 503 with Retry-After, not 500.
func TestOpen_NoConnectionLeft(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	role := fmt.Sprintf("rowq_noconn_%d", time.Now().UnixNano())
	if _, err := postgres.Pool(s).Exec(ctx, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { postgres.Pool(s).Exec(context.Background(), "DROP ROLE "+role) })
	u, err := url.Parse(dbtest.URL(t, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	limited, err := postgres.Open(u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer limited.Close()
	if err := limited.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Ping as a role without connections: %v, want ErrUnavailable", err)
	}
}

// TestAdvise_Autovacuum checks that Advise warns exactly when the server's
// autovacuum is off, whichever way this server is set.
func TestAdvise_Autovacuum(t *testing.T) {
	t.Parallel()
	s, ctx := setup(t)
	pool, err := pgxpool.New(ctx, dbtest.PostgresURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var setting string
	if err := pool.QueryRow(ctx, "SHOW autovacuum").Scan(&setting); err != nil {
		t.Fatal(err)
	}
	advice, err := s.Advise(ctx)
	if err != nil {
		t.Fatal(err)
	}
	warned := len(advice) == 1 && strings.Contains(advice[0], "autovacuum is off")
	if want := setting == "off"; warned != want || (!want && len(advice) != 0) {
		t.Errorf("autovacuum %s: Advise = %q", setting, advice)
	}
}
