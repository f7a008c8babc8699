package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// heldBy is the condition that the grab a lease token names still holds
// the job: delivered (grabbed) or accepted (leased). Arguments: ?1 id, ?2
// grabs.
const heldBy = `id = ?1 AND grabs = ?2 AND state IN ('grabbed', 'leased')`

// leaseExpired is heldBy for a lease that has run out by ?3.
const leaseExpired = `id = ?1 AND grabs = ?2 AND state = 'leased' AND grabbed_until < ?3`

// JobLease moves a job held by grab p.Grabs to leased until now + p.Lease.
func (s *Store) JobLease(ctx context.Context, p *store.JobLeaseParams) (time.Time, error) {
	until := s.micros() + p.Lease.Microseconds()
	n, err := affected(s.w.ExecContext(ctx, `/* rowq:jobs.lease */ UPDATE jobs
		SET state = 'leased', grabbed_until = ?3,
			progress = COALESCE(?4, progress), progress_message = COALESCE(?5, progress_message)
		WHERE `+heldBy, p.ID, p.Grabs, until, p.Progress, p.Message))
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("lease job %d for grab %d: %w", p.ID, p.Grabs, err)
	}
	return fromMicros(until), nil
}

// JobHeld returns the job if grab grabs holds it.
func (s *Store) JobHeld(ctx context.Context, id int64, grabs int) (*store.Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx, `/* rowq:jobs.held */ SELECT `+jobCols+` FROM jobs WHERE `+heldBy, id, grabs))
	if err != nil {
		return nil, fmt.Errorf("get job %d held by grab %d: %w", id, grabs, mapErr(err))
	}
	return j, nil
}

// JobFinish writes the outcome of a job grab p.Grabs holds and records the
// result, in one transaction; a job with a flow that it deletes or fails
// ends through FlowEnd in it.
func (s *Store) JobFinish(ctx context.Context, p *store.JobFinishParams) (string, error) {
	guard := heldBy
	if p.Expired {
		guard = leaseExpired
	}
	var (
		queue string
		done  store.FlowDone
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		done = store.FlowDone{}
		now := s.micros()
		args := []any{p.ID, p.Grabs}
		if p.Expired {
			args = append(args, now)
		}
		var keep sql.NullInt64
		j, err := scanJob(withExtra(tx.QueryRowContext(ctx, `/* rowq:jobs.finish */ SELECT `+jobCols+`, `+keepOf+` FROM jobs WHERE `+guard, args...), &keep))
		if err != nil {
			return err
		}
		queue = j.Queue
		if keep.Int64 > 0 && p.Outcome != store.FinishRetry {
			status := store.FinishedSucceeded
			if p.Outcome == store.FinishFail {
				status = store.FinishedFailed
			}
			if err := insertFinished(ctx, tx, store.FinishedOf(j, status, p.Message, p.Result, fromMicros(now))); err != nil {
				return err
			}
		}
		switch p.Outcome {
		case store.FinishDelete:
			_, err = tx.ExecContext(ctx, `/* rowq:jobs.finish */ DELETE FROM jobs WHERE id = ?`, p.ID)
		case store.FinishRetry:
			_, err = tx.ExecContext(ctx, `/* rowq:jobs.finish */ UPDATE jobs SET state = 'waiting', fail_count = fail_count + 1,
				next_try = ?, grabbed_by = NULL, grabbed_until = NULL, progress = NULL, progress_message = NULL
				WHERE id = ?`, now+p.Delay.Microseconds(), p.ID)
		case store.FinishFail:
			if _, err = tx.ExecContext(ctx, `/* rowq:jobs.finish */
				INSERT INTO failed_jobs (job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at, grabs,
					timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered)
				SELECT id, queue_name, category, url, payload, ?, ?, ?, fail_count + 1, ?, created_at, grabs,
					timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered
				FROM jobs WHERE id = ?`, p.Status, p.Code, p.Message, now, p.ID); err == nil {
				_, err = tx.ExecContext(ctx, `/* rowq:jobs.finish */ DELETE FROM jobs WHERE id = ?`, p.ID)
			}
		default:
			err = fmt.Errorf("unknown outcome %q", p.Outcome)
		}
		if err == nil && j.Flow && p.Outcome != store.FinishRetry {
			done, err = s.flowEnd(ctx, tx, []store.FlowEnded{finishEnded(j, p)})
		}
		if err != nil || p.Expired {
			return err
		}
		_, err = tx.ExecContext(ctx, `/* rowq:jobs.finish */ INSERT INTO job_results (job_id, grabs, status, created_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (job_id, grabs) DO UPDATE SET status = excluded.status, created_at = excluded.created_at`,
			p.ID, p.Grabs, p.Status, now)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("finish job %d of grab %d: %w", p.ID, p.Grabs, err)
	}
	s.Done(done)
	return queue, nil
}

