package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// heldBy is the condition that the grab a lease token names still holds
// the job: delivered (grabbed) or accepted (leased). Arguments: $1 id, $2
// grabs.
const heldBy = `id = $1 AND grabs = $2 AND state IN ('grabbed', 'leased')`

// leaseExpired is heldBy for a lease that has run out.
const leaseExpired = `id = $1 AND grabs = $2 AND state = 'leased' AND grabbed_until <= now()`

// JobLease moves a job held by grab p.Grabs to leased until now() +
// p.Lease, in one statement.
func (s *Store) JobLease(ctx context.Context, p *store.JobLeaseParams) (time.Time, error) {
	until, err := queryOne(ctx, s, pgx.RowTo[time.Time], `/* rowq:jobs.lease */ UPDATE jobs
		SET state = 'leased', grabbed_until = now() + make_interval(secs => $3),
			progress = COALESCE($4, progress), progress_message = COALESCE($5, progress_message)
		WHERE `+heldBy+` RETURNING grabbed_until`, p.ID, p.Grabs, p.Lease.Seconds(), p.Progress, p.Message)
	if err != nil {
		return time.Time{}, fmt.Errorf("lease job %d for grab %d: %w", p.ID, p.Grabs, mapErr(err))
	}
	return until.UTC(), nil
}

// JobHeld returns the job if grab grabs holds it.
func (s *Store) JobHeld(ctx context.Context, id int64, grabs int) (*store.Job, error) {
	j, err := queryOne(ctx, s, scanJob, `/* rowq:jobs.held */ SELECT `+jobCols+` FROM jobs WHERE `+heldBy, id, grabs)
	if err != nil {
		return nil, fmt.Errorf("get job %d held by grab %d: %w", id, grabs, mapErr(err))
	}
	return j, nil
}

// JobFinish writes the outcome of a job grab p.Grabs holds and records the
// result, in one transaction of two statements; the outcome of a job with
// a flow is written by the same statements, and FlowEnd (finishFlow).
func (s *Store) JobFinish(ctx context.Context, p *store.JobFinishParams) (string, error) {
	q, args, err := finishSQL(p)
	if err != nil {
		return "", err
	}
	var (
		queue string
		done  store.FlowDone
	)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		done = store.FlowDone{}
		err := tx.QueryRow(ctx, q, args...).Scan(&queue)
		if errors.Is(err, pgx.ErrNoRows) && p.Outcome != store.FinishRetry {
			queue, done, err = finishFlow(ctx, tx, p, q, args)
		}
		if err != nil || p.Expired {
			return err
		}
		_, err = tx.Exec(ctx, `/* rowq:jobs.finish */ INSERT INTO job_results (job_id, grabs, status, created_at)
			VALUES ($1, $2, $3, now()) ON CONFLICT (job_id, grabs) DO UPDATE SET status = excluded.status, created_at = excluded.created_at`,
			p.ID, p.Grabs, p.Status)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("finish job %d of grab %d: %w", p.ID, p.Grabs, mapErr(err))
	}
	s.FlowHook.Done(done)
	return queue, nil
}

// finishSQL returns JobFinish's statement for p's outcome, and its
// arguments. The statements that end the job leave a job with a flow
// alone (noFlow).
func finishSQL(p *store.JobFinishParams) (string, []any, error) {
	guard := heldBy
	if p.Expired {
		guard = leaseExpired
	}
	var q string
	args := []any{p.ID, p.Grabs}
	switch p.Outcome {
	case store.FinishDelete:
		// The history of a queue that keeps its finished jobs is written
		// by the same statement (k); $3, $4 are the message and result.
		q = `/* rowq:jobs.finish */ WITH d AS (
			DELETE FROM jobs WHERE ` + guard + noFlow + `
			RETURNING id, queue_name, category, url, payload, fail_count, created_at, next_try),
		k AS (
			INSERT INTO finished_jobs (` + finishedCols + `)
			SELECT d.id, d.queue_name, d.category, d.url, d.payload, 'succeeded', d.fail_count + 1, d.created_at, d.next_try, now(), $3, $4
			FROM d JOIN queues q ON q.name = d.queue_name WHERE q.keep_finished > 0
			` + finishedUpsert + `)
		SELECT queue_name FROM d`
		args = append(args, p.Message, nullJSON(p.Result))
	case store.FinishRetry:
		q = `/* rowq:jobs.finish */ UPDATE jobs SET state = 'waiting', fail_count = fail_count + 1,
			next_try = now() + make_interval(secs => $3), grabbed_by = NULL, grabbed_until = NULL,
			progress = NULL, progress_message = NULL
			WHERE ` + guard + ` RETURNING queue_name`
		args = append(args, p.Delay.Seconds())
	case store.FinishFail:
		q = `/* rowq:jobs.finish */ WITH d AS (
			DELETE FROM jobs WHERE ` + guard + noFlow + `
			RETURNING id, queue_name, category, url, payload, fail_count, created_at, grabs, next_try,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered),
			k AS (
				INSERT INTO finished_jobs (` + finishedCols + `)
				SELECT d.id, d.queue_name, d.category, d.url, d.payload, 'failed', d.fail_count + 1, d.created_at, d.next_try, now(), $5, NULL
				FROM d JOIN queues q ON q.name = d.queue_name WHERE q.keep_finished > 0
				` + finishedUpsert + `)
			INSERT INTO failed_jobs (job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at, grabs,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered)
			SELECT id, queue_name, category, url, payload, $3, $4, $5, fail_count + 1, now(), created_at, grabs,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered FROM d
			RETURNING queue_name`
		args = append(args, p.Status, p.Code, p.Message)
	default:
		return "", nil, fmt.Errorf("finish job %d: unknown outcome %q", p.ID, p.Outcome)
	}
	return q, args, nil
}

