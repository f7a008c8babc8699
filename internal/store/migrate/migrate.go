// Package migrate applies a dialect's embedded schema migrations and records
// which versions are applied in the table rowq_migrations.
//
// Files are named NNNN_name.up.sql and applied in version order. Concurrent
// runs (several nodes starting at once) are serialised by the dialect's Lock.
package migrate

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

// Runner applies the migrations in FS to DB.
type Runner struct {
	DB *sql.DB
	// FS holds the *.up.sql files at its root.
	FS fs.FS
	// Lock takes a lock that serialises runs across processes on conn and
	// returns the function that releases it. Nil means no lock beyond each
	// migration's own transaction (SQLite, whose write transactions are
	// already exclusive).
	Lock func(ctx context.Context, conn *sql.Conn) (unlock func(), err error)
	// Transactional says that DDL is transactional (PostgreSQL, SQLite): the
	// files not applied yet and their version rows are applied in one
	// transaction. MySQL DDL is not, so there each file holds one statement
	// and the version row is written after it.
	Transactional bool
	// Placeholder renders the n-th (1-based) bind parameter: "?" or "$1".
	Placeholder func(n int) string
	// Applied, if set, reports an error of a non-transactional migration's
	// statement, or of the row that records it, that a concurrent twin's
	// success would cause (a table that exists, a version recorded): the
	// migration then counts as applied. For engines whose lock may not
	// hold against every twin (Galera, where a lease can expire under a
	// stalled migrator).
	Applied func(error) bool
}

type migration struct {
	version int
	name    string
	sql     string
}

// Run applies every migration not applied yet.
func (r *Runner) Run(ctx context.Context) error {
	migs, err := r.load()
	if err != nil {
		return err
	}
	conn, err := r.DB.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close()
	if r.Lock != nil {
		unlock, err := r.Lock(ctx, conn)
		if err != nil {
			return fmt.Errorf("migrate: lock: %w", err)
		}
		defer unlock()
	}
	if _, err := conn.ExecContext(ctx, `/* rowq:migrate.table */ CREATE TABLE IF NOT EXISTS rowq_migrations (
		version BIGINT NOT NULL PRIMARY KEY,
		name VARCHAR(255) NOT NULL)`); err != nil {
		return fmt.Errorf("migrate: create rowq_migrations: %w", err)
	}
	if r.Transactional {
		return r.runTx(ctx, conn, migs)
	}
	done, err := appliedVersions(ctx, conn)
	if err != nil {
		return err
	}
	for _, m := range migs {
		if done[m.version] {
			continue
		}
		// Read again just before: where the lock may not hold against
		// every twin (Galera), a twin may have applied it meanwhile.
		var n int
		check := "/* rowq:migrate.check */ SELECT COUNT(*) FROM rowq_migrations WHERE version = " + r.Placeholder(1)
		if err := conn.QueryRowContext(ctx, check, m.version).Scan(&n); err != nil {
			return fmt.Errorf("migrate: %04d_%s: %w", m.version, m.name, err)
		}
		if n > 0 {
			continue
		}
		if _, err := conn.ExecContext(ctx, m.sql); err != nil && !r.applied(err) {
			return fmt.Errorf("migrate: %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := conn.ExecContext(ctx, r.recordSQL(), m.version, m.name); err != nil && !r.applied(err) {
			return fmt.Errorf("migrate: %04d_%s: record: %w", m.version, m.name, err)
		}
	}
	return nil
}

// runTx applies the migrations not applied yet in one transaction, where
// DDL is transactional: a schema is upgraded whole or not at all, with one
// commit (a fresh SQLite database was 25 commits, each synced to disk).
func (r *Runner) runTx(ctx context.Context, conn *sql.Conn, migs []migration) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: begin: %w", err)
	}
	defer tx.Rollback()
	done, err := appliedVersions(ctx, tx)
	if err != nil {
		return err
	}
	n := 0
	for _, m := range migs {
		if done[m.version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("migrate: %04d_%s: %w", m.version, m.name, err)
		}
		if _, err := tx.ExecContext(ctx, r.recordSQL(), m.version, m.name); err != nil {
			return fmt.Errorf("migrate: %04d_%s: record: %w", m.version, m.name, err)
		}
		n++
	}
	if n == 0 {
		return nil // up to date: nothing to commit
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate: commit: %w", err)
	}
	return nil
}

// appliedVersions reads the versions rowq_migrations records.
func appliedVersions(ctx context.Context, q interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}) (map[int]bool, error) {
	rows, err := q.QueryContext(ctx, "/* rowq:migrate.check */ SELECT version FROM rowq_migrations")
	if err != nil {
		return nil, fmt.Errorf("migrate: read rowq_migrations: %w", err)
	}
	defer rows.Close()
	done := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("migrate: read rowq_migrations: %w", err)
		}
		done[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("migrate: read rowq_migrations: %w", err)
	}
	return done, nil
}

func (r *Runner) recordSQL() string {
	return "/* rowq:migrate.record */ INSERT INTO rowq_migrations (version, name) VALUES (" + r.Placeholder(1) + ", " + r.Placeholder(2) + ")"
}

func (r *Runner) applied(err error) bool { return r.Applied != nil && r.Applied(err) }

func (r *Runner) load() ([]migration, error) {
	paths, err := fs.Glob(r.FS, "*.up.sql")
	if err != nil {
		return nil, err
	}
	var migs []migration
	for _, p := range paths {
		num, name, ok := strings.Cut(strings.TrimSuffix(p, ".up.sql"), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			return nil, fmt.Errorf("migrate: file %s: want NNNN_name.up.sql", p)
		}
		b, err := fs.ReadFile(r.FS, p)
		if err != nil {
			return nil, err
		}
		migs = append(migs, migration{version: v, name: name, sql: string(b)})
	}
	sort.Slice(migs, func(i, j int) bool { return migs[i].version < migs[j].version })
	for i := 1; i < len(migs); i++ {
		if migs[i].version == migs[i-1].version {
			return nil, fmt.Errorf("migrate: two files have version %d", migs[i].version)
		}
	}
	return migs, nil
}
