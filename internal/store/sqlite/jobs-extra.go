package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/rowq/rowq/internal/store"
)

// insertSQL inserts one job; its arguments come from insertArgs.
const insertSQL = `/* rowq:jobs.insert */
	INSERT INTO jobs (queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay,
		priority, unique_key, retry_backoff, retry_delay_max, retry_jitter)
	VALUES (?, ?, ?, ?, 'waiting', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertGrabbedSQL inserts one job already grabbed; its arguments are
// insertArgs, then the holder's node id and grabbed_until.
const insertGrabbedSQL = `/* rowq:jobs.insert_grabbed */
	INSERT INTO jobs (queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay,
		priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, grabbed_by, grabbed_until)
	VALUES (?, ?, ?, ?, 'grabbed', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertUniqueSQL inserts one job unless its unique key is taken, and then
// returns no row.
const insertUniqueSQL = insertSQL + ` ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id`

// insertArgs are the arguments of insertSQL for job j created at now.
func insertArgs(j *store.JobInsertParams, now int64) []any {
	var key any // NULL: no key, and NULLs never collide in jobs_unique
	if j.UniqueKey != "" {
		key = j.UniqueKey
	}
	backoff := j.RetryBackoff
	if backoff == "" {
		backoff = store.BackoffFixed
	}
	return []any{j.Queue, j.Category, j.URL, nullPayload(j.Payload), now, now + j.RunAfter.Microseconds(),
		j.Timeout, j.MaxRetries, j.RetryDelay, j.Priority, key, backoff, j.RetryDelayMax, j.RetryJitter}
}

// JobsPush stores the jobs in one transaction. There is one writer
// connection, so a key found taken stays taken until the commit.
func (s *Store) JobsPush(ctx context.Context, jobs []*store.JobInsertParams) ([]store.JobPushed, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	out := make([]store.JobPushed, len(jobs))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.micros()
		for i, j := range jobs {
			if j.UniqueKey == "" {
				res, err := tx.ExecContext(ctx, insertSQL, insertArgs(j, now)...)
				if err != nil {
					return err
				}
				if out[i].ID, err = res.LastInsertId(); err != nil {
					return err
				}
				continue
			}
			err := tx.QueryRowContext(ctx, insertUniqueSQL, insertArgs(j, now)...).Scan(&out[i].ID)
			if !errors.Is(err, sql.ErrNoRows) {
				if err != nil {
					return err
				}
				continue
			}
			held, err := scanJob(tx.QueryRowContext(ctx, `/* rowq:jobs.push_unique */ SELECT `+jobCols+`
				FROM jobs WHERE queue_name = ? AND unique_key = ?`, j.Queue, j.UniqueKey))
			if err != nil {
				return err
			}
			out[i] = store.JobPushed{ID: held.ID, Existing: true, Job: held}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("push %d jobs: %w", len(jobs), err)
	}
	return out, nil
}

// QueueSetPaused pauses or resumes the queue and returns it, or
// store.ErrNotFound.
func (s *Store) QueueSetPaused(ctx context.Context, name string, paused bool) (*store.Queue, error) {
	q, err := scanQueue(s.w.QueryRowContext(ctx, `/* rowq:queues.set_paused */
		UPDATE queues SET paused = ?, updated_at = ? WHERE name = ? RETURNING `+queueCols, paused, s.micros(), name))
	if err != nil {
		return nil, fmt.Errorf("set paused=%t on queue %q: %w", paused, name, mapErr(err))
	}
	return q, nil
}

// retryInsertSQL puts failure log entries back as waiting jobs due at ?1,
// with their old job ids, created_at and settings, and fail_count 0.
const retryInsertSQL = `/* rowq:failed_jobs.retry */ INSERT INTO jobs
	(id, queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count,
	 priority, unique_key, retry_backoff, retry_delay_max, retry_jitter)
	SELECT job_id, queue_name, category, url, payload, 'waiting', created_at, ?, timeout, max_retries, retry_delay, 0,
	 priority, NULL, retry_backoff, retry_delay_max, retry_jitter
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
