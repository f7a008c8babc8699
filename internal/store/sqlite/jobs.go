package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const jobCols = `id, queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count, grabbed_by, grabbed_until,
	priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, grabs, progress, progress_message, traceparent, tracestate, deferrals,
	concurrency_key, concurrency_limit, ordered, flow`

func scanJob(row sqldb.Scanner) (*store.Job, error) {
	var (
		j                  store.Job
		payload, grabbedBy sql.NullString
		created, next      int64
		grabbedUntil       sql.NullInt64
		key, pmsg          sql.NullString
		tp, ts             sql.NullString
		progress           sql.NullFloat64
		ckey               sql.NullString
	)
	err := row.Scan(&j.ID, &j.Queue, &j.Category, &j.URL, &payload, &j.State, &created, &next,
		&j.Timeout, &j.MaxRetries, &j.RetryDelay, &j.FailCount, &grabbedBy, &grabbedUntil,
		&j.Priority, &key, &j.RetryBackoff, &j.RetryDelayMax, &j.RetryJitter, &j.Grabs, &progress, &pmsg, &tp, &ts, &j.Deferrals,
		&ckey, &j.ConcurrencyLimit, &j.Ordered, &j.Flow)
	if err != nil {
		return nil, err
	}
	j.Trace = store.Trace{Parent: tp.String, State: ts.String}
	if progress.Valid {
		j.Progress = &progress.Float64
	}
	j.ProgressMessage = pmsg.String
	j.UniqueKey = key.String
	j.ConcurrencyKey = ckey.String
	if payload.Valid {
		j.Payload = []byte(payload.String)
	}
	j.CreatedAt, j.NextTry = fromMicros(created), fromMicros(next)
	j.GrabbedBy = grabbedBy.String
	if grabbedUntil.Valid {
		t := fromMicros(grabbedUntil.Int64)
		j.GrabbedTil = &t
	}
	return &j, nil
}

func nullPayload(p []byte) any {
	if p == nil {
		return nil
	}
	return string(p)
}

// JobsInsert stores jobs in one transaction.
func (s *Store) JobsInsert(ctx context.Context, jobs []*store.JobInsertParams) ([]int64, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(jobs))
	if _, err := s.jobsInsert(ctx, jobs, nil, ids); err != nil {
		return nil, fmt.Errorf("insert %d jobs: %w", len(jobs), err)
	}
	return ids, nil
}

// jobsInsert inserts jobs waiting, or, with a holder, already grabbed by
// hold.Node until now + hold.Lease (local hand-off), puts their ids in ids
// and returns the now they were created at.
func (s *Store) jobsInsert(ctx context.Context, jobs []*store.JobInsertParams, hold *store.JobsInsertGrabbedParams, ids []int64) (int64, error) {
	var now int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		q := insertSQL
		if hold != nil {
			q = insertGrabbedSQL
		}
		stmt, err := tx.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		defer stmt.Close()
		now = s.micros()
		for i, j := range jobs {
			args := insertArgs(j, now)
			if hold != nil {
				args = append(args, hold.Node, now+hold.Lease.Microseconds())
			}
			res, err := stmt.ExecContext(ctx, args...)
			if err != nil {
				return err
			}
			if ids[i], err = res.LastInsertId(); err != nil {
				return err
			}
		}
		return nil
	})
	return now, err
}

// grabSQL is the fetch; EXPLAIN QUERY PLAN of its inner SELECT must show the
// jobs_fetch index and no temporary B-tree for ORDER BY.
const grabSQL = `/* rowq:jobs.grab */
	UPDATE jobs SET state = ?6, grabbed_by = ?1, grabbed_until = ?2, grabs = grabs + 1
	WHERE id IN (` + grabSelectSQL + `)
	RETURNING ` + jobCols

const grabSelectSQL = `SELECT id FROM jobs WHERE queue_name = ?3 AND state = 'waiting' AND next_try <= ?4` + grabKeysSQL + ` ORDER BY priority DESC, next_try, id LIMIT ?5`

// grabKeysSQL marks where grabSQL takes the condition that leaves out the
// jobs of keys the leader holds back enough of (grabKeys).
const grabKeysSQL = "/* keys */"

// grabKeys returns grabSQL for p, with its keys' condition (grabKeysCond).
func grabKeys(p *store.JobsGrabParams) (string, []any) {
	cond, args := grabKeysCond(p)
	if cond == "" {
		return grabSQL, nil
	}
	return keyedGrab(grabSQL, cond), args
}