// finishFlow ends the job with a flow that grab p.Grabs holds, in tx: it
// locks the job, writes its outcome with the statement q (args) made for
// it, and applies its flow.
func finishFlow(ctx context.Context, tx pgx.Tx, p *store.JobFinishParams, q string, args []any) (string, store.FlowDone, error) {
	guard := heldBy
	if p.Expired {
		guard = leaseExpired
	}
	rows, _ := tx.Query(ctx, `/* rowq:jobs.finish_flow */ SELECT `+jobCols+` FROM jobs WHERE `+guard+` AND flow FOR UPDATE`, p.ID, p.Grabs)
	j, err := pgx.CollectExactlyOneRow(rows, scanJob)
	if err != nil {
		return "", store.FlowDone{}, err
	}
	var queue string
	if err := tx.QueryRow(ctx, withFlow(q), args...).Scan(&queue); err != nil {
		return "", store.FlowDone{}, err
	}
	end := store.FlowEnded{Job: j, Status: store.FinishedSucceeded, Message: p.Message, Result: p.Result}
	if p.Outcome == store.FinishFail {
		end.Status, end.Result = store.FinishedFailed, nil
	}
	done, err := store.FlowEnd(ctx, flowTx{tx}, []store.FlowEnded{end})
	return queue, done, err
}

// JobResult returns the result recorded for the job's grab.
func (s *Store) JobResult(ctx context.Context, id int64, grabs int) (string, error) {
	status, err := queryOne(ctx, s, pgx.RowTo[string], `/* rowq:jobs.result */ SELECT status FROM job_results WHERE job_id = $1 AND grabs = $2`, id, grabs)
	if err != nil {
		return "", fmt.Errorf("get result of job %d, grab %d: %w", id, grabs, mapErr(err))
	}
	return status, nil
}

// JobResultsPurge deletes the results recorded more than age ago.
func (s *Store) JobResultsPurge(ctx context.Context, age time.Duration) (int64, error) {
	n, err := s.exec(ctx, `/* rowq:jobs.results_purge */ DELETE FROM job_results WHERE created_at < now() - make_interval(secs => $1)`, age.Seconds())
	if err != nil {
		return 0, fmt.Errorf("purge job results: %w", mapErr(err))
	}
	return n, nil
}

// JobsLeaseExpired returns jobs of p.Queue whose lease has run out.
func (s *Store) JobsLeaseExpired(ctx context.Context, p *store.JobsLeaseExpiredParams) ([]*store.Job, error) {
	jobs, err := queryAll(ctx, s, scanJob, `/* rowq:jobs.lease_expired */ SELECT `+jobCols+` FROM jobs
		WHERE queue_name = $1 AND state = 'leased' AND grabbed_until <= now() LIMIT $2`, p.Queue, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("find expired leases of queue %q: %w", p.Queue, mapErr(err))
	}
	return jobs, nil
}

// JobsLeased returns the id and grab count of every leased job of queue.
func (s *Store) JobsLeased(ctx context.Context, queue string) ([]store.JobGrab, error) {
	out, err := queryAll(ctx, s, pgx.RowToStructByPos[store.JobGrab], `/* rowq:jobs.leased */ SELECT id, grabs FROM jobs
		WHERE queue_name = $1 AND state = 'leased'`, queue)
	if err != nil {
		return nil, fmt.Errorf("list leased jobs of queue %q: %w", queue, mapErr(err))
	}
	return out, nil
}

