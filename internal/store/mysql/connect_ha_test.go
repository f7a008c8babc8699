//go:build ha

package mysql_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/dburl"
	"github.com/rowq/rowq/internal/store/mysql"
)

// galeraSetup is what the connection tests on the Galera cluster need.
type galeraSetup struct {
	g     *dbtest.Galera
	ports []string // member n's port at ports[n-1]
}

// setupGalera takes the cluster for the test (it kills or isolates
// members) and makes a database on it.
func setupGalera(t *testing.T) *galeraSetup {
	t.Helper()
	dbtest.Lock(t, "galera")
	g := dbtest.StartGalera(t).Database(t)
	b := &galeraSetup{g: g}
	for _, m := range g.Members {
		u, err := dburl.Parse(m, "3306")
		if err != nil {
			t.Fatal(err)
		}
		b.ports = append(b.ports, u.Port())
	}
	// The database was created through member 1; the others apply the
	// CREATE DATABASE a little later.
	for n := range g.Members {
		b.waitDatabase(t, n+1)
	}
	return b
}

// waitDatabase waits until member n has the test's database.
func (b *galeraSetup) waitDatabase(t *testing.T, n int) {
	t.Helper()
	s, err := mysql.OpenURL(b.g.Members[n-1])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(time.Minute)
	for err = s.Ping(t.Context()); err != nil; err = s.Ping(t.Context()) {
		if time.Now().After(deadline) {
			t.Fatalf("member %d has not the test database after a minute: %v", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// open opens and migrates a store on url.
func (b *galeraSetup) open(t *testing.T, url string) *mysql.Store {
	t.Helper()
	s, err := mysql.OpenURL(url)
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

// member returns the member (1-3) a connection of s reaches.
func (b *galeraSetup) member(t *testing.T, s *mysql.Store) int {
	t.Helper()
	var port string
	if err := s.DB().QueryRowContext(t.Context(), "SELECT @@port").Scan(&port); err != nil {
		t.Fatal(err)
	}
	for i, p := range b.ports {
		if p == port {
			return i + 1
		}
	}
	t.Fatalf("port %s is no member's", port)
	return 0
}

// admin runs a statement on member n alone.
func (b *galeraSetup) admin(t *testing.T, n int, query string) {
	t.Helper()
	s, err := mysql.OpenURL(b.g.Members[n-1])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.DB().ExecContext(ctx, query); err != nil {
		t.Fatalf("member %d: %s: %v", n, query, err)
	}
}

// isolate cuts member n off the others (it leaves the primary component:
// wsrep_ready OFF, statements on tables answer 1047) until the test ends.
func (b *galeraSetup) isolate(t *testing.T, n int) {
	t.Helper()
	b.admin(t, n, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'")
	t.Cleanup(func() {
		b.admin(t, n, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'")
		b.waitPrimary(t, n)
	})
}

// waitPrimary waits until member n is back in the primary component with
// the two others.
func (b *galeraSetup) waitPrimary(t *testing.T, n int) {
	t.Helper()
	s, err := mysql.OpenURL(b.g.Members[n-1])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var name, status, size, state string
		err := s.DB().QueryRow("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_status'").Scan(&name, &status)
		if err == nil {
			err = s.DB().QueryRow("SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size)
		}
		if err == nil {
			err = s.DB().QueryRow("SHOW GLOBAL STATUS LIKE 'wsrep_local_state_comment'").Scan(&name, &state)
		}
		if err == nil && status == "Primary" && size == "3" && state == "Synced" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("member %d not back in the primary component: %s of %s, %s, %v", n, status, size, state, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// insert enqueues one job, bounded in time.
func insert(ctx context.Context, s store.Store) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://w/"}})
	return err
}

// writesResume inserts until an insert succeeds after fault() ran, and
// returns how long that took. Every failed insert must be
// store.ErrUnavailable, the answer that tells clients to try again.
func writesResume(t *testing.T, s store.Store, fault func()) time.Duration {
	t.Helper()
	if err := insert(t.Context(), s); err != nil {
		t.Fatalf("insert before the fault: %v", err)
	}
	fault()
	start := time.Now()
	failed := 0
	for deadline := start.Add(2 * time.Minute); ; {
		err := insert(t.Context(), s)
		if err == nil {
			break
		}
		failed++
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("insert after the fault: %v, want ErrUnavailable", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no insert succeeded within 2 minutes of the fault: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	took := time.Since(start)
	t.Logf("writes resumed %v after the fault (%d inserts failed)", took.Round(time.Millisecond), failed)
	return took
}

// TestGalera_MultiHostMovesOnKill: with a URL naming the three members,
// writes go to the first, and when it is killed they resume on another
// member by themselves.
func TestGalera_MultiHostMovesOnKill(t *testing.T) {
	b := setupGalera(t)
	s := b.open(t, b.g.URL)
	if got := b.member(t, s); got != 1 {
		t.Fatalf("writes go to member %d, want the first of the URL", got)
	}
	t.Cleanup(func() { b.g.Restart(t, 1) })
	writesResume(t, s, func() { b.g.Kill(t, 1) })
	if got := b.member(t, s); got == 1 {
		t.Fatalf("writes still go to the killed member")
	}
}

// TestGalera_MultiHostMovesOnIsolation: the member in use leaves the
// primary component (its connections answer 1047); the pool retires them
// and writes resume on another member.
func TestGalera_MultiHostMovesOnIsolation(t *testing.T) {
	b := setupGalera(t)
	s := b.open(t, b.g.URL)
	if got := b.member(t, s); got != 1 {
		t.Fatalf("writes go to member %d, want the first of the URL", got)
	}
	writesResume(t, s, func() { b.isolate(t, 1) })
	// Sticky: every connection now goes to the one member taken instead.
	moved := b.member(t, s)
	if moved == 1 {
		t.Fatal("writes still go to the isolated member")
	}
	for range 20 {
		if got := b.member(t, s); got != moved {
			t.Fatalf("connections go to members %d and %d, want one", moved, got)
		}
	}
}

// TestGalera_ReadOnlyMemberPassedOver: a member with read_only ON is not
// used, though it answers.
func TestGalera_ReadOnlyMemberPassedOver(t *testing.T) {
	b := setupGalera(t)
	b.admin(t, 1, "SET GLOBAL read_only = ON")
	t.Cleanup(func() { b.admin(t, 1, "SET GLOBAL read_only = OFF") })
	s := b.open(t, b.g.URL)
	if got := b.member(t, s); got != 2 {
		t.Fatalf("writes go to member %d, want 2 (1 is read-only)", got)
	}
}

// TestGalera_OutsidePrimaryIsUnavailable: through a URL naming one member,
// an enqueue on that member once it is outside the primary component is
// store.ErrUnavailable (error 1047), and once it is back, the pool serves
// again from new connections.
func TestGalera_OutsidePrimaryIsUnavailable(t *testing.T) {
	b := setupGalera(t)
	s := b.open(t, b.g.Members[2])
	if err := insert(t.Context(), s); err != nil {
		t.Fatal(err)
	}
	b.isolate(t, 3)
	// A transaction caught in the change of view may answer 1180 (or a
	// deadlock) instead: unavailable too.
	var err error
	var me *gomysql.MySQLError
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		err = insert(t.Context(), s)
		if err != nil && !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("insert on the isolated member: %v, want ErrUnavailable", err)
		}
		if errors.As(err, &me) && me.Number == 1047 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("insert on a member outside the primary component: %v, want ErrUnavailable from error 1047", err)
		}
	}
	t.Logf("%v", err)
	if !strings.Contains(err.Error(), "WSREP") {
		t.Errorf("error %q does not say why", err)
	}
	b.admin(t, 3, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'")
	b.waitPrimary(t, 3)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		if err = insert(t.Context(), s); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no insert succeeded after the member rejoined: %v", err)
		}
	}
}
