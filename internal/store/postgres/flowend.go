package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// Ending jobs with a flow. The statements that end jobs (jobs.go,
// leases.go, finished.go, inspect.go) carry noFlow, so that they end only
// the jobs without one, as they did before flows; when they end fewer
// jobs than asked, the same end is tried again with withFlow(statement)
// in a transaction (endFlow) that runs store.FlowEnd on what it ended.

// noFlow is the condition, in every statement that ends jobs, that leaves
// the jobs with a flow to the read path.
const noFlow = ` AND NOT flow`

// withFlow turns a statement with noFlow into the one that ends the jobs
// with a flow instead.
func withFlow(q string) string {
	if !strings.Contains(q, noFlow) {
		panic("postgres: statement without the flow condition: " + q)
	}
	return strings.Replace(q, noFlow, ` AND flow`, 1)
}

// endFlow runs end in a transaction, retried as a whole, then store.FlowEnd
// on the jobs it ended, and after the commit tells the FlowHook what that
// did.
func (s *Store) endFlow(ctx context.Context, end func(tx pgx.Tx) ([]store.FlowEnded, error)) error {
	var done store.FlowDone
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		done = store.FlowDone{}
		ended, err := end(tx)
		if err != nil || len(ended) == 0 {
			return err
		}
		done, err = store.FlowEnd(ctx, flowTx{tx}, ended)
		return err
	})
	if err != nil {
		return err
	}
	s.FlowHook.Done(done)
	return nil
}

// flowTx is store.FlowTx over a transaction.
type flowTx struct{ tx pgx.Tx }

var _ store.FlowTx = flowTx{}

const jobFlowCols = `job_id, batch_id, on_success, on_failure, on_finish, pending, on_parent_failure`

func scanJobFlow(row pgx.CollectableRow) (*store.JobFlow, error) {
	var (
		f                  store.JobFlow
		batch              *int64
		succ, fail, finish []byte
	)
	if err := row.Scan(&f.JobID, &batch, &succ, &fail, &finish, &f.Pending, &f.OnParentFailure); err != nil {
		return nil, err
	}
	if batch != nil {
		f.BatchID = *batch
	}
	var err error
	for _, c := range []struct {
		dst **store.JobInsertParams
		src []byte
	}{{&f.OnSuccess, succ}, {&f.OnFailure, fail}, {&f.OnFinish, finish}} {
		if *c.dst, err = store.DecodeCallback(c.src); err != nil {
			return nil, fmt.Errorf("job %d: %w", f.JobID, err)
		}
	}
	return &f, nil
}

func (t flowTx) FlowsOf(ctx context.Context, ids []int64) ([]*store.JobFlow, error) {
	rows, _ := t.tx.Query(ctx, `/* rowq:flows.of */ SELECT `+jobFlowCols+` FROM job_flows WHERE job_id = ANY($1)`, ids)
	return pgx.CollectRows(rows, scanJobFlow)
}

// flowChildrenSQL reads the edges from the parents $1 to their blocked
// dependents and locks each dependent's job and flow rows, in ascending
// order of the dependents (the locks are taken as the sorted rows come).
// A dependent another transaction changed meanwhile is read as it
// committed: its pending count is the one left by the other parent's end.
const flowChildrenSQL = `/* rowq:flows.children */ SELECT d.parent_id, d.child_id, f.pending, f.on_parent_failure
	FROM job_deps d JOIN jobs j ON j.id = d.child_id JOIN job_flows f ON f.job_id = d.child_id
	WHERE d.parent_id = ANY($1) AND j.state = 'blocked'
	ORDER BY d.child_id, d.parent_id
	FOR UPDATE OF j, f`

func (t flowTx) FlowChildren(ctx context.Context, parents []int64) ([]store.FlowChild, error) {
	rows, _ := t.tx.Query(ctx, flowChildrenSQL, parents)
	return pgx.CollectRows(rows, pgx.RowToStructByPos[store.FlowChild])
}

func (t flowTx) FlowSetPending(ctx context.Context, pending map[int64]int) error {
	ids, ns := make([]int64, 0, len(pending)), make([]int32, 0, len(pending))
	for id, n := range pending {
		ids, ns = append(ids, id), append(ns, int32(n))
	}
	_, err := t.tx.Exec(ctx, `/* rowq:flows.set_pending */ UPDATE job_flows SET pending = v.n
		FROM unnest($1::bigint[], $2::int[]) AS v(id, n) WHERE job_flows.job_id = v.id`, ids, ns)
	return err
}

