package postgres

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// Jobs with a flow (store/flow.go): JobsInsertFlow and the reads of flows
// and batches. Ending them is flowend.go's.

// insertFlowSQL is insertSQL with each job's state ($19) and flow ($20).
const insertFlowSQL = `/* rowq:jobs.insert_flow */
	INSERT INTO jobs (` + insertCols + `, state, flow)
	SELECT ` + insertValues + `, unnest($19::text[]), unnest($20::bool[])
	RETURNING id`

// JobsInsertFlow stores p's jobs, their flows and p's batch in one
// transaction: it locks the parents given by id (ascending) and marks
// them as having a flow, creates the batch, then inserts the jobs, their
// job_flows rows and their edges, one statement each.
func (s *Store) JobsInsertFlow(ctx context.Context, p *store.FlowInsertParams) (*store.FlowInserted, error) {
	if len(p.Jobs) == 0 {
		return &store.FlowInserted{}, nil
	}
	var out *store.FlowInserted
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = insertFlowTx(ctx, tx, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert %d jobs with flows: %w", len(p.Jobs), mapErr(err))
	}
	return out, nil
}

// flowPlan is what JobsInsertFlow stores beside the jobs.
type flowPlan struct {
	flow    []bool
	waitIdx [][]int   // per job: the earlier jobs of the call it waits for
	waitID  [][]int64 // per job: the live parents given by id it waits for
}

func insertFlowTx(ctx context.Context, tx pgx.Tx, p *store.FlowInsertParams) (*store.FlowInserted, error) {
	live, err := lockParents(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	plan, err := planFlow(p, live)
	if err != nil {
		return nil, err
	}
	out := &store.FlowInserted{Blocked: make([]bool, len(p.Jobs))}
	if p.Batch != nil {
		if out.BatchID, err = insertBatch(ctx, tx, p.Batch, len(p.Jobs)); err != nil {
			return nil, err
		}
	}
	jobs, states := make([]*store.JobInsertParams, len(p.Jobs)), make([]string, len(p.Jobs))
	for i, j := range p.Jobs {
		jobs[i], states[i] = j.Job, store.StateWaiting
		if len(plan.waitIdx[i])+len(plan.waitID[i]) > 0 {
			states[i], out.Blocked[i] = store.StateBlocked, true
		}
	}
	rows, _ := tx.Query(ctx, insertFlowSQL, append(insertArgs(jobs), states, plan.flow)...)
	if out.IDs, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		return nil, err
	}
	if err := insertFlows(ctx, tx, p, plan, out); err != nil {
		return nil, err
	}
	return out, nil
}

// lockParents locks the parents given by id, ascending, sets flow on
// those that are live and returns them; a parent that is not live must
// have finished in a way its dependent accepts (*store.ParentError).
func lockParents(ctx context.Context, tx pgx.Tx, p *store.FlowInsertParams) (map[int64]bool, error) {
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
	// A parent that has a flow already is locked, not written again.
	rows, _ := tx.Query(ctx, `/* rowq:flows.lock_parents */ WITH l AS MATERIALIZED (
			SELECT id, flow FROM jobs WHERE id = ANY($1) ORDER BY id FOR UPDATE),
		u AS (UPDATE jobs SET flow = true WHERE id IN (SELECT id FROM l WHERE NOT flow))
		SELECT id FROM l`, ids)
	got, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	live := make(map[int64]bool, len(got))
	for _, id := range got {
		live[id] = true
	}
	var gone []int64
	for _, id := range ids {
		if !live[id] {
			gone = append(gone, id)
		}
	}
	status := map[int64]string{}
	if len(gone) > 0 {
		if status, err = finishedStatus(ctx, tx, gone); err != nil {
			return nil, err
		}
	}
	return live, parentsAccepted(p, live, status)
}

// finishedStatus returns the history status of those of ids that are
// kept.
func finishedStatus(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]string, error) {
	var (
		id     int64
		status string
	)
	out := map[int64]string{}
	rows, _ := tx.Query(ctx, `/* rowq:flows.finished_parents */ SELECT id, status FROM finished_jobs WHERE id = ANY($1)`, ids)
	_, err := pgx.ForEachRow(rows, []any{&id, &status}, func() error {
		out[id] = status
		return nil
	})
	return out, err
}

