package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// Flows (store/flow.go): a job with a flow has jobs.flow = 1 and, when it
// has callbacks, parents or a batch, a job_flows row; job_deps holds the
// edges from parents to the dependents that wait for them, batches the
// batches. The statements that end jobs call store.FlowEnd (flowtx.go) for
// the ended jobs with flow set; those that end jobs without reading them
// leave such jobs alone (AND flow = 0) and end them through a read path.

// flowRow is what the INSERT of a job of JobsInsertFlow writes beside the
// job (insertRowsSQL).
type flowRow struct {
	blocked bool
	flow    bool
}

func (r flowRow) state() string {
	if r.blocked {
		return store.StateBlocked
	}
	return store.StateWaiting
}

// JobsInsertFlow stores p in one transaction, retried as a whole on a
// deadlock or, on Galera, a lost certification: the parents given by id
// locked (ascending) and marked, then the batch, the jobs, their flow rows
// and their edges.
func (s *Store) JobsInsertFlow(ctx context.Context, p *store.FlowInsertParams) (*store.FlowInserted, error) {
	if len(p.Jobs) == 0 {
		return &store.FlowInserted{}, nil
	}
	info, err := s.server(ctx)
	var out *store.FlowInserted
	if err == nil {
		err = retry(ctx, func() error {
			return s.inTx(ctx, func(tx *sql.Tx) error {
				var err error
				out, err = insertFlow(ctx, tx, info, p)
				return err
			})
		})
	}
	if err != nil {
		return nil, fmt.Errorf("insert %d jobs with a flow: %w", len(p.Jobs), mapErr(err))
	}
	return out, nil
}

// flowPlan is what JobsInsertFlow writes for each job.
type flowPlan struct {
	rows    []flowRow
	pending []int
	// parents are each job's parents not done, deduplicated: an id (ID
	// parents) or -1-index (Index parents, whose ids are known once
	// inserted).
	parents [][]int64
}

// insertFlow is JobsInsertFlow in tx.
func insertFlow(ctx context.Context, tx *sql.Tx, info serverInfo, p *store.FlowInsertParams) (*store.FlowInserted, error) {
	done, err := lockParents(ctx, tx, info, p)
	if err != nil {
		return nil, err
	}
	plan, err := planFlow(p, done)
	if err != nil {
		return nil, err
	}
	out := &store.FlowInserted{Blocked: make([]bool, len(p.Jobs))}
	if p.Batch != nil {
		if out.BatchID, err = insertBatch(ctx, tx, p.Batch, len(p.Jobs)); err != nil {
			return nil, err
		}
	}
	jobs := make([]*store.JobInsertParams, len(p.Jobs))
	for i, j := range p.Jobs {
		jobs[i] = j.Job
		out.Blocked[i] = plan.rows[i].blocked
	}
	if out.IDs, err = insertFlowJobs(ctx, tx, info, jobs, plan.rows); err != nil {
		return nil, err
	}
	if err := insertJobFlows(ctx, tx, p, out, plan.pending); err != nil {
		return nil, err
	}
	return out, insertEdges(ctx, tx, out.IDs, plan.parents)
}

// lockParents locks the parents given by id that are live, ascending,
// marks them (flow = 1), and returns for each parent given by id whether
// it is done: live ones are not; the others are looked up in the history
// (finished_jobs), where only a success or a failure that the job's
// policy runs past counts as done; any other is a *store.ParentError.
func lockParents(ctx context.Context, tx *sql.Tx, info serverInfo, p *store.FlowInsertParams) (map[int64]bool, error) {
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
	live, err := sqldb.QueryAll(ctx, tx, sqldb.ScanInt64, syncWaitSQL(info, `/* rowq:flow.insert */ SELECT id FROM jobs FORCE INDEX (PRIMARY)
		WHERE id IN (`+sqldb.Placeholders(len(ids))+`) ORDER BY id FOR UPDATE`), idArgs(ids)...)
	if err != nil {
		return nil, err
	}
	if len(live) > 0 {
		if _, err := tx.ExecContext(ctx, `/* rowq:flow.insert */ UPDATE jobs FORCE INDEX (PRIMARY) SET flow = 1
			WHERE id IN (`+sqldb.Placeholders(len(live))+`) AND flow = 0`, idArgs(live)...); err != nil {
			return nil, err
		}
	}
	gone := map[int64]string{}
	for _, id := range ids {
		if !slices.Contains(live, id) {
			gone[id] = ""
		}
	}
	if err := finishedStatuses(ctx, tx, gone); err != nil {
		return nil, err
	}
	done := make(map[int64]bool, len(ids))
	for _, id := range live {
		done[id] = false
	}
	for i, j := range p.Jobs {
		for k, d := range j.DependsOn {
			st, ok := gone[d.ID]
			switch {
			case d.ID <= 0 || !ok:
			case st == store.FinishedSucceeded:
				done[d.ID] = true
			case st != "" && j.OnParentFailure == store.ParentFailureRun:
				done[d.ID] = true
			default:
				return nil, &store.ParentError{Job: i, Item: k, Parent: d, Status: st}
			}
		}
	}
	return done, nil
}

