package postgres

import (
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rowq/rowq/internal/store"
)

// SQL the tests inspect.
const (
	GrabSelectSQL  = grabSelectSQL
	ClaimSQL       = claimSQL
	JobsNextDueSQL = jobsNextDueSQL
)

// Pool returns the store's connection pool.
func Pool(s *Store) *pgxpool.Pool { return s.pool }

// Listing SQL, for the EXPLAIN test.
var (
	JobsListSQL       = jobsListSQL
	FailedJobsListSQL = failedJobsListSQL
)

// DueSQL is the due-schedules SELECT, for the EXPLAIN test.
const DueSQL = dueSQL

// SQL of the rescue and the look for expired grabs, for the EXPLAIN test.
const (
	RescueSQL      = rescueSQL
	JobsExpiredSQL = jobsExpiredSQL
)

// SessionPID returns the backend pid of the connection that holds a node
// session's lock.
func SessionPID(s store.NodeSession) uint32 { return s.(*nodeSession).conn.PgConn().PID() }

// OutboxReadSQL is the outbox's read (and probe), for the EXPLAIN test.
const OutboxReadSQL = outboxReadSQL

// Concurrency keys' statements, for the EXPLAIN test.
var GrabKeys = grabKeys

const KeyHeadsSQL = keyHeadsSQL

// MapErr maps a driver error onto the store's errors, for the table test.
var MapErr = mapErr

// Flow statements, for the EXPLAIN test.
const (
	FlowChildrenSQL = flowChildrenSQL
	FlowForgetSQL   = flowForgetSQL
)

// CompleteFlowSQL is JobsComplete's statement for jobs with a flow.
var CompleteFlowSQL = completeFlowSQL
