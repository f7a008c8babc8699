package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/mysql"
)

// The HA clusters of scripts/galera.sh and scripts/pg-ha.sh, for the tests
// built with the tag ha (docs/ha.md). A test asks for a cluster with
// StartGalera or StartPGHA, which start it if it is not running (under a file
// lock, so that parallel test binaries start it once) and fail the test if it
// cannot: it is never skipped. The scripts' own variables choose the ports
// and data directories (ROWQ_GALERA_PORT, ROWQ_GALERA_GPORT, ROWQ_GALERA_DIR,
// ROWQ_PGHA_PORT, ROWQ_PGHA_DIR), so that several clusters can run side by
// side.
//
// A test that kills or fails over members changes the cluster for every
// other test of the run, so a test has a cluster to itself: StartGalera and
// StartPGHA hold the cluster's lock (Lock) until the test ends. A test asks
// once; its subtests use what it was given.

// Galera is a running three-member Galera cluster.
type Galera struct {
	Members []string // mysql:// URL of each member, 1 to 3, database test
	URL     string   // one URL naming the three members
}

// StartGalera starts the Galera cluster if it is not running.
func StartGalera(t testing.TB) *Galera {
	t.Helper()
	Lock(t, "galera")
	urls := haScript(t, "galera.sh", "start")
	g := &Galera{URL: lastLine(urls)}
	for n := 1; n <= 3; n++ {
		g.Members = append(g.Members, lastLine(haScript(t, "galera.sh", "url", strconv.Itoa(n))))
	}
	return g
}

