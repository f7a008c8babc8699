package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store"
)

// jobsListSQL builds the listing query for a kind and direction. It walks
// jobs_list (queue_name, state, next_try, id) in index order; the keyset
// condition is a row comparison, which PostgreSQL uses as an index bound.
// Grabbed jobs include the leased ones (both are out for delivery; few),
// read from two ranges of the index and sorted.
// Arguments: $1 queue, $2 state, $3 limit, [$4 next_try, $5 id].
func jobsListSQL(kind string, desc, after bool) string {
	state := "state = $2"
	if kind == store.JobsGrabbed {
		state = "state IN ($2, 'leased')"
	}
	q := `/* rowq:inspect.jobs_list */ SELECT ` + jobCols + `
	FROM jobs WHERE queue_name = $1 AND ` + state
	switch kind {
	case store.JobsWaiting:
		q += ` AND next_try <= now()`
	case store.JobsDeferred:
		q += ` AND next_try > now()`
	}
	cmp, dir := ">", ""
	if desc {
		cmp, dir = "<", " DESC"
	}
	if after {
		q += ` AND (next_try, id) ` + cmp + ` ($4, $5)`
	}
	return q + ` ORDER BY next_try` + dir + `, id` + dir + ` LIMIT $3`
}

// JobsList returns a page of the queue's jobs of one kind.
func (s *Store) JobsList(ctx context.Context, p *store.JobsListParams) ([]*store.Job, error) {
	state := store.StateWaiting
	if p.Kind == store.JobsGrabbed {
		state = store.StateGrabbed
	}
	args := []any{p.Queue, state, p.Limit}
	if p.After != nil {
		args = append(args, p.After.NextTry, p.After.ID)
	}
	jobs, err := queryAll(ctx, s, scanJob, jobsListSQL(p.Kind, p.Desc, p.After != nil), args...)
	if err != nil {
		return nil, fmt.Errorf("list %s jobs of queue %q: %w", p.Kind, p.Queue, mapErr(err))
	}
	return jobs, nil
}

// jobDeleteSQL removes the job $1 of queue $2 that has no flow.
const jobDeleteSQL = `/* rowq:inspect.job_delete */
	DELETE FROM jobs WHERE id = $1 AND queue_name = $2` + noFlow + ` RETURNING ` + jobCols

// JobDelete removes one job of the queue and returns it, or
// store.ErrNotFound. A job with a flow counts as cancelled for its flow
// (its dependents, its batch, its on_finish callback), with no history.
func (s *Store) JobDelete(ctx context.Context, queue string, id int64) (*store.Job, error) {
	j, err := queryOne(ctx, s, scanJob, jobDeleteSQL, id, queue)
	if errors.Is(err, pgx.ErrNoRows) {
		j, err = s.removeFlow(ctx, withFlow(jobDeleteSQL), []any{id, queue}, "deleted")
	}
	if err != nil {
		return nil, fmt.Errorf("delete job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return j, nil
}

// failedJobsListSQL builds the failure log listing: by id on
// failed_jobs_queue (queue_name, id), or by creation on failed_jobs_created
// (queue_name, created_at, id). Arguments: $1 queue, $2 limit, [key…].
func failedJobsListSQL(byCreated, desc, after bool) string {
	cmp, dir := ">", ""
	if desc {
		cmp, dir = "<", " DESC"
	}
	q := `/* rowq:inspect.failed_list */ SELECT ` + failedJobCols + ` FROM failed_jobs WHERE queue_name = $1`
	if !byCreated {
		if after {
			q += ` AND id ` + cmp + ` $3`
		}
		// queue_name leads the ORDER BY (it is fixed by the WHERE) so that
		// the planner matches the index instead of filtering the primary key.
		return q + ` ORDER BY queue_name` + dir + `, id` + dir + ` LIMIT $2`
	}
	if after {
		q += ` AND (created_at, id) ` + cmp + ` ($3, $4)`
	}
	return q + ` ORDER BY queue_name` + dir + `, created_at` + dir + `, id` + dir + ` LIMIT $2`
}

// FailedJobsList returns a page of the queue's failure log.
func (s *Store) FailedJobsList(ctx context.Context, p *store.FailedJobsListParams) ([]*store.FailedJob, error) {
	args := []any{p.Queue, p.Limit}
	if a := p.After; a != nil {
		if p.ByCreated {
			args = append(args, a.CreatedAt, a.ID)
		} else {
			args = append(args, a.ID)
		}
	}
	out, err := queryAll(ctx, s, scanFailedJob, failedJobsListSQL(p.ByCreated, p.Desc, p.After != nil), args...)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return out, nil
}

// FailedJobDelete removes one failure log entry and returns it, or
// store.ErrNotFound.
func (s *Store) FailedJobDelete(ctx context.Context, queue string, id int64) (*store.FailedJob, error) {
	f, err := queryOne(ctx, s, scanFailedJob, `/* rowq:inspect.failed_delete */
		DELETE FROM failed_jobs WHERE id = $1 AND queue_name = $2 RETURNING `+failedJobCols, id, queue)
	if err != nil {
		return nil, fmt.Errorf("delete failed job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return f, nil
}

// TablesSize returns the tables of the current schema with the statistics
// collector's live and dead row counts and the bytes of each table with
// its indexes and TOAST.
func (s *Store) TablesSize(ctx context.Context) ([]*store.TableSize, error) {
	ts, err := queryAll(ctx, s, func(row pgx.CollectableRow) (*store.TableSize, error) {
		var t store.TableSize
		err := row.Scan(&t.Name, &t.Rows, &t.Bytes, &t.DeadRows)
		return &t, err
	}, `/* rowq:inspect.tables_size */ SELECT relname, n_live_tup, pg_total_relation_size(relid), n_dead_tup
		FROM pg_stat_user_tables WHERE schemaname = current_schema() ORDER BY relname`)
	if err != nil {
		return nil, fmt.Errorf("size tables: %w", mapErr(err))
	}
	return ts, nil
}
