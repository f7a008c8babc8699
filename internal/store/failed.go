package store

import (
	"context"
	"encoding/json"
	"time"
)

// FailedJobStore reads the failure log and moves its entries back to the
// jobs or away. (Entries are written by JobStore.JobFail.)
type FailedJobStore interface {
	// FailedJobGet returns one failure log entry of the queue, or ErrNotFound.
	FailedJobGet(ctx context.Context, queue string, id int64) (*FailedJob, error)
	// FailedJobRetry moves one failure log entry of the queue back to the
	// jobs as a waiting job, due now, with its old job id and fail_count 0,
	// in one transaction; ErrNotFound if there is no such entry.
	FailedJobRetry(ctx context.Context, queue string, id int64) (*Job, error)
	// FailedJobsRetry does what FailedJobRetry does for up to p.Limit
	// entries at once, in one transaction.
	FailedJobsRetry(ctx context.Context, p *FailedJobsBulkParams) (*FailedJobsBulkResult, error)
	// FailedJobsDelete deletes up to p.Limit entries of the failure log.
	FailedJobsDelete(ctx context.Context, p *FailedJobsBulkParams) (*FailedJobsBulkResult, error)
}

// FailedJob is an entry of the failure log.
type FailedJob struct {
	ID        int64
	JobID     int64
	Queue     string
	Category  string
	URL       string
	Payload   json.RawMessage
	Status    string
	Code      int
	Message   string
	FailCount int
	FailedAt  time.Time
	CreatedAt time.Time // when the job was created
	// The job's settings, kept so that a retry from the log restores them.
	// Entries written before these were kept read as zero.
	Timeout    int
	MaxRetries int
	RetryDelay int
	JobOptions
}

// FailedJobsBulkParams selects failure log entries of a queue for a bulk
// operation: the highest ids first, so that a caller walking the log with
// Before never meets entries added while it walks.
type FailedJobsBulkParams struct {
	Queue string
	// IDs, when not nil, limits the operation to these entries.
	IDs []int64
	// Before, when > 0, limits the operation to entries with a smaller id.
	Before int64
	// Limit bounds the entries handled by one call (one transaction).
	Limit int
}

// FailedJobsBulkResult is the outcome of one bulk call.
type FailedJobsBulkResult struct {
	// Count is how many entries were retried or deleted.
	Count int
	// Last is the smallest id handled (the next call's Before), 0 if none.
	Last int64
}
