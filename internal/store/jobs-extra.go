package store

import (
	"cmp"
	"context"
	"slices"
)

// Retry backoff kinds of a job (JobExtra.RetryBackoff).
const (
	// BackoffFixed waits RetryDelay before every retry (Fireworq's way).
	BackoffFixed = "fixed"
	// BackoffExponential waits min(RetryDelayMax, RetryDelay·2^(n-1))
	// before the n-th retry.
	BackoffExponential = "exponential"
)

// JobExtra holds rowq's own job settings beside Fireworq's. It is embedded
// in Job, JobInsertParams and FailedJob so that every node, and a retry
// from the failure log, sees the same settings.
type JobExtra struct {
	// Priority orders due jobs of a queue: higher first, ties by next_try
	// then id.
	Priority int
	// UniqueKey, when not "", allows one pending job (waiting or grabbed)
	// per queue and key. The failure log does not keep it.
	UniqueKey string
	// RetryBackoff is BackoffFixed or BackoffExponential ("" reads as
	// fixed).
	RetryBackoff string
	// RetryDelayMax caps an exponential delay, in seconds; 0 = no cap.
	RetryDelayMax int
	// RetryJitter spreads each retry delay by up to ± this fraction of it
	// (0..1).
	RetryJitter float64
}

// JobsExtraStore is the store side of rowq's additions to the queue API:
// batch enqueue with unique keys, pausing queues and retrying or deleting
// failure log entries.
type JobsExtraStore interface {
	// JobsPush stores the jobs in one transaction (all or none) and
	// reports, in the order given, each job's id. A job with a UniqueKey
	// that a pending job of its queue already holds (or an earlier job of
	// the same call) is not stored: its result names the holder, with
	// Existing set. The database's unique index decides, so concurrent
	// pushes of one key store one job.
	JobsPush(ctx context.Context, jobs []*JobInsertParams) ([]JobPushed, error)

	// QueueSetPaused pauses or resumes the queue and returns it, or
	// ErrNotFound.
	QueueSetPaused(ctx context.Context, name string, paused bool) (*Queue, error)

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

// JobPushed is the outcome of one job of Store.JobsPush.
type JobPushed struct {
	ID int64
	// Existing is set when a pending job with the same unique key was
	// found instead of storing a new one; Job is then that job.
	Existing bool
	Job      *Job
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

// KeyedInOrder returns the indexes of the jobs that have a unique key,
// ordered by queue and key. Dialects insert keyed jobs in this order so
// that two pushes of the same keys take the index locks in the same order
// instead of deadlocking.
func KeyedInOrder(jobs []*JobInsertParams) []int {
	var idx []int
	for i, j := range jobs {
		if j.UniqueKey != "" {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(jobs[a].Queue, jobs[b].Queue), cmp.Compare(jobs[a].UniqueKey, jobs[b].UniqueKey))
	})
	return idx
}
