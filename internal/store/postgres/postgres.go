// Package postgres implements store.Store on PostgreSQL 13 and later, through
// pgx and a pgxpool connection pool.
//
// Every operation is one SQL statement, so none holds a transaction open
// across round trips; jobs are grabbed with FOR UPDATE SKIP LOCKED. Times are
// taken from the database's clock (now()) and returned in UTC.
package postgres

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/migrate"
)

//go:embed migrations/*.up.sql
var migrations embed.FS

// migrateLockKey is the pg_advisory_lock key that serialises migration runs
// across nodes ("rowq" in ASCII).
const migrateLockKey = 0x726f7771

// maxConns is the pool size unless the URL sets pool_max_conns.
const maxConns = 32

// Store is the PostgreSQL store. It is safe for concurrent use.
type Store struct {
	store.FlowHook // FlowWatch, and Done after the commits that end flow jobs
	pool           *pgxpool.Pool
	db             *sql.DB // pool seen through database/sql, for the migration runner
}

var _ store.Store = (*Store)(nil)

// Open returns a store for a postgres://user:pass@host:5432/db?sslmode=…
// URL. It does not connect until the first operation, and does not migrate.
// Each connection waits store.LockWait at most for a lock, unless the URL
// sets lock_timeout.
//
// The URL may name several hosts, as pgx takes them
// (postgres://…@h1:5432,h2:5432/db?target_session_attrs=read-write). Either
// way, a connection that reaches a read-only server (a standby, or a
// primary made read-only) is refused, and a statement answered 25006
// (read-only transaction) closes the pool's connections: after a failover,
// the pool reconnects to the primary instead of keeping connections to the
// old one.
func Open(url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		cfg.MaxConns = maxConns
	}
	setTimeout := false
	if _, ok := cfg.ConnConfig.RuntimeParams["lock_timeout"]; !ok {
		// Set after connecting, not as a startup parameter, which
		// connection poolers such as PgBouncer refuse.
		setTimeout = true
	}
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error { return afterConnect(ctx, conn, setTimeout) }
	var pool atomic.Pointer[pgxpool.Pool]
	var lastReset atomic.Int64 // unix nanoseconds
	onPgError := cfg.ConnConfig.OnPgError
	cfg.ConnConfig.OnPgError = func(pc *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		if pgErr.Code != codeReadOnlyTransaction {
			return onPgError == nil || onPgError(pc, pgErr)
		}
		// The server is read-only, and so is every connection to it:
		// close them all, once a second at most (each connection of
		// the pool may answer 25006 before it goes).
		now, last := time.Now().UnixNano(), lastReset.Load()
		if p := pool.Load(); p != nil && now-last > int64(time.Second) && lastReset.CompareAndSwap(last, now) {
			go p.Reset()
		}
		return false // closes this connection
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres: %w", err)
	}
	pool.Store(p)
	return &Store{pool: p, db: stdlib.OpenDBFromPool(p)}, nil
}

// errReadOnly is the error of a connection to a read-only server.
var errReadOnly = fmt.Errorf("%w: the server is read-only (a standby?); rowq writes to the primary", store.ErrUnavailable)

// afterConnect refuses a connection to a read-only server and sets
// lock_timeout when setTimeout is true. PostgreSQL 14 and later report
// in_hot_standby and default_transaction_read_only when the connection
// opens; the statement that sets lock_timeout reads transaction_read_only,
// which covers a read-only server of any version.
func afterConnect(ctx context.Context, conn *pgx.Conn, setTimeout bool) error {
	pc := conn.PgConn()
	if pc.ParameterStatus("in_hot_standby") == "on" || pc.ParameterStatus("default_transaction_read_only") == "on" {
		return errReadOnly
	}
	if !setTimeout {
		return nil
	}
	var readOnly string
	err := conn.QueryRow(ctx, `/* rowq:connect */ SELECT set_config('lock_timeout', $1, false), current_setting('transaction_read_only')`, lockTimeout).Scan(new(string), &readOnly)
	if err != nil {
		return err
	}
	if readOnly == "on" {
		return errReadOnly
	}
	return nil
}

