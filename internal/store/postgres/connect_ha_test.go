//go:build ha

package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/dburl"
	"github.com/rowq/rowq/internal/store/postgres"
)

// setupPGHA takes the pair for the test (it fails over or reconfigures
// the servers), in sync mode, and makes a database on it that both servers
// have: the standby replays the CREATE DATABASE a little after the primary
// has committed it.
func setupPGHA(t *testing.T) *dbtest.PGHA {
	t.Helper()
	dbtest.Lock(t, "pg-ha")
	p := dbtest.StartPGHA(t, "sync").Database(t)
	for _, u := range hostURLs(t, p.URL) {
		s, err := postgres.Open(u)
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for err = s.Ping(t.Context()); isCode(err, "3D000"); err = s.Ping(t.Context()) { // no such database yet
			if time.Now().After(deadline) {
				t.Fatalf("%s has not the test database after a minute: %v", u, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		s.Close()
	}
	return p
}

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// openPG opens and migrates a store on url.
func openPG(t *testing.T, url string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}

// hostURLs returns one URL per host of the pair's URL, without
// target_session_attrs: each reaches its server whatever that is.
func hostURLs(t *testing.T, pairURL string) []string {
	t.Helper()
	u, err := dburl.Parse(pairURL, "5432")
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("target_session_attrs")
	var out []string
	for _, h := range u.Hosts {
		c := *u.URL
		c.Host, c.RawQuery = h, q.Encode()
		out = append(out, c.String())
	}
	return out
}

func insertPG(ctx context.Context, s store.Store) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://w/"}})
	return err
}

// TestPGHA_FailoverResumesWithin5s: the primary is stopped at once and the
// standby promoted; the store, on the pair's URL, writes again within 5 s of
// the promotion, and a node session opens again.
func TestPGHA_FailoverResumesWithin5s(t *testing.T) {
	p := setupPGHA(t)
	s := openPG(t, p.URL)
	ctx := t.Context()
	if err := insertPG(ctx, s); err != nil {
		t.Fatal(err)
	}
	sess, err := s.NodeSessionOpen(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	t.Cleanup(func() { p.Rejoin(t, "sync") })
	stopped := time.Now()
	p.Failover(t) // returns once the standby is promoted
	promoted := time.Now()
	failed := 0
	for {
		err := insertPG(ctx, s)
		if err == nil {
			break
		}
		failed++
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("insert after the failover: %v, want ErrUnavailable", err)
		}
		if time.Since(promoted) > time.Minute {
			t.Fatalf("no insert within a minute of the promotion: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(promoted)
	t.Logf("writes resumed %v after the promotion, %v after the primary was stopped (%d inserts failed)",
		took.Round(time.Millisecond), time.Since(stopped).Round(time.Millisecond), failed)
	if took > 5*time.Second {
		t.Errorf("writes resumed %v after the promotion, want within 5s", took)
	}
	if err := sess.Check(ctx); err == nil {
		t.Error("the node session on the stopped primary still checks")
	}
	sess2, err := s.NodeSessionOpen(ctx, "n1")
	if err != nil {
		t.Fatalf("node session on the new primary: %v", err)
	}
	sess2.Close()
}

// TestPGHA_StandbyRefused: a URL naming the standby alone gives no
// connection: reads and node sessions are unavailable, though the standby
// answers them.
func TestPGHA_StandbyRefused(t *testing.T) {
	p := setupPGHA(t)
	ctx := t.Context()
	refused := 0
	for _, u := range hostURLs(t, p.URL) {
		s, err := postgres.Open(u)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, err = s.Now(ctx)
		if err == nil {
			continue // the primary
		}
		refused++
		if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "read-only") {
			t.Errorf("%s: Now = %v, want ErrUnavailable saying read-only", u, err)
		}
		if _, err := s.NodeSessionOpen(ctx, "n1"); !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: NodeSessionOpen = %v, want ErrUnavailable", u, err)
		}
	}
	if refused != 1 {
		t.Fatalf("%d servers of the pair refused, want 1 (the standby)", refused)
	}
}

// TestPGHA_ReadOnlyPrimary: the primary made read-only (as a failover tool
// fences it): writes are unavailable (25006 on the pool's connections,
// which go, then no new connection taken) and the node session's check
// fails; made writable again, writes resume.
func TestPGHA_ReadOnlyPrimary(t *testing.T) {
	p := setupPGHA(t)
	s := openPG(t, p.URL)
	ctx := t.Context()
	if err := insertPG(ctx, s); err != nil {
		t.Fatal(err)
	}
	sess, err := s.NodeSessionOpen(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	setReadOnly(t, p, "on")
	t.Cleanup(func() { setReadOnly(t, p, "off") })
	var werr error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if werr = insertPG(ctx, s); werr != nil || time.Now().After(deadline) {
			break
		}
	}
	if !errors.Is(werr, store.ErrUnavailable) {
		t.Fatalf("insert on a read-only primary: %v, want ErrUnavailable", werr)
	}
	if err := sess.Check(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("node session check on a read-only primary: %v, want ErrUnavailable", err)
	}
	setReadOnly(t, p, "off")
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if werr = insertPG(ctx, s); werr == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no insert after the primary took writes again: %v", werr)
		}
	}
}

// setReadOnly sets default_transaction_read_only on the pair's primary,
// through a session that overrides it (options=-c …), as the store's own
// sessions then cannot.
func setReadOnly(t *testing.T, p *dbtest.PGHA, on string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, u := range hostURLs(t, p.URL) {
		pu, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		// pgx takes no + for a space.
		pu.RawQuery += "&options=-c%20default_transaction_read_only%3Doff"
		c, err := postgres.Open(pu.String())
		if err != nil {
			t.Fatal(err)
		}
		pool := postgres.Pool(c)
		_, err = pool.Exec(ctx, "ALTER SYSTEM SET default_transaction_read_only = "+on)
		if err == nil {
			_, err = pool.Exec(ctx, "SELECT pg_reload_conf()")
		}
		c.Close()
		if err == nil {
			return
		}
		errs = append(errs, err)
	}
	t.Fatalf("no primary took default_transaction_read_only = %s: %v", on, errs)
}

// TestPGHA_AdviseAsyncStandby: Advise warns about a standby that commits
// do not wait for, and not about a synchronous one.
func TestPGHA_AdviseAsyncStandby(t *testing.T) {
	dbtest.Lock(t, "pg-ha")
	ctx := t.Context()
	warned := func(mode string) bool {
		t.Helper()
		p := dbtest.StartPGHA(t, mode)
		s, err := postgres.Open(p.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		advice, err := s.Advise(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %q", mode, advice)
		for _, a := range advice {
			if strings.Contains(a, "asynchronously") {
				return true
			}
		}
		return false
	}
	if !warned("async") {
		t.Error("no advice about an asynchronous standby")
	}
	if warned("sync") {
		t.Error("advice about a synchronous standby")
	}
}