// keyedGrab puts cond into grab (grabSQL, or grabSelectSQL), naming
// jobs_fetch: with a condition on the key, SQLite's planner would walk
// jobs_list and sort.
func keyedGrab(grab, cond string) string {
	grab = strings.Replace(grab, "SELECT id FROM jobs WHERE", "SELECT id FROM jobs INDEXED BY jobs_fetch WHERE", 1)
	return strings.Replace(grab, grabKeysSQL, cond, 1)
}

// grabKeysCond is the condition on the grabbed jobs' keys that p asks for
// ("" for none) and its arguments, which follow grabSQL's six.
func grabKeysCond(p *store.JobsGrabParams) (string, []any) {
	switch {
	case p.NoKeys:
		return " AND concurrency_key IS NULL", nil
	case len(p.SkipKeys) > 0:
		marks := make([]string, len(p.SkipKeys))
		for i := range marks {
			marks[i] = fmt.Sprintf("?%d", 7+i)
		}
		return " AND (concurrency_key IS NULL OR concurrency_key NOT IN (" + strings.Join(marks, ", ") + "))", sqldb.StringArgs(p.SkipKeys)
	}
	return "", nil
}

// JobsGrab marks due jobs as grabbed by the node and returns them.
func (s *Store) JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error) {
	now := s.micros()
	q, keys := grabKeys(p)
	rows, err := s.w.QueryContext(ctx, q, append([]any{p.Node, now + p.Lease.Microseconds(), p.Queue, now, p.Limit, store.GrabState(p)}, keys...)...)
	if err != nil {
		return nil, fmt.Errorf("grab jobs from queue %q: %w", p.Queue, mapErr(err))
	}
	defer rows.Close()
	var jobs []*store.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("grab jobs from queue %q: %w", p.Queue, mapErr(err))
		}
		jobs = append(jobs, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("grab jobs from queue %q: %w", p.Queue, mapErr(err))
	}
	sort.Slice(jobs, func(a, b int) bool {
		if jobs[a].Priority != jobs[b].Priority {
			return jobs[a].Priority > jobs[b].Priority
		}
		if !jobs[a].NextTry.Equal(jobs[b].NextTry) {
			return jobs[a].NextTry.Before(jobs[b].NextTry)
		}
		return jobs[a].ID < jobs[b].ID
	})
	return jobs, nil
}

// JobsExtend extends the node's grabs in the queue.
func (s *Store) JobsExtend(ctx context.Context, p *store.JobsExtendParams) (int64, error) {
	res, err := s.w.ExecContext(ctx, `/* rowq:jobs.extend */
		UPDATE jobs SET grabbed_until = ? WHERE queue_name = ? AND state = 'grabbed' AND grabbed_by = ?`,
		s.micros()+p.Lease.Microseconds(), p.Queue, p.Node)
	n, err := affected(res, err)
	if err != nil {
		return 0, fmt.Errorf("extend grabs of node %q in queue %q: %w", p.Node, p.Queue, err)
	}
	return n, nil
}

// JobsComplete deletes jobs the node still holds: those without a flow
// by the statement that deletes them unread (flow = 0), then, when some
// are left, those with a flow through completeFlow.
func (s *Store) JobsComplete(ctx context.Context, p *store.JobsCompleteParams) (int64, error) {
	var (
		n   int64
		err error
	)
	if len(p.Keep) > 0 && len(p.IDs) > 0 {
		n, err = s.completeKept(ctx, p)
	} else {
		n, err = s.execHeld(ctx, `/* rowq:jobs.complete */ DELETE FROM jobs`, p.IDs, p.Node, store.StateGrabbed, ` AND flow = 0`)
	}
	if err == nil && n < int64(len(p.IDs)) {
		var m int64
		m, err = s.completeFlow(ctx, p)
		n += m
	}
	if err != nil {
		return 0, fmt.Errorf("complete %d jobs: %w", len(p.IDs), err)
	}
	return n, nil
}

