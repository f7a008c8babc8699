// Package mysql is the MySQL 8.0+ and MariaDB 10.6+ dialect of the store.
// Only MariaDB is tested (no MySQL 8 server is installable where rowq is
// built); MySQL's own path, inserts without RETURNING, is forced on
// MariaDB by the tests (WithoutReturning).
//
// It writes SQL both servers accept, but for the INSERTs of jobs: on
// MariaDB they return the ids they stored (RETURNING), on MySQL, which
// lacks it, the ids are LAST_INSERT_ID() plus the auto_increment step. Other
// writes that must report rows read them in a short transaction; grabs use
// SELECT … FOR UPDATE SKIP LOCKED. On a MariaDB Galera cluster a few
// statements change (galera.go, docs/ha.md). Times are DATETIME(6) in UTC and every
// comparison uses the server's NOW(6). Sessions run in READ COMMITTED so
// that the fetch, rescue and claim statements lock only the rows they
// change, not the gaps between them.
package mysql

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dburl"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// Store is the MySQL/MariaDB store.
type Store struct {
	db  *sql.DB
	srv serverCache // see server
	// noReturning (for tests) makes a MariaDB server count as MySQL: no
	// INSERT … RETURNING.
	noReturning bool
	// FlowHook tells the FlowWatch function what ending flow jobs did
	// (flow.go).
	store.FlowHook
}

var _ store.Store = (*Store)(nil)

// Open opens a pool on a go-sql-driver DSN (user:pass@tcp(host:3306)/db).
// It forces the session settings rowq relies on (UTC times, strict SQL
// mode, matched-rows counts, READ COMMITTED) whatever the DSN says, bounds
// row lock waits to store.LockWait unless the DSN sets
// innodb_lock_wait_timeout, and does not connect: the first query does.
func Open(dsn string) (*Store, error) { return open([]string{dsn}) }

// open opens a pool on the DSNs of the hosts of one URL (connector).
func open(dsns []string) (*Store, error) {
	var hosts []driver.Connector
	var addrs []string
	for _, dsn := range dsns {
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			return nil, fmt.Errorf("open mysql: %w", err)
		}
		forceSettings(cfg)
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, fmt.Errorf("open mysql: %w", err)
		}
		hosts, addrs = append(hosts, conn), append(addrs, cfg.Addr)
	}
	db := sql.OpenDB(newConnector(hosts, addrs))
	db.SetMaxOpenConns(48)
	db.SetMaxIdleConns(48)
	db.SetConnMaxLifetime(3 * time.Minute)
	return &Store{db: db}, nil
}

// forceSettings sets on cfg what Open promises.
func forceSettings(cfg *mysql.Config) {
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	// Affected rows count matched rows, so a compare-and-set that writes
	// the values already stored still reports that it matched.
	cfg.ClientFoundRows = true
	// One round trip per statement instead of prepare, execute and close.
	cfg.InterpolateParams = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["sql_mode"] = "'TRADITIONAL'"
	if _, ok := cfg.Params["innodb_lock_wait_timeout"]; !ok {
		cfg.Params["innodb_lock_wait_timeout"] = strconv.Itoa(int(store.LockWait / time.Second))
	}
}

// OpenURL opens a pool on a mysql://user:pass@host:3306/db?params URL
// (see DSNFromURL), as Open does. The URL may name several hosts,
// mysql://user:pass@h1:3306,h2:3306/db: the pool then uses the first one
// that is ready for writes and moves to the next when it fails (connector).
func OpenURL(databaseURL string) (*Store, error) {
	dsns, err := dsnsFromURL(databaseURL)
	if err != nil {
		return nil, err
	}
	return open(dsns)
}

// multiHostTimeout bounds the dial to each host of a URL that names
// several, unless the URL sets timeout: a host that does not answer must
// not hold the move to the next one for the system's TCP timeout.
const multiHostTimeout = "5s"

// DSNFromURL turns mysql://user:pass@host:port/db?params into the
// go-sql-driver DSN user:pass@tcp(host:port)/db?params; the port defaults
// to 3306. The params go to the driver as they are (tls=true verifies the
// server against the system's certificate authorities), but for
// tls-ca=FILE: the server's certificate must then be signed by a CA of
// that PEM file and name the host, through a TLS configuration registered
// with the driver. A URL naming several hosts has no one DSN: OpenURL
// takes it.
func DSNFromURL(databaseURL string) (string, error) {
	dsns, err := dsnsFromURL(databaseURL)
	if err != nil {
		return "", err
	}
	if len(dsns) > 1 {
		return "", fmt.Errorf("database URL %q: names %d hosts, not one", redacted(databaseURL), len(dsns))
	}
	return dsns[0], nil
}

