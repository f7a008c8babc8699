// Package sqldb is the database/sql plumbing the MySQL and SQLite dialects
// share: collecting rows through a scan function, transactions, retrying
// what the dialect calls retryable, and placeholder lists. It knows no
// driver: each dialect passes its own predicate, and maps errors in its own
// mapErr. Its only SQL is what both dialects write alike: the outbox's
// (outbox.go, whose columns and arguments PostgreSQL uses too) and the
// worker hosts' (workerhosts.go); due.go and keys.go read answers both
// dialects' queries shape alike. (PostgreSQL uses pgx natively and has
// the same shapes in its own terms.)
package sqldb

import (
	"context"
	"database/sql"
	"math/rand/v2"
	"strings"
	"time"
)

// DBTX is a *sql.DB, a *sql.Tx or a *sql.Conn.
type DBTX interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Scanner is a *sql.Row or a *sql.Rows.
type Scanner interface{ Scan(dest ...any) error }

// QueryAll runs query on db and returns every row it selects, scanned by
// scan, in order.
func QueryAll[T any](ctx context.Context, db DBTX, scan func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// QueryOne runs query on db and returns the one row it selects, scanned by
// scan; sql.ErrNoRows when it selects none.
func QueryOne[T any](ctx context.Context, db DBTX, scan func(Scanner) (T, error), query string, args ...any) (T, error) {
	return scan(db.QueryRowContext(ctx, query, args...))
}

// ScanString scans a row of one text column, for QueryAll and QueryOne.
func ScanString(row Scanner) (string, error) {
	var v string
	err := row.Scan(&v)
	return v, err
}

// ScanNullString scans a row of one text column that may be NULL (nil).
func ScanNullString(row Scanner) (*string, error) {
	var v *string
	err := row.Scan(&v)
	return v, err
}

// ScanInt64 scans a row of one integer column, for QueryAll and QueryOne.
func ScanInt64(row Scanner) (int64, error) {
	var v int64
	err := row.Scan(&v)
	return v, err
}

// Attempts bounds how often Retry and InTx run what they run.
const Attempts = 5

// Retry runs fn, and again after a short jittered pause, up to Attempts
// times in all, while it fails with an error retryable reports (a deadlock,
// a lock wait timeout, a busy database). fn must be safe to run again: a
// single statement or a whole transaction. A nil retryable runs fn once.
func Retry(ctx context.Context, retryable func(error) bool, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if err == nil || attempt == Attempts || retryable == nil || !retryable(err) {
			return err
		}
		backoff := time.Duration(attempt)*5*time.Millisecond + rand.N(5*time.Millisecond)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
	}
}

// InTx runs fn in a transaction on db and commits it, or rolls it back if
// fn fails; the whole transaction runs again while it fails with an error
// retryable reports (see Retry).
func InTx(ctx context.Context, db *sql.DB, retryable func(error) bool, fn func(tx *sql.Tx) error) error {
	return Retry(ctx, retryable, func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			tx.Rollback()
			return err
		}
		return tx.Commit()
	})
}

// Placeholders returns "?, ?, …" with n marks, for IN lists and VALUES.
func Placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?, ", n), ", ")
}

// Affected returns the rows a statement matched, or its error.
func Affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// NullString is s as a statement's argument: NULL when s is "", so that
// an optional column left empty costs no bytes of the row.
func NullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
