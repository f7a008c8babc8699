package mysql

import (
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
	GrabUpdateSQL = grabUpdateSQL
	HeldSQL       = heldSQL
)

const (
	CompleteSQL   = completeSQL
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
	s.returning.Store(false)
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

// History statements, for the EXPLAIN test.
var (
	FinishedPruneFindSQL = finishedPruneFindSQL
	FinishedListSQL      = finishedListSQL
)
