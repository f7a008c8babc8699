package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/store"
)

// serverCannotServe lists the server errors that say the server rowq is
// connected to cannot take work now, whatever the statement: the
// connection that got one is retired, with every connection opened before
// it, and a URL naming several hosts moves on to the next one.
var serverCannotServe = map[uint16]bool{
	1047: true, // ER_UNKNOWN_COM_ERROR: a Galera member not ready, outside the primary component
	1053: true, // ER_SERVER_SHUTDOWN
	1180: true, // ER_ERROR_DURING_COMMIT: Galera could not replicate the commit
	1290: true, // ER_OPTION_PREVENTS_STATEMENT: --read-only, as during a failover
	1792: true, // ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION
	1836: true, // ER_READ_ONLY_MODE
}

// cannotServe reports whether err is one of serverCannotServe.
func cannotServe(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && serverCannotServe[me.Number]
}

// connector opens the pool's connections on the hosts of the URL.
//
// With one host it connects as it always did: one statement per new
// connection, which sets the isolation level (no session variable names it
// on both servers, transaction_isolation on MySQL 8 and tx_isolation on
// MariaDB before 11.1, so the DSN cannot).
//
// With several, it stays on one host (sticky, so that every connection of
// the node writes through the same Galera member and sees its own writes)
// while that host is ready: read_only OFF and, when wsrep_on is ON,
// wsrep_ready ON in the Primary component, checked on each new connection.
// It moves on, in the order of the URL and round again, when the host
// cannot be reached or is not ready, or when a connection answers one of
// serverCannotServe; connections opened before the move are retired as
// they come back to the pool.
type connector struct {
	hosts []driver.Connector // one per host of the URL, in its order
	addrs []string           // their host:port, for errors
	// cur is the host new connections go to.
	cur atomic.Int32
	// gen counts the retirements: a connection opened in an earlier
	// generation is not used again.
	gen atomic.Uint64
}

func newConnector(hosts []driver.Connector, addrs []string) *connector {
	return &connector{hosts: hosts, addrs: addrs}
}

// Driver returns the driver of the hosts' connectors.
func (c *connector) Driver() driver.Driver { return c.hosts[0].Driver() }

// Connect opens a connection on the host in use, or on the next ready one.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	gen := c.gen.Load()
	if len(c.hosts) == 1 {
		dc, err := c.open(ctx, 0)
		if err != nil {
			return nil, err
		}
		return &conn{Conn: dc, c: c, gen: gen}, nil
	}
	start := int(c.cur.Load())
	var errs []error
	for i := range c.hosts {
		h := (start + i) % len(c.hosts)
		dc, err := c.open(ctx, h)
		if err == nil {
			if h != start && c.cur.CompareAndSwap(int32(start), int32(h)) {
				// The connections to the host left behind retire.
				gen = c.gen.Add(1)
			}
			return &conn{Conn: dc, c: c, gen: gen, host: h}, nil
		}
		errs = append(errs, fmt.Errorf("host %s: %w", c.addrs[h], err))
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("connect to the first ready host of %s: %w", strings.Join(c.addrs, ","), errors.Join(errs...))
}

// open connects to host h and prepares the session: the isolation level
// and, when the URL names several hosts, the readiness check.
func (c *connector) open(ctx context.Context, h int) (driver.Conn, error) {
	dc, err := c.hosts[h].Connect(ctx)
	if err != nil {
		return nil, err
	}
	_, err = dc.(driver.ExecerContext).ExecContext(ctx, "/* rowq:connect */ SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED", nil)
	if err == nil && len(c.hosts) > 1 {
		err = checkReady(ctx, dc)
	}
	if err != nil {
		dc.Close()
		return nil, err
	}
	return dc, nil
}

// errNotReady is the error of a host that answers but cannot take writes.
var errNotReady = fmt.Errorf("%w: server not ready for writes", store.ErrUnavailable)

