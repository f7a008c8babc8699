package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// jobsListSQL builds the listing query for a kind and direction. Waiting
// and deferred jobs are read from jobs_list (queue_name, next_try, id) in
// index order, skipping the grabbed rows among them (the deliveries in
// flight, few) and the blocked ones (flows, listed apart: JobsBlocked);
// grabbed jobs, few, from their range of jobs_fetch, then
// sorted. The keyset condition is written as a range on next_try plus a
// tie-break so that both MySQL and MariaDB use it as an index range.
// Grabbed jobs include the leased ones: both are out for delivery.
// Arguments: queue, state, [next_try, next_try, id,] limit.
func jobsListSQL(kind string, desc, after bool) string {
	index, state := "jobs_list", "state = ?"
	if kind == store.JobsGrabbed {
		index, state = "jobs_fetch", "state IN (?, 'leased')"
	}
	q := `/* rowq:inspect.jobs_list */ SELECT ` + jobCols + `
	FROM jobs FORCE INDEX (` + index + `)
	WHERE queue_name = ? AND ` + state
	switch kind {
	case store.JobsWaiting:
		q += ` AND next_try <= NOW(6)`
	case store.JobsDeferred:
		q += ` AND next_try > NOW(6)`
	}
	dir := ""
	if desc {
		dir = " DESC"
		if after {
			q += ` AND next_try <= ? AND (next_try < ? OR id < ?)`
		}
	} else if after {
		q += ` AND next_try >= ? AND (next_try > ? OR id > ?)`
	}
	return q + ` ORDER BY next_try` + dir + `, id` + dir + ` LIMIT ?`
}

func jobsListArgs(p *store.JobsListParams) []any {
	state := store.StateWaiting
	if p.Kind == store.JobsGrabbed {
		state = store.StateGrabbed
	}
	args := []any{p.Queue, state}
	if p.After != nil {
		args = append(args, p.After.NextTry, p.After.NextTry, p.After.ID)
	}
	return append(args, p.Limit)
}

// JobsList returns a page of the queue's jobs of one kind.
func (s *Store) JobsList(ctx context.Context, p *store.JobsListParams) ([]*store.Job, error) {
	rows, err := s.db.QueryContext(ctx, jobsListSQL(p.Kind, p.Desc, p.After != nil), jobsListArgs(p)...)
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

// JobDelete removes one job of the queue in a short transaction and
// returns it, or store.ErrNotFound. A job with a flow counts as cancelled
// for it (its dependents, its batch, its on_finish callback), in the same
// transaction; it still writes no history.
func (s *Store) JobDelete(ctx context.Context, queue string, id int64) (*store.Job, error) {
	var (
		j    *store.Job
		done store.FlowDone
	)
	err := retry(ctx, func() error {
		done = store.FlowDone{}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			j, err = scanJob(tx.QueryRowContext(ctx, `/* rowq:inspect.job_delete */ SELECT `+jobCols+`
				FROM jobs WHERE id = ? AND queue_name = ? FOR UPDATE`, id, queue))
			if err != nil {
				return err
			}
			if _, err = tx.ExecContext(ctx, `/* rowq:inspect.job_delete */ DELETE FROM jobs WHERE id = ?`, id); err != nil {
				return err
			}
			if j.Ordered {
				if err = forgetOrdered(ctx, tx, id); err != nil {
					return err
				}
			}
			done, err = s.endFlows(ctx, tx, store.FlowEnded{Job: j, Status: store.FinishedCancelled, Message: flowDeleted})
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("delete job %d of queue %q: %w", id, queue, mapErr(err))
	}
	s.FlowHook.Done(done)
	return j, nil
}

// flowDeleted is the message a deleted job's flow tells (its on_finish
// callback): it counts as cancelled.
const flowDeleted = "deleted"

// failedJobsListSQL builds the failure log listing: by id on
// failed_jobs_queue (queue_name, id), or by creation on failed_jobs_created
// (queue_name, created_at, id). Arguments: queue, [key…,] limit.
func failedJobsListSQL(byCreated, desc, after bool) string {
	cmp, dir := ">", ""
	if desc {
		cmp, dir = "<", " DESC"
	}
	if !byCreated {
		q := `/* rowq:inspect.failed_list */ SELECT ` + failedJobCols + `
	FROM failed_jobs FORCE INDEX (failed_jobs_queue)
	WHERE queue_name = ?`
		if after {
			q += ` AND id ` + cmp + ` ?`
		}
		return q + ` ORDER BY id` + dir + ` LIMIT ?`
	}
	q := `/* rowq:inspect.failed_list */ SELECT ` + failedJobCols + `
	FROM failed_jobs FORCE INDEX (failed_jobs_created)
	WHERE queue_name = ?`
	if after {
		q += ` AND created_at ` + cmp + `= ? AND (created_at ` + cmp + ` ? OR id ` + cmp + ` ?)`
	}
	return q + ` ORDER BY created_at` + dir + `, id` + dir + ` LIMIT ?`
}

func failedJobsListArgs(p *store.FailedJobsListParams) []any {
	args := []any{p.Queue}
	if a := p.After; a != nil {
		if p.ByCreated {
			args = append(args, a.CreatedAt, a.CreatedAt, a.ID)
		} else {
			args = append(args, a.ID)
		}
	}
	return append(args, p.Limit)
}

// FailedJobsList returns a page of the queue's failure log.
func (s *Store) FailedJobsList(ctx context.Context, p *store.FailedJobsListParams) ([]*store.FailedJob, error) {
	rows, err := s.db.QueryContext(ctx, failedJobsListSQL(p.ByCreated, p.Desc, p.After != nil), failedJobsListArgs(p)...)
	if err != nil {
		return nil, fmt.Errorf("list failed jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	defer rows.Close()
	var out []*store.FailedJob
	for rows.Next() {
		f, err := scanFailedJob(rows)
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
	var f *store.FailedJob
	err := retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			f, err = scanFailedJob(tx.QueryRowContext(ctx, `/* rowq:inspect.failed_delete */ SELECT `+failedJobCols+`
				FROM failed_jobs WHERE id = ? AND queue_name = ? FOR UPDATE`, id, queue))
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `/* rowq:inspect.failed_delete */ DELETE FROM failed_jobs WHERE id = ?`, id)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("delete failed job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return f, nil
}

// TablesSize returns the tables of the database with InnoDB's estimates of
// their rows and bytes (data and indexes), which it refreshes as rows
// change (innodb_stats_auto_recalc).
func (s *Store) TablesSize(ctx context.Context) ([]*store.TableSize, error) {
	ts, err := sqldb.QueryAll(ctx, s.db, func(row sqldb.Scanner) (*store.TableSize, error) {
		var t store.TableSize
		err := row.Scan(&t.Name, &t.Rows, &t.Bytes)
		return &t, err
	}, `/* rowq:inspect.tables_size */ SELECT TABLE_NAME, COALESCE(TABLE_ROWS, 0), COALESCE(DATA_LENGTH + INDEX_LENGTH, 0)
		FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'
		ORDER BY TABLE_NAME`)
	if err != nil {
		return nil, fmt.Errorf("size tables: %w", mapErr(err))
	}
	return ts, nil
}
