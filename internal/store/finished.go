package store

import (
	"context"
	"encoding/json"
	"time"
)

// History of finished jobs: a queue whose KeepFinished is more than zero
// keeps each job that leaves it (succeeded, failed for good, cancelled) in
// the table finished_jobs for that long. The row is written by the
// statement's transaction that records the outcome, under the same holder
// guard (JobsComplete with Keep, JobFail, JobFinish and JobsSucceed with
// Keep, JobCancel with Keep), so that a job is kept once or not at all. The
// table lives apart from the jobs table: grabs never read it.
//
// A job retried from the failure log keeps its id, so a later outcome of
// it replaces its history row.

// Statuses of a finished job (FinishedJob.Status).
const (
	FinishedSucceeded = "succeeded"
	FinishedFailed    = "failed"
	FinishedCancelled = "cancelled"
)

// FinishedStore reads and prunes the history of finished jobs.
type FinishedStore interface {
	// FinishedGet returns the history row of job id of queue, or
	// ErrNotFound.
	FinishedGet(ctx context.Context, queue string, id int64) (*FinishedJob, error)
	// FinishedList returns up to p.Limit history rows of p.Queue, the
	// latest finished first (finished_at, then id, descending), after
	// p.Before when given.
	FinishedList(ctx context.Context, p *FinishedListParams) ([]*FinishedJob, error)
	// FinishedPrune deletes up to p.Limit history rows of p.Queue that
	// finished more than p.Age ago by the database's clock, in one short
	// transaction (ids selected, then deleted by id), and returns how many.
	FinishedPrune(ctx context.Context, p *FinishedPruneParams) (int64, error)
}

// FinishedJob is a finished job as its history keeps it.
type FinishedJob struct {
	ID       int64
	Queue    string
	Category string
	URL      string
	Payload  json.RawMessage // nil when the job had none
	// Status is FinishedSucceeded, FinishedFailed or FinishedCancelled.
	Status string
	// Attempts counts the deliveries that ended with an outcome, the last
	// one included (a cancelled job's running delivery included).
	Attempts  int
	CreatedAt time.Time
	// StartedAt is when the last attempt became due (the job's next_try);
	// nil for a job cancelled while it waited.
	StartedAt  *time.Time
	FinishedAt time.Time
	Message    string
	Result     json.RawMessage // nil when none was kept
}

// FinishNote is what the history of a job that succeeded records beside
// the job: its worker's message and result.
type FinishNote struct {
	ID      int64
	Message string
	Result  json.RawMessage // nil for none
}

// FinishedOf returns the history row of j leaving with status, at
// finished (the database's now); held tells whether a delivery held it.
// Dialects that read the job's row in the outcome's transaction write
// this.
func FinishedOf(j *Job, status, message string, result json.RawMessage, finished time.Time) *FinishedJob {
	f := &FinishedJob{
		ID: j.ID, Queue: j.Queue, Category: j.Category, URL: j.URL, Payload: j.Payload,
		Status: status, Attempts: j.FailCount, CreatedAt: j.CreatedAt, FinishedAt: finished,
		Message: message, Result: result,
	}
	if j.State != StateWaiting && j.State != StateBlocked {
		f.Attempts++
		started := j.NextTry
		f.StartedAt = &started
	}
	if len(f.Payload) == 0 {
		f.Payload = nil
	}
	if len(f.Result) == 0 {
		f.Result = nil
	}
	return f
}

// FinishedListParams are the arguments of FinishedStore.FinishedList.
type FinishedListParams struct {
	Queue string
	// Status and Category, when not "", keep only the rows that have them.
	Status, Category string
	// Since and Until, when not zero, keep the rows that finished at or
	// after Since and before Until.
	Since, Until time.Time
	// Before, when not nil, starts after this row (a cursor).
	Before *FinishedCursor
	Limit  int
}

// FinishedCursor is the place of a history row in FinishedList's order.
type FinishedCursor struct {
	FinishedAt time.Time
	ID         int64
}

// FinishedPruneParams are the arguments of FinishedStore.FinishedPrune.
type FinishedPruneParams struct {
	Queue string
	Age   time.Duration
	Limit int
}