// Database creates an empty database on the cluster and returns the
// cluster with its URLs naming that database instead of test. The database
// is dropped, through whichever member answers, when the test ends.
func (g *Galera) Database(t testing.TB) *Galera {
	t.Helper()
	name := "rowq_t_" + randHex(6)
	dsn, err := mysql.DSNFromURL(g.Members[0])
	if err != nil {
		t.Fatal(err)
	}
	admin := openAdmin(t, "mysql", dsn, g.Members[0])
	exec(t, admin, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
	admin.Close()
	t.Cleanup(func() { dropAnywhere(g.Members, name) })
	db := &Galera{URL: renameDB(g.URL, name)}
	for _, m := range g.Members {
		db.Members = append(db.Members, renameDB(m, name))
		// A member applies what another committed a moment later: a test
		// that connects to the new database through it at once could find
		// none (Error 1049). Wait until each member has it.
		seeDatabase(t, m, name)
	}
	return db
}

// seeDatabase waits until member m has database name, asking with
// wsrep_sync_wait so that each answer comes after the member applied what
// the cluster had committed.
func seeDatabase(t testing.TB, m, name string) {
	t.Helper()
	dsn, err := mysql.DSNFromURL(m)
	if err != nil {
		t.Fatal(err)
	}
	admin := openAdmin(t, "mysql", dsn, m)
	defer admin.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var n int
		err := admin.QueryRowContext(ctx, "SET STATEMENT wsrep_sync_wait = 1 FOR SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name).Scan(&n)
		cancel()
		if err == nil && n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dbtest: database %s not on %s after 60 s (last error: %v)", name, m, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dropAnywhere drops database name through the first member that takes the
// statement: a test may have left a member down.
func dropAnywhere(members []string, name string) {
	for _, m := range members {
		dsn, err := mysql.DSNFromURL(m)
		if err != nil {
			continue
		}
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_, err = db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name)
		cancel()
		db.Close()
		if err == nil {
			return
		}
	}
}

// renameDB replaces the database /test of a cluster URL (which url.Parse may
// not take: it names several hosts) by /name.
func renameDB(u, name string) string { return strings.Replace(u, "/test", "/"+name, 1) }

// Shell returns a shell command that runs scripts/galera.sh with args on
// this cluster, whatever the environment of the shell: for a chaos run's
// database fault.
func (g *Galera) Shell(t testing.TB, args string) string { return shell(t, "galera.sh", args) }

// Kill SIGKILLs member n (1-3).
func (g *Galera) Kill(t testing.TB, n int) {
	t.Helper()
	haScript(t, "galera.sh", "kill", strconv.Itoa(n))
}

// Restart starts member n again and waits until it has rejoined.
func (g *Galera) Restart(t testing.TB, n int) {
	t.Helper()
	haScript(t, "galera.sh", "restart", strconv.Itoa(n))
}

// PGHA is a running PostgreSQL primary with a streaming standby.
type PGHA struct {
	URL string // both hosts, target_session_attrs=read-write
}

// StartPGHA starts the pair in mode "sync" or "async", or switches a running
// pair to that mode.
func StartPGHA(t testing.TB, mode string) *PGHA {
	t.Helper()
	Lock(t, "pg-ha")
	return &PGHA{URL: lastLine(haScript(t, "pg-ha.sh", "start", mode))}
}

// Database creates an empty database on the pair and returns the pair with
// its URL naming that database. The database is dropped when the test ends.
func (p *PGHA) Database(t testing.TB) *PGHA {
	t.Helper()
	name := "rowq_t_" + randHex(6)
	admin := openAdmin(t, "pgx", p.URL, p.URL)
	exec(t, admin, "CREATE DATABASE "+name)
	admin.Close()
	t.Cleanup(func() {
		if db, err := sql.Open("pgx", p.URL); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			db.ExecContext(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			cancel()
			db.Close()
		}
	})
	db := &PGHA{URL: renameDB(p.URL, name)}
	// pgx tries the hosts in order and gives up at a server that says the
	// database does not exist, as a standby does until it has replayed
	// the CREATE DATABASE.
	conn, err := sql.Open("pgx", db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	deadline := time.Now().Add(30 * time.Second)
	for err = conn.Ping(); err != nil && time.Now().Before(deadline); err = conn.Ping() {
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("dbtest: the new database on the PostgreSQL pair: %v", err)
	}
	return db
}

// Shell returns a shell command that runs scripts/pg-ha.sh with args on
// this pair, whatever the environment of the shell.
func (p *PGHA) Shell(t testing.TB, args string) string { return shell(t, "pg-ha.sh", args) }

// Failover stops the primary at once and promotes the standby.
func (p *PGHA) Failover(t testing.TB) { t.Helper(); haScript(t, "pg-ha.sh", "failover") }

// Rejoin makes the stopped server a standby of the primary again.
func (p *PGHA) Rejoin(t testing.TB, mode string) { t.Helper(); haScript(t, "pg-ha.sh", "rejoin", mode) }

// Lock holds an exclusive lock named name, across the tests of this binary
// and the test binaries of a run, until the test ends. A test that holds it
// already does not wait for itself.
func Lock(t testing.TB, name string) {
	t.Helper()
	locks.Lock()
	l := locks.of[name]
	if l == nil {
		l = &procLock{}
		locks.of[name] = l
	}
	mine := l.holder == t
	locks.Unlock()
	if mine {
		return
	}
	l.mu.Lock()
	f := lockFile(t, name)
	locks.Lock()
	l.holder = t
	locks.Unlock()
	t.Cleanup(func() {
		locks.Lock()
		l.holder = nil
		locks.Unlock()
		f.Close()
		l.mu.Unlock()
	})
}

// procLock is a Lock within this process: the flock of lockFile does not
// keep two tests of one process apart.
type procLock struct {
	mu     sync.Mutex
	holder testing.TB // guarded by locks
}

var locks = struct {
	sync.Mutex
	of map[string]*procLock
}{of: map[string]*procLock{}}

func lockFile(t testing.TB, name string) *os.File {
	t.Helper()
	path := filepath.Join(os.TempDir(), "rowq-test-"+name+".lock")
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	return f
}

// haScript runs scripts/NAME with args under the lock of that script, and
// returns what it printed.
func haScript(t testing.TB, name string, args ...string) string {
	t.Helper()
	f := lockFile(t, strings.TrimSuffix(name, ".sh")+"-script")
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := osexec.CommandContext(ctx, filepath.Join(repoRoot(t), "scripts", name), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("scripts/%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// shell returns a shell command that runs scripts/NAME with args, and with
// the scripts' variables of this environment.
func shell(t testing.TB, name, args string) string {
	var env []string
	for _, v := range []string{"ROWQ_GALERA_PORT", "ROWQ_GALERA_GPORT", "ROWQ_GALERA_DIR", "ROWQ_PGHA_PORT", "ROWQ_PGHA_DIR"} {
		if x, ok := os.LookupEnv(v); ok {
			env = append(env, v+"="+strconv.Quote(x))
		}
	}
	return strings.TrimSpace(strings.Join(env, " ") + " " + filepath.Join(repoRoot(t), "scripts", name) + " " + args)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	return s[strings.LastIndexByte(s, '\n')+1:]
}

// repoRoot is the directory of go.mod above this file.
func repoRoot(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("dbtest: cannot find the repository")
	}
	dir := filepath.Dir(file)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal(fmt.Errorf("dbtest: no go.mod above %s", file))
		}
		dir = parent
	}
}
