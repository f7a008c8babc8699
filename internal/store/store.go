// Package store is the one seam between rowq's logic and SQL. It defines the
// Store interface, the rows it reads and writes, and the errors every dialect
// maps its driver errors onto. Each dialect (store/mysql, store/postgres,
// store/sqlite) implements Store with its own SQL and passes the conformance
// suite in store/storetest.
//
// Every time a Store compares or computes (expiry of a grab, a lease, a
// deferred job) is taken from the database's clock, never the caller's, so
// clock skew between rowq nodes cannot break mutual exclusion.
//
// No statement waits long for a row another transaction holds (LockWait):
// rowq's transactions last milliseconds, so a row lock held for seconds is
// held by a transaction stuck half-way, most likely that of a node frozen
// (SIGSTOP, a stalled VM) whose database session, and with it its locks,
// lives on.
package store

import (
	"context"
	"errors"
	"time"
)

// Errors every dialect maps its driver errors onto.
var (
	// ErrNotFound means the row asked for does not exist, or (for a
	// compare-and-set) is no longer in the state the caller expected.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique constraint refused the write.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable means the database could not be reached, or a row the
	// statement needed stayed locked by another transaction for LockWait;
	// the caller may retry later. Dialects wrap the driver's error with it.
	ErrUnavailable = errors.New("database unavailable")
	// ErrLocalSession means the database's session locks are local to
	// the server of a cluster that holds them (a Galera member): they
	// cannot tell other servers' clients that a node died
	// (NodeStore.NodeSessionOpen). The node then keeps a short lease
	// instead (NodeStore.NodesReapExpired).
	ErrLocalSession = errors.New("session locks are local to one member of the database cluster")
)

// LockWait bounds how long a statement waits for a row lock that another
// transaction holds (MySQL/MariaDB innodb_lock_wait_timeout, PostgreSQL
// lock_timeout, set on every connection of a store's pool unless its
// database URL sets them). A statement that waited that long fails with
// ErrUnavailable and is not run again by the store: the holder is stuck,
// and the caller decides when to try again. Statements that scan rows other
// nodes may hold (grabbing, extending and rescuing jobs) skip locked rows
// instead of waiting for them.
const LockWait = 2 * time.Second

// Job states as stored.
const (
	StateWaiting = "waiting" // ready once next_try has passed (deferred before)
	StateGrabbed = "grabbed" // held by a node until grabbed_until
)

// Store is every operation rowq performs on its database: the noun
// interfaces below, plus the dialect's life cycle. Implementations are safe
// for concurrent use. A consumer that needs little asks for the noun
// interface it uses, not for Store.
type Store interface {
	// Dialect names the SQL dialect: "mysql", "postgres" or "sqlite".
	Dialect() string
	// Migrate applies the embedded schema migrations that are not applied
	// yet. Concurrent calls from several nodes are serialised.
	Migrate(ctx context.Context) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Now returns the database's clock.
	Now(ctx context.Context) (time.Time, error)
	// Advise returns what an operator should know about the database's
	// settings for rowq, one sentence each (PostgreSQL with autovacuum
	// off: the jobs table's dead rows then grow without bound); none when
	// all is well. The server logs them as warnings when it starts.
	Advise(ctx context.Context) ([]string, error)
	// Close releases the connection pools.
	Close() error

	NodeStore
	QueueStore
	RoutingStore
	JobStore
	FailedJobStore
	FinishedStore
	FlowStore
	InspectStore
	StatsStore
	LockStore
	ScheduleStore
	TokenStore
	SecretStore
	OutboxStore
	WorkerHostStore
}
