package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

const failedJobCols = `id, job_id, queue_name, category, url, payload, status, code, message,
	fail_count, failed_at, created_at,
	timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter,
	concurrency_key, concurrency_limit, ordered`

func scanFailedJob(row pgx.CollectableRow) (*store.FailedJob, error) {
	var (
		f       store.FailedJob
		payload []byte
		ckey    *string
	)
	err := row.Scan(&f.ID, &f.JobID, &f.Queue, &f.Category, &f.URL, &payload, &f.Status, &f.Code, &f.Message,
		&f.FailCount, &f.FailedAt, &f.CreatedAt,
		&f.Timeout, &f.MaxRetries, &f.RetryDelay, &f.Priority, &f.RetryBackoff, &f.RetryDelayMax, &f.RetryJitter,
		&ckey, &f.ConcurrencyLimit, &f.Ordered)
	if ckey != nil {
		f.ConcurrencyKey = *ckey
	}
	if payload != nil {
		f.Payload = payload
	}
	f.FailedAt, f.CreatedAt = f.FailedAt.UTC(), f.CreatedAt.UTC()
	return &f, err
}

// FailedJobGet returns one failure log entry of the queue, or
// store.ErrNotFound.
func (s *Store) FailedJobGet(ctx context.Context, queue string, id int64) (*store.FailedJob, error) {
	f, err := queryOne(ctx, s, scanFailedJob, `/* rowq:failed_jobs.get */ SELECT `+failedJobCols+` FROM failed_jobs WHERE id = $1 AND queue_name = $2`, id, queue)
	if err != nil {
		return nil, fmt.Errorf("get failed job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return f, nil
}

// retryInsertSQL puts the deleted failure log entries of CTE d back as
// waiting jobs due now, with their old job ids, created_at and settings,
// and fail_count 0.
const retryInsertSQL = `INSERT INTO jobs
	(id, queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count,
	 priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, grabs, concurrency_key, concurrency_limit, ordered)
	OVERRIDING SYSTEM VALUE
	SELECT job_id, queue_name, category, url, payload, 'waiting', created_at, now(), timeout, max_retries, retry_delay, 0,
	 priority, NULL, retry_backoff, retry_delay_max, retry_jitter, grabs, concurrency_key, concurrency_limit, ordered
	FROM d`

// FailedJobRetry moves one failure log entry back to the jobs as a waiting
// job due now, in one statement, or returns store.ErrNotFound.
func (s *Store) FailedJobRetry(ctx context.Context, queue string, id int64) (*store.Job, error) {
	j, err := queryOne(ctx, s, scanJob, `/* rowq:failed_jobs.retry */
		WITH d AS (DELETE FROM failed_jobs WHERE id = $1 AND queue_name = $2 RETURNING *)
		`+retryInsertSQL+` RETURNING `+jobCols, id, queue)
	if err != nil {
		return nil, fmt.Errorf("retry failed job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return j, nil
}

// failedBulkSQL deletes the entries a FailedJobsBulkParams selects (CTE d)
// and reports how many and the smallest id; then is "" or a CTE that uses d.
func failedBulkSQL(op, then string) string {
	return `/* rowq:failed_jobs.` + op + `_bulk */
		WITH d AS (
			DELETE FROM failed_jobs WHERE id IN (
				SELECT id FROM failed_jobs
				WHERE queue_name = $1 AND ($2::bigint[] IS NULL OR id = ANY($2)) AND ($3::bigint = 0 OR id < $3)
				ORDER BY id DESC LIMIT $4
				FOR UPDATE)
			RETURNING *)` + then + `
		SELECT count(*)::int, coalesce(min(id), 0) FROM d`
}

func (s *Store) failedBulk(ctx context.Context, p *store.FailedJobsBulkParams, query string) (*store.FailedJobsBulkResult, error) {
	if p.Limit <= 0 || (p.IDs != nil && len(p.IDs) == 0) {
		return &store.FailedJobsBulkResult{}, nil
	}
	return queryOne(ctx, s, func(row pgx.CollectableRow) (*store.FailedJobsBulkResult, error) {
		var r store.FailedJobsBulkResult
		return &r, row.Scan(&r.Count, &r.Last)
	}, query, p.Queue, p.IDs, p.Before, p.Limit)
}

// FailedJobsRetry moves up to p.Limit failure log entries back to the jobs,
// highest ids first, in one statement.
func (s *Store) FailedJobsRetry(ctx context.Context, p *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error) {
	res, err := s.failedBulk(ctx, p, failedBulkSQL("retry", `, i AS (`+retryInsertSQL+`)`))
	if err != nil {
		return nil, fmt.Errorf("retry failed jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return res, nil
}

// FailedJobsDelete deletes up to p.Limit failure log entries, highest ids
// first.
func (s *Store) FailedJobsDelete(ctx context.Context, p *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error) {
	res, err := s.failedBulk(ctx, p, failedBulkSQL("delete", ""))
	if err != nil {
		return nil, fmt.Errorf("delete failed jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return res, nil
}