// finishedStatuses fills in the history status of each job of gone.
func finishedStatuses(ctx context.Context, tx *sql.Tx, gone map[int64]string) error {
	if len(gone) == 0 {
		return nil
	}
	ids := make([]int64, 0, len(gone))
	for id := range gone {
		ids = append(ids, id)
	}
	rows, err := tx.QueryContext(ctx, `/* rowq:flow.insert */ SELECT id, status FROM finished_jobs
		WHERE id IN (`+sqldb.Placeholders(len(ids))+`)`, idArgs(ids)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id     int64
			status string
		)
		if err := rows.Scan(&id, &status); err != nil {
			return err
		}
		gone[id] = status
	}
	return rows.Err()
}

// planFlow decides each job's state, flow column, pending count and edges.
func planFlow(p *store.FlowInsertParams, done map[int64]bool) (*flowPlan, error) {
	n := len(p.Jobs)
	plan := &flowPlan{rows: make([]flowRow, n), pending: make([]int, n), parents: make([][]int64, n)}
	for i, j := range p.Jobs {
		if j.Job.UniqueKey != "" {
			return nil, fmt.Errorf("job %d: a job with a flow takes no unique key", i)
		}
		var parents []int64
		for _, d := range j.DependsOn {
			key := d.ID
			if d.ID <= 0 {
				if d.Index < 0 || d.Index >= i {
					return nil, fmt.Errorf("job %d: depends on job %d, not an earlier job of the call", i, d.Index)
				}
				key = -1 - int64(d.Index)
				plan.rows[d.Index].flow = true
			} else if done[d.ID] {
				continue
			}
			if !slices.Contains(parents, key) {
				parents = append(parents, key)
			}
		}
		plan.parents[i], plan.pending[i] = parents, len(parents)
		plan.rows[i].blocked = len(parents) > 0
		if j.HasFlow() || p.Batch != nil {
			plan.rows[i].flow = true
		}
	}
	return plan, nil
}

// insertBatch inserts the batch of n jobs and returns its id.
func insertBatch(ctx context.Context, tx *sql.Tx, b *store.BatchParams, n int) (int64, error) {
	success, err := store.EncodeCallback(b.OnSuccess)
	if err != nil {
		return 0, err
	}
	finish, err := store.EncodeCallback(b.OnFinish)
	if err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `/* rowq:flow.insert */ INSERT INTO batches (total, pending, created_at, meta, on_success, on_finish)
		VALUES (?, ?, NOW(6), ?, ?, ?)`, n, n, nullBytes(b.Meta), nullBytes(success), nullBytes(finish))
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// insertFlowJobs inserts jobs, each with its flowRow, chunk by chunk, and
// returns their ids in order. The ordered ones that are not blocked go
// to ordered_jobs; a blocked one goes there when released (FlowRelease).
func insertFlowJobs(ctx context.Context, tx *sql.Tx, info serverInfo, jobs []*store.JobInsertParams, rows []flowRow) ([]int64, error) {
	ids := make([]int64, 0, len(jobs))
	from := 0
	for _, c := range chunkInserts(jobs) {
		fl := rows[from : from+len(c)]
		q, args := insertRowsSQL(c, nil, nil, fl)
		start := len(ids)
		var err error
		if info.returning {
			err = queryInsert(ctx, tx, q+" RETURNING id", args, len(c), func(r *sql.Rows) error {
				var id int64
				err := r.Scan(&id)
				ids = append(ids, id)
				return err
			})
		} else {
			err = execInsert(ctx, tx, q, args, len(c), info.step, &ids)
		}
		if err != nil {
			return nil, err
		}
		var ordered []*store.JobInsertParams
		var orderedIDs []int64
		for k, j := range c {
			if !fl[k].blocked {
				ordered, orderedIDs = append(ordered, j), append(orderedIDs, ids[start+k])
			}
		}
		if err := insertOrdered(ctx, tx, ordered, orderedIDs); err != nil {
			return nil, err
		}
		from += len(c)
	}
	return ids, nil
}

