package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// jobsListSQL builds the listing query for a kind and direction. It walks
// jobs_list (queue_name, state, next_try, id) in
// index order. Grabbed jobs include the leased ones (both are out for
// delivery; few), read from two ranges of the index and sorted.
// Arguments: ?1 queue, ?2 state, ?3 limit, ?4 now, [?5 next_try, ?6 id].
func jobsListSQL(kind string, desc, after bool) string {
	state := "state = ?2"
	if kind == store.JobsGrabbed {
		state = "state IN (?2, 'leased')"
	}
	q := `/* rowq:inspect.jobs_list */ SELECT ` + jobCols + `
	FROM jobs WHERE queue_name = ?1 AND ` + state
	switch kind {
	case store.JobsWaiting:
		q += ` AND next_try <= ?4`
	case store.JobsDeferred:
		q += ` AND next_try > ?4`
	}
	cmp, dir := ">", ""
	if desc {
		cmp, dir = "<", " DESC"
	}
	if after {
		q += ` AND (next_try, id) ` + cmp + ` (?5, ?6)`
	}
	return q + ` ORDER BY next_try` + dir + `, id` + dir + ` LIMIT ?3`
}

// JobsList returns a page of the queue's jobs of one kind.
func (s *Store) JobsList(ctx context.Context, p *store.JobsListParams) ([]*store.Job, error) {
	state := store.StateWaiting
	if p.Kind == store.JobsGrabbed {
		state = store.StateGrabbed
	}
	args := []any{p.Queue, state, p.Limit, s.micros()}
	if p.After != nil {
		args = append(args, p.After.NextTry.UnixMicro(), p.After.ID)
	}
	rows, err := s.r.QueryContext(ctx, jobsListSQL(p.Kind, p.Desc, p.After != nil), args...)
	if err != nil {
		return nil, fmt.Errorf("list %s jobs of queue %q: %w", p.Kind, p.Queue, mapErr(err))
	}
	defer rows.Close()
	var jobs []*store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list %s jobs of queue %q: %w", p.Kind, p.Queue, mapErr(err))
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list %s jobs of queue %q: %w", p.Kind, p.Queue, mapErr(err))
	}
	return jobs, nil
}

// JobDelete removes one job of the queue and returns it, or
// store.ErrNotFound. A job with a flow ends as cancelled for its flow
// (FlowEnd), without history.
func (s *Store) JobDelete(ctx context.Context, queue string, id int64) (*store.Job, error) {
	var (
		j    *store.Job
		done store.FlowDone
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		done = store.FlowDone{}
		if j, err = scanJob(tx.QueryRowContext(ctx, `/* rowq:inspect.job_delete */
			DELETE FROM jobs WHERE id = ? AND queue_name = ? RETURNING `+jobCols, id, queue)); err != nil {
			return err
		}
		done, err = s.flowEnd(ctx, tx, []store.FlowEnded{{Job: j, Status: store.FinishedCancelled, Message: "deleted"}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete job %d of queue %q: %w", id, queue, mapErr(err))
	}
	s.Done(done)
	return j, nil
}

// failedJobsListSQL builds the failure log listing: by id on
// failed_jobs_queue (queue_name, id), or by creation on failed_jobs_created
// (queue_name, created_at, rowid). Arguments: ?1 queue, ?2 limit, [key…].
func failedJobsListSQL(byCreated, desc, after bool) string {
	cmp, dir := ">", ""
	if desc {
		cmp, dir = "<", " DESC"
	}
	q := `/* rowq:inspect.failed_list */ SELECT ` + failedCols + ` FROM failed_jobs WHERE queue_name = ?1`
	if !byCreated {
		if after {
			q += ` AND id ` + cmp + ` ?3`
		}
		return q + ` ORDER BY id` + dir + ` LIMIT ?2`
	}
	if after {
		q += ` AND (created_at, id) ` + cmp + ` (?3, ?4)`
	}
	return q + ` ORDER BY created_at` + dir + `, id` + dir + ` LIMIT ?2`
}

// FailedJobsList returns a page of the queue's failure log.
func (s *Store) FailedJobsList(ctx context.Context, p *store.FailedJobsListParams) ([]*store.FailedJob, error) {
	args := []any{p.Queue, p.Limit}
	if a := p.After; a != nil {
		if p.ByCreated {
			args = append(args, a.CreatedAt.UnixMicro(), a.ID)
		} else {
			args = append(args, a.ID)
		}
	}
	rows, err := s.r.QueryContext(ctx, failedJobsListSQL(p.ByCreated, p.Desc, p.After != nil), args...)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	defer rows.Close()
	var out []*store.FailedJob
	for rows.Next() {
		f, err := scanFailed(rows)
		if err != nil {
			return nil, fmt.Errorf("list failed jobs of queue %q: %w", p.Queue, mapErr(err))
		}
		out = append(out, f)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list failed jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return out, nil
}

// FailedJobDelete removes one failure log entry and returns it, or
// store.ErrNotFound.
func (s *Store) FailedJobDelete(ctx context.Context, queue string, id int64) (*store.FailedJob, error) {
	f, err := scanFailed(s.w.QueryRowContext(ctx, `/* rowq:inspect.failed_delete */
		DELETE FROM failed_jobs WHERE id = ? AND queue_name = ? RETURNING `+failedCols, id, queue))
	if err != nil {
		return nil, fmt.Errorf("delete failed job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return f, nil
}

// TablesSize counts the rows of each table and adds up the pages of the
// table and its indexes (the dbstat table).
func (s *Store) TablesSize(ctx context.Context) ([]*store.TableSize, error) {
	ts, err := sqldb.QueryAll(ctx, s.r, func(row sqldb.Scanner) (*store.TableSize, error) {
		var t store.TableSize
		err := row.Scan(&t.Name, &t.Bytes)
		return &t, err
	}, `/* rowq:inspect.tables_size */ SELECT t.name, COALESCE(SUM(d.pgsize), 0)
		FROM sqlite_schema t JOIN sqlite_schema o ON o.tbl_name = t.name LEFT JOIN dbstat d ON d.name = o.name
		WHERE t.type = 'table' AND t.name NOT LIKE 'sqlite_%'
		GROUP BY t.name ORDER BY t.name`)
	if err == nil {
		for _, t := range ts {
			// The names come from sqlite_schema, not from a caller.
			if err = s.r.QueryRowContext(ctx, `/* rowq:inspect.tables_size */ SELECT COUNT(*) FROM "`+t.Name+`"`).Scan(&t.Rows); err != nil {
				break
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("size tables: %w", mapErr(err))
	}
	return ts, nil
}