func (t flowTx) FlowRelease(ctx context.Context, ids []int64) ([]string, error) {
	rows, _ := t.tx.Query(ctx, `/* rowq:flows.release */ WITH r AS (
			UPDATE jobs SET state = 'waiting' WHERE id = ANY($1) AND state = 'blocked' RETURNING queue_name)
		SELECT DISTINCT queue_name FROM r`, ids)
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// flowEndBlockedSQL ends the blocked jobs $1 with status $2 and message
// $3: deletes them, writes their history where their queue keeps it (never
// delivered: the attempts they had, no start) and, for failed, their
// failure log entries with status $4.
const flowEndBlockedSQL = `/* rowq:flows.end_blocked */ WITH d AS (
		DELETE FROM jobs WHERE id = ANY($1) AND state = 'blocked' RETURNING ` + jobCols + `),
	k AS (
		INSERT INTO finished_jobs (` + finishedCols + `)
		SELECT d.id, d.queue_name, d.category, d.url, d.payload, $2, d.fail_count, d.created_at, NULL, now(), $3, NULL
		FROM d JOIN queues q ON q.name = d.queue_name WHERE q.keep_finished > 0
		` + finishedUpsert + `),
	f AS (
		INSERT INTO failed_jobs (job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at, grabs,
			timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered)
		SELECT id, queue_name, category, url, payload, $4, 0, $3, fail_count + 1, now(), created_at, grabs,
			timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered
		FROM d WHERE $2 = '` + store.FinishedFailed + `')
	SELECT ` + jobCols + ` FROM d ORDER BY id`

func (t flowTx) FlowEndBlocked(ctx context.Context, ids []int64, status, message string) ([]*store.Job, error) {
	rows, _ := t.tx.Query(ctx, flowEndBlockedSQL, ids, status, message, store.FailedParent)
	return pgx.CollectRows(rows, scanJob)
}

// flowForgetSQL deletes the job_flows rows of $1 and their edges, both
// ways: a probe of job_deps' primary key (parent_id, child_id) and one of
// job_deps_child for each id.
const flowForgetSQL = `/* rowq:flows.forget */ WITH f AS (DELETE FROM job_flows WHERE job_id = ANY($1))
	DELETE FROM job_deps WHERE parent_id = ANY($1) OR child_id = ANY($1)`

func (t flowTx) FlowForget(ctx context.Context, ids []int64) error {
	_, err := t.tx.Exec(ctx, flowForgetSQL, ids)
	return err
}

func (t flowTx) FlowInsertJobs(ctx context.Context, jobs []*store.JobInsertParams) error {
	_, err := t.tx.Exec(ctx, insertSQL, insertArgs(jobs)...)
	return err
}

// batchCols are the columns of a batch (store.Batch).
const batchCols = `id, total, pending, succeeded, failed, cancelled, created_at, finished_at, meta,
	on_success IS NOT NULL, on_finish IS NOT NULL`

// scanBatchAnd scans batchCols, then the row's further columns into more.
func scanBatchAnd(row pgx.CollectableRow, more ...any) (*store.Batch, error) {
	var (
		b    store.Batch
		meta *string
	)
	err := row.Scan(append([]any{&b.ID, &b.Total, &b.Pending, &b.Succeeded, &b.Failed, &b.Cancelled,
		&b.CreatedAt, &b.FinishedAt, &meta, &b.HasOnSuccess, &b.HasOnFinish}, more...)...)
	if err != nil {
		return nil, err
	}
	if meta != nil {
		b.Meta = []byte(*meta)
	}
	b.CreatedAt = b.CreatedAt.UTC()
	if b.FinishedAt != nil {
		t := b.FinishedAt.UTC()
		b.FinishedAt = &t
	}
	return &b, nil
}

func scanBatch(row pgx.CollectableRow) (*store.Batch, error) { return scanBatchAnd(row) }

func (t flowTx) BatchCount(ctx context.Context, id int64, n store.BatchCounts) (*store.BatchRow, error) {
	rows, _ := t.tx.Query(ctx, `/* rowq:batches.count */ UPDATE batches SET
			succeeded = succeeded + $2, failed = failed + $3, cancelled = cancelled + $4,
			pending = pending - ($2 + $3 + $4),
			finished_at = CASE WHEN pending - ($2 + $3 + $4) <= 0 THEN coalesce(finished_at, now()) END
		WHERE id = $1
		RETURNING `+batchCols+`, on_success, on_finish`, id, n.Succeeded, n.Failed, n.Cancelled)
	b, err := pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (*store.BatchRow, error) {
		var succ, finish []byte
		b, err := scanBatchAnd(row, &succ, &finish)
		if err != nil {
			return nil, err
		}
		r := &store.BatchRow{Batch: *b}
		if r.OnSuccess, err = store.DecodeCallback(succ); err != nil {
			return nil, err
		}
		r.OnFinish, err = store.DecodeCallback(finish)
		return r, err
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return b, err
}

// notes are the worker's notes of jobs that succeeded, by job id.
type notes map[int64]store.FinishNote

// notesOf returns the notes of lists, a later one of a job replacing an
// earlier one.
func notesOf(lists ...[]store.FinishNote) notes {
	n := notes{}
	for _, l := range lists {
		for _, f := range l {
			n[f.ID] = f
		}
	}
	return n
}

// args returns the notes as the arrays of ids, messages and results that
// succeededHistorySQL joins.
func (n notes) args() []any {
	ids, msgs, results := make([]int64, 0, len(n)), make([]string, 0, len(n)), make([]*string, 0, len(n))
	for id, f := range n {
		ids, msgs, results = append(ids, id), append(msgs, f.Message), append(results, nullJSON(f.Result))
	}
	return []any{ids, msgs, results}
}

// ended returns jobs as they ended with status, with their notes.
func (n notes) ended(jobs []*store.Job, status string) []store.FlowEnded {
	out := make([]store.FlowEnded, len(jobs))
	for i, j := range jobs {
		f := n[j.ID]
		out[i] = store.FlowEnded{Job: j, Status: status, Message: f.Message, Result: f.Result}
	}
	return out
}

// succeededHistorySQL writes the history of the jobs of CTE d (jobCols)
// that succeeded, where their queue keeps it, with the notes given as the
// arrays ids, msgs and results (parameters).
func succeededHistorySQL(ids, msgs, results string) string {
	return `INSERT INTO finished_jobs (` + finishedCols + `)
		SELECT d.id, d.queue_name, d.category, d.url, d.payload, 'succeeded', d.fail_count + 1, d.created_at, d.next_try, now(),
			coalesce(n.message, ''), n.result
		FROM d JOIN queues q ON q.name = d.queue_name AND q.keep_finished > 0
		LEFT JOIN unnest(` + ids + `::bigint[], ` + msgs + `::text[], ` + results + `::text[]) AS n(id, message, result) ON n.id = d.id
		` + finishedUpsert
}

// completeFlowSQL is JobsComplete for the jobs with a flow among $1 held
// by node $2: it locks them in ascending order, deletes them, writes their
// history where their queue keeps it (notes: $3, $4, $5), and returns them
// as they were.
var completeFlowSQL = `/* rowq:jobs.complete_flow */ WITH l AS MATERIALIZED (
		SELECT id FROM jobs WHERE id = ANY($1) AND state = 'grabbed' AND grabbed_by = $2 AND flow ORDER BY id FOR UPDATE),
	d AS (
		DELETE FROM jobs WHERE id IN (SELECT id FROM l) RETURNING ` + jobCols + `),
	k AS (` + succeededHistorySQL("$3", "$4", "$5") + `)
	SELECT ` + jobCols + ` FROM d`

// completeFlow ends the jobs with a flow among p.IDs that p.Node holds,
// through FlowEnd, and returns how many.
func (s *Store) completeFlow(ctx context.Context, p *store.JobsCompleteParams) (int64, error) {
	ns := notesOf(p.Keep, p.Flow)
	var n int64
	err := s.endFlow(ctx, func(tx pgx.Tx) ([]store.FlowEnded, error) {
		rows, _ := tx.Query(ctx, completeFlowSQL, append([]any{p.IDs, p.Node}, ns.args()...)...)
		jobs, err := pgx.CollectRows(rows, scanJob)
		n = int64(len(jobs))
		return ns.ended(jobs, store.FinishedSucceeded), err
	})
	return n, err
}

// succeedFlowSQL is JobsSucceed for the jobs with a flow that the grabs
// ($1 ids, $2 grab counts) hold: it locks them in ascending order, deletes
// them, records their results ($3), writes their history where their
// queue keeps it (notes: $4, $5, $6), and returns them as they were.
var succeedFlowSQL = `/* rowq:jobs.succeed_flow */ WITH l AS MATERIALIZED (
		SELECT id FROM jobs WHERE id = ANY($1) AND (id, grabs) IN (SELECT * FROM unnest($1::bigint[], $2::int[]))
			AND state IN ('grabbed', 'leased') AND flow ORDER BY id FOR UPDATE),
	d AS (
		DELETE FROM jobs WHERE id IN (SELECT id FROM l) RETURNING ` + jobCols + `),
	r AS (
		INSERT INTO job_results (job_id, grabs, status, created_at) SELECT id, grabs, $3, now() FROM d
		ON CONFLICT (job_id, grabs) DO UPDATE SET status = excluded.status, created_at = excluded.created_at),
	k AS (` + succeededHistorySQL("$4", "$5", "$6") + `)
	SELECT ` + jobCols + ` FROM d`

// succeedFlow ends the jobs with a flow that p.Grabs (ids, grabs) hold,
// through FlowEnd, and returns them as they were.
func (s *Store) succeedFlow(ctx context.Context, p *store.JobsSucceedParams, ids []int64, grabs []int32) ([]*store.Job, error) {
	var list []store.FinishNote
	for i, f := range p.Notes {
		f.ID = p.Grabs[i].ID
		list = append(list, f)
	}
	ns := notesOf(list)
	var jobs []*store.Job
	err := s.endFlow(ctx, func(tx pgx.Tx) ([]store.FlowEnded, error) {
		rows, _ := tx.Query(ctx, succeedFlowSQL, append([]any{ids, grabs, p.Status}, ns.args()...)...)
		var err error
		jobs, err = pgx.CollectRows(rows, scanJob)
		return ns.ended(jobs, store.FinishedSucceeded), err
	})
	return jobs, err
}

// failFlow is JobFail for a job with a flow: it locks the job, moves it to
// the failure log with q, JobFail's statement made for it (withFlow), and
// applies its flow.
func (s *Store) failFlow(ctx context.Context, p *store.JobFailParams, q string) (*store.FailedJob, error) {
	var f *store.FailedJob
	err := s.endFlow(ctx, func(tx pgx.Tx) ([]store.FlowEnded, error) {
		rows, _ := tx.Query(ctx, `/* rowq:jobs.fail_flow */ SELECT `+jobCols+` FROM jobs
			WHERE id = $1 AND state = 'grabbed' AND grabbed_by = $2 AND flow FOR UPDATE`, p.ID, p.Node)
		j, err := pgx.CollectExactlyOneRow(rows, scanJob)
		if err != nil {
			return nil, err
		}
		rows, _ = tx.Query(ctx, q, p.ID, p.Node, p.Status, p.Code, p.Message)
		if f, err = pgx.CollectExactlyOneRow(rows, scanFailedJob); err != nil {
			return nil, err
		}
		return []store.FlowEnded{{Job: j, Status: store.FinishedFailed, Message: p.Message}}, nil
	})
	return f, err
}

// removeFlow removes a job with a flow with q (args), JobCancel's or
// JobDelete's statement made for it (withFlow), which returns the job, and
// applies its flow as a cancel with message.
func (s *Store) removeFlow(ctx context.Context, q string, args []any, message string) (*store.Job, error) {
	var j *store.Job
	err := s.endFlow(ctx, func(tx pgx.Tx) ([]store.FlowEnded, error) {
		rows, _ := tx.Query(ctx, q, args...)
		var err error
		if j, err = pgx.CollectExactlyOneRow(rows, scanJob); err != nil {
			return nil, err
		}
		return []store.FlowEnded{{Job: j, Status: store.FinishedCancelled, Message: message}}, nil
	})
	return j, err
}
