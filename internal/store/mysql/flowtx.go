package mysql

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// flowTx is store.FlowTx over a transaction of this dialect: what
// store.FlowEnd reads and writes in the transaction that ended jobs.
//
// Locks: the ended jobs are locked (deleted) by the caller, in ascending
// id order; FlowChildren then locks their blocked dependents, ascending,
// job row then flow row; BatchCount locks a batch row last. A dependent's
// id is always higher than its parents' (it was enqueued after them), so
// every transaction takes its row locks of jobs in ascending id order.
type flowTx struct {
	tx *sql.Tx
	s  *Store
	// blocked are the ended jobs that were blocked: the only ones with
	// edges to parents (a job is released once its parents all ended, and
	// each parent's end deletes its edges), which FlowForget deletes.
	blocked map[int64]bool
}

// flowEdge is a job_deps row.
type flowEdge struct{ parent, child int64 }

var _ store.FlowTx = (*flowTx)(nil)

// endFlows applies, in tx, the flows of those of ended that have one
// (store.FlowEnd); without any it reads nothing.
func (s *Store) endFlows(ctx context.Context, tx *sql.Tx, ended ...store.FlowEnded) (store.FlowDone, error) {
	if !slices.ContainsFunc(ended, func(e store.FlowEnded) bool { return e.Job.Flow }) {
		return store.FlowDone{}, nil
	}
	f := &flowTx{tx: tx, s: s, blocked: map[int64]bool{}}
	for _, e := range ended {
		if e.Job.State == store.StateBlocked {
			f.blocked[e.Job.ID] = true
		}
	}
	return store.FlowEnd(ctx, f, ended)
}

const jobFlowCols = "job_id, batch_id, on_success, on_failure, on_finish, pending, on_parent_failure"

// scanJobFlow scans the jobFlowCols of one row.
func scanJobFlow(sc sqldb.Scanner) (*store.JobFlow, error) {
	var (
		f                   store.JobFlow
		batch               sql.NullInt64
		success, fail, fini []byte
	)
	if err := sc.Scan(&f.JobID, &batch, &success, &fail, &fini, &f.Pending, &f.OnParentFailure); err != nil {
		return nil, err
	}
	f.BatchID = batch.Int64
	var err error
	if f.OnSuccess, err = store.DecodeCallback(success); err != nil {
		return nil, err
	}
	if f.OnFailure, err = store.DecodeCallback(fail); err != nil {
		return nil, err
	}
	f.OnFinish, err = store.DecodeCallback(fini)
	return &f, err
}

// FlowsOf reads the flow rows of ids. The caller holds the jobs (it ended
// them), and the writers of a flow row hold its job: a plain read.
func (f *flowTx) FlowsOf(ctx context.Context, ids []int64) ([]*store.JobFlow, error) {
	return sqldb.QueryAll(ctx, f.tx, scanJobFlow, `/* rowq:flow.flows_of */ SELECT `+jobFlowCols+` FROM job_flows
		WHERE job_id IN (`+sqldb.Placeholders(len(ids))+`)`, idArgs(ids)...)
}

// FlowChildren reads the edges of parents (a plain read: the writers of a
// parent's edges hold its job, which the caller holds), then locks the children still blocked, ascending, each
// job row then its flow row (STRAIGHT_JOIN: jobs first, by primary key).
// Every writer of a flow row holds its job row first, so taking both in
// one statement orders the locks as two statements would.
func (f *flowTx) FlowChildren(ctx context.Context, parents []int64) ([]store.FlowChild, error) {
	edges, err := sqldb.QueryAll(ctx, f.tx, func(sc sqldb.Scanner) (flowEdge, error) {
		var e flowEdge
		err := sc.Scan(&e.parent, &e.child)
		return e, err
	}, `/* rowq:flow.children */ SELECT parent_id, child_id FROM job_deps
		WHERE parent_id IN (`+sqldb.Placeholders(len(parents))+`)`, idArgs(parents)...)
	if err != nil {
		return nil, err
	}
	if len(edges) == 0 {
		return nil, nil
	}
	var children []int64
	for _, e := range edges {
		children = append(children, e.child)
	}
	slices.Sort(children)
	children = slices.Compact(children)
	locked, err := sqldb.QueryAll(ctx, f.tx, func(sc sqldb.Scanner) (store.FlowChild, error) {
		var c store.FlowChild
		err := sc.Scan(&c.Child, &c.Pending, &c.OnParentFailure)
		return c, err
	}, lockChildrenSQL(len(children)), idArgs(children)...)
	if err != nil {
		return nil, err
	}
	byChild := make(map[int64]store.FlowChild, len(locked))
	for _, c := range locked {
		byChild[c.Child] = c
	}
	var out []store.FlowChild
	for _, e := range edges {
		if c, ok := byChild[e.child]; ok {
			c.Parent = e.parent
			out = append(out, c)
		}
	}
	return out, nil
}