// JobCancel removes a job of the queue and, if it was grabbed or leased,
// records its grab's result as cancelled, in one statement (cancelSQL); a
// job with a flow is removed by the same statement and FlowEnd.
func (s *Store) JobCancel(ctx context.Context, queue string, id int64) (*store.Job, error) {
	j, err := queryOne(ctx, s, scanJob, cancelSQL, id, queue, store.ResultCancelled)
	if errors.Is(err, pgx.ErrNoRows) {
		j, err = s.removeFlow(ctx, withFlow(cancelSQL), []any{id, queue, store.ResultCancelled}, store.ResultCancelled)
	}
	if err != nil {
		return nil, fmt.Errorf("cancel job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return j, nil
}

// cancelSQL removes the job $1 of queue $2 that has no flow, records $3
// as its grab's result if it was held, and writes its history where its
// queue keeps it. A job that never ran (waiting, or blocked) counts no
// attempt and no start.
const cancelSQL = `/* rowq:jobs.cancel */ WITH d AS (
		DELETE FROM jobs WHERE id = $1 AND queue_name = $2` + noFlow + ` RETURNING ` + jobCols + `),
	r AS (
		INSERT INTO job_results (job_id, grabs, status, created_at)
		SELECT id, grabs, $3, now() FROM d WHERE state NOT IN ('waiting', 'blocked')
		ON CONFLICT (job_id, grabs) DO UPDATE SET status = excluded.status, created_at = excluded.created_at),
	k AS (
		INSERT INTO finished_jobs (` + finishedCols + `)
		SELECT d.id, d.queue_name, d.category, d.url, d.payload, 'cancelled',
			d.fail_count + CASE WHEN d.state IN ('waiting', 'blocked') THEN 0 ELSE 1 END, d.created_at,
			CASE WHEN d.state IN ('waiting', 'blocked') THEN NULL ELSE d.next_try END, now(), $3, NULL
		FROM d JOIN queues q ON q.name = d.queue_name WHERE q.keep_finished > 0
		` + finishedUpsert + `)
	SELECT ` + jobCols + ` FROM d`

// JobsSucceed deletes the jobs the grabs hold and records their results
// in one statement (succeedSQL); when it deleted fewer than asked, the
// jobs with a flow among the others are ended through FlowEnd
// (succeedFlow).
func (s *Store) JobsSucceed(ctx context.Context, p *store.JobsSucceedParams) ([]string, error) {
	if len(p.Grabs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(p.Grabs))
	grabs := make([]int32, len(p.Grabs))
	for i, g := range p.Grabs {
		ids[i], grabs[i] = g.ID, int32(g.Grabs)
	}
	type done struct {
		ID    int64
		Grabs int
		Queue string
	}
	var (
		msgs    []string
		results []*string
	)
	if p.Notes != nil {
		msgs, results = make([]string, len(p.Grabs)), make([]*string, len(p.Grabs))
	}
	for i := range p.Notes {
		msgs[i], results[i] = p.Notes[i].Message, nullJSON(p.Notes[i].Result)
	}
	deleted, err := queryAll(ctx, s, pgx.RowToStructByPos[done], succeedSQL, ids, grabs, p.Status, msgs, results)
	if err != nil {
		return nil, fmt.Errorf("complete %d leased jobs: %w", len(p.Grabs), mapErr(err))
	}
	queues := make(map[store.JobGrab]string, len(p.Grabs))
	for _, d := range deleted {
		queues[store.JobGrab{ID: d.ID, Grabs: d.Grabs}] = d.Queue
	}
	if len(deleted) < len(p.Grabs) {
		jobs, err := s.succeedFlow(ctx, p, ids, grabs)
		if err != nil {
			return nil, fmt.Errorf("complete %d leased jobs: %w", len(p.Grabs), mapErr(err))
		}
		for _, j := range jobs {
			queues[store.JobGrab{ID: j.ID, Grabs: j.Grabs}] = j.Queue
		}
	}
	out := make([]string, len(p.Grabs))
	for i, g := range p.Grabs {
		out[i] = queues[g]
		delete(queues, g) // the same grab twice: once
	}
	return out, nil
}

// succeedSQL deletes the jobs without a flow that the grabs ($1 ids, $2
// grab counts) hold and records their results ($3). The history of the
// jobs whose queue keeps finished jobs is written by the same statement
// (k), with the grabs' messages ($4) and results ($5). k reads the deleted
// rows from jobs as the statement's snapshot still shows them, so that d
// returns no more than it did without history, and only for the queues
// that keep it.
const succeedSQL = `/* rowq:jobs.succeed */ WITH g AS (
		SELECT * FROM unnest($1::bigint[], $2::int[]) AS g(id, grabs)),
	d AS (
		DELETE FROM jobs j USING g WHERE j.id = g.id AND j.grabs = g.grabs AND j.state IN ('grabbed', 'leased')` + noFlow + `
		RETURNING j.id, j.grabs, j.queue_name),
	r AS (
		INSERT INTO job_results (job_id, grabs, status, created_at) SELECT id, grabs, $3, now() FROM d
		ON CONFLICT (job_id, grabs) DO UPDATE SET status = excluded.status, created_at = excluded.created_at),
	k AS (
		INSERT INTO finished_jobs (` + finishedCols + `)
		SELECT DISTINCT ON (j.id) j.id, j.queue_name, j.category, j.url, j.payload, 'succeeded', j.fail_count + 1, j.created_at, j.next_try, now(),
			coalesce(n.message, ''), n.result
		FROM d JOIN queues q ON q.name = d.queue_name AND q.keep_finished > 0
		JOIN jobs j ON j.id = d.id
		LEFT JOIN unnest($1::bigint[], $4::text[], $5::text[]) AS n(id, message, result) ON n.id = d.id
		` + finishedUpsert + `)
	SELECT id, grabs, queue_name FROM d`
