package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/rowq/rowq/internal/store"
)

// optionArgs are the values of the columns priority, unique_key,
// retry_backoff, retry_delay_max and retry_jitter.
func optionArgs(e *store.JobOptions) []any {
	var key any // NULL: no key, and NULLs never collide in jobs_unique
	if e.UniqueKey != "" {
		key = e.UniqueKey
	}
	return []any{e.Priority, key, backoffOrFixed(e.RetryBackoff), e.RetryDelayMax, e.RetryJitter}
}

func backoffOrFixed(b string) string {
	if b == "" {
		return store.BackoffFixed
	}
	return b
}

// uniqueAttempts bounds how often a push retries a key whose holder left
// between the INSERT that collided and the SELECT that looked for it.
const uniqueAttempts = 10

// JobsPush stores the jobs in one transaction: those without a unique key
// with multi-row INSERTs, the others one by one so that a collision
// neither fails the batch nor breaks the id arithmetic of the multi-row
// INSERT. A colliding INSERT waits on the row lock of a concurrent holder
// and fails once it commits; the SELECT that follows (READ COMMITTED: a
// fresh snapshot) then sees the holder.
func (s *Store) JobsPush(ctx context.Context, jobs []*store.JobInsertParams) ([]store.JobPushed, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	step, err := s.autoIncrementStep(ctx)
	if err != nil {
		return nil, fmt.Errorf("push %d jobs: %w", len(jobs), mapErr(err))
	}
	var out []store.JobPushed
	err = retry(ctx, func() error {
		out = make([]store.JobPushed, len(jobs))
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var (
				plain []*store.JobInsertParams
				at    []int
			)
			for i, j := range jobs {
				if j.UniqueKey == "" {
					plain, at = append(plain, j), append(at, i)
				}
			}
			if len(plain) > 0 {
				var ids []int64
				for _, c := range chunkInserts(plain) {
					if err := insertChunk(ctx, tx, c, step, &ids); err != nil {
						return err
					}
				}
				for k, id := range ids {
					out[at[k]].ID = id
				}
			}
			for _, i := range store.KeyedInOrder(jobs) {
				var err error
				if out[i], err = pushUnique(ctx, tx, jobs[i], step); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("push %d jobs: %w", len(jobs), mapErr(err))
	}
	return out, nil
}

// pushUnique inserts a job with a unique key, or finds the pending job
// that holds the key.
func pushUnique(ctx context.Context, tx *sql.Tx, j *store.JobInsertParams, step int64) (store.JobPushed, error) {
	for range uniqueAttempts {
		var ids []int64
		err := insertChunk(ctx, tx, []*store.JobInsertParams{j}, step, &ids)
		if err == nil {
			return store.JobPushed{ID: ids[0]}, nil
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != errDupEntry {
			return store.JobPushed{}, err
		}
		held, err := scanJob(tx.QueryRowContext(ctx, `/* rowq:jobs.push_unique */ SELECT `+jobCols+`
			FROM jobs WHERE queue_name = ? AND unique_key = ?`, j.Queue, j.UniqueKey))
		if errors.Is(err, sql.ErrNoRows) {
			continue // the holder finished meanwhile: the key is free again
		}
		if err != nil {
			return store.JobPushed{}, err
		}
		return store.JobPushed{ID: held.ID, Existing: true, Job: held}, nil
	}
	return store.JobPushed{}, fmt.Errorf("unique key %q of queue %q: taken and freed %d times in a row", j.UniqueKey, j.Queue, uniqueAttempts)
}

// QueueSetPaused pauses or resumes the queue and returns it, or
// store.ErrNotFound.
func (s *Store) QueueSetPaused(ctx context.Context, name string, paused bool) (*store.Queue, error) {
	var n int64
	err := retry(ctx, func() (err error) {
		n, err = affected(s.db.ExecContext(ctx, `/* rowq:queues.set_paused */
			UPDATE queues SET paused = ?, updated_at = NOW(6) WHERE name = ?`, paused, name))
		return err
	})
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("set paused=%t on queue %q: %w", paused, name, mapErr(err))
	}
	return s.QueueGet(ctx, name)
}

// retryInsertSQL puts failure log entries back as waiting jobs due now,
// with their old job ids, created_at and settings, and fail_count 0.
const retryInsertSQL = `/* rowq:failed_jobs.retry */ INSERT INTO jobs
	(id, queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count,
	 priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, grabbed_until)
	SELECT job_id, queue_name, category, url, payload, 'waiting', created_at, NOW(6), timeout, max_retries, retry_delay, 0,
	 priority, NULL, retry_backoff, retry_delay_max, retry_jitter, NOW(6)
	FROM failed_jobs WHERE id IN `

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
		_, err := tx.ExecContext(ctx, retryInsertSQL+in, args...)
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
		q.WriteString(" AND id IN (" + placeholders(len(p.IDs)) + ")")
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
			in := "(" + placeholders(len(ids)) + ")"
			if err := before(tx, in, ids); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, "/* rowq:failed_jobs."+op+"_bulk */ DELETE FROM failed_jobs WHERE id IN "+in, ids...)
			return err
		})
	})
	return res, err
}
