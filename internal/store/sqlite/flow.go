package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// insertFlowSQL inserts one job of JobsInsertFlow; its arguments are
// insertArgs, then the state and flow.
const insertFlowSQL = `/* rowq:flow.insert */
	INSERT INTO jobs (queue_name, category, url, payload, created_at, next_try, timeout, max_retries, retry_delay,
		priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, traceparent, tracestate, concurrency_key, concurrency_limit, ordered,
		state, flow)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// JobsInsertFlow stores p's jobs, their flows and p's batch in one
// transaction.
func (s *Store) JobsInsertFlow(ctx context.Context, p *store.FlowInsertParams) (*store.FlowInserted, error) {
	if len(p.Jobs) == 0 {
		return &store.FlowInserted{}, nil
	}
	var out *store.FlowInserted
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = insertFlowTx(ctx, tx, p, s.micros())
		return err
	})
	if err != nil {
		var pe *store.ParentError
		if errors.As(err, &pe) {
			return nil, pe
		}
		return nil, fmt.Errorf("insert %d jobs with a flow: %w", len(p.Jobs), err)
	}
	return out, nil
}

// insertFlowTx is JobsInsertFlow in tx at now.
func insertFlowTx(ctx context.Context, tx *sql.Tx, p *store.FlowInsertParams, now int64) (*store.FlowInserted, error) {
	live, err := flowParents(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	out := &store.FlowInserted{IDs: make([]int64, len(p.Jobs)), Blocked: make([]bool, len(p.Jobs))}
	if p.Batch != nil {
		if out.BatchID, err = insertBatch(ctx, tx, p, now); err != nil {
			return nil, err
		}
	}
	hasChildren := make([]bool, len(p.Jobs))
	for i, j := range p.Jobs {
		for _, d := range j.DependsOn {
			if d.ID <= 0 {
				if d.Index < 0 || d.Index >= i {
					return nil, fmt.Errorf("job %d depends on job %d, not an earlier job of the call", i, d.Index)
				}
				hasChildren[d.Index] = true
			}
		}
	}
	ins, err := prepareFlowInserts(ctx, tx)
	if err != nil {
		return nil, err
	}
	defer ins.close()
	for i, j := range p.Jobs {
		parents := waitsFor(j, out.IDs, live)
		flow := j.HasFlow() || p.Batch != nil || hasChildren[i]
		state := store.StateWaiting
		if len(parents) > 0 {
			state = store.StateBlocked
		}
		res, err := ins.job.ExecContext(ctx, append(insertArgs(j.Job, now), state, flow)...)
		if err != nil {
			return nil, err
		}
		if out.IDs[i], err = res.LastInsertId(); err != nil {
			return nil, err
		}
		out.Blocked[i] = len(parents) > 0
		// A job that only has dependents needs no job_flows row (as a
		// parent named by id has none).
		if j.HasFlow() || p.Batch != nil {
			if err := ins.insertJobFlow(ctx, j, out.IDs[i], out.BatchID, parents); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// flowInserts are the statements JobsInsertFlow runs for each job,
// prepared once per call.
type flowInserts struct{ job, flow, deps *sql.Stmt }

func prepareFlowInserts(ctx context.Context, tx *sql.Tx) (*flowInserts, error) {
	var (
		ins flowInserts
		err error
	)
	if ins.job, err = tx.PrepareContext(ctx, insertFlowSQL); err != nil {
		return nil, err
	}
	if ins.flow, err = tx.PrepareContext(ctx, `/* rowq:flow.insert */ INSERT INTO job_flows (`+jobFlowCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`); err != nil {
		ins.close()
		return nil, err
	}
	if ins.deps, err = tx.PrepareContext(ctx, `/* rowq:flow.insert */ INSERT INTO job_deps (parent_id, child_id)
		SELECT value, ? FROM json_each(?)`); err != nil {
		ins.close()
		return nil, err
	}
	return &ins, nil
}

func (ins *flowInserts) close() {
	for _, st := range []*sql.Stmt{ins.job, ins.flow, ins.deps} {
		if st != nil {
			st.Close()
		}
	}
}

