package mysql

import (
	"context"
	"database/sql"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// GrabSQL is the grab SELECT, for the EXPLAIN test.
const GrabSQL = grabSQL

// DB returns the store's pool.
func (s *Store) DB() *sql.DB { return s.db }

// Listing SQL, for the EXPLAIN test.
var (
	JobsListSQL       = jobsListSQL
	FailedJobsListSQL = failedJobsListSQL
)

// JobsNextDueSQL is the look at idle queues, for the EXPLAIN test.
var JobsNextDueSQL = jobsNextDueSQL

// Writes to grabbed jobs, for the EXPLAIN test.
var (
	GrabUpdateSQL   = grabUpdateSQL
	HeldSQL         = heldSQL
	CompleteHeldSQL = completeHeldSQL
)

const (
	ReleaseSQL    = releaseSQL
	ExtendFindSQL = extendFindSQL
	ExtendSQL     = extendSQL
	RescueFindSQL = rescueFindSQL
	RescueSQL     = rescueSQL
)

// ByIDs completes RescueSQL for n ids; RescueLockSQL locks n ids to rescue.
var (
	ByIDs         = byIDs
	RescueLockSQL = rescueLockSQL
)

// WithoutReturning makes the store insert as on MySQL, which has no
// INSERT … RETURNING, on a MariaDB server too.
func (s *Store) WithoutReturning() {
	s.noReturning = true
	s.srv.info.Store(nil)
}

// DueSQL is the due-schedules SELECT, for the EXPLAIN test.
const DueSQL = dueSQL

// JobsExpiredSQL is the look for expired grabs, for the EXPLAIN test.
var JobsExpiredSQL = jobsExpiredSQL

// SessionConnID returns the connection id (CONNECTION_ID()) that holds a
// node session's lock.
func SessionConnID(s store.NodeSession) int64 { return s.(*nodeSession).connID }

// OutboxReadSQL is the outbox's read (and probe), for the EXPLAIN test.
const OutboxReadSQL = sqldb.OutboxReadSQL

// Concurrency keys' statements, for the EXPLAIN test.
var (
	KeyHeadsSQL = keyHeadsSQL
	GrabKeys    = grabKeys
)

const KeyBusySQL = keyBusySQL

// MapErr maps a driver error onto the store's errors, for the table test.
var MapErr = mapErr

// DSNsFromURL returns the DSN of each host of a URL.
var DSNsFromURL = dsnsFromURL

// LockMigrations takes the migration lock Migrate takes, on a connection
// of its own, and returns the function that releases it.
func (s *Store) LockMigrations(ctx context.Context) (func(), error) {
	info, err := s.server(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	lock := lockMigrations
	if info.galera {
		lock = s.lockMigrationsGalera
	}
	unlock, err := lock(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return func() { unlock(); conn.Close() }, nil
}

// Server tells what the store found its server to be.
func (s *Store) Server(ctx context.Context) (returning, galera bool, err error) {
	info, err := s.server(ctx)
	return info.returning, info.galera, err
}

// History statements, for the EXPLAIN test.
var (
	FinishedPruneFindSQL = finishedPruneFindSQL
	FinishedListSQL      = finishedListSQL
)

// Flow statements, for the EXPLAIN test.
var (
	LockChildrenSQL      = lockChildrenSQL
	ForgetFlowsSQL       = forgetFlowsSQL
	ForgetChildEdgesSQL  = forgetChildEdgesSQL
	ForgetParentEdgesSQL = forgetParentEdgesSQL
)