// lockChildrenSQL locks those of n jobs that are blocked, and their flow
// rows, in ascending id order.
func lockChildrenSQL(n int) string {
	return `/* rowq:flow.children */ SELECT j.id, f.pending, f.on_parent_failure
		FROM jobs j FORCE INDEX (PRIMARY) STRAIGHT_JOIN job_flows f ON f.job_id = j.id
		WHERE j.id IN (` + sqldb.Placeholders(n) + `) AND j.state = 'blocked' ORDER BY j.id FOR UPDATE`
}

// FlowSetPending writes the pending counts, one CASE on the job id.
func (f *flowTx) FlowSetPending(ctx context.Context, pending map[int64]int) error {
	ids := make([]int64, 0, len(pending))
	for id := range pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var q strings.Builder
	args := make([]any, 0, 3*len(ids))
	q.WriteString(`/* rowq:flow.set_pending */ UPDATE job_flows FORCE INDEX (PRIMARY) SET pending = CASE job_id`)
	for _, id := range ids {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, id, pending[id])
	}
	q.WriteString(" END WHERE job_id IN (" + sqldb.Placeholders(len(ids)) + ")")
	_, err := f.tx.ExecContext(ctx, q.String(), idArgs(ids, args...)...)
	return err
}

// FlowRelease moves the blocked jobs ids to waiting, and lists the
// ordered ones in ordered_jobs, which a blocked job stays out of (it would
// hold its key's later jobs back: keys.go).
func (f *flowTx) FlowRelease(ctx context.Context, ids []int64) ([]string, error) {
	type released struct {
		id      int64
		queue   string
		key     sql.NullString
		ordered bool
	}
	jobs, err := sqldb.QueryAll(ctx, f.tx, func(sc sqldb.Scanner) (released, error) {
		var r released
		err := sc.Scan(&r.id, &r.queue, &r.key, &r.ordered)
		return r, err
	}, `/* rowq:flow.release */ SELECT id, queue_name, concurrency_key, ordered FROM jobs FORCE INDEX (PRIMARY)
		WHERE id IN (`+sqldb.Placeholders(len(ids))+`) AND state = 'blocked'`, idArgs(ids)...)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	var (
		queues  []string
		ordered []any
		moved   = make([]int64, len(jobs))
	)
	for i, r := range jobs {
		moved[i] = r.id
		if !slices.Contains(queues, r.queue) {
			queues = append(queues, r.queue)
		}
		if r.ordered && r.key.Valid {
			ordered = append(ordered, r.id, r.queue, r.key.String)
		}
	}
	if _, err := f.tx.ExecContext(ctx, `/* rowq:flow.release */ UPDATE jobs FORCE INDEX (PRIMARY) SET state = 'waiting'
		WHERE id IN (`+sqldb.Placeholders(len(moved))+`) AND state = 'blocked'`, idArgs(moved)...); err != nil {
		return nil, err
	}
	if len(ordered) > 0 {
		_, err = f.tx.ExecContext(ctx, `/* rowq:flow.release */ INSERT IGNORE INTO ordered_jobs (job_id, queue_name, concurrency_key)
			VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(ordered)/3), ", "), ordered...)
	}
	return queues, err
}

// FlowEndBlocked ends the blocked jobs ids (which FlowChildren locked):
// their history where their queue keeps it, then the failure log
// (FinishedFailed) or nothing (FinishedCancelled), and their rows go.
func (f *flowTx) FlowEndBlocked(ctx context.Context, ids []int64, status, message string) ([]*store.Job, error) {
	var now time.Time
	keep := map[int64]bool{}
	jobs, err := sqldb.QueryAll(ctx, f.tx, func(sc sqldb.Scanner) (*store.Job, error) {
		var k sql.NullInt64
		j, err := scanJob(sc, &now, &k)
		if err == nil {
			keep[j.ID] = k.Int64 > 0
		}
		return j, err
	}, `/* rowq:flow.end_blocked */ SELECT `+jobCols+`, NOW(6), `+keepOf+` FROM jobs FORCE INDEX (PRIMARY)
		WHERE id IN (`+sqldb.Placeholders(len(ids))+`) AND state = 'blocked' ORDER BY id FOR UPDATE`, idArgs(ids)...)
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	var fs []*store.FinishedJob
	for _, j := range jobs {
		f.blocked[j.ID] = true
		if keep[j.ID] {
			fs = append(fs, store.FinishedOf(j, status, message, nil, now))
		}
	}
	if err := insertFinished(ctx, f.tx, fs...); err != nil {
		return nil, err
	}
	if status == store.FinishedFailed {
		for _, j := range jobs {
			if _, err := moveToFailed(ctx, f.tx, j, now, store.FailedParent, 0, message); err != nil {
				return nil, err
			}
		}
		return jobs, nil
	}
	gone := make([]int64, len(jobs))
	for i, j := range jobs {
		gone[i] = j.ID
	}
	_, err = f.tx.ExecContext(ctx, `/* rowq:flow.end_blocked */ DELETE jobs FROM jobs FORCE INDEX (PRIMARY) WHERE id IN (`+sqldb.Placeholders(len(gone))+`)`, idArgs(gone)...)
	return jobs, err
}

// Statements of FlowForget for n ids. Each names its index: on the few
// rows of a small table the optimizer prefers a full scan, which in a
// locking statement waits for every row another transaction holds.
func forgetFlowsSQL(n int) string {
	return `/* rowq:flow.forget */ DELETE job_flows FROM job_flows FORCE INDEX (PRIMARY) WHERE job_id IN (` + sqldb.Placeholders(n) + `)`
}

func forgetChildEdgesSQL(n int) string {
	return `/* rowq:flow.forget */ DELETE job_deps FROM job_deps FORCE INDEX (PRIMARY) WHERE parent_id IN (` + sqldb.Placeholders(n) + `)`
}

func forgetParentEdgesSQL(n int) string {
	return `/* rowq:flow.forget */ DELETE job_deps FROM job_deps FORCE INDEX (job_deps_child) WHERE child_id IN (` + sqldb.Placeholders(n) + `)`
}

// FlowForget deletes the flow rows of ids and their edges both ways: to
// their dependents, and, for those that were blocked, to their parents.
func (f *flowTx) FlowForget(ctx context.Context, ids []int64) error {
	args := idArgs(ids)
	for _, q := range []string{forgetFlowsSQL(len(ids)), forgetChildEdgesSQL(len(ids))} {
		if _, err := f.tx.ExecContext(ctx, q, args...); err != nil {
			return err
		}
	}
	var blocked []int64
	for _, id := range ids {
		if f.blocked[id] {
			blocked = append(blocked, id)
		}
	}
	if len(blocked) == 0 {
		return nil
	}
	_, err := f.tx.ExecContext(ctx, forgetParentEdgesSQL(len(blocked)), idArgs(blocked)...)
	return err
}

// FlowInsertJobs inserts the callbacks as waiting jobs, with the
// dialect's INSERT (ordered jobs listed in ordered_jobs).
func (f *flowTx) FlowInsertJobs(ctx context.Context, jobs []*store.JobInsertParams) error {
	info, err := f.s.server(ctx)
	if err != nil {
		return err
	}
	var ids []int64
	for _, c := range chunkInserts(jobs) {
		if err := insertChunk(ctx, f.tx, c, info, &ids); err != nil {
			return err
		}
	}
	return nil
}

const batchCols = "id, total, pending, succeeded, failed, cancelled, created_at, finished_at, meta, on_success, on_finish"

// scanBatch scans batchCols, then extra.
func scanBatch(sc sqldb.Scanner, extra ...any) (*store.BatchRow, error) {
	var (
		b                  store.BatchRow
		finished           sql.NullTime
		meta, success, fin []byte
	)
	dest := append([]any{&b.ID, &b.Total, &b.Pending, &b.Succeeded, &b.Failed, &b.Cancelled, &b.CreatedAt, &finished,
		&meta, &success, &fin}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	if finished.Valid {
		b.FinishedAt = &finished.Time
	}
	if len(meta) > 0 {
		b.Meta = meta
	}
	b.HasOnSuccess, b.HasOnFinish = success != nil, fin != nil
	var err error
	if b.OnSuccess, err = store.DecodeCallback(success); err != nil {
		return nil, err
	}
	b.OnFinish, err = store.DecodeCallback(fin)
	return &b, err
}

// BatchCount locks the batch row, adds n and writes it back: MariaDB has
// no UPDATE … RETURNING. finished_at is the NOW(6) of the locking read.
func (f *flowTx) BatchCount(ctx context.Context, id int64, n store.BatchCounts) (*store.BatchRow, error) {
	var now time.Time
	b, err := scanBatch(f.tx.QueryRowContext(ctx, `/* rowq:flow.batch_count */ SELECT `+batchCols+`, NOW(6)
		FROM batches WHERE id = ? FOR UPDATE`, id), &now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	b.Succeeded += n.Succeeded
	b.Failed += n.Failed
	b.Cancelled += n.Cancelled
	b.Pending -= n.Succeeded + n.Failed + n.Cancelled
	if b.Pending <= 0 && b.FinishedAt == nil {
		b.FinishedAt = &now
	}
	_, err = f.tx.ExecContext(ctx, `/* rowq:flow.batch_count */ UPDATE batches
		SET pending = ?, succeeded = ?, failed = ?, cancelled = ?, finished_at = ? WHERE id = ?`,
		b.Pending, b.Succeeded, b.Failed, b.Cancelled, b.FinishedAt, id)
	return b, err
}