// Dialect returns "postgres".
func (s *Store) Dialect() string { return "postgres" }

// Migrate applies the embedded migrations not applied yet, holding an
// advisory lock so that nodes starting together run them once.
func (s *Store) Migrate(ctx context.Context) error {
	r := &migrate.Runner{
		DB:            s.db,
		FS:            migrationFS(),
		Lock:          lockMigrations,
		Transactional: true,
		Placeholder:   func(n int) string { return "$" + strconv.Itoa(n) },
	}
	if err := r.Run(ctx); err != nil {
		return fmt.Errorf("migrate postgres: %w", mapErr(err))
	}
	return nil
}

// lockTimeout is store.LockWait as lock_timeout takes it.
var lockTimeout = strconv.FormatInt(store.LockWait.Milliseconds(), 10) + "ms"

// lockMigrations waits for the migration lock, and lifts lock_timeout on
// conn until it unlocks: another node's migrations take as long as they
// take, and a migration's DDL may wait for the tables it alters.
func lockMigrations(ctx context.Context, conn *sql.Conn) (func(), error) {
	var was string
	if err := conn.QueryRowContext(ctx, `/* rowq:migrate.lock */
		SELECT current_setting('lock_timeout'), set_config('lock_timeout', '0', false)`).Scan(&was, new(string)); err != nil {
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, `/* rowq:migrate.lock */ SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return nil, err
	}
	return func() {
		// A failed unlock leaves a broken connection, which the pool drops,
		// and with it the session's lock.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn.ExecContext(ctx, `/* rowq:migrate.unlock */
			SELECT pg_advisory_unlock($1), set_config('lock_timeout', $2, false)`, migrateLockKey, was)
	}, nil
}

// migrationFS returns the embedded migrations with the files at its root.
func migrationFS() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err) // cannot happen: the directory is embedded
	}
	return sub
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres: %w", mapErr(err))
	}
	return nil
}

// Now returns the database's clock in UTC.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `/* rowq:now */ SELECT now()`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", mapErr(err))
	}
	return now.UTC(), nil
}

// Close closes the connection pool, waiting for connections in use.
func (s *Store) Close() error {
	err := s.db.Close()
	s.pool.Close()
	return err
}

// exec runs one statement and returns how many rows it affected.
func (s *Store) exec(ctx context.Context, sql string, args ...any) (int64, error) {
	return retry(ctx, func() (int64, error) {
		tag, err := s.pool.Exec(ctx, sql, args...)
		return tag.RowsAffected(), err
	})
}

// queryAll runs one statement and scans every row it returns.
func queryAll[T any](ctx context.Context, s *Store, scan pgx.RowToFunc[T], sql string, args ...any) ([]T, error) {
	return retry(ctx, func() ([]T, error) {
		rows, _ := s.pool.Query(ctx, sql, args...) // an error is returned by Collect
		return pgx.CollectRows(rows, scan)
	})
}

// queryOne runs one statement and scans the one row it returns;
// pgx.ErrNoRows when it returns none.
func queryOne[T any](ctx context.Context, s *Store, scan pgx.RowToFunc[T], sql string, args ...any) (T, error) {
	return retry(ctx, func() (T, error) {
		rows, _ := s.pool.Query(ctx, sql, args...)
		return pgx.CollectExactlyOneRow(rows, scan)
	})
}

// retry runs fn again after a short random pause when PostgreSQL aborted its
// statement for a deadlock or a serialization failure. Each statement is
// atomic, so running it again is safe. A lock it could not take within
// lock_timeout is not tried again: it already waited store.LockWait for a
// holder that is stuck.
func retry[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	const attempts = 4
	for i := 1; ; i++ {
		v, err := fn()
		if err == nil || i == attempts || !retryable(err) {
			return v, err
		}
		pause := time.Duration(i)*5*time.Millisecond + rand.N(5*time.Millisecond)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return v, err
		}
	}
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "40P01", "40001": // deadlock, serialization failure
		return true
	}
	return false
}

// mapErr maps driver errors onto the store's errors: no rows is
// store.ErrNotFound, a unique violation store.ErrConflict, a lost or
// refused connection store.ErrUnavailable. It is the only place that knows
// PostgreSQL's error codes.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrUnavailable): // a read-only server
		return err
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	case isCode(err, "23505"):
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case unavailable(err):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// codeLockNotAvailable is the error of a statement that waited
// lock_timeout for a lock.
const codeLockNotAvailable = "55P03"

// codeReadOnlyTransaction is the error of a write on a read-only server: a
// standby, or an old primary still reached after a failover.
const codeReadOnlyTransaction = "25006"

func isCode(err error, code string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == code
}

// unavailable reports whether err says the database cannot be reached now,
// as opposed to refusing the statement.
func unavailable(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Connection exceptions, a server shutting down or starting up, no
		// connection left (max_connections, or a role's or database's
		// limit), a lock held by another transaction for store.LockWait,
		// and a read-only server.
		return strings.HasPrefix(pgErr.Code, "08") ||
			pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03" ||
			pgErr.Code == "53300" || pgErr.Code == codeLockNotAvailable ||
			pgErr.Code == codeReadOnlyTransaction
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false // the caller gave up; the database may be fine
	}
	var netErr net.Error
	return errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET)
}

// inTx runs fn in a transaction, again if PostgreSQL aborted it for a
// deadlock or a serialization failure.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	_, err := retry(ctx, func() (struct{}, error) {
		return struct{}{}, pgx.BeginFunc(ctx, s.pool, fn)
	})
	return err
}

// Advise warns when autovacuum is off: every job leaves dead rows behind
// (its grab and its acknowledgement), about 2 a job, which only VACUUM
// reclaims, so the jobs table and its indexes grow without bound and every
// grab slows down. rowq does not vacuum on its own: turning autovacuum off
// is the operator's decision, and so is what replaces it.
//
// It warns too when the server streams to standbys that commits do not
// wait for (synchronous_standby_names empty, or synchronous_commit off or
// local): a failover to such a standby loses what the primary had
// acknowledged and not yet sent, jobs, lock tokens and fired schedule
// ticks alike (docs/ha.md).
func (s *Store) Advise(ctx context.Context) ([]string, error) {
	type settings struct {
		Autovacuum, SyncNames, SyncCommit string
		Standbys                          int64
	}
	got, err := queryOne(ctx, s, pgx.RowToStructByPos[settings], `/* rowq:advise */
		SELECT current_setting('autovacuum'), current_setting('synchronous_standby_names'),
		       current_setting('synchronous_commit'), (SELECT count(*) FROM pg_stat_replication)`)
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", mapErr(err))
	}
	var advice []string
	if got.Autovacuum != "on" {
		advice = append(advice, "PostgreSQL's autovacuum is off: the dead rows every job leaves in the jobs table are never reclaimed, so the table grows and grabs slow down; turn autovacuum on or VACUUM the rowq tables regularly")
	}
	if got.Standbys > 0 && (strings.TrimSpace(got.SyncNames) == "" || got.SyncCommit == "off" || got.SyncCommit == "local") {
		advice = append(advice, fmt.Sprintf("PostgreSQL streams to %d standby(s) asynchronously (synchronous_standby_names %q, synchronous_commit %s): a failover to one loses the jobs, lock tokens and fired schedule ticks the primary acknowledged but had not sent; set synchronous_standby_names (docs/ha.md)", got.Standbys, got.SyncNames, got.SyncCommit))
	}
	return advice, nil
}