// insertJobFlows inserts the job_flows rows of the jobs that have
// callbacks, parents or a batch.
func insertJobFlows(ctx context.Context, tx *sql.Tx, p *store.FlowInsertParams, out *store.FlowInserted, pending []int) error {
	var rows [][]any
	for i, j := range p.Jobs {
		if !j.HasFlow() && p.Batch == nil {
			continue
		}
		var cbs [3][]byte
		for k, cb := range []*store.JobInsertParams{j.OnSuccess, j.OnFailure, j.OnFinish} {
			var err error
			if cbs[k], err = store.EncodeCallback(cb); err != nil {
				return fmt.Errorf("job %d: %w", i, err)
			}
		}
		var batch any
		if out.BatchID != 0 {
			batch = out.BatchID
		}
		policy := j.OnParentFailure
		if policy == "" {
			policy = store.ParentFailureCancel
		}
		rows = append(rows, []any{out.IDs[i], batch, nullBytes(cbs[0]), nullBytes(cbs[1]), nullBytes(cbs[2]), pending[i], policy})
	}
	return insertMany(ctx, tx, `/* rowq:flow.insert */ INSERT INTO job_flows (`+jobFlowCols+`) VALUES `, "(?, ?, ?, ?, ?, ?, ?)", rows)
}

// insertEdges inserts the edges from each job's parents not done to it.
func insertEdges(ctx context.Context, tx *sql.Tx, ids []int64, parents [][]int64) error {
	var rows [][]any
	for i, ps := range parents {
		for _, key := range ps {
			parent := key
			if key < 0 {
				parent = ids[-1-key]
			}
			rows = append(rows, []any{parent, ids[i]})
		}
	}
	return insertMany(ctx, tx, `/* rowq:flow.insert */ INSERT INTO job_deps (parent_id, child_id) VALUES `, "(?, ?)", rows)
}

// insertMany inserts rows with multi-row INSERTs of head, each row
// written as row, within the bounds of one statement (chunkInserts).
func insertMany(ctx context.Context, tx *sql.Tx, head, row string, rows [][]any) error {
	for start := 0; start < len(rows); {
		end, size := start, 0
		for end < len(rows) && end-start < insertMaxRows && size < insertMaxBytes {
			for _, v := range rows[end] {
				if s, ok := v.(string); ok {
					size += len(s)
				}
			}
			size += 64
			end++
		}
		var args []any
		for _, r := range rows[start:end] {
			args = append(args, r...)
		}
		q := head + strings.TrimSuffix(strings.Repeat(row+", ", end-start), ", ")
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
		start = end
	}
	return nil
}

// FlowGet reads a live job's flow: its flow row (none for a job that has
// only dependents) and its edges both ways.
func (s *Store) FlowGet(ctx context.Context, id int64) (*store.FlowInfo, error) {
	info, err := s.flowGet(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("get flow of job %d: %w", id, mapErr(err))
	}
	return info, nil
}