// checkReady refuses a server that is read-only or a Galera member that is
// not ready (joining, donor without wsrep_sst_donor_rejects_queries, or
// outside the primary component). SHOW is the one statement such a member
// still answers.
func checkReady(ctx context.Context, dc driver.Conn) error {
	vars, err := show(ctx, dc, "/* rowq:connect.ready */ SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'wsrep_on')")
	if err != nil {
		return err
	}
	if strings.EqualFold(vars["read_only"], "ON") {
		return fmt.Errorf("%w: read_only is ON", errNotReady)
	}
	if !strings.EqualFold(vars["wsrep_on"], "ON") {
		return nil
	}
	status, err := show(ctx, dc, "/* rowq:connect.ready */ SHOW GLOBAL STATUS WHERE Variable_name IN ('wsrep_ready', 'wsrep_cluster_status')")
	if err != nil {
		return err
	}
	if !strings.EqualFold(status["wsrep_ready"], "ON") || status["wsrep_cluster_status"] != "Primary" {
		return fmt.Errorf("%w: Galera member with wsrep_ready %s in a %s component", errNotReady, status["wsrep_ready"], status["wsrep_cluster_status"])
	}
	return nil
}

// show runs a SHOW … VARIABLES or STATUS statement and returns its rows by
// lower-cased name.
func show(ctx context.Context, dc driver.Conn, query string) (map[string]string, error) {
	rows, err := dc.(driver.QueryerContext).QueryContext(ctx, query, nil)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]string{}
	row := make([]driver.Value, len(rows.Columns()))
	for {
		if err := rows.Next(row); err == io.EOF {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		out[strings.ToLower(asString(row[0]))] = asString(row[1])
	}
}

func asString(v driver.Value) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

// retire marks the connections of generation gen for retirement, once per
// generation, and moves new connections off host h.
func (c *connector) retire(gen uint64, h int) {
	if !c.gen.CompareAndSwap(gen, gen+1) || len(c.hosts) == 1 {
		return
	}
	c.cur.CompareAndSwap(int32(h), int32((h+1)%len(c.hosts)))
}

// conn is a connection of the driver that watches its errors: after one of
// serverCannotServe, it and the other connections of its generation leave
// the pool (IsValid false, ResetSession driver.ErrBadConn). The statement
// that got the error fails with it; the caller maps it to
// store.ErrUnavailable, and what it runs next runs on a new connection.
type conn struct {
	driver.Conn
	c    *connector
	gen  uint64
	host int
	bad  atomic.Bool
}

var (
	_ driver.ConnBeginTx        = (*conn)(nil)
	_ driver.ConnPrepareContext = (*conn)(nil)
	_ driver.ExecerContext      = (*conn)(nil)
	_ driver.QueryerContext     = (*conn)(nil)
	_ driver.Pinger             = (*conn)(nil)
	_ driver.NamedValueChecker  = (*conn)(nil)
	_ driver.SessionResetter    = (*conn)(nil)
	_ driver.Validator          = (*conn)(nil)
	_ driver.Tx                 = tx{}
)

// watch retires the connection if err says its server cannot serve.
func (cn *conn) watch(err error) error {
	if err != nil && cannotServe(err) {
		cn.bad.Store(true)
		cn.c.retire(cn.gen, cn.host)
	}
	return err
}

func (cn *conn) retired() bool { return cn.bad.Load() || cn.gen != cn.c.gen.Load() }

// IsValid is false once the connection is retired.
func (cn *conn) IsValid() bool {
	return !cn.retired() && cn.Conn.(driver.Validator).IsValid()
}

// ResetSession refuses a retired connection before its reuse.
func (cn *conn) ResetSession(ctx context.Context) error {
	if cn.retired() {
		return driver.ErrBadConn
	}
	return cn.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (cn *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := cn.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
	return r, cn.watch(err)
}

func (cn *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := cn.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
	return r, cn.watch(err)
}

func (cn *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := cn.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	return s, cn.watch(err)
}

func (cn *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	t, err := cn.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, cn.watch(err)
	}
	return tx{t, cn}, nil
}

func (cn *conn) Ping(ctx context.Context) error {
	return cn.watch(cn.Conn.(driver.Pinger).Ping(ctx))
}

func (cn *conn) CheckNamedValue(nv *driver.NamedValue) error {
	return cn.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

// tx watches the commit, where Galera answers 1180 or a certification
// failure.
type tx struct {
	driver.Tx
	cn *conn
}

func (t tx) Commit() error { return t.cn.watch(t.Tx.Commit()) }