// finishEnded is job j as JobFinish ends it with p (FinishDelete or
// FinishFail), for FlowEnd.
func finishEnded(j *store.Job, p *store.JobFinishParams) store.FlowEnded {
	if p.Outcome == store.FinishFail {
		return store.FlowEnded{Job: j, Status: store.FinishedFailed, Message: p.Message}
	}
	return store.FlowEnded{Job: j, Status: store.FinishedSucceeded, Message: p.Message, Result: p.Result}
}

// JobResult returns the result recorded for the job's grab.
func (s *Store) JobResult(ctx context.Context, id int64, grabs int) (string, error) {
	var status string
	err := s.r.QueryRowContext(ctx, `/* rowq:jobs.result */ SELECT status FROM job_results WHERE job_id = ? AND grabs = ?`, id, grabs).Scan(&status)
	if err != nil {
		return "", fmt.Errorf("get result of job %d, grab %d: %w", id, grabs, mapErr(err))
	}
	return status, nil
}

// JobResultsPurge deletes the results recorded more than age ago.
func (s *Store) JobResultsPurge(ctx context.Context, age time.Duration) (int64, error) {
	n, err := affected(s.w.ExecContext(ctx, `/* rowq:jobs.results_purge */ DELETE FROM job_results WHERE created_at < ?`, s.micros()-age.Microseconds()))
	if err != nil {
		return 0, fmt.Errorf("purge job results: %w", err)
	}
	return n, nil
}

// JobsLeaseExpired returns jobs of p.Queue whose lease has run out.
func (s *Store) JobsLeaseExpired(ctx context.Context, p *store.JobsLeaseExpiredParams) ([]*store.Job, error) {
	jobs, err := sqldb.QueryAll(ctx, s.r, scanJob, `/* rowq:jobs.lease_expired */ SELECT `+jobCols+` FROM jobs
		WHERE queue_name = ? AND state = 'leased' AND grabbed_until < ? LIMIT ?`, p.Queue, s.micros(), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("find expired leases of queue %q: %w", p.Queue, mapErr(err))
	}
	return jobs, nil
}

// JobsLeased returns the id and grab count of every leased job of queue.
func (s *Store) JobsLeased(ctx context.Context, queue string) ([]store.JobGrab, error) {
	out, err := sqldb.QueryAll(ctx, s.r, func(sc sqldb.Scanner) (store.JobGrab, error) {
		var g store.JobGrab
		err := sc.Scan(&g.ID, &g.Grabs)
		return g, err
	}, `/* rowq:jobs.leased */ SELECT id, grabs FROM jobs WHERE queue_name = ? AND state = 'leased'`, queue)
	if err != nil {
		return nil, fmt.Errorf("list leased jobs of queue %q: %w", queue, mapErr(err))
	}
	return out, nil
}

