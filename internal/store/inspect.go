package store

import (
	"context"
	"time"
)

// InspectStore lists and removes jobs and failure log entries for operators.
// Listings are keyset-paged: each page starts strictly after the sort key
// of the previous page's last row, so a page costs the same wherever it is
// and rows inserted or deleted meanwhile never shift the others.
type InspectStore interface {
	// JobsList returns up to p.Limit jobs of p.Queue in p.Kind, ordered by
	// (next_try, id), ascending or descending, starting after p.After.
	JobsList(ctx context.Context, p *JobsListParams) ([]*Job, error)
	// JobDelete removes one job of the queue, whatever its state, and
	// returns it, or ErrNotFound.
	JobDelete(ctx context.Context, queue string, id int64) (*Job, error)
	// FailedJobsList returns up to p.Limit failure log entries of p.Queue
	// ordered by id (the order of failure) or by (created_at, id), starting
	// after p.After.
	FailedJobsList(ctx context.Context, p *FailedJobsListParams) ([]*FailedJob, error)
	// FailedJobDelete removes one failure log entry of the queue and returns
	// it, or ErrNotFound.
	FailedJobDelete(ctx context.Context, queue string, id int64) (*FailedJob, error)
	// TablesSize returns the size of each table of the database, by name,
	// as the database reckons it: what a soak watches to see that the
	// tables do not grow under a steady load.
	TablesSize(ctx context.Context) ([]*TableSize, error)
}

// TableSize is the size of one table.
type TableSize struct {
	Name string
	// Rows is the database's estimate (MySQL/MariaDB: InnoDB's, from
	// information_schema.TABLES; PostgreSQL: n_live_tup) or, on SQLite, a
	// count.
	Rows int64
	// Bytes is the space the table and its indexes take.
	Bytes int64
	// DeadRows are PostgreSQL's dead row versions that no vacuum has
	// removed yet (n_dead_tup); 0 elsewhere.
	DeadRows int64
}

// Kinds of jobs JobsList lists.
const (
	JobsGrabbed  = "grabbed"  // held by a node, or leased by a worker that accepted it
	JobsWaiting  = "waiting"  // waiting and due: next_try <= the database's now
	JobsDeferred = "deferred" // waiting and not yet due: next_try > now
)

// JobKey is a job's place in a listing: the sort key (next_try, id).
type JobKey struct {
	NextTry time.Time
	ID      int64
}

// JobsListParams are the arguments of InspectStore.JobsList.
type JobsListParams struct {
	Queue string
	Kind  string // JobsGrabbed, JobsWaiting or JobsDeferred
	Desc  bool   // newest next_try first
	After *JobKey
	Limit int
}

// FailedKey is a failure log entry's place in a listing: its id, and its
// job's created_at when listed by creation.
type FailedKey struct {
	CreatedAt time.Time // used only with ByCreated
	ID        int64
}

// FailedJobsListParams are the arguments of InspectStore.FailedJobsList.
type FailedJobsListParams struct {
	Queue string
	// ByCreated orders by the job's creation (created_at, id) instead of by
	// id, which is the order in which the jobs failed.
	ByCreated bool
	Desc      bool
	After     *FailedKey
	Limit     int
}