// JobsRelease puts the given jobs, where still grabbed by p.Node, back to
// waiting, and returns how many it put back.
func (s *Store) JobsRelease(ctx context.Context, p *store.JobsReleaseParams) (int64, error) {
	state := store.HeldState(p.Leased)
	n, err := s.execHeld(ctx, `/* rowq:jobs.release */
		UPDATE jobs SET state = 'waiting', grabbed_by = NULL, grabbed_until = NULL`, p.IDs, p.Node, state, "")
	if err != nil {
		return 0, fmt.Errorf("release %d jobs: %w", len(p.IDs), err)
	}
	return n, nil
}

// execHeld runs stmt on those of ids that node still holds in state (it
// appends the WHERE clause, then cond) and returns how many rows it
// changed.
func (s *Store) execHeld(ctx context.Context, stmt string, ids []int64, node, state, cond string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := make([]any, 0, len(ids)+2)
	args = append(args, state, node)
	for _, id := range ids {
		args = append(args, id)
	}
	stmt += ` WHERE state = ? AND grabbed_by = ? AND id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)` + cond
	return affected(s.w.ExecContext(ctx, stmt, args...))
}

// JobRetry puts a held job back to waiting after a delay.
func (s *Store) JobRetry(ctx context.Context, p *store.JobRetryParams) error {
	res, err := s.w.ExecContext(ctx, `/* rowq:jobs.retry */
		UPDATE jobs SET state = 'waiting', fail_count = fail_count + 1, next_try = ?, grabbed_by = NULL, grabbed_until = NULL
		WHERE id = ? AND state = 'grabbed' AND grabbed_by = ?`,
		s.micros()+p.Delay.Microseconds(), p.ID, p.Node)
	n, err := affected(res, err)
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("retry job %d: %w", p.ID, err)
	}
	return nil
}

// JobsDefer puts the jobs the node holds back to waiting, each due at now
// + its delay (a CASE on the id).
func (s *Store) JobsDefer(ctx context.Context, p *store.JobsDeferParams) (int64, error) {
	if len(p.Jobs) == 0 {
		return 0, nil
	}
	now := s.micros()
	count := 0
	if p.Count {
		count = 1
	}
	var q strings.Builder
	q.WriteString(`/* rowq:jobs.defer */ UPDATE jobs SET state = 'waiting', grabbed_by = NULL, grabbed_until = NULL,
		deferrals = deferrals + ?, next_try = CASE id`)
	args := make([]any, 0, 3*len(p.Jobs)+2)
	args = append(args, count)
	for _, j := range p.Jobs {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, j.ID, now+j.Delay.Microseconds())
	}
	q.WriteString(` END WHERE state = 'grabbed' AND grabbed_by = ? AND id IN (` + sqldb.Placeholders(len(p.Jobs)) + `)`)
	args = append(args, p.Node)
	for _, j := range p.Jobs {
		args = append(args, j.ID)
	}
	n, err := affected(s.w.ExecContext(ctx, q.String(), args...))
	if err != nil {
		return 0, fmt.Errorf("defer %d jobs of node %q: %w", len(p.Jobs), p.Node, err)
	}
	return n, nil
}

// JobFail moves a held job to the failure log. A job without a flow is
// deleted unread (flow = 0); one with goes through FlowEnd.
func (s *Store) JobFail(ctx context.Context, p *store.JobFailParams) (*store.FailedJob, error) {
	var (
		f    *store.FailedJob
		done store.FlowDone
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		done = store.FlowDone{}
		row := tx.QueryRowContext(ctx, `/* rowq:jobs.fail */
			INSERT INTO failed_jobs (job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at, grabs,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered)
			SELECT id, queue_name, category, url, payload, ?, ?, ?, fail_count + 1, ?, created_at, grabs,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered
			FROM jobs WHERE id = ? AND state = 'grabbed' AND grabbed_by = ?
			RETURNING `+failedCols, p.Status, p.Code, p.Message, s.micros(), p.ID, p.Node)
		var err error
		if f, err = scanFailed(row); err != nil {
			return err
		}
		if !p.Keep {
			n, err := affected(tx.ExecContext(ctx, `/* rowq:jobs.fail_delete */ DELETE FROM jobs WHERE id = ? AND flow = 0`, p.ID))
			if err != nil || n > 0 {
				return err
			}
		}
		j, err := scanJob(tx.QueryRowContext(ctx, `/* rowq:jobs.fail_delete */ DELETE FROM jobs WHERE id = ? RETURNING `+jobCols, p.ID))
		if err != nil {
			return err
		}
		if p.Keep {
			if err := insertFinished(ctx, tx, store.FinishedOf(j, store.FinishedFailed, p.Message, nil, f.FailedAt)); err != nil {
				return err
			}
		}
		done, err = s.flowEnd(ctx, tx, []store.FlowEnded{{Job: j, Status: store.FinishedFailed, Message: p.Message}})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fail job %d: %w", p.ID, err)
	}
	s.Done(done)
	return f, nil
}

