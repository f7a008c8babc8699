package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store"
)

func backoffOrFixed(b string) string {
	if b == "" {
		return store.BackoffFixed
	}
	return b
}

// insertUniqueSQL is insertSQL that stores nothing when the job's unique
// key is taken. ON CONFLICT waits for a concurrent insert of the same key
// to commit or roll back, and an insert that does nothing does not abort
// the transaction.
var insertUniqueSQL = strings.Replace(insertSQL, "RETURNING id",
	"ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id", 1)

// uniqueAttempts bounds how often a push retries a key whose holder left
// between the INSERT that collided and the SELECT that looked for it.
const uniqueAttempts = 10

// JobsPush stores the jobs in one transaction: those without a unique key
// with one statement, the others one by one with ON CONFLICT DO NOTHING,
// reading the holder of a taken key (READ COMMITTED: each statement sees
// what committed before it).
func (s *Store) JobsPush(ctx context.Context, jobs []*store.JobInsertParams) ([]store.JobPushed, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	var out []store.JobPushed
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = make([]store.JobPushed, len(jobs))
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
			rows, _ := tx.Query(ctx, insertSQL, insertArgs(plain)...)
			ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			if err != nil {
				return err
			}
			for k, id := range ids {
				out[at[k]].ID = id
			}
		}
		for _, i := range store.KeyedInOrder(jobs) {
			var err error
			if out[i], err = pushUnique(ctx, tx, jobs[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, wrap(err, "push %d jobs", len(jobs))
	}
	return out, nil
}

// pushUnique inserts a job with a unique key, or finds the pending job
// that holds the key.
func pushUnique(ctx context.Context, tx pgx.Tx, j *store.JobInsertParams) (store.JobPushed, error) {
	for range uniqueAttempts {
		rows, _ := tx.Query(ctx, insertUniqueSQL, insertArgs([]*store.JobInsertParams{j})...)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return store.JobPushed{}, err
		}
		if len(ids) == 1 {
			return store.JobPushed{ID: ids[0]}, nil
		}
		rows, _ = tx.Query(ctx, `/* rowq:jobs.push_unique */ SELECT `+jobCols+`
			FROM jobs WHERE queue_name = $1 AND unique_key = $2`, j.Queue, j.UniqueKey)
		held, err := pgx.CollectExactlyOneRow(rows, scanJob)
		if errors.Is(err, pgx.ErrNoRows) {
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
	q, err := queryRow(ctx, s, scanQueue, `/* rowq:queues.set_paused */
		UPDATE queues SET paused = $2, updated_at = now() WHERE name = $1 RETURNING `+queueCols, name, paused)
	if err != nil {
		return nil, wrap(err, "set paused=%t on queue %q", paused, name)
	}
	return q, nil
}

// retryInsertSQL puts the deleted failure log entries of CTE d back as
// waiting jobs due now, with their old job ids, created_at and settings,
// and fail_count 0.
const retryInsertSQL = `INSERT INTO jobs
	(id, queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count,
	 priority, unique_key, retry_backoff, retry_delay_max, retry_jitter)
	OVERRIDING SYSTEM VALUE
	SELECT job_id, queue_name, category, url, payload, 'waiting', created_at, now(), timeout, max_retries, retry_delay, 0,
	 priority, NULL, retry_backoff, retry_delay_max, retry_jitter
	FROM d`

// FailedJobRetry moves one failure log entry back to the jobs as a waiting
// job due now, in one statement, or returns store.ErrNotFound.
func (s *Store) FailedJobRetry(ctx context.Context, queue string, id int64) (*store.Job, error) {
	j, err := queryRow(ctx, s, scanJob, `/* rowq:failed_jobs.retry */
		WITH d AS (DELETE FROM failed_jobs WHERE id = $1 AND queue_name = $2 RETURNING *)
		`+retryInsertSQL+` RETURNING `+jobCols, id, queue)
	if err != nil {
		return nil, wrap(err, "retry failed job %d of queue %q", id, queue)
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
	return queryRow(ctx, s, func(row pgx.CollectableRow) (*store.FailedJobsBulkResult, error) {
		var r store.FailedJobsBulkResult
		return &r, row.Scan(&r.Count, &r.Last)
	}, query, p.Queue, p.IDs, p.Before, p.Limit)
}

// FailedJobsRetry moves up to p.Limit failure log entries back to the jobs,
// highest ids first, in one statement.
func (s *Store) FailedJobsRetry(ctx context.Context, p *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error) {
	res, err := s.failedBulk(ctx, p, failedBulkSQL("retry", `, i AS (`+retryInsertSQL+`)`))
	if err != nil {
		return nil, wrap(err, "retry failed jobs of queue %q", p.Queue)
	}
	return res, nil
}

// FailedJobsDelete deletes up to p.Limit failure log entries, highest ids
// first.
func (s *Store) FailedJobsDelete(ctx context.Context, p *store.FailedJobsBulkParams) (*store.FailedJobsBulkResult, error) {
	res, err := s.failedBulk(ctx, p, failedBulkSQL("delete", ""))
	if err != nil {
		return nil, wrap(err, "delete failed jobs of queue %q", p.Queue)
	}
	return res, nil
}