// flowParents locks the parents p names by id: it sets flow on those that
// are live and returns them; a parent that is not is looked up in the
// history, and *store.ParentError unless it counts as done.
func flowParents(ctx context.Context, tx *sql.Tx, p *store.FlowInsertParams) (map[int64]bool, error) {
	var ids []int64
	for _, j := range p.Jobs {
		for _, d := range j.DependsOn {
			if d.ID > 0 {
				ids = append(ids, d.ID)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	list := idList(ids)
	found, err := sqldb.QueryAll(ctx, tx, sqldb.ScanInt64, `/* rowq:flow.parents */ UPDATE jobs SET flow = 1
		WHERE id IN (SELECT value FROM json_each(?)) RETURNING id`, list)
	if err != nil {
		return nil, err
	}
	live := make(map[int64]bool, len(found))
	for _, id := range found {
		live[id] = true
	}
	status := map[int64]string{}
	rows, err := tx.QueryContext(ctx, `/* rowq:flow.parents */ SELECT id, status FROM finished_jobs WHERE id IN (SELECT value FROM json_each(?))`, list)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var st string
		if err := rows.Scan(&id, &st); err != nil {
			return nil, err
		}
		status[id] = st
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return live, parentErr(p, live, status)
}

// parentErr is the first parent by id of p that is not live and cannot
// count as done, as a *store.ParentError; nil when there is none.
func parentErr(p *store.FlowInsertParams, live map[int64]bool, status map[int64]string) error {
	for i, j := range p.Jobs {
		for k, d := range j.DependsOn {
			if d.ID <= 0 || live[d.ID] {
				continue
			}
			st, kept := status[d.ID]
			if kept && (st == store.FinishedSucceeded || j.OnParentFailure == store.ParentFailureRun) {
				continue
			}
			return &store.ParentError{Job: i, Item: k, Parent: d, Status: st}
		}
	}
	return nil
}

// waitsFor returns the parents j waits for, each once: its earlier jobs
// of the call (ids so far) and its live parents by id.
func waitsFor(j *store.FlowJobParams, ids []int64, live map[int64]bool) []int64 {
	var out []int64
	for _, d := range j.DependsOn {
		switch {
		case d.ID > 0 && live[d.ID]:
			out = append(out, d.ID)
		case d.ID <= 0:
			out = append(out, ids[d.Index])
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func insertBatch(ctx context.Context, tx *sql.Tx, p *store.FlowInsertParams, now int64) (int64, error) {
	success, err := store.EncodeCallback(p.Batch.OnSuccess)
	if err != nil {
		return 0, err
	}
	final, err := store.EncodeCallback(p.Batch.OnFinish)
	if err != nil {
		return 0, err
	}
	var meta any
	if len(p.Batch.Meta) > 0 {
		meta = string(p.Batch.Meta)
	}
	var id int64
	err = tx.QueryRowContext(ctx, `/* rowq:flow.batch_insert */ INSERT INTO batches (total, pending, created_at, meta, on_success, on_finish)
		VALUES (?1, ?1, ?2, ?3, ?4, ?5) RETURNING id`, len(p.Jobs), now, meta, nullBytes(success), nullBytes(final)).Scan(&id)
	return id, err
}

// insertJobFlow writes the job_flows row of job id and its edges from
// parents.
func (ins *flowInserts) insertJobFlow(ctx context.Context, j *store.FlowJobParams, id, batch int64, parents []int64) error {
	var cbs [3]any
	for i, cb := range []*store.JobInsertParams{j.OnSuccess, j.OnFailure, j.OnFinish} {
		b, err := store.EncodeCallback(cb)
		if err != nil {
			return err
		}
		cbs[i] = nullBytes(b)
	}
	var batchID any
	if batch != 0 {
		batchID = batch
	}
	policy := j.OnParentFailure
	if policy == "" {
		policy = store.ParentFailureCancel
	}
	if _, err := ins.flow.ExecContext(ctx, id, batchID, cbs[0], cbs[1], cbs[2], len(parents), policy); err != nil {
		return err
	}
	if len(parents) == 0 {
		return nil
	}
	_, err := ins.deps.ExecContext(ctx, id, idList(parents))
	return err
}

// nullBytes is b as a TEXT argument, NULL for none.
func nullBytes(b []byte) any {
	if b == nil {
		return nil
	}
	return string(b)
}

// FlowGet returns the flow of a live job.
func (s *Store) FlowGet(ctx context.Context, id int64) (*store.FlowInfo, error) {
	info, err := s.flowGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get flow of job %d: %w", id, mapErr(err))
	}
	return info, nil
}

func (s *Store) flowGet(ctx context.Context, id int64) (*store.FlowInfo, error) {
	var (
		batch                sql.NullInt64
		success, fail, final sql.NullString
		policy               sql.NullString
	)
	err := s.r.QueryRowContext(ctx, `/* rowq:flow.get */ SELECT f.batch_id, f.on_success, f.on_failure, f.on_finish, f.on_parent_failure
		FROM jobs j LEFT JOIN job_flows f ON f.job_id = j.id WHERE j.id = ? AND j.flow`, id).Scan(&batch, &success, &fail, &final, &policy)
	if err != nil {
		return nil, err
	}
	info := &store.FlowInfo{JobID: id, BatchID: batch.Int64, OnParentFailure: policy.String}
	if !policy.Valid {
		info.OnParentFailure = store.ParentFailureCancel
	}
	for _, cb := range []struct {
		name string
		set  bool
	}{{"on_success", success.Valid}, {"on_failure", fail.Valid}, {"on_finish", final.Valid}} {
		if cb.set {
			info.Callbacks = append(info.Callbacks, cb.name)
		}
	}
	if info.WaitsFor, err = sqldb.QueryAll(ctx, s.r, sqldb.ScanInt64,
		`/* rowq:flow.get */ SELECT parent_id FROM job_deps WHERE child_id = ? ORDER BY parent_id`, id); err != nil {
		return nil, err
	}
	info.Dependents, err = sqldb.QueryAll(ctx, s.r, sqldb.ScanInt64,
		`/* rowq:flow.get */ SELECT child_id FROM job_deps WHERE parent_id = ? ORDER BY child_id`, id)
	return info, err
}

// JobsBlocked returns a page of the queue's blocked jobs, by id.
func (s *Store) JobsBlocked(ctx context.Context, p *store.JobsBlockedParams) ([]*store.BlockedJob, error) {
	jobs, err := sqldb.QueryAll(ctx, s.r, scanJob, `/* rowq:flow.blocked */ SELECT `+jobCols+` FROM jobs
		WHERE queue_name = ? AND state = 'blocked' AND id > ? ORDER BY id LIMIT ?`, p.Queue, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	if len(jobs) == 0 {
		return nil, nil
	}
	out := make([]*store.BlockedJob, len(jobs))
	byID := make(map[int64]*store.BlockedJob, len(jobs))
	for i, j := range jobs {
		out[i] = &store.BlockedJob{Job: j}
		byID[j.ID] = out[i]
	}
	rows, err := s.r.QueryContext(ctx, `/* rowq:flow.blocked */ SELECT child_id, parent_id FROM job_deps
		WHERE child_id IN (SELECT value FROM json_each(?)) ORDER BY child_id, parent_id`, idList(jobIDs(jobs)))
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	defer rows.Close()
	for rows.Next() {
		var child, parent int64
		if err := rows.Scan(&child, &parent); err != nil {
			return nil, fmt.Errorf("list blocked jobs of queue %q: %w", p.Queue, mapErr(err))
		}
		b := byID[child]
		b.WaitsFor = append(b.WaitsFor, parent)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list blocked jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return out, nil
}

func jobIDs(jobs []*store.Job) []int64 {
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	return ids
}

func scanBatch(row sqldb.Scanner) (*store.Batch, error) {
	b, err := scanBatchRow(row)
	if err != nil {
		return nil, err
	}
	return &b.Batch, nil
}

// BatchGet returns batch id.
func (s *Store) BatchGet(ctx context.Context, id int64) (*store.Batch, error) {
	b, err := scanBatch(s.r.QueryRowContext(ctx, `/* rowq:flow.batch_get */ SELECT `+batchCols+` FROM batches WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("get batch %d: %w", id, mapErr(err))
	}
	return b, nil
}

// BatchesList returns a page of batches, newest first.
func (s *Store) BatchesList(ctx context.Context, p *store.BatchesListParams) ([]*store.Batch, error) {
	before := p.Before
	if before <= 0 {
		before = 1<<63 - 1
	}
	bs, err := sqldb.QueryAll(ctx, s.r, scanBatch, `/* rowq:flow.batches_list */ SELECT `+batchCols+` FROM batches
		WHERE id < ? ORDER BY id DESC LIMIT ?`, before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", mapErr(err))
	}
	return bs, nil
}