// JobsRescue frees expired grabs of the queue (grabExpired).
func (s *Store) JobsRescue(ctx context.Context, queue string) (int64, error) {
	res, err := s.w.ExecContext(ctx, rescueSQL, queue, s.micros())
	n, err := affected(res, err)
	if err != nil {
		return 0, fmt.Errorf("rescue jobs of queue %q: %w", queue, err)
	}
	return n, nil
}

// rescueSQL puts the queue's expired grabs back to waiting; its arguments
// are the queue and now.
const rescueSQL = `/* rowq:jobs.rescue */
	UPDATE jobs SET state = 'waiting', grabbed_by = NULL, grabbed_until = NULL
	WHERE queue_name = ? AND state = 'grabbed' AND ` + grabExpired

// grabExpired is the condition on a grabbed row of jobs that its grab has
// expired by the time given (its one argument): its lease has passed, or
// its node has no registration (reaped or deleted). The node is looked up
// by primary key for each of the queue's grabs, which are few (its
// deliveries in flight).
const grabExpired = `(jobs.grabbed_until < ? OR NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.id = jobs.grabbed_by))`

// JobGet returns one job of the queue.
func (s *Store) JobGet(ctx context.Context, queue string, id int64) (*store.Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx, `/* rowq:jobs.get */ SELECT `+jobCols+` FROM jobs WHERE id = ? AND queue_name = ?`, id, queue))
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, mapErr(err))
	}
	return j, nil
}

