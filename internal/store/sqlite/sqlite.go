// Package sqlite is the embedded SQLite dialect of the store: rowq's
// zero-setup default. It uses modernc.org/sqlite (pure Go, no cgo).
//
// Writes go through one connection (SQLite has one writer at a time; a pool
// of writers only trades SQLITE_BUSY errors), reads through a pool of their
// own, in WAL mode. SQLite has no server clock: the database's clock is the
// clock of the host that holds the file, which every process sharing the
// file also reads. Times are stored as integer microseconds since the epoch.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/migrate"
	"github.com/rowq/rowq/internal/store/sqldb"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite store.
type Store struct {
	store.FlowHook         // FlowWatch, and Done after a commit that ended flow jobs
	w              *sql.DB // the one writer connection
	r              *sql.DB // readers
	now            func() time.Time
	path           string // the database file, beside which node sessions keep their lock files
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the SQLite database file at path.
func Open(path string) (*Store, error) {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(FULL)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	return &Store{w: w, r: r, now: time.Now, path: path}, nil
}

// Dialect returns "sqlite".
func (s *Store) Dialect() string { return "sqlite" }

// Migrate applies the embedded migrations.
func (s *Store) Migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	r := &migrate.Runner{DB: s.w, FS: sub, Transactional: true, Placeholder: func(int) string { return "?" }}
	return mapErr(r.Run(ctx))
}

// Ping checks that the file can be read.
func (s *Store) Ping(ctx context.Context) error { return mapErr(s.r.PingContext(ctx)) }

// Now returns the host's clock.
func (s *Store) Now(context.Context) (time.Time, error) { return s.now().UTC(), nil }

// Close closes both pools.
func (s *Store) Close() error { return errors.Join(s.r.Close(), s.w.Close()) }

func (s *Store) micros() int64 { return s.now().UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// mapErr maps SQLite errors onto the store's errors. It is the only place
// that knows SQLite's error codes.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
	}
	return err
}

// retryable reports a busy or locked database: the busy timeout ran out
// while another process held the write lock.
func retryable(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && (se.Code()&0xff == sqlite3.SQLITE_BUSY || se.Code()&0xff == sqlite3.SQLITE_LOCKED)
}

// inTx runs fn in a write transaction and commits it, or rolls it back if
// fn fails; the whole transaction runs again while it fails retryably.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return mapErr(sqldb.InTx(ctx, s.w, retryable, fn))
}

func affected(res sql.Result, err error) (int64, error) {
	n, err := sqldb.Affected(res, err)
	return n, mapErr(err)
}

// Advise has nothing to say: rowq needs no setting of this database beyond
// what Open checks.
func (s *Store) Advise(context.Context) ([]string, error) { return nil, nil }