// parentsAccepted returns a *store.ParentError for the first parent given
// by id that is not live and did not finish in a way its dependent
// accepts.
func parentsAccepted(p *store.FlowInsertParams, live map[int64]bool, status map[int64]string) error {
	for i, j := range p.Jobs {
		for k, d := range j.DependsOn {
			if d.ID <= 0 || live[d.ID] {
				continue
			}
			switch st := status[d.ID]; {
			case st == store.FinishedSucceeded:
			case st != "" && j.OnParentFailure == store.ParentFailureRun:
			default:
				return &store.ParentError{Job: i, Item: k, Parent: d, Status: st}
			}
		}
	}
	return nil
}

// planFlow tells which jobs have a flow and which parents each waits for.
func planFlow(p *store.FlowInsertParams, live map[int64]bool) (*flowPlan, error) {
	n := len(p.Jobs)
	plan := &flowPlan{flow: make([]bool, n), waitIdx: make([][]int, n), waitID: make([][]int64, n)}
	for i, j := range p.Jobs {
		plan.flow[i] = plan.flow[i] || j.HasFlow() || p.Batch != nil
		seen := make(map[store.FlowParent]bool, len(j.DependsOn)) // each parent once
		for _, d := range j.DependsOn {
			if d.ID > 0 {
				d.Index = 0
			}
			if seen[d] {
				continue
			}
			seen[d] = true
			switch {
			case d.ID > 0:
				if live[d.ID] {
					plan.waitID[i] = append(plan.waitID[i], d.ID)
				}
			case d.Index < 0 || d.Index >= i:
				return nil, fmt.Errorf("job %d depends on job %d of the call, which is not an earlier one", i, d.Index)
			default:
				plan.waitIdx[i] = append(plan.waitIdx[i], d.Index)
				plan.flow[d.Index] = true
			}
		}
	}
	return plan, nil
}

// insertBatch creates a batch of total jobs, all pending.
func insertBatch(ctx context.Context, tx pgx.Tx, b *store.BatchParams, total int) (int64, error) {
	succ, err := callbackText(b.OnSuccess)
	if err != nil {
		return 0, err
	}
	finish, err := callbackText(b.OnFinish)
	if err != nil {
		return 0, err
	}
	var id int64
	err = tx.QueryRow(ctx, `/* rowq:batches.insert */ INSERT INTO batches (total, pending, created_at, meta, on_success, on_finish)
		VALUES ($1, $1, now(), $2, $3, $4) RETURNING id`, total, nullJSON(b.Meta), succ, finish).Scan(&id)
	return id, err
}

// callbackText is store.EncodeCallback as a text column takes it: nil for
// none.
func callbackText(p *store.JobInsertParams) (*string, error) {
	b, err := store.EncodeCallback(p)
	if err != nil || b == nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// insertFlows inserts the job_flows rows of the jobs with callbacks,
// parents or a batch, and the edges from their parents, once the jobs
// have their ids. A job that has only dependents has no row: FlowEnd
// needs none for it, and FlowGet reads its edges.
func insertFlows(ctx context.Context, tx pgx.Tx, p *store.FlowInsertParams, plan *flowPlan, out *store.FlowInserted) error {
	var (
		ids, parents, children []int64
		batches                []*int64
		succ, fail, finish     []*string
		pending                []int32
		policies               []string
	)
	for i, j := range p.Jobs {
		if !j.HasFlow() && out.BatchID == 0 {
			continue // none, or only dependents: the edges say it all
		}
		id := out.IDs[i]
		var batch *int64
		if out.BatchID != 0 {
			batch = &out.BatchID
		}
		cbs := make([]*string, 3)
		for k, cb := range []*store.JobInsertParams{j.OnSuccess, j.OnFailure, j.OnFinish} {
			var err error
			if cbs[k], err = callbackText(cb); err != nil {
				return err
			}
		}
		policy := j.OnParentFailure
		if policy == "" {
			policy = store.ParentFailureCancel
		}
		ids, batches, policies = append(ids, id), append(batches, batch), append(policies, policy)
		succ, fail, finish = append(succ, cbs[0]), append(fail, cbs[1]), append(finish, cbs[2])
		pending = append(pending, int32(len(plan.waitIdx[i])+len(plan.waitID[i])))
		for _, k := range plan.waitIdx[i] {
			parents, children = append(parents, out.IDs[k]), append(children, id)
		}
		for _, parent := range plan.waitID[i] {
			parents, children = append(parents, parent), append(children, id)
		}
	}
	if _, err := tx.Exec(ctx, `/* rowq:flows.insert */ INSERT INTO job_flows (`+jobFlowCols+`)
		SELECT unnest($1::bigint[]), unnest($2::bigint[]), unnest($3::text[]), unnest($4::text[]), unnest($5::text[]),
			unnest($6::int[]), unnest($7::text[])`, ids, batches, succ, fail, finish, pending, policies); err != nil {
		return err
	}
	if len(parents) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `/* rowq:flows.insert_deps */ INSERT INTO job_deps (parent_id, child_id)
		SELECT unnest($1::bigint[]), unnest($2::bigint[])`, parents, children)
	return err
}