// JobCancel removes a job of the queue and, if it was grabbed or leased,
// records its grab's result as cancelled, in one transaction; a job with a
// flow ends cancelled through FlowEnd in it.
func (s *Store) JobCancel(ctx context.Context, queue string, id int64) (*store.Job, error) {
	var (
		j    *store.Job
		done store.FlowDone
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		done = store.FlowDone{}
		var err error
		j, err = scanJob(tx.QueryRowContext(ctx, `/* rowq:jobs.cancel */ DELETE FROM jobs WHERE id = ? AND queue_name = ? RETURNING `+jobCols, id, queue))
		if err != nil {
			return err
		}
		keep, err := keepFinished(ctx, tx, queue)
		if err == nil && keep {
			err = insertFinished(ctx, tx, store.FinishedOf(j, store.FinishedCancelled, store.ResultCancelled, nil, fromMicros(s.micros())))
		}
		if err == nil {
			done, err = s.flowEnd(ctx, tx, []store.FlowEnded{{Job: j, Status: store.FinishedCancelled, Message: store.ResultCancelled}})
		}
		if err != nil || j.State == store.StateWaiting || j.State == store.StateBlocked {
			return err
		}
		_, err = tx.ExecContext(ctx, `/* rowq:jobs.cancel */ INSERT INTO job_results (job_id, grabs, status, created_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (job_id, grabs) DO UPDATE SET status = excluded.status, created_at = excluded.created_at`,
			id, j.Grabs, store.ResultCancelled, s.micros())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cancel job %d of queue %q: %w", id, queue, mapErr(err))
	}
	s.Done(done)
	return j, nil
}

// JobsSucceed deletes the jobs the grabs hold and records their results,
// in one transaction; those with a flow (read by the DELETE's RETURNING)
// end through FlowEnd in it.
func (s *Store) JobsSucceed(ctx context.Context, p *store.JobsSucceedParams) ([]string, error) {
	if len(p.Grabs) == 0 {
		return nil, nil
	}
	var (
		out  []string
		done store.FlowDone
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		done = store.FlowDone{}
		args := make([]any, 0, 2*len(p.Grabs))
		for _, g := range p.Grabs {
			args = append(args, g.ID, g.Grabs)
		}
		rows, err := tx.QueryContext(ctx, `/* rowq:jobs.succeed */ DELETE FROM jobs
			WHERE (id, grabs) IN (VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?), ", len(p.Grabs)), ", ")+`)
			AND state IN ('grabbed', 'leased') RETURNING `+jobCols+`, `+keepOf, args...)
		if err != nil {
			return err
		}
		type gone struct {
			job  *store.Job
			keep bool
		}
		deleted := map[store.JobGrab]gone{}
		for rows.Next() {
			var keep sql.NullInt64
			j, err := scanJob(withExtra(rows, &keep))
			if err != nil {
				rows.Close()
				return err
			}
			deleted[store.JobGrab{ID: j.ID, Grabs: j.Grabs}] = gone{job: j, keep: keep.Int64 > 0}
		}
		if err := rows.Close(); err != nil {
			return err
		}
		out = make([]string, len(p.Grabs))
		results := make([]any, 0, 4*len(deleted))
		now := s.micros()
		var (
			kept  []*store.FinishedJob
			ended []store.FlowEnded
		)
		for i, g := range p.Grabs {
			if d, ok := deleted[g]; ok {
				out[i] = d.job.Queue
				delete(deleted, g) // the same grab twice: once
				results = append(results, g.ID, g.Grabs, p.Status, now)
				var note store.FinishNote
				if p.Notes != nil {
					note = p.Notes[i]
				}
				if d.keep {
					kept = append(kept, store.FinishedOf(d.job, store.FinishedSucceeded, note.Message, note.Result, fromMicros(now)))
				}
				if d.job.Flow {
					ended = append(ended, store.FlowEnded{Job: d.job, Status: store.FinishedSucceeded, Message: note.Message, Result: note.Result})
				}
			}
		}
		if len(results) == 0 {
			return nil
		}
		if err := insertFinished(ctx, tx, kept...); err != nil {
			return err
		}
		if done, err = s.flowEnd(ctx, tx, ended); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `/* rowq:jobs.succeed */ INSERT INTO job_results (job_id, grabs, status, created_at) VALUES `+
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?), ", len(results)/4), ", ")+
			` ON CONFLICT (job_id, grabs) DO UPDATE SET status = excluded.status, created_at = excluded.created_at`, results...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d leased jobs: %w", len(p.Grabs), mapErr(err))
	}
	s.Done(done)
	return out, nil
}
