package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// flowTx is store.FlowTx over a write transaction. SQLite has one writer:
// what the transaction reads stays as read until its commit, so it locks
// nothing row by row.
type flowTx struct {
	tx  *sql.Tx
	now int64 // the outcome's time
}

var _ store.FlowTx = (*flowTx)(nil)

// flowEnd applies the flows of the ended jobs in tx (store.FlowEnd), when
// any has one.
func (s *Store) flowEnd(ctx context.Context, tx *sql.Tx, ended []store.FlowEnded) (store.FlowDone, error) {
	for _, e := range ended {
		if e.Job.Flow {
			return store.FlowEnd(ctx, &flowTx{tx: tx, now: s.micros()}, ended)
		}
	}
	return store.FlowDone{}, nil
}

// idList is ids as the JSON array a statement reads with json_each: one
// argument however many ids.
func idList(ids []int64) string {
	b, _ := json.Marshal(ids) // int64s always marshal
	return string(b)
}

const jobFlowCols = `job_id, batch_id, on_success, on_failure, on_finish, pending, on_parent_failure`

func scanJobFlow(row sqldb.Scanner) (*store.JobFlow, error) {
	var (
		f                    store.JobFlow
		batch                sql.NullInt64
		success, fail, final []byte
		err                  error
	)
	if err := row.Scan(&f.JobID, &batch, &success, &fail, &final, &f.Pending, &f.OnParentFailure); err != nil {
		return nil, err
	}
	f.BatchID = batch.Int64
	if f.OnSuccess, err = store.DecodeCallback(success); err != nil {
		return nil, err
	}
	if f.OnFailure, err = store.DecodeCallback(fail); err != nil {
		return nil, err
	}
	if f.OnFinish, err = store.DecodeCallback(final); err != nil {
		return nil, err
	}
	return &f, nil
}

// FlowsOf returns the job_flows rows of ids.
func (f *flowTx) FlowsOf(ctx context.Context, ids []int64) ([]*store.JobFlow, error) {
	return sqldb.QueryAll(ctx, f.tx, scanJobFlow, `/* rowq:flow.flows_of */ SELECT `+jobFlowCols+`
		FROM job_flows WHERE job_id IN (SELECT value FROM json_each(?))`, idList(ids))
}

// flowChildrenSQL reads the edges from the parents of a JSON array (by
// job_deps' primary key) to children still blocked (by primary keys).
const flowChildrenSQL = `/* rowq:flow.children */ SELECT d.parent_id, d.child_id, f.pending, f.on_parent_failure
	FROM job_deps d JOIN job_flows f ON f.job_id = d.child_id JOIN jobs j ON j.id = d.child_id
	WHERE d.parent_id IN (SELECT value FROM json_each(?)) AND j.state = 'blocked'`

// FlowChildren returns the edges from parents to their blocked dependents.
func (f *flowTx) FlowChildren(ctx context.Context, parents []int64) ([]store.FlowChild, error) {
	return sqldb.QueryAll(ctx, f.tx, func(row sqldb.Scanner) (store.FlowChild, error) {
		var c store.FlowChild
		err := row.Scan(&c.Parent, &c.Child, &c.Pending, &c.OnParentFailure)
		return c, err
	}, flowChildrenSQL, idList(parents))
}

