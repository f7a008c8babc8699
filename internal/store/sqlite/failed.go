package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const failedCols = `id, job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at,
	timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter,
	concurrency_key, concurrency_limit, ordered`

func scanFailed(row sqldb.Scanner) (*store.FailedJob, error) {
	var (
		f                 store.FailedJob
		payload           sql.NullString
		failedAt, created int64
		ckey              sql.NullString
	)
	err := row.Scan(&f.ID, &f.JobID, &f.Queue, &f.Category, &f.URL, &payload, &f.Status, &f.Code, &f.Message, &f.FailCount, &failedAt, &created,
		&f.Timeout, &f.MaxRetries, &f.RetryDelay, &f.Priority, &f.RetryBackoff, &f.RetryDelayMax, &f.RetryJitter,
		&ckey, &f.ConcurrencyLimit, &f.Ordered)
	if err != nil {
		return nil, err
	}
	f.ConcurrencyKey = ckey.String
	if payload.Valid {
		f.Payload = []byte(payload.String)
	}
	f.FailedAt, f.CreatedAt = fromMicros(failedAt), fromMicros(created)
	return &f, nil
}

// FailedJobGet returns one failure log entry of the queue.
func (s *Store) FailedJobGet(ctx context.Context, queue string, id int64) (*store.FailedJob, error) {
	f, err := scanFailed(s.r.QueryRowContext(ctx, `/* rowq:failed.get */ SELECT `+failedCols+` FROM failed_jobs WHERE id = ? AND queue_name = ?`, id, queue))
	if err != nil {
		return nil, fmt.Errorf("get failed job %d: %w", id, mapErr(err))
	}
	return f, nil
}

// retryInsertSQL puts failure log entries back as waiting jobs due at ?1,
// with their old job ids, created_at and settings, and fail_count 0.
const retryInsertSQL = `/* rowq:failed_jobs.retry */ INSERT INTO jobs
	(id, queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count,
	 priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, grabs, concurrency_key, concurrency_limit, ordered)
	SELECT job_id, queue_name, category, url, payload, 'waiting', created_at, ?, timeout, max_retries, retry_delay, 0,
	 priority, NULL, retry_backoff, retry_delay_max, retry_jitter, grabs, concurrency_key, concurrency_limit, ordered
	FROM failed_jobs WHERE id IN `

// FailedJobRetry moves one failure log entry back to the jobs as a waiting
// job due now, in one transaction, or returns store.ErrNotFound.
func (s *Store) FailedJobRetry(ctx context.Context, queue string, id int64) (*store.Job, error) {
	var j *store.Job
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var jobID int64
		err := tx.QueryRowContext(ctx, `/* rowq:failed_jobs.retry */ SELECT job_id FROM failed_jobs WHERE id = ? AND queue_name = ?`,
			id, queue).Scan(&jobID)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, retryInsertSQL+"(?)", s.micros(), id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `/* rowq:failed_jobs.retry */ DELETE FROM failed_jobs WHERE id = ?`, id); err != nil {
			return err
		}
		j, err = scanJob(tx.QueryRowContext(ctx, `/* rowq:failed_jobs.retry */ SELECT `+jobCols+` FROM jobs WHERE id = ?`, jobID))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry failed job %d of queue %q: %w", id, queue, err)
	}
	return j, nil
}

// FailedJobsRetry moves up to p.Limit failure log entries back to the jobs,
// highest ids first, in one transaction.
func (s *Store) FailedJobsRetry(ctx context.Context, p *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error) {
	res, err := s.failedBulk(ctx, p, "retry", func(tx *sql.Tx, in string, args []any) error {
		_, err := tx.ExecContext(ctx, retryInsertSQL+in, append([]any{s.micros()}, args...)...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry failed jobs of queue %q: %w", p.Queue, err)
	}
	return res, nil
}

// FailedJobsDelete deletes up to p.Limit failure log entries, highest ids
// first.
func (s *Store) FailedJobsDelete(ctx context.Context, p *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error) {
	res, err := s.failedBulk(ctx, p, "delete", func(*sql.Tx, string, []any) error { return nil })
	if err != nil {
		return nil, fmt.Errorf("delete failed jobs of queue %q: %w", p.Queue, err)
	}
	return res, nil
}

// failedBulk selects the entries p names, runs before on them (given as an
// IN list and its arguments), then deletes them, in one transaction.
func (s *Store) failedBulk(ctx context.Context, p *store.FailedJobsBulkParams, op string,
	before func(tx *sql.Tx, in string, args []any) error) (*store.FailedJobsBulkResult, error) {
	res := &store.FailedJobsBulkResult{}
	if p.Limit <= 0 || (p.IDs != nil && len(p.IDs) == 0) {
		return res, nil
	}
	var q strings.Builder
	q.WriteString("/* rowq:failed_jobs." + op + "_bulk */ SELECT id FROM failed_jobs WHERE queue_name = ?")
	args := []any{p.Queue}
	if p.IDs != nil {
		q.WriteString(" AND id IN (?" + strings.Repeat(", ?", len(p.IDs)-1) + ")")
		for _, id := range p.IDs {
			args = append(args, id)
		}
	}
	if p.Before > 0 {
		q.WriteString(" AND id < ?")
		args = append(args, p.Before)
	}
	q.WriteString(" ORDER BY id DESC LIMIT ?")
	args = append(args, p.Limit)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, q.String(), args...)
		if err != nil {
			return err
		}
		var ids []any
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
			res.Last = id
		}
		rows.Close()
		if err := rows.Err(); err != nil || len(ids) == 0 {
			return err
		}
		res.Count = len(ids)
		in := "(?" + strings.Repeat(", ?", len(ids)-1) + ")"
		if err := before(tx, in, ids); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, "/* rowq:failed_jobs."+op+"_bulk */ DELETE FROM failed_jobs WHERE id IN "+in, ids...)
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