// dsnsFromURL returns the DSN of each host of the URL, in its order.
func dsnsFromURL(databaseURL string) ([]string, error) {
	u, err := dburl.Parse(databaseURL, "3306")
	if err != nil {
		return nil, fmt.Errorf("database URL %q: %w", redacted(databaseURL), err)
	}
	if u.Scheme != "mysql" {
		return nil, fmt.Errorf("database URL %q: want scheme mysql", u.Redacted())
	}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	cfg.Net = "tcp"
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if cfg.DBName == "" {
		return nil, fmt.Errorf("database URL %q: name the database, as in mysql://root@127.0.0.1:3306/rowq", u.Redacted())
	}
	query := u.RawQuery
	q := u.Query()
	if q.Has("tls-ca") {
		name, err := registerCA(q.Get("tls-ca"), q.Get("tls"))
		if err != nil {
			return nil, fmt.Errorf("database URL %q: %w", u.Redacted(), err)
		}
		q.Del("tls-ca")
		q.Set("tls", name)
		query = q.Encode()
	}
	if len(u.Hosts) > 1 && !q.Has("timeout") {
		q.Set("timeout", multiHostTimeout)
		query = q.Encode()
	}
	var dsns []string
	for _, host := range u.Hosts {
		cfg.Addr = host
		dsn := cfg.FormatDSN()
		if query != "" {
			sep := "?"
			if strings.Contains(dsn, "?") {
				sep = "&"
			}
			dsn += sep + query
		}
		dsns = append(dsns, dsn)
	}
	return dsns, nil
}

// redacted is the URL s with its password hidden, for an error about it.
func redacted(s string) string {
	if r, ok := dburl.Redact(s); ok {
		return r
	}
	return "(not a URL)"
}

// registerCA registers with the driver a TLS configuration that trusts the
// certificate authorities of the PEM file caFile, and returns its name
// for the DSN's tls parameter. tls is the URL's own tls parameter, which
// may only ask for verification.
func registerCA(caFile, tlsParam string) (string, error) {
	if tlsParam != "" && tlsParam != "true" {
		return "", fmt.Errorf("tls-ca verifies the server: it goes with tls=true or no tls parameter, got tls=%s", tlsParam)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return "", fmt.Errorf("tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return "", fmt.Errorf("tls-ca: no PEM certificate in %s", caFile)
	}
	sum := sha256.Sum256(append([]byte(caFile+"\x00"), pem...))
	name := "rowq-ca-" + hex.EncodeToString(sum[:8])
	// The driver sets ServerName to the DSN's host, and so checks it.
	if err := mysql.RegisterTLSConfig(name, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}); err != nil {
		return "", fmt.Errorf("tls-ca: %w", err)
	}
	return name, nil
}

// Dialect returns "mysql".
func (s *Store) Dialect() string { return "mysql" }

// Ping checks that the server answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("ping mysql: %w", mapErr(err))
	}
	return nil
}

// Now returns the server's clock, NOW(6), in UTC.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.db.QueryRowContext(ctx, "/* rowq:now */ SELECT NOW(6)").Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", mapErr(err))
	}
	return now.UTC(), nil
}

// Close closes the connection pool.
func (s *Store) Close() error { return s.db.Close() }

// Server error numbers rowq reacts to.
const (
	errDupEntry        = 1062 // ER_DUP_ENTRY
	errLockWaitTimeout = 1205 // ER_LOCK_WAIT_TIMEOUT
	errLockDeadlock    = 1213 // ER_LOCK_DEADLOCK
)

// unavailable lists, beside serverCannotServe (whose connections are
// retired, connect.go), the server errors that mean "try again later": no
// connection left, one connection killed (by an operator: the server may
// be fine), a row that stayed locked for store.LockWait, or a deadlock (a
// Galera certification failure too) that outlasted the store's retries.
// None of them stored anything.
var unavailable = map[uint16]bool{
	1040: true, // ER_CON_COUNT_ERROR: too many connections
	1205: true, // ER_LOCK_WAIT_TIMEOUT: another transaction held a row for store.LockWait
	1213: true, // ER_LOCK_DEADLOCK, after retry gave up
	1927: true, // MariaDB ER_CONNECTION_KILLED
}

// mapErr maps driver errors onto the store's errors. It is the only place
// that knows MySQL's error numbers.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	if errors.Is(err, store.ErrUnavailable) { // connector: no host ready
		return err
	}
	var me *mysql.MySQLError
	var ne net.Error
	switch {
	case errors.As(err, &me) && me.Number == errDupEntry:
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case errors.As(err, &me) && (unavailable[me.Number] || serverCannotServe[me.Number]),
		errors.Is(err, driver.ErrBadConn),
		errors.Is(err, mysql.ErrInvalidConn),
		errors.As(err, &ne):
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// retryable reports a deadlock (on Galera also a lost certification
// conflict), or a grab that raced another member's (errGrabRaced). Both
// roll back the transaction, and
// what runs again is a single statement or a whole transaction, so running
// it again is safe. A lock wait timeout is not run again: it already waited
// store.LockWait for a holder that is stuck.
func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errLockDeadlock || errors.Is(err, errGrabRaced)
}

// lockWaitTimedOut reports that a statement waited store.LockWait for a row
// another transaction held.
func lockWaitTimedOut(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == errLockWaitTimeout
}

// retry runs fn again, a few times with a short jittered backoff, while it
// fails with a retryable error.
func retry(ctx context.Context, fn func() error) error { return sqldb.Retry(ctx, retryable, fn) }

// inTx runs fn in a transaction and commits it, or rolls it back if fn
// fails. Callers retry the whole transaction with retry.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return sqldb.InTx(ctx, s.db, nil, fn)
}

// Advise has nothing to say: rowq needs no setting of this database beyond
// what Open checks.
func (s *Store) Advise(context.Context) ([]string, error) { return nil, nil }