// FlowSetPending sets the pending parents count of each child given.
func (f *flowTx) FlowSetPending(ctx context.Context, pending map[int64]int) error {
	stmt, err := f.tx.PrepareContext(ctx, `/* rowq:flow.set_pending */ UPDATE job_flows SET pending = ? WHERE job_id = ?`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for id, n := range pending {
		if _, err := stmt.ExecContext(ctx, n, id); err != nil {
			return err
		}
	}
	return nil
}

// FlowRelease moves the blocked jobs ids to waiting.
func (f *flowTx) FlowRelease(ctx context.Context, ids []int64) ([]string, error) {
	queues, err := sqldb.QueryAll(ctx, f.tx, sqldb.ScanString, `/* rowq:flow.release */ UPDATE jobs SET state = 'waiting'
		WHERE id IN (SELECT value FROM json_each(?)) AND state = 'blocked' RETURNING queue_name`, idList(ids))
	if err != nil {
		return nil, err
	}
	slices.Sort(queues)
	return slices.Compact(queues), nil
}

// FlowEndBlocked ends the blocked jobs ids without running them.
func (f *flowTx) FlowEndBlocked(ctx context.Context, ids []int64, status, message string) ([]*store.Job, error) {
	list := idList(ids)
	if status == store.FinishedFailed {
		if _, err := f.tx.ExecContext(ctx, `/* rowq:flow.end_blocked */
			INSERT INTO failed_jobs (job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at, grabs,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered)
			SELECT id, queue_name, category, url, payload, ?, 0, ?, fail_count + 1, ?, created_at, grabs,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered
			FROM jobs WHERE id IN (SELECT value FROM json_each(?)) AND state = 'blocked' ORDER BY id`,
			store.FailedParent, message, f.now, list); err != nil {
			return nil, err
		}
	}
	rows, err := f.tx.QueryContext(ctx, `/* rowq:flow.end_blocked */ DELETE FROM jobs
		WHERE id IN (SELECT value FROM json_each(?)) AND state = 'blocked' RETURNING `+jobCols+`, `+keepOf, list)
	if err != nil {
		return nil, err
	}
	var (
		jobs []*store.Job
		kept []*store.FinishedJob
	)
	for rows.Next() {
		var keep sql.NullInt64
		j, err := scanJob(withExtra(rows, &keep))
		if err != nil {
			rows.Close()
			return nil, err
		}
		jobs = append(jobs, j)
		if keep.Int64 > 0 {
			kept = append(kept, store.FinishedOf(j, status, message, nil, fromMicros(f.now)))
		}
	}
	if err := rows.Close(); err != nil {
		return nil, err
	}
	return jobs, insertFinished(ctx, f.tx, kept...)
}

// flowForgetSQL deletes a job's flow row and its edges, each by key; each
// takes the ids as a JSON array.
var flowForgetSQL = []string{
	`/* rowq:flow.forget */ DELETE FROM job_flows WHERE job_id IN (SELECT value FROM json_each(?))`,
	`/* rowq:flow.forget */ DELETE FROM job_deps WHERE parent_id IN (SELECT value FROM json_each(?))`,
	`/* rowq:flow.forget */ DELETE FROM job_deps WHERE child_id IN (SELECT value FROM json_each(?))`,
}

// FlowForget deletes the job_flows rows of ids and their edges.
func (f *flowTx) FlowForget(ctx context.Context, ids []int64) error {
	list := idList(ids)
	for _, q := range flowForgetSQL {
		if _, err := f.tx.ExecContext(ctx, q, list); err != nil {
			return err
		}
	}
	return nil
}

// FlowInsertJobs inserts jobs as waiting.
func (f *flowTx) FlowInsertJobs(ctx context.Context, jobs []*store.JobInsertParams) error {
	stmt, err := f.tx.PrepareContext(ctx, insertSQL)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, j := range jobs {
		if _, err := stmt.ExecContext(ctx, insertArgs(j, f.now)...); err != nil {
			return err
		}
	}
	return nil
}

const batchCols = `id, total, pending, succeeded, failed, cancelled, created_at, finished_at, meta, on_success, on_finish`

func scanBatchRow(row sqldb.Scanner) (*store.BatchRow, error) {
	var (
		b                store.BatchRow
		created          int64
		finished         sql.NullInt64
		meta             sql.NullString
		success, onFinal []byte
		err              error
	)
	if err := row.Scan(&b.ID, &b.Total, &b.Pending, &b.Succeeded, &b.Failed, &b.Cancelled, &created, &finished, &meta, &success, &onFinal); err != nil {
		return nil, err
	}
	b.CreatedAt = fromMicros(created)
	if finished.Valid {
		t := fromMicros(finished.Int64)
		b.FinishedAt = &t
	}
	if meta.Valid {
		b.Meta = json.RawMessage(meta.String)
	}
	if b.OnSuccess, err = store.DecodeCallback(success); err != nil {
		return nil, err
	}
	if b.OnFinish, err = store.DecodeCallback(onFinal); err != nil {
		return nil, err
	}
	b.HasOnSuccess, b.HasOnFinish = b.OnSuccess != nil, b.OnFinish != nil
	return &b, nil
}

// BatchCount adds n to batch id's counts.
func (f *flowTx) BatchCount(ctx context.Context, id int64, n store.BatchCounts) (*store.BatchRow, error) {
	sum := n.Succeeded + n.Failed + n.Cancelled
	b, err := scanBatchRow(f.tx.QueryRowContext(ctx, `/* rowq:flow.batch_count */ UPDATE batches
		SET succeeded = succeeded + ?1, failed = failed + ?2, cancelled = cancelled + ?3, pending = pending - ?4,
			finished_at = CASE WHEN pending - ?4 <= 0 THEN COALESCE(finished_at, ?5) ELSE finished_at END
		WHERE id = ?6 RETURNING `+batchCols, n.Succeeded, n.Failed, n.Cancelled, sum, f.now, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return b, err
}

// completeFlow is JobsComplete for the held jobs that the statement
// without a flow left: in one transaction it deletes those with a flow,
// returning them, writes the history of those in p.Keep and applies their
// flows (FlowEnd), with their notes in p.Flow (else in p.Keep). It returns
// how many it deleted.
func (s *Store) completeFlow(ctx context.Context, p *store.JobsCompleteParams) (int64, error) {
	notes := make(map[int64]store.FinishNote, len(p.Flow)+len(p.Keep))
	keep := make(map[int64]store.FinishNote, len(p.Keep))
	for _, k := range p.Keep {
		notes[k.ID], keep[k.ID] = k, k
	}
	for _, f := range p.Flow {
		notes[f.ID] = f
	}
	var (
		n    int64
		done store.FlowDone
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		n, done = 0, store.FlowDone{}
		jobs, err := sqldb.QueryAll(ctx, tx, scanJob, `/* rowq:jobs.complete_flow */ DELETE FROM jobs
			WHERE state = ? AND grabbed_by = ? AND id IN (SELECT value FROM json_each(?)) AND flow <> 0 RETURNING `+jobCols,
			store.StateGrabbed, p.Node, idList(p.IDs))
		if err != nil || len(jobs) == 0 {
			return err
		}
		n = int64(len(jobs))
		now := fromMicros(s.micros())
		var (
			fs    []*store.FinishedJob
			ended = make([]store.FlowEnded, len(jobs))
		)
		for i, j := range jobs {
			if k, ok := keep[j.ID]; ok {
				fs = append(fs, store.FinishedOf(j, store.FinishedSucceeded, k.Message, k.Result, now))
			}
			note := notes[j.ID]
			ended[i] = store.FlowEnded{Job: j, Status: store.FinishedSucceeded, Message: note.Message, Result: note.Result}
		}
		if err := insertFinished(ctx, tx, fs...); err != nil {
			return err
		}
		done, err = s.flowEnd(ctx, tx, ended)
		return err
	})
	if err != nil {
		return 0, err
	}
	s.Done(done)
	return n, nil
}