// FlowGet returns the flow of a live job with flow set: the columns of
// its job_flows row (a parent given by id to a later job may have none)
// and its edges.
func (s *Store) FlowGet(ctx context.Context, id int64) (*store.FlowInfo, error) {
	f, err := queryOne(ctx, s, func(row pgx.CollectableRow) (*store.FlowInfo, error) {
		f := &store.FlowInfo{JobID: id}
		var succ, fail, finish bool
		err := row.Scan(&f.BatchID, &f.OnParentFailure, &succ, &fail, &finish, &f.WaitsFor, &f.Dependents)
		for k, has := range []bool{succ, fail, finish} {
			if has {
				f.Callbacks = append(f.Callbacks, []string{"on_success", "on_failure", "on_finish"}[k])
			}
		}
		return f, err
	}, `/* rowq:flows.get */ SELECT coalesce(f.batch_id, 0), coalesce(f.on_parent_failure, 'cancel'),
			f.on_success IS NOT NULL, f.on_failure IS NOT NULL, f.on_finish IS NOT NULL,
			ARRAY(SELECT parent_id FROM job_deps WHERE child_id = j.id ORDER BY parent_id),
			ARRAY(SELECT child_id FROM job_deps WHERE parent_id = j.id ORDER BY child_id)
		FROM jobs j LEFT JOIN job_flows f ON f.job_id = j.id WHERE j.id = $1 AND j.flow`, id)
	if err != nil {
		return nil, fmt.Errorf("get flow of job %d: %w", id, mapErr(err))
	}
	f.WaitsFor, f.Dependents = nilIfNone(f.WaitsFor), nilIfNone(f.Dependents)
	return f, nil
}

func nilIfNone(ids []int64) []int64 {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

// JobsBlocked returns a page of the queue's blocked jobs by id, each with
// the parents it waits for (its edges).
func (s *Store) JobsBlocked(ctx context.Context, p *store.JobsBlockedParams) ([]*store.BlockedJob, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	out, err := queryAll(ctx, s, func(row pgx.CollectableRow) (*store.BlockedJob, error) {
		var b store.BlockedJob
		var err error
		b.Job, err = scanJobAnd(row, &b.WaitsFor)
		b.WaitsFor = nilIfNone(b.WaitsFor)
		return &b, err
	}, `/* rowq:flows.blocked */ SELECT `+jobCols+`,
			ARRAY(SELECT parent_id FROM job_deps WHERE child_id = jobs.id ORDER BY parent_id)
		FROM jobs WHERE queue_name = $1 AND state = 'blocked' AND id > $2 ORDER BY id LIMIT $3`, p.Queue, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list blocked jobs of queue %q: %w", p.Queue, mapErr(err))
	}
	return out, nil
}

// BatchGet returns batch id, or store.ErrNotFound.
func (s *Store) BatchGet(ctx context.Context, id int64) (*store.Batch, error) {
	b, err := queryOne(ctx, s, scanBatch, `/* rowq:batches.get */ SELECT `+batchCols+` FROM batches WHERE id = $1`, id)
	if err != nil {
		return nil, fmt.Errorf("get batch %d: %w", id, mapErr(err))
	}
	return b, nil
}

// BatchesList returns a page of batches, newest first, walking the primary
// key down from p.Before.
func (s *Store) BatchesList(ctx context.Context, p *store.BatchesListParams) ([]*store.Batch, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	before := p.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	bs, err := queryAll(ctx, s, scanBatch, `/* rowq:batches.list */ SELECT `+batchCols+`
		FROM batches WHERE id < $1 ORDER BY id DESC LIMIT $2`, before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", mapErr(err))
	}
	return bs, nil
}