func (s *Store) flowGet(ctx context.Context, id int64) (*store.FlowInfo, error) {
	q, err := s.causal(ctx, `/* rowq:flow.get */ SELECT flow FROM jobs WHERE id = ?`)
	if err != nil {
		return nil, err
	}
	var flow bool
	if err := s.db.QueryRowContext(ctx, q, id).Scan(&flow); err != nil {
		return nil, err
	}
	if !flow {
		return nil, store.ErrNotFound
	}
	info := &store.FlowInfo{JobID: id, OnParentFailure: store.ParentFailureCancel}
	f, err := scanJobFlow(s.db.QueryRowContext(ctx, `/* rowq:flow.get */ SELECT `+jobFlowCols+` FROM job_flows WHERE job_id = ?`, id))
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return nil, err
	default:
		info.BatchID, info.OnParentFailure = f.BatchID, f.OnParentFailure
		for _, cb := range []struct {
			name string
			p    *store.JobInsertParams
		}{{"on_success", f.OnSuccess}, {"on_failure", f.OnFailure}, {"on_finish", f.OnFinish}} {
			if cb.p != nil {
				info.Callbacks = append(info.Callbacks, cb.name)
			}
		}
	}
	if info.WaitsFor, err = sqldb.QueryAll(ctx, s.db, sqldb.ScanInt64, `/* rowq:flow.get */ SELECT parent_id FROM job_deps
		WHERE child_id = ? ORDER BY parent_id`, id); err != nil {
		return nil, err
	}
	info.Dependents, err = sqldb.QueryAll(ctx, s.db, sqldb.ScanInt64, `/* rowq:flow.get */ SELECT child_id FROM job_deps
		WHERE parent_id = ? ORDER BY child_id`, id)
	return info, err
}

// JobsBlocked reads the queue's blocked jobs from their range of
// jobs_fetch, sorted by id, then their edges.
func (s *Store) JobsBlocked(ctx context.Context, p *store.JobsBlockedParams) ([]*store.BlockedJob, error) {
	out, err := s.jobsBlocked(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return out, nil
}

func (s *Store) jobsBlocked(ctx context.Context, p *store.JobsBlockedParams) ([]*store.BlockedJob, error) {
	jobs, err := sqldb.QueryAll(ctx, s.db, func(sc sqldb.Scanner) (*store.Job, error) { return scanJob(sc) },
		`/* rowq:flow.blocked */ SELECT `+jobCols+` FROM jobs FORCE INDEX (jobs_fetch)
		WHERE queue_name = ? AND state = 'blocked' AND id > ? ORDER BY id LIMIT ?`, p.Queue, p.After, p.Limit)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	out := make([]*store.BlockedJob, len(jobs))
	byID := make(map[int64]*store.BlockedJob, len(jobs))
	ids := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = &store.BlockedJob{Job: j}
		byID[j.ID], ids[i] = out[i], j.ID
	}
	rows, err := s.db.QueryContext(ctx, `/* rowq:flow.blocked */ SELECT child_id, parent_id FROM job_deps FORCE INDEX (job_deps_child)
		WHERE child_id IN (`+sqldb.Placeholders(len(ids))+`) ORDER BY child_id, parent_id`, idArgs(ids)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var child, parent int64
		if err := rows.Scan(&child, &parent); err != nil {
			return nil, err
		}
		byID[child].WaitsFor = append(byID[child].WaitsFor, parent)
	}
	return out, rows.Err()
}

// BatchGet reads batch id.
func (s *Store) BatchGet(ctx context.Context, id int64) (*store.Batch, error) {
	b, err := scanBatch(s.db.QueryRowContext(ctx, `/* rowq:flow.batch_get */ SELECT `+batchCols+` FROM batches WHERE id = ?`, id))
	if err != nil {
		return nil, fmt.Errorf("get batch %d: %w", id, mapErr(err))
	}
	return &b.Batch, nil
}

// BatchesList reads a page of batches, newest first, by primary key.
func (s *Store) BatchesList(ctx context.Context, p *store.BatchesListParams) ([]*store.Batch, error) {
	before := int64(1<<63 - 1)
	if p.Before > 0 {
		before = p.Before
	}
	bs, err := sqldb.QueryAll(ctx, s.db, func(sc sqldb.Scanner) (*store.Batch, error) {
		b, err := scanBatch(sc)
		if err != nil {
			return nil, err
		}
		return &b.Batch, nil
	}, `/* rowq:flow.batches_list */ SELECT `+batchCols+` FROM batches WHERE id < ? ORDER BY id DESC LIMIT ?`, before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", mapErr(err))
	}
	return bs, nil
}
