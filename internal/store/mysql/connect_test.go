package mysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
)

func TestMapErr_ServerErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		number uint16
		want   error // nil: neither unavailable nor a conflict
	}{
		{1047, store.ErrUnavailable}, // Galera member outside the primary component
		{1180, store.ErrUnavailable}, // commit failed
		{1792, store.ErrUnavailable}, // read-only transaction
		{1290, store.ErrUnavailable}, // --read-only
		{1836, store.ErrUnavailable}, // read-only mode
		{1213, store.ErrUnavailable}, // deadlock that outlasted the retries
		{1205, store.ErrUnavailable}, // lock wait timeout
		{1040, store.ErrUnavailable}, // too many connections
		{1053, store.ErrUnavailable}, // shutdown
		{1927, store.ErrUnavailable}, // connection killed
		{1062, store.ErrConflict},
		{1064, nil}, // syntax error
		{1146, nil}, // no such table
	} {
		t.Run(fmt.Sprint(tc.number), func(t *testing.T) {
			t.Parallel()
			err := mysql.MapErr(fmt.Errorf("insert jobs: %w", &gomysql.MySQLError{Number: tc.number, Message: "m"}))
			for _, sentinel := range []error{store.ErrUnavailable, store.ErrConflict, store.ErrNotFound} {
				if got, want := errors.Is(err, sentinel), sentinel == tc.want; got != want {
					t.Errorf("errors.Is(mapErr(%d), %v) = %v, want %v", tc.number, sentinel, got, want)
				}
			}
		})
	}
}

func TestDSNsFromURL_HostLists(t *testing.T) {
	t.Parallel()
	dsns, err := mysql.DSNsFromURL("mysql://u:p%40w@h1:3311,h2,[::1]:3313/rowq?tls=skip-verify")
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, dsn := range dsns {
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("ParseDSN(%s): %v", dsn, err)
		}
		if cfg.User != "u" || cfg.Passwd != "p@w" || cfg.DBName != "rowq" || cfg.TLS == nil || cfg.Timeout != 5*time.Second {
			t.Errorf("%s: user %q, password %q, db %q, TLS %v, timeout %v; want u, p@w, rowq, TLS, 5s", dsn, cfg.User, cfg.Passwd, cfg.DBName, cfg.TLS != nil, cfg.Timeout)
		}
		addrs = append(addrs, cfg.Addr)
	}
	if got, want := strings.Join(addrs, " "), "h1:3311 h2:3306 [::1]:3313"; got != want {
		t.Errorf("hosts = %s, want %s", got, want)
	}
	// One host: no timeout the URL does not ask for.
	one, err := mysql.DSNFromURL("mysql://u@h1/rowq")
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := gomysql.ParseDSN(one); cfg.Timeout != 0 || cfg.Addr != "h1:3306" {
		t.Errorf("one host: addr %s, timeout %v; want h1:3306, none", cfg.Addr, cfg.Timeout)
	}
	if _, err := mysql.DSNFromURL("mysql://u:secret@h1,h2/rowq"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("DSNFromURL of two hosts: err = %v, want an error that hides the password", err)
	}
	for _, bad := range []string{"mysql://u:secret@h1,,h2/rowq", "mysql://u:secret@h1:0/rowq", "mysql://u:secret@h1,h2/"} {
		if _, err := mysql.OpenURL(bad); err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("OpenURL(%s): err = %v, want an error that hides the password", bad, err)
		}
	}
}

// TestConnect_OneHostStatements: a URL naming one host costs a new
// connection what it always did, the session settings of the DSN and the
// isolation level; the readiness check is only for host lists. Counted by
// the server (the session's Questions, the SHOW itself included).
func TestConnect_OneHostStatements(t *testing.T) {
	t.Parallel()
	count := func(t *testing.T, url string) int {
		s, err := mysql.OpenURL(url)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var name string
		var n int
		if err := s.DB().QueryRowContext(t.Context(), "SHOW SESSION STATUS LIKE 'Questions'").Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	one := dbtest.URL(t, "mysql")
	if got, want := count(t, one), 3; got != want {
		t.Errorf("statements on a new connection, one host = %d, want %d (session settings, isolation level, the SHOW)", got, want)
	}
	// The same server named twice: the readiness check runs.
	u, _, _ := strings.Cut(strings.TrimPrefix(one, "mysql://"), "/")
	host := u[strings.LastIndexByte(u, '@')+1:]
	two := strings.Replace(one, host, host+","+host, 1)
	if got, want := count(t, two), 4; got != want {
		t.Errorf("statements on a new connection, two hosts = %d, want %d (read_only and wsrep_on, MariaDB without Galera)", got, want)
	}
}

// TestConnect_RetiresConnectionOnReadOnlyError: a connection that gets a
// server error saying the server cannot serve (1792 here, the one a
// single server gives on demand) is not used again, nor are the pool's
// other connections.
func TestConnect_RetiresConnectionOnReadOnlyError(t *testing.T) {
	t.Parallel()
	s := dbtest.Open(t, "mysql").(*mysql.Store)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	db := s.DB()
	if _, err := db.ExecContext(ctx, "CREATE TABLE ro_t (id INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	// Two connections in the pool: the one that gets the error and another.
	other, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	otherID := connID(t, ctx, other)
	tx, err := db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var badID int64
	if err := tx.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&badID); err != nil {
		t.Fatal(err)
	}
	_, err = tx.ExecContext(ctx, "INSERT INTO ro_t VALUES (1)")
	var me *gomysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1792 {
		t.Fatalf("insert in a read-only transaction: err = %v, want error 1792", err)
	}
	if err := mysql.MapErr(err); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("mapErr(1792) = %v, want ErrUnavailable", err)
	}
	tx.Rollback()
	other.Close()
	for range 5 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if id := connID(t, ctx, c); id == badID || id == otherID {
			t.Fatalf("connection %d used again after error 1792 (retired: %d and %d)", id, badID, otherID)
		}
		c.Close()
	}
}

func connID(t *testing.T, ctx context.Context, c *sql.Conn) int64 {
	t.Helper()
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}
