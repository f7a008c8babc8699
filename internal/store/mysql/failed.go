package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const failedJobCols = "id, job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at, " +
	"timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, " +
	"concurrency_key, concurrency_limit, ordered"

func scanFailedJob(sc sqldb.Scanner) (*store.FailedJob, error) {
	var (
		f       store.FailedJob
		payload []byte
		ckey    sql.NullString
	)
	err := sc.Scan(&f.ID, &f.JobID, &f.Queue, &f.Category, &f.URL, &payload,
		&f.Status, &f.Code, &f.Message, &f.FailCount, &f.FailedAt, &f.CreatedAt,
		&f.Timeout, &f.MaxRetries, &f.RetryDelay, &f.Priority, &f.RetryBackoff, &f.RetryDelayMax, &f.RetryJitter,
		&ckey, &f.ConcurrencyLimit, &f.Ordered)
	if err != nil {
		return nil, err
	}
	f.ConcurrencyKey = ckey.String
	f.Payload = payload
	return &f, nil
}

// FailedJobGet returns one failure log entry of the queue, or
// store.ErrNotFound.
func (s *Store) FailedJobGet(ctx context.Context, queue string, id int64) (*store.FailedJob, error) {
	f, err := scanFailedJob(s.db.QueryRowContext(ctx, `/* rowq:failed_jobs.get */ SELECT `+failedJobCols+` FROM failed_jobs WHERE id = ? AND queue_name = ?`, id, queue))
	if err != nil {
		return nil, fmt.Errorf("get failed job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return f, nil
}

// retryInsertSQL puts failure log entries back as waiting jobs due now,
// with their old job ids, created_at and settings, and fail_count 0.
const retryInsertSQL = `/* rowq:failed_jobs.retry */ INSERT INTO jobs
	(id, queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count,
	 priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, grabbed_until, grabs,
	 concurrency_key, concurrency_limit, ordered)
	SELECT job_id, queue_name, category, url, payload, 'waiting', created_at, NOW(6), timeout, max_retries, retry_delay, 0,
	 priority, NULL, retry_backoff, retry_delay_max, retry_jitter, NOW(6), grabs,
	 concurrency_key, concurrency_limit, ordered
	FROM failed_jobs WHERE id IN `

// retryOrderedSQL lists in ordered_jobs the ordered jobs that
// retryInsertSQL puts back (mysql/keys.go). IGNORE: a row of the job's
// that was left behind (see JobsKeyHeads) is as good as a new one.
const retryOrderedSQL = `/* rowq:failed_jobs.retry */ INSERT IGNORE INTO ordered_jobs (job_id, queue_name, concurrency_key)
	SELECT job_id, queue_name, concurrency_key FROM failed_jobs WHERE ordered AND concurrency_key IS NOT NULL AND id IN `

// FailedJobRetry moves one failure log entry back to the jobs as a waiting
// job due now, in one transaction, or returns store.ErrNotFound.
func (s *Store) FailedJobRetry(ctx context.Context, queue string, id int64) (*store.Job, error) {
	var j *store.Job
	err := retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var jobID int64
			err := tx.QueryRowContext(ctx, `/* rowq:failed_jobs.retry */ SELECT job_id FROM failed_jobs
				WHERE id = ? AND queue_name = ? FOR UPDATE`, id, queue).Scan(&jobID)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, retryInsertSQL+"(?)", id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, retryOrderedSQL+"(?)", id); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `/* rowq:failed_jobs.retry */ DELETE FROM failed_jobs WHERE id = ?`, id); err != nil {
				return err
			}
			j, err = scanJob(tx.QueryRowContext(ctx, `/* rowq:failed_jobs.retry */ SELECT `+jobCols+` FROM jobs WHERE id = ?`, jobID))
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("retry failed job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return j, nil
}

// FailedJobsRetry moves up to p.Limit failure log entries back to the jobs,
// highest ids first, in one transaction.
func (s *Store) FailedJobsRetry(ctx context.Context, p *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error) {
	res, err := s.failedBulk(ctx, p, "retry", func(tx *sql.Tx, in string, args []any) error {
		if _, err := tx.ExecContext(ctx, retryInsertSQL+in, args...); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, retryOrderedSQL+in, args...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("retry failed jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return res, nil
}

// FailedJobsDelete deletes up to p.Limit failure log entries, highest ids
// first.
func (s *Store) FailedJobsDelete(ctx context.Context, p *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error) {
	res, err := s.failedBulk(ctx, p, "delete", func(*sql.Tx, string, []any) error { return nil })
	if err != nil {
		return nil, fmt.Errorf("delete failed jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return res, nil
}

// failedBulk locks the entries p selects, runs before on them (given as an
// IN list and its arguments), then deletes them, in one transaction.
func (s *Store) failedBulk(ctx context.Context, p *store.FailedJobsBulkParams, op string,
	before func(tx *sql.Tx, in string, args []any) error) (*store.FailedJobsBulkResult, error) {
	if p.Limit <= 0 || (p.IDs != nil && len(p.IDs) == 0) {
		return &store.FailedJobsBulkResult{}, nil
	}
	var q strings.Builder
	q.WriteString("/* rowq:failed_jobs." + op + "_bulk */ SELECT id FROM failed_jobs WHERE queue_name = ?")
	args := []any{p.Queue}
	if p.IDs != nil {
		q.WriteString(" AND id IN (" + sqldb.Placeholders(len(p.IDs)) + ")")
		for _, id := range p.IDs {
			args = append(args, id)
		}
	}
	if p.Before > 0 {
		q.WriteString(" AND id < ?")
		args = append(args, p.Before)
	}
	q.WriteString(" ORDER BY id DESC LIMIT ? FOR UPDATE")
	args = append(args, p.Limit)
	var res *store.FailedJobsBulkResult
	err := retry(ctx, func() error {
		res = &store.FailedJobsBulkResult{}
		return s.inTx(ctx, func(tx *sql.Tx) error {
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
			in := "(" + sqldb.Placeholders(len(ids)) + ")"
			if err := before(tx, in, ids); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, "/* rowq:failed_jobs."+op+"_bulk */ DELETE FROM failed_jobs WHERE id IN "+in, ids...)
			return err
		})
	})
	return res, err
}