// insertSQL inserts one job; its arguments come from insertArgs.
const insertSQL = `/* rowq:jobs.insert */
	INSERT INTO jobs (queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay,
		priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, traceparent, tracestate, concurrency_key, concurrency_limit, ordered)
	VALUES (?, ?, ?, ?, 'waiting', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// insertGrabbedSQL inserts one job already grabbed; its arguments are
// insertArgs, then the holder's node id and grabbed_until.
const insertGrabbedSQL = `/* rowq:jobs.insert_grabbed */
	INSERT INTO jobs (queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay,
		priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, traceparent, tracestate, concurrency_key, concurrency_limit, ordered, grabbed_by, grabbed_until, grabs)
	VALUES (?, ?, ?, ?, 'grabbed', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)`

// insertUniqueSQL inserts one job unless its unique key is taken, and then
// returns no row.
const insertUniqueSQL = insertSQL + ` ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id`

// insertArgs are the arguments of insertSQL for job j created at now.
func insertArgs(j *store.JobInsertParams, now int64) []any {
	var key any // NULL: no key, and NULLs never collide in jobs_unique
	if j.UniqueKey != "" {
		key = j.UniqueKey
	}
	backoff := j.RetryBackoff
	if backoff == "" {
		backoff = store.BackoffFixed
	}
	return []any{j.Queue, j.Category, j.URL, nullPayload(j.Payload), now, now + j.RunAfter.Microseconds(),
		j.Timeout, j.MaxRetries, j.RetryDelay, j.Priority, key, backoff, j.RetryDelayMax, j.RetryJitter,
		sqldb.NullString(j.Trace.Parent), sqldb.NullString(j.Trace.State),
		sqldb.NullString(j.ConcurrencyKey), j.ConcurrencyLimit, j.Ordered}
}

// JobsPush stores the jobs in one transaction. There is one writer
// connection, so a key found taken stays taken until the commit.
func (s *Store) JobsPush(ctx context.Context, jobs []*store.JobInsertParams) ([]store.JobPushed, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	var out []store.JobPushed
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = pushTx(ctx, tx, jobs, s.micros())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("push %d jobs: %w", len(jobs), err)
	}
	return out, nil
}

// pushTx is JobsPush inside the transaction tx, at now; the outbox
// moves its rows with it.
func pushTx(ctx context.Context, tx *sql.Tx, jobs []*store.JobInsertParams, now int64) ([]store.JobPushed, error) {
	out := make([]store.JobPushed, len(jobs))
	for i, j := range jobs {
		if j.UniqueKey == "" {
			res, err := tx.ExecContext(ctx, insertSQL, insertArgs(j, now)...)
			if err != nil {
				return nil, err
			}
			if out[i].ID, err = res.LastInsertId(); err != nil {
				return nil, err
			}
			continue
		}
		err := tx.QueryRowContext(ctx, insertUniqueSQL, insertArgs(j, now)...).Scan(&out[i].ID)
		if !errors.Is(err, sql.ErrNoRows) {
			if err != nil {
				return nil, err
			}
			continue
		}
		held, err := scanJob(tx.QueryRowContext(ctx, `/* rowq:jobs.push_unique */ SELECT `+jobCols+`
			FROM jobs WHERE queue_name = ? AND unique_key = ?`, j.Queue, j.UniqueKey))
		if err != nil {
			return nil, err
		}
		out[i] = store.JobPushed{ID: held.ID, Existing: true, Job: held}
	}
	return out, nil
}

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// now + p.Lease in one transaction and returns them in order. The times
// are the host's clock, read in the transaction: the rows are known
// without reading them back.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]*store.Job, error) {
	if len(p.Jobs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(p.Jobs))
	now, err := s.jobsInsert(ctx, p.Jobs, p, ids)
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), err)
	}
	jobs := make([]*store.Job, len(p.Jobs))
	for i, j := range p.Jobs {
		jobs[i] = j.GrabbedJob(ids[i], p.Node, fromMicros(now), fromMicros(now+j.RunAfter.Microseconds()), fromMicros(now+p.Lease.Microseconds()))
	}
	return jobs, nil
}

// jobsNextDueSQL tells, for each queue of a JSON array, how many
// microseconds from the time given (?2) its earliest waiting job is due
// and its earliest grab or lease runs out: the first subquery reads one
// entry of jobs_list (queue_name, state, next_try, id), however many jobs
// wait; the second the queue's grabs and leases.
const jobsNextDueSQL = `/* rowq:jobs.next_due */ SELECT name, w - ?2, g - ?2 FROM (
	SELECT q.value AS name,
		(SELECT next_try FROM jobs WHERE queue_name = q.value AND state = 'waiting' ORDER BY next_try LIMIT 1) AS w,
		(SELECT MIN(grabbed_until) FROM jobs WHERE queue_name = q.value AND state IN ('grabbed', 'leased')) AS g
	FROM json_each(?1) AS q)
	WHERE w IS NOT NULL OR g IS NOT NULL`

// jobsExpiredSQL names the queues of a JSON array that hold a grab or a
// lease expired by the time given (grabExpired; ?2 is that time); a
// queue's grabs are its deliveries in flight, few, and its leases its
// accepted jobs.
const jobsExpiredSQL = `/* rowq:jobs.expired */ SELECT q.value FROM json_each(?) AS q
	WHERE EXISTS (SELECT 1 FROM jobs WHERE queue_name = q.value AND state = 'grabbed' AND ` + grabExpired + `)
		OR EXISTS (SELECT 1 FROM jobs WHERE queue_name = q.value AND state = 'leased' AND grabbed_until < ?2)`

// JobsNextDue tells when each of queues next needs its leader. It reads
// on a reader connection, so it does not wait for the single writer.
func (s *Store) JobsNextDue(ctx context.Context, queues []string) ([]store.QueueDue, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(queues)
	if err != nil {
		return nil, err
	}
	due, err := sqldb.QueryAll(ctx, s.r, sqldb.ScanQueueDue, jobsNextDueSQL, string(list), s.micros())
	if err != nil {
		return nil, fmt.Errorf("look when %d queues are next due: %w", len(queues), mapErr(err))
	}
	return due, nil
}

// JobsExpired returns those of queues that hold an expired grab, reading
// as JobsNextDue does.
func (s *Store) JobsExpired(ctx context.Context, queues []string) ([]string, error) {
	expired, err := s.queueNames(ctx, jobsExpiredSQL, queues)
	if err != nil {
		return nil, fmt.Errorf("look for expired grabs in %d queues: %w", len(queues), err)
	}
	return expired, nil
}

// queueNames runs query with the queues (a JSON array) and now, on a
// reader connection, and returns the names it selects.
func (s *Store) queueNames(ctx context.Context, query string, queues []string) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(queues)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, query, string(list), s.micros())
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, mapErr(err)
		}
		names = append(names, q)
	}
	return names, mapErr(rows.Err())
}
