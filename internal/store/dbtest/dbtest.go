// Package dbtest gives tests a fresh database on each backend: a new MySQL
// or PostgreSQL database (dropped when the test ends) or a new SQLite file.
//
// The servers are found through ROWQ_TEST_MYSQL_URL and ROWQ_TEST_POSTGRES_URL
// (defaults: the local MariaDB and PostgreSQL that `make test` prepares), and
// a PostgreSQL role that connects over TLS only through
// ROWQ_TEST_POSTGRES_TLS_URL. A server that cannot be reached fails the test:
// it is never skipped.
package dbtest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // database/sql driver "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/backend"
	"github.com/rowq/rowq/internal/store/mysql"
)

// Dialects lists every backend the conformance and end-to-end tests run on.
var Dialects = []string{"mysql", "postgres", "sqlite"}

// ForEachDialect runs fn as a parallel subtest named after each dialect of
// Dialects.
func ForEachDialect(t *testing.T, fn func(t *testing.T, dialect string)) {
	t.Helper()
	for _, d := range Dialects {
		t.Run(d, func(t *testing.T) {
			t.Parallel()
			fn(t, d)
		})
	}
}

// Server URLs of the test database servers.
var (
	MySQLURL    = env("ROWQ_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
	PostgresURL = env("ROWQ_TEST_POSTGRES_URL", "postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	// PostgresTLSURL is a role of the PostgreSQL test server that its
	// pg_hba.conf lets in over TLS only, with the URL's sslmode and
	// sslrootcert (scripts/test.sh makes the role rowq_tls and verifies
	// the server against its own, self-signed, certificate).
	PostgresTLSURL = env("ROWQ_TEST_POSTGRES_TLS_URL",
		"postgres://rowq_tls:rowq_tls@127.0.0.1:5432/test?sslmode=verify-ca&sslrootcert=/etc/ssl/certs/ssl-cert-snakeoil.pem")
)

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// URL creates an empty database on the dialect's server and returns its URL.
// The database is dropped when the test ends.
func URL(t testing.TB, dialect string) string {
	t.Helper()
	name := "rowq_t_" + randHex(6)
	switch dialect {
	case "sqlite":
		return "sqlite://" + filepath.Join(t.TempDir(), "rowq.db")
	case "mysql":
		dsn, err := mysql.DSNFromURL(MySQLURL)
		if err != nil {
			t.Fatal(err)
		}
		admin := openAdmin(t, "mysql", dsn, MySQLURL)
		exec(t, admin, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
		t.Cleanup(func() { exec(t, admin, "DROP DATABASE IF EXISTS "+name); admin.Close() })
		return withPath(t, MySQLURL, name)
	case "postgres":
		admin := openAdmin(t, "pgx", PostgresURL, PostgresURL)
		exec(t, admin, "CREATE DATABASE "+name)
		t.Cleanup(func() { exec(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); admin.Close() })
		return withPath(t, PostgresURL, name)
	default:
		t.Fatalf("dbtest: unknown dialect %q", dialect)
		return ""
	}
}

// PostgresTLS creates an empty database on the PostgreSQL test server,
// owned by PostgresTLSURL's role, and returns its URL over TLS. The
// database is dropped when the test ends. It fails the test when the role
// is missing: scripts/test.sh makes it.
func PostgresTLS(t testing.TB) string {
	t.Helper()
	u, err := url.Parse(PostgresTLSURL)
	if err != nil {
		t.Fatal(err)
	}
	role := u.User.Username()
	name := "rowq_t_" + randHex(6)
	admin := openAdmin(t, "pgx", PostgresURL, PostgresURL)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" OWNER "+quoteIdent(role)); err != nil {
		admin.Close()
		t.Fatalf("dbtest: create a database owned by %q, the role of ROWQ_TEST_POSTGRES_TLS_URL (run scripts/test.sh, which makes it): %v", role, err)
	}
	t.Cleanup(func() { exec(t, admin, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); admin.Close() })
	return withPath(t, PostgresTLSURL, name)
}

func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// Open creates a fresh database on the dialect's server, opens and migrates
// a store on it, and closes the store when the test ends.
func Open(t testing.TB, dialect string) store.Store {
	t.Helper()
	return OpenURL(t, URL(t, dialect))
}

// OpenURL opens and migrates a store on an existing database URL and closes
// it when the test ends.
func OpenURL(t testing.TB, databaseURL string) store.Store {
	t.Helper()
	s, err := backend.Open(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate %s: %v", s.Dialect(), err)
	}
	return s
}

func openAdmin(t testing.TB, driver, dsn, shown string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("dbtest: the %s test server at %s cannot be reached (run `make test`, which starts it): %v", driver, backend.Redact(shown), err)
	}
	return db
}

func exec(t testing.TB, db *sql.DB, q string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, q); err != nil {
		t.Errorf("dbtest: %s: %v", q, err)
	}
}

func withPath(t testing.TB, raw, dbname string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + dbname
	return u.String()
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// AppDB opens a database that URL made the way an application opens it
// (the transactional outbox's tests write to rowq_outbox as one): through
// database/sql with the dialect's driver and the server's default session
// settings, with at most maxConns connections. It is closed when the test
// ends.
func AppDB(t testing.TB, databaseURL string, maxConns int) *sql.DB {
	t.Helper()
	scheme, rest, _ := strings.Cut(databaseURL, "://")
	var db *sql.DB
	var err error
	switch scheme {
	case "mysql":
		dsn, derr := mysql.DSNFromURL(databaseURL)
		if derr != nil {
			t.Fatal(derr)
		}
		db, err = sql.Open("mysql", dsn)
	case "postgres":
		db, err = sql.Open("pgx", databaseURL)
	case "sqlite":
		path, _, _ := strings.Cut(rest, "?")
		db, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_txlock=immediate")
	default:
		t.Fatalf("dbtest: unknown database URL %q", databaseURL)
	}
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	t.Cleanup(func() { db.Close() })
	return db
}

// WithUser returns databaseURL with user and password instead of its own.
func WithUser(t testing.TB, databaseURL, user, password string) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, password)
	return u.String()
}

// Rebind turns the ? placeholders of q into PostgreSQL's $1, $2, … for
// the postgres dialect.
func Rebind(dialect, q string) string {
	if dialect != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
