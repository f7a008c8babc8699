package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const jobCols = "id, queue_name, category, url, payload, state, created_at, next_try, " +
	"timeout, max_retries, retry_delay, fail_count, grabbed_by, grabbed_until, " +
	"priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, grabs, progress, progress_message, traceparent, tracestate, deferrals, " +
	"concurrency_key, concurrency_limit, ordered, flow"

// scanJob scans the jobCols of one row, then extra columns into extra.
func scanJob(sc sqldb.Scanner, extra ...any) (*store.Job, error) {
	var (
		j       store.Job
		payload []byte
		by      sql.NullString
		until   sql.NullTime
		key     sql.NullString
		prog    sql.NullFloat64
		pmsg    sql.NullString
		tp, ts  sql.NullString
		ckey    sql.NullString
	)
	dest := append([]any{&j.ID, &j.Queue, &j.Category, &j.URL, &payload, &j.State, &j.CreatedAt, &j.NextTry,
		&j.Timeout, &j.MaxRetries, &j.RetryDelay, &j.FailCount, &by, &until,
		&j.Priority, &key, &j.RetryBackoff, &j.RetryDelayMax, &j.RetryJitter, &j.Grabs, &prog, &pmsg, &tp, &ts, &j.Deferrals,
		&ckey, &j.ConcurrencyLimit, &j.Ordered, &j.Flow}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	j.Payload = payload // nil when NULL
	j.UniqueKey = key.String
	j.ConcurrencyKey = ckey.String
	if prog.Valid {
		j.Progress = &prog.Float64
	}
	j.ProgressMessage = pmsg.String
	j.Trace = store.Trace{Parent: tp.String, State: ts.String}
	// grabbed_by and grabbed_until mean something only while the job is
	// grabbed or leased (migration 0701).
	if j.State != store.StateWaiting && j.State != store.StateBlocked {
		j.GrabbedBy = by.String
		if until.Valid {
			j.GrabbedTil = &until.Time
		}
	}
	return &j, nil
}

// Limits of one INSERT statement; a larger batch is split into several
// statements in one transaction. The byte bound stays well below the
// servers' default max_allowed_packet (16 MiB, 64 MiB on MySQL 8).
const (
	insertMaxRows  = 1000
	insertMaxBytes = 4 << 20
)

// JobsInsert stores the jobs with multi-row INSERTs (one for a batch of
// usual size) and returns their ids in the order given.
func (s *Store) JobsInsert(ctx context.Context, jobs []*store.JobInsertParams) ([]int64, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	ids, err := s.jobsInsert(ctx, jobs)
	if err != nil {
		return nil, fmt.Errorf("insert %d jobs: %w", len(jobs), mapErr(err))
	}
	return ids, nil
}

// jobsInsert inserts jobs waiting, with one INSERT per chunk.
func (s *Store) jobsInsert(ctx context.Context, jobs []*store.JobInsertParams) ([]int64, error) {
	info, err := s.server(ctx)
	if err != nil {
		return nil, err
	}
	chunks := chunkInserts(jobs)
	var ids []int64
	err = retry(ctx, func() error {
		ids = ids[:0]
		if len(chunks) == 1 && !anyOrdered(jobs) && !info.galera {
			return insertChunk(ctx, s.db, chunks[0], info, &ids)
		}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			for _, c := range chunks {
				if err := insertChunk(ctx, tx, c, info, &ids); err != nil {
					return err
				}
			}
			return nil
		})
	})
	return ids, err
}

// chunkInserts splits jobs into runs that fit one INSERT statement.
func chunkInserts(jobs []*store.JobInsertParams) [][]*store.JobInsertParams {
	var chunks [][]*store.JobInsertParams
	start, size := 0, 0
	for i, j := range jobs {
		n := len(j.URL) + len(j.Payload) + len(j.Trace.State) + 255 // 255: the other columns, a traceparent among them
		if i > start && (i-start == insertMaxRows || size+n > insertMaxBytes) {
			chunks = append(chunks, jobs[start:i])
			start, size = i, 0
		}
		size += n
	}
	return append(chunks, jobs[start:])
}

// insertChunk inserts jobs with one multi-row INSERT and appends their ids.
// On MariaDB the INSERT returns them (RETURNING id). On MySQL they are
// computed: a multi-row INSERT … VALUES is a "simple insert", to which InnoDB
// gives consecutive ids (in steps of @@auto_increment_increment) in every
// innodb_autoinc_lock_mode, starting at LAST_INSERT_ID(). Galera changes that
// step when a member leaves or joins, and a cached step then answers wrong
// ids, so the arithmetic is never used on MariaDB.
// Its ordered jobs are listed in ordered_jobs (insertOrdered): db must
// then be a transaction, as it must on Galera (see queryInsert).
func insertChunk(ctx context.Context, db sqldb.DBTX, jobs []*store.JobInsertParams, info serverInfo, ids *[]int64) error {
	q, args := insertSQL(jobs, nil, nil)
	from := len(*ids)
	var err error
	if info.returning {
		err = queryInsert(ctx, db, q+" RETURNING id", args, len(jobs), func(rows *sql.Rows) error {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			*ids = append(*ids, id)
			return nil
		})
	} else {
		err = execInsert(ctx, db, q, args, len(jobs), info.step, ids)
	}
	if err != nil {
		return err
	}
	return insertOrdered(ctx, db, jobs, (*ids)[from:])
}

// queryInsert runs the INSERT … RETURNING q of n rows and scans each row it
// returns. Galera re-runs an autocommit statement that lost a certification
// conflict, and then sends the RETURNING rows of both runs (the first run's
// rows were rolled back): on Galera its callers run q in a transaction,
// where a conflict fails with 1213 instead and the store's retry runs the
// whole transaction again. A count other than n is an error all the same.
func queryInsert(ctx context.Context, db sqldb.DBTX, q string, args []any, n int, scan func(*sql.Rows) error) error {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	got := 0
	for ; rows.Next(); got++ {
		if got >= n {
			return fmt.Errorf("inserted more rows than %d", n)
		}
		if err := scan(rows); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if got != n {
		return fmt.Errorf("inserted %d rows, want %d", got, n)
	}
	return nil
}

// execInsert runs the INSERT q of n rows and appends their ids.
func execInsert(ctx context.Context, db sqldb.DBTX, q string, args []any, n int, step int64, ids *[]int64) error {
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return err
	}
	first, err := res.LastInsertId()
	if err != nil {
		return err
	}
	rows, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if rows != int64(n) {
		return fmt.Errorf("inserted %d rows, want %d", rows, n)
	}
	for i := range n {
		*ids = append(*ids, first+int64(i)*step)
	}
	return nil
}

// insertSQL is the multi-row INSERT of jobs and its arguments: waiting
// jobs due at NOW(6) + RunAfter, or, with a holder, jobs grabbed by
// hold.Node until NOW(6) + hold.Lease (local hand-off). With at, the
// statement takes *at for NOW(6).
func insertSQL(jobs []*store.JobInsertParams, hold *store.JobsInsertGrabbedParams, at *time.Time) (string, []any) {
	return insertRowsSQL(jobs, hold, at, nil)
}

// insertCols are the columns insertRowsSQL writes, but flow.
const insertCols = `/* rowq:jobs.insert */ INSERT INTO jobs
		(queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count,
		priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, traceparent, tracestate, grabbed_by, grabbed_until, grabs,
		concurrency_key, concurrency_limit, ordered`

// insertRowsSQL is insertSQL, or, with flows (one for each of jobs), the
// INSERT of jobs with a flow (JobsInsertFlow): each waiting or blocked,
// with its flow column.
func insertRowsSQL(jobs []*store.JobInsertParams, hold *store.JobsInsertGrabbedParams, at *time.Time, flows []flowRow) (string, []any) {
	now := "NOW(6)"
	if at != nil {
		now = "CAST(? AS DATETIME(6))"
	}
	var q strings.Builder
	q.WriteString(insertCols)
	row := "(?, ?, ?, ?, 'waiting', NOW(6), NOW(6) + INTERVAL ? MICROSECOND, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, '', NOW(6), 0, ?, ?, ?)"
	switch {
	case flows != nil:
		q.WriteString(", flow)\n\t\tVALUES ")
		row = "(?, ?, ?, ?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, '', NOW(6), 0, ?, ?, ?, ?)"
	case hold != nil:
		q.WriteString(")\n\t\tVALUES ")
		row = "(?, ?, ?, ?, 'grabbed', " + now + ", " + now + " + INTERVAL ? MICROSECOND, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?, " + now + " + INTERVAL ? MICROSECOND, 1, ?, ?, ?)"
	default:
		q.WriteString(")\n\t\tVALUES ")
	}
	args := make([]any, 0, 23*len(jobs))
	for i, j := range jobs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(row)
		// The driver sends a nil json.RawMessage as NULL.
		args = append(args, j.Queue, j.Category, j.URL, j.Payload)
		if flows != nil {
			args = append(args, flows[i].state())
		}
		if at != nil {
			args = append(args, *at, *at)
		}
		args = append(args, j.RunAfter.Microseconds(), j.Timeout, j.MaxRetries, j.RetryDelay)
		args = append(args, optionArgs(&j.JobOptions)...)
		args = append(args, sqldb.NullString(j.Trace.Parent), sqldb.NullString(j.Trace.State))
		if hold != nil {
			args = append(args, hold.Node)
			if at != nil {
				args = append(args, *at)
			}
			args = append(args, hold.Lease.Microseconds())
		}
		args = append(args, keyArgs(&j.JobOptions)...)
		if flows != nil {
			args = append(args, flows[i].flow)
		}
	}
	return q.String(), args
}

// grabSQL selects the jobs to grab, locking them and skipping those another
// grab holds, in the order of the jobs_fetch index (queue_name, state,
// priority DESC, next_try, id), which it walks without a filesort. The last column is the
// grab's expiry, computed from the same NOW(6). Arguments: lease in
// microseconds, queue, limit.
const grabSQL = `/* rowq:jobs.grab */ SELECT ` + jobCols + `, NOW(6) + INTERVAL ? MICROSECOND
	FROM jobs FORCE INDEX (jobs_fetch)
	WHERE queue_name = ? AND state = 'waiting' AND next_try <= NOW(6)` + grabKeysSQL + `
	ORDER BY priority DESC, next_try, id
	LIMIT ?
	FOR UPDATE SKIP LOCKED`

// grabKeysSQL marks where grabSQL takes the condition that leaves out the
// jobs of keys the leader holds back enough of (grabKeys).
const grabKeysSQL = "/* keys */"

// grabKeys returns grabSQL for p, with its keys' condition, and the
// condition's arguments.
func grabKeys(p *store.JobsGrabParams) (string, []any) {
	switch {
	case p.NoKeys:
		return strings.Replace(grabSQL, grabKeysSQL, " AND concurrency_key IS NULL", 1), nil
	case len(p.SkipKeys) > 0:
		args := sqldb.StringArgs(p.SkipKeys)
		return strings.Replace(grabSQL, grabKeysSQL, " AND (concurrency_key IS NULL OR concurrency_key NOT IN ("+sqldb.Placeholders(len(args))+"))", 1), args
	}
	return grabSQL, nil
}

// JobsGrab marks up to p.Limit due waiting jobs of p.Queue as grabbed by
// p.Node until NOW(6) + p.Lease, in one short transaction, and returns them
// in (priority DESC, next_try, id) order.
//
// The UPDATE keeps a row only while it is still waiting (grabUpdateSQL), and
// a grab whose UPDATE changed fewer rows than its SELECT locked hands out
// nothing: it rolls back and runs again (errGrabRaced). On one server the
// row locks make that impossible; on Galera, whose members lock only their
// own rows and certify commits optimistically, a row another member's grab
// committed can reach this member between the SELECT and the UPDATE. Only
// the rows it changed could be handed out instead, but MariaDB's UPDATE
// does not say which rows those are (no UPDATE … RETURNING).
func (s *Store) JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	info, err := s.server(ctx)
	if err != nil {
		return nil, fmt.Errorf("grab jobs from queue %q: %w", p.Queue, mapErr(err))
	}
	var jobs []*store.Job
	err = retry(ctx, func() error {
		jobs = nil
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var until time.Time
			var err error
			jobs, err = grabLocked(ctx, tx, info, p, &until)
			if err != nil || len(jobs) == 0 {
				return err
			}
			state := store.GrabState(p)
			args := make([]any, 0, 3+len(jobs))
			args = append(args, state, p.Node, until)
			for _, j := range jobs {
				til := until
				j.State, j.GrabbedBy, j.GrabbedTil = state, p.Node, &til
				j.Grabs++
				args = append(args, j.ID)
			}
			n, err := sqldb.Affected(tx.ExecContext(ctx, grabUpdateSQL(len(jobs)), args...))
			if err == nil && n != int64(len(jobs)) {
				err = errGrabRaced
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("grab jobs from queue %q: %w", p.Queue, mapErr(err))
	}
	return jobs, nil
}

// errGrabRaced fails a grab whose UPDATE changed fewer rows than its SELECT
// locked: another member's grab took some of them (see JobsGrab). It is
// retryable.
var errGrabRaced = errors.New("jobs locked by the grab were taken by another grab")

// grabLocked runs grabSQL in tx and sets until to the grab's expiry.
func grabLocked(ctx context.Context, tx *sql.Tx, info serverInfo, p *store.JobsGrabParams, until *time.Time) ([]*store.Job, error) {
	q, keys := grabKeys(p)
	args := append(append([]any{p.Lease.Microseconds(), p.Queue}, keys...), p.Limit)
	rows, err := tx.QueryContext(ctx, syncWaitSQL(info, q), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var jobs []*store.Job
	for rows.Next() {
		j, err := scanJob(rows, until)
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, rows.Err()
}

// JobsExtend moves grabbed_until to NOW(6) + p.Lease for every job of
// p.Queue grabbed by p.Node, found without locking (findIDs) and written
// by primary key, and returns how many it moved.
func (s *Store) JobsExtend(ctx context.Context, p *store.JobsExtendParams) (int64, error) {
	ids, err := s.findIDs(ctx, extendFindSQL, p.Queue, p.Node)
	var n int64
	if err == nil {
		n, err = s.execHeld(ctx, heldSQL(extendSQL, len(ids)), []any{p.Lease.Microseconds()}, ids, p.Node, store.StateGrabbed)
	}
	if err != nil {
		return 0, fmt.Errorf("extend jobs of queue %q grabbed by node %q: %w", p.Queue, p.Node, err)
	}
	return n, nil
}

// JobsComplete deletes the given jobs where they are still grabbed by
// p.Node, then the ordered_jobs rows of p.Ordered, and returns how many
// jobs it deleted. The jobs with a flow are left by the DELETE (flow = 0)
// and ended through completeFlow.
func (s *Store) JobsComplete(ctx context.Context, p *store.JobsCompleteParams) (int64, error) {
	var (
		n    int64
		done store.FlowDone
		err  error
	)
	if len(p.Keep) > 0 {
		n, done, err = s.completeKept(ctx, p)
	} else {
		n, done, err = s.completePlain(ctx, p)
	}
	if err == nil && len(p.Ordered) > 0 {
		// After the jobs, not in their transaction: a row left behind by
		// a crash in between is looked past (JobsKeyHeads).
		err = retry(ctx, func() error { return forgetOrdered(ctx, s.db, p.Ordered...) })
	}
	if err != nil {
		return 0, fmt.Errorf("complete %d jobs of node %q: %w", len(p.IDs), p.Node, err)
	}
	s.FlowHook.Done(done)
	return n, nil
}

// completePlain is JobsComplete without history: one DELETE of the jobs
// without a flow, as ever, and, only when it left some of p.IDs (jobs with
// a flow, or no longer held), completeFlow in a transaction of its own. A
// call whose jobs all have a flow (p.Flow) skips the DELETE.
func (s *Store) completePlain(ctx context.Context, p *store.JobsCompleteParams) (int64, store.FlowDone, error) {
	var (
		n    int64
		done store.FlowDone
		err  error
	)
	if len(p.Flow) < len(p.IDs) {
		n, err = s.execHeld(ctx, completeHeldSQL(len(p.IDs)), nil, p.IDs, p.Node, store.StateGrabbed)
	}
	if err != nil || n >= int64(len(p.IDs)) {
		return n, done, err
	}
	var m int64
	err = retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			m, done, err = s.completeFlow(ctx, tx, p, nil)
			return err
		})
	})
	return n + m, done, mapErr(err)
}

// JobsRelease puts the given jobs, where still grabbed by p.Node, back to
// waiting, and returns how many it put back.
func (s *Store) JobsRelease(ctx context.Context, p *store.JobsReleaseParams) (int64, error) {
	state := store.HeldState(p.Leased)
	n, err := s.execHeld(ctx, heldSQL(releaseSQL, len(p.IDs)), nil, p.IDs, p.Node, state)
	if err != nil {
		return 0, fmt.Errorf("release %d jobs of node %q: %w", len(p.IDs), p.Node, err)
	}
	return n, nil
}

// The writes to the grabbed jobs name their index. The table of a queue that
// keeps up holds few rows, and on few rows the optimizer prefers a full scan
// to a primary key range for an id IN (…) list, or the first index that
// starts with queue_name to jobs_fetch; a full scan also walks every
// deleted row that purge has not removed yet. The EXPLAIN test checks each.
const (
	completeSQL = `/* rowq:jobs.complete */ DELETE jobs FROM jobs FORCE INDEX (PRIMARY)`
	releaseSQL  = `/* rowq:jobs.release */ UPDATE jobs FORCE INDEX (PRIMARY) SET state = 'waiting', grabbed_by = ''`
	// Extending and rescuing find the ids of their rows with a plain read
	// (findIDs) and write those rows by primary key. Arguments of the
	// finds: queue, node; queue.
	extendFindSQL = `/* rowq:jobs.extend */ SELECT id FROM jobs FORCE INDEX (jobs_fetch)
		WHERE queue_name = ? AND state = 'grabbed' AND grabbed_by = ?`
	extendSQL     = `/* rowq:jobs.extend */ UPDATE jobs FORCE INDEX (PRIMARY) SET grabbed_until = NOW(6) + INTERVAL ? MICROSECOND`
	rescueFindSQL = `/* rowq:jobs.rescue */ SELECT id FROM jobs FORCE INDEX (jobs_fetch)
		WHERE queue_name = ? AND state = 'grabbed' AND ` + grabExpired
	rescueSQL = `/* rowq:jobs.rescue */ UPDATE jobs FORCE INDEX (PRIMARY) SET state = 'waiting', grabbed_by = ''`
)

// rescueLockSQL locks those of n ids (found by rescueFindSQL) whose grab
// has still expired, skipping the rows another transaction holds.
func rescueLockSQL(n int) string {
	return `/* rowq:jobs.rescue */ SELECT id FROM jobs FORCE INDEX (PRIMARY)
		WHERE id IN (` + sqldb.Placeholders(n) + `) AND state = 'grabbed' AND ` + grabExpired + `
		FOR UPDATE SKIP LOCKED`
}

// byIDs completes set, an UPDATE without WHERE, for n ids.
func byIDs(set string, n int) string {
	return set + ` WHERE id IN (` + sqldb.Placeholders(n) + `)`
}

// findIDs returns the ids find selects of the queue's grabbed range of
// jobs_fetch. It is a plain read, which in READ COMMITTED reads the rows as
// last committed and waits for no lock. A statement that locked that range
// would wait for the rows of a node frozen half-way through a transaction
// (SIGSTOP, a stalled VM: its session, and so its locks, live on): the rows
// a frozen grab changed but did not commit sit in the range, and InnoDB
// reads past a locked row, in READ COMMITTED, only on a scan of the primary
// key. And a transaction that locked the range would, frozen half-way
// itself, hold every node's grabs of the queue: locks taken through
// jobs_fetch stay on the rows the rest of the condition then left out. The
// writes that follow go by primary key to the rows found, which are few: a
// queue's grabs are its deliveries in flight and its read-ahead.
func (s *Store) findIDs(ctx context.Context, find string, args ...any) ([]int64, error) {
	var ids []int64
	err := retry(ctx, func() (err error) {
		ids, err = sqldb.QueryAll(ctx, s.db, sqldb.ScanInt64, find, args...)
		return err
	})
	return ids, mapErr(err)
}

// idArgs turns ids into statement arguments after lead.
func idArgs(ids []int64, lead ...any) []any {
	args := append(make([]any, 0, len(lead)+len(ids)), lead...)
	for _, id := range ids {
		args = append(args, id)
	}
	return args
}

// grabExpired is the condition on a grabbed row of jobs that its grab has
// expired: its lease has passed, or its node has no registration (reaped
// or deleted). The node is looked up by primary key for each of the
// queue's grabs, which are few (its deliveries in flight); inside an OR the
// subquery is not turned into a join.
const grabExpired = `(jobs.grabbed_until < NOW(6) OR NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.id = jobs.grabbed_by))`

// grabUpdateSQL marks n jobs, selected by grabSQL, as grabbed (or leased,
// for a puller), those still waiting: an engine that ignores SKIP LOCKED
// (Galera across members) never has one job grabbed twice. Arguments:
// state, node, until, ids.
func grabUpdateSQL(n int) string {
	return `/* rowq:jobs.grab */ UPDATE jobs FORCE INDEX (PRIMARY) SET state = ?, grabbed_by = ?, grabbed_until = ?, grabs = grabs + 1
		WHERE id IN (` + sqldb.Placeholders(n) + `) AND state = 'waiting'`
}

// heldSQL completes stmt (completeSQL, releaseSQL or extendSQL) for n
// ids that a node still holds in a state (grabbed, or leased for a
// puller). Arguments: ids, state, node.
func heldSQL(stmt string, n int) string {
	return stmt + ` WHERE id IN (` + sqldb.Placeholders(n) + `) AND state = ? AND grabbed_by = ?`
}

// completeHeldSQL is JobsComplete's DELETE of n ids: heldSQL of
// completeSQL for the jobs without a flow.
func completeHeldSQL(n int) string { return heldSQL(completeSQL, n) + ` AND flow = 0` }

// execHeld runs stmt, a heldSQL for len(ids), with the arguments lead, on
// those of ids that node still holds in state and returns how many rows it
// changed.
func (s *Store) execHeld(ctx context.Context, stmt string, lead []any, ids []int64, node, state string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := append(idArgs(ids, lead...), state, node)
	stmt, err := s.causal(ctx, stmt)
	if err != nil {
		return 0, mapErr(err)
	}
	var n int64
	err = retry(ctx, func() (err error) {
		n, err = sqldb.Affected(s.db.ExecContext(ctx, stmt, args...))
		return err
	})
	return n, mapErr(err)
}

// JobRetry puts a job grabbed by p.Node back to waiting with fail_count + 1
// and next_try = NOW(6) + p.Delay, or returns store.ErrNotFound.
func (s *Store) JobRetry(ctx context.Context, p *store.JobRetryParams) error {
	var n int64
	q, err := s.causal(ctx, `/* rowq:jobs.retry */
			UPDATE jobs SET state = 'waiting', fail_count = fail_count + 1,
				next_try = NOW(6) + INTERVAL ? MICROSECOND, grabbed_by = ''
			WHERE id = ? AND state = 'grabbed' AND grabbed_by = ?`)
	if err == nil {
		err = retry(ctx, func() (err error) {
			n, err = sqldb.Affected(s.db.ExecContext(ctx, q, p.Delay.Microseconds(), p.ID, p.Node))
			return err
		})
	}
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("retry job %d of node %q: %w", p.ID, p.Node, mapErr(err))
	}
	return nil
}

// JobsDefer puts the jobs grabbed by p.Node back to waiting, each due at
// NOW(6) + its delay (a CASE on the id), written by primary key.
func (s *Store) JobsDefer(ctx context.Context, p *store.JobsDeferParams) (int64, error) {
	if len(p.Jobs) == 0 {
		return 0, nil
	}
	var q strings.Builder
	q.WriteString(`/* rowq:jobs.defer */ UPDATE jobs FORCE INDEX (PRIMARY) SET state = 'waiting', grabbed_by = '',
		deferrals = deferrals + ?, next_try = NOW(6) + INTERVAL (CASE id`)
	count := 0
	if p.Count {
		count = 1
	}
	args := make([]any, 0, 3*len(p.Jobs)+2)
	args = append(args, count)
	for _, j := range p.Jobs {
		q.WriteString(" WHEN ? THEN ?")
		args = append(args, j.ID, j.Delay.Microseconds())
	}
	q.WriteString(` END) MICROSECOND WHERE id IN (` + sqldb.Placeholders(len(p.Jobs)) + `) AND state = 'grabbed' AND grabbed_by = ?`)
	for _, j := range p.Jobs {
		args = append(args, j.ID)
	}
	args = append(args, p.Node)
	var n int64
	stmt, err := s.causal(ctx, q.String())
	if err == nil {
		err = retry(ctx, func() (err error) {
			n, err = sqldb.Affected(s.db.ExecContext(ctx, stmt, args...))
			return err
		})
	}
	if err != nil {
		return 0, fmt.Errorf("defer %d jobs of node %q: %w", len(p.Jobs), p.Node, mapErr(err))
	}
	return n, nil
}

// JobFail moves a job grabbed by p.Node to the failure log with
// fail_count + 1, in one short transaction, or returns store.ErrNotFound;
// a job with a flow has it applied there too (failed).
func (s *Store) JobFail(ctx context.Context, p *store.JobFailParams) (*store.FailedJob, error) {
	var (
		f    *store.FailedJob
		done store.FlowDone
	)
	q, err := s.causal(ctx, `/* rowq:jobs.fail */ SELECT `+jobCols+`, NOW(6)
		FROM jobs WHERE id = ? AND state = 'grabbed' AND grabbed_by = ? FOR UPDATE`)
	if err != nil {
		return nil, fmt.Errorf("fail job %d of node %q: %w", p.ID, p.Node, mapErr(err))
	}
	err = retry(ctx, func() error {
		done = store.FlowDone{}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var now time.Time
			j, err := scanJob(tx.QueryRowContext(ctx, q, p.ID, p.Node), &now)
			if err != nil {
				return err
			}
			f, err = moveToFailed(ctx, tx, j, now, p.Status, p.Code, p.Message)
			if err == nil && p.Keep {
				err = insertFinished(ctx, tx, store.FinishedOf(j, store.FinishedFailed, p.Message, nil, now))
			}
			if err == nil {
				done, err = s.endFlows(ctx, tx, store.FlowEnded{Job: j, Status: store.FinishedFailed, Message: p.Message})
			}
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("fail job %d of node %q: %w", p.ID, p.Node, mapErr(err))
	}
	s.FlowHook.Done(done)
	return f, nil
}

// moveToFailed inserts j into the failure log with fail_count + 1 and the
// result, failed at now, and deletes it from jobs, in tx.
func moveToFailed(ctx context.Context, tx *sql.Tx, j *store.Job, now time.Time, status string, code int, message string) (*store.FailedJob, error) {
	f := &store.FailedJob{
		JobID: j.ID, Queue: j.Queue, Category: j.Category, URL: j.URL, Payload: j.Payload,
		Status: status, Code: code, Message: message, FailCount: j.FailCount + 1,
		FailedAt: now, CreatedAt: j.CreatedAt,
		Timeout: j.Timeout, MaxRetries: j.MaxRetries, RetryDelay: j.RetryDelay, JobOptions: j.JobOptions,
	}
	f.UniqueKey = "" // the key frees when the job leaves the jobs table
	res, err := tx.ExecContext(ctx, `/* rowq:jobs.fail */ INSERT INTO failed_jobs
		(job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at,
		 timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, grabs,
		 concurrency_key, concurrency_limit, ordered)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		f.JobID, f.Queue, f.Category, f.URL, f.Payload, f.Status, f.Code, f.Message, f.FailCount, f.FailedAt, f.CreatedAt,
		f.Timeout, f.MaxRetries, f.RetryDelay, f.Priority, backoffOrFixed(f.RetryBackoff), f.RetryDelayMax, f.RetryJitter, j.Grabs,
		sqldb.NullString(f.ConcurrencyKey), f.ConcurrencyLimit, f.Ordered)
	if err != nil {
		return nil, err
	}
	if f.ID, err = res.LastInsertId(); err != nil {
		return nil, err
	}
	if _, err = tx.ExecContext(ctx, `/* rowq:jobs.fail */ DELETE FROM jobs WHERE id = ?`, j.ID); err != nil {
		return nil, err
	}
	if j.Ordered {
		err = forgetOrdered(ctx, tx, j.ID)
	}
	return f, err
}

// JobsRescue puts grabbed jobs of queue whose grab has expired
// (grabExpired) back to waiting, and returns how many. It finds them
// without locking (findIDs), then, in one short transaction, locks those
// still expired by primary key, skipping the rows another transaction
// holds, and writes them.
func (s *Store) JobsRescue(ctx context.Context, queue string) (int64, error) {
	ids, err := s.findIDs(ctx, rescueFindSQL, queue)
	var n int64
	if err == nil && len(ids) > 0 {
		err = retry(ctx, func() error {
			n = 0
			return s.inTx(ctx, func(tx *sql.Tx) error {
				locked, err := sqldb.QueryAll(ctx, tx, sqldb.ScanInt64, rescueLockSQL(len(ids)), idArgs(ids)...)
				if err != nil || len(locked) == 0 {
					return err
				}
				n, err = sqldb.Affected(tx.ExecContext(ctx, byIDs(rescueSQL, len(locked)), idArgs(locked)...))
				return err
			})
		})
		err = mapErr(err)
	}
	if err != nil {
		return 0, fmt.Errorf("rescue jobs of queue %q: %w", queue, err)
	}
	return n, nil
}

// JobGet returns one job of the queue, or store.ErrNotFound.
func (s *Store) JobGet(ctx context.Context, queue string, id int64) (*store.Job, error) {
	q, err := s.causal(ctx, `/* rowq:jobs.get */ SELECT `+jobCols+` FROM jobs WHERE id = ? AND queue_name = ?`)
	var j *store.Job
	if err == nil {
		j, err = scanJob(s.db.QueryRowContext(ctx, q, id, queue))
	}
	if err != nil {
		return nil, fmt.Errorf("get job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return j, nil
}

// optionArgs are the values of the columns priority, unique_key,
// retry_backoff, retry_delay_max and retry_jitter.
func optionArgs(e *store.JobOptions) []any {
	var key any // NULL: no key, and NULLs never collide in jobs_unique
	if e.UniqueKey != "" {
		key = e.UniqueKey
	}
	return []any{e.Priority, key, backoffOrFixed(e.RetryBackoff), e.RetryDelayMax, e.RetryJitter}
}

// keyArgs are the values of the columns concurrency_key, concurrency_limit
// and ordered.
func keyArgs(e *store.JobOptions) []any {
	return []any{sqldb.NullString(e.ConcurrencyKey), e.ConcurrencyLimit, e.Ordered}
}

func backoffOrFixed(b string) string {
	if b == "" {
		return store.BackoffFixed
	}
	return b
}

// uniqueAttempts bounds how often a push retries a key whose holder left
// between the INSERT that collided and the SELECT that looked for it.
const uniqueAttempts = 10

// JobsPush stores the jobs in one transaction: those without a unique key
// with multi-row INSERTs, the others one by one so that a collision
// neither fails the batch nor breaks the id arithmetic of the multi-row
// INSERT. A colliding INSERT waits on the row lock of a concurrent holder
// and fails once it commits; the SELECT that follows (READ COMMITTED: a
// fresh snapshot) then sees the holder.
func (s *Store) JobsPush(ctx context.Context, jobs []*store.JobInsertParams) ([]store.JobPushed, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	info, err := s.server(ctx)
	if err != nil {
		return nil, fmt.Errorf("push %d jobs: %w", len(jobs), mapErr(err))
	}
	var out []store.JobPushed
	err = retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			out, err = pushTx(ctx, tx, jobs, info)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("push %d jobs: %w", len(jobs), mapErr(err))
	}
	return out, nil
}

// pushTx is JobsPush inside the transaction tx; the outbox moves its
// rows with it.
func pushTx(ctx context.Context, tx *sql.Tx, jobs []*store.JobInsertParams, info serverInfo) ([]store.JobPushed, error) {
	out := make([]store.JobPushed, len(jobs))
	var (
		plain []*store.JobInsertParams
		at    []int
	)
	for i, j := range jobs {
		if j.UniqueKey == "" {
			plain, at = append(plain, j), append(at, i)
		}
	}
	if len(plain) > 0 {
		var ids []int64
		for _, c := range chunkInserts(plain) {
			if err := insertChunk(ctx, tx, c, info, &ids); err != nil {
				return nil, err
			}
		}
		for k, id := range ids {
			out[at[k]].ID = id
		}
	}
	for _, i := range store.KeyedInOrder(jobs) {
		var err error
		if out[i], err = pushUnique(ctx, tx, jobs[i], info); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pushUnique inserts a job with a unique key, or finds the pending job
// that holds the key.
func pushUnique(ctx context.Context, tx *sql.Tx, j *store.JobInsertParams, info serverInfo) (store.JobPushed, error) {
	for range uniqueAttempts {
		var ids []int64
		err := insertChunk(ctx, tx, []*store.JobInsertParams{j}, info, &ids)
		if err == nil {
			return store.JobPushed{ID: ids[0]}, nil
		}
		var me *mysql.MySQLError
		if !errors.As(err, &me) || me.Number != errDupEntry {
			return store.JobPushed{}, err
		}
		held, err := scanJob(tx.QueryRowContext(ctx, `/* rowq:jobs.push_unique */ SELECT `+jobCols+`
			FROM jobs WHERE queue_name = ? AND unique_key = ?`, j.Queue, j.UniqueKey))
		if errors.Is(err, sql.ErrNoRows) {
			continue // the holder finished meanwhile: the key is free again
		}
		if err != nil {
			return store.JobPushed{}, err
		}
		return store.JobPushed{ID: held.ID, Existing: true, Job: held}, nil
	}
	return store.JobPushed{}, fmt.Errorf("unique key %q of queue %q: taken and freed %d times in a row", j.UniqueKey, j.Queue, uniqueAttempts)
}

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// NOW(6) + p.Lease, as JobsInsert stores waiting jobs, and returns them in
// order. On MariaDB the INSERT returns the ids and times it stored
// (RETURNING), in the one round trip a waiting job's INSERT takes. MySQL
// has no RETURNING: there the database's clock is read first and the
// INSERT stores that time instead of NOW(6), so the rows are known from the
// INSERT's arguments and LAST_INSERT_ID(), at one round trip more.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]*store.Job, error) {
	if len(p.Jobs) == 0 {
		return nil, nil
	}
	info, err := s.server(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), mapErr(err))
	}
	chunks := chunkInserts(p.Jobs)
	var jobs []*store.Job
	err = retry(ctx, func() error {
		jobs = jobs[:0]
		if len(chunks) == 1 && !anyOrdered(p.Jobs) && !info.galera {
			return s.insertGrabbedChunk(ctx, s.db, chunks[0], p, info, &jobs)
		}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			for _, c := range chunks {
				if err := s.insertGrabbedChunk(ctx, tx, c, p, info, &jobs); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), mapErr(err))
	}
	return jobs, nil
}

// insertGrabbedChunk inserts jobs, a chunk of p.Jobs, grabbed by p.Node,
// with one multi-row INSERT, and appends them as stored. Its ordered jobs
// are listed in ordered_jobs (insertOrdered): db must then be a
// transaction.
func (s *Store) insertGrabbedChunk(ctx context.Context, db sqldb.DBTX, jobs []*store.JobInsertParams, p *store.JobsInsertGrabbedParams, info serverInfo, out *[]*store.Job) error {
	from := len(*out)
	if err := s.insertGrabbedRows(ctx, db, jobs, p, info, out); err != nil {
		return err
	}
	ids := make([]int64, len(jobs))
	for i, j := range (*out)[from:] {
		ids[i] = j.ID
	}
	return insertOrdered(ctx, db, jobs, ids)
}

// insertGrabbedRows is insertGrabbedChunk's INSERT.
func (s *Store) insertGrabbedRows(ctx context.Context, db sqldb.DBTX, jobs []*store.JobInsertParams, p *store.JobsInsertGrabbedParams, info serverInfo, out *[]*store.Job) error {
	if info.returning {
		q, args := insertSQL(jobs, p, nil)
		i := 0
		// next_try and grabbed_until are created_at plus what the row
		// added to NOW(6), which is one value within a statement: they
		// are computed (grabbedAt) rather than read back and parsed.
		return queryInsert(ctx, db, q+" RETURNING id, created_at", args, len(jobs), func(rows *sql.Rows) error {
			var (
				id  int64
				now time.Time
			)
			if err := rows.Scan(&id, &now); err != nil {
				return err
			}
			*out = append(*out, grabbedAt(jobs[i], id, p, now))
			i++
			return nil
		})
	}
	var at time.Time
	if err := db.QueryRowContext(ctx, "/* rowq:jobs.insert */ SELECT NOW(6)").Scan(&at); err != nil {
		return err
	}
	q, args := insertSQL(jobs, p, &at)
	var ids []int64
	if err := execInsert(ctx, db, q, args, len(jobs), info.step, &ids); err != nil {
		return err
	}
	for i, j := range jobs {
		*out = append(*out, grabbedAt(j, ids[i], p, at))
	}
	return nil
}

// grabbedAt is job j, stored with id by an insert grabbed by p.Node whose
// NOW(6) was at: its next_try and grabbed_until are what the row added
// to at.
func grabbedAt(j *store.JobInsertParams, id int64, p *store.JobsInsertGrabbedParams, at time.Time) *store.Job {
	return j.GrabbedJob(id, p.Node, at, at.Add(micros(j.RunAfter)), at.Add(micros(p.Lease)))
}

// micros is d in whole microseconds, as INTERVAL … MICROSECOND adds it.
func micros(d time.Duration) time.Duration { return time.Duration(d.Microseconds()) * time.Microsecond }

// jobsNextDueSQL tells, for each of n queues, how many microseconds from
// now its earliest waiting job is due and its earliest grab or lease runs
// out. The first subquery walks jobs_list (queue_name, next_try, id) from
// its start to the first waiting job, past the grabbed ones (the
// deliveries in flight, few), however many jobs wait; the second reads the
// queue's grabs and leases in jobs_fetch (queue_name, state, …). Blocked
// jobs (flows) are walked past too, and they may be many: a look at a
// queue with 10,000 blocked jobs due took 7 ms instead of 0.5 (MariaDB
// 10.11, 2 cores), linear in their number.
func jobsNextDueSQL(n int) string {
	return `/* rowq:jobs.next_due */ SELECT name, TIMESTAMPDIFF(MICROSECOND, NOW(6), w), TIMESTAMPDIFF(MICROSECOND, NOW(6), g) FROM (
		SELECT q.name,
			(SELECT j.next_try FROM jobs j FORCE INDEX (jobs_list)
				WHERE j.queue_name = q.name AND j.state = 'waiting' ORDER BY j.next_try LIMIT 1) AS w,
			(SELECT MIN(j.grabbed_until) FROM jobs j FORCE INDEX (jobs_fetch)
				WHERE j.queue_name = q.name AND j.state IN ('grabbed', 'leased')) AS g
		FROM queues q WHERE q.name IN (` + sqldb.Placeholders(n) + `)) t
		WHERE w IS NOT NULL OR g IS NOT NULL`
}

// jobsExpiredSQL names the queues, of n given (twice: once for each half
// of the UNION), that hold an expired grab (grabExpired) or an expired
// lease. A queue's grabs, its deliveries in flight, are few: its range of
// jobs_fetch (queue_name, state, …), as are its leases (the accepted jobs:
// another range). Each half keeps its own plan; one OR of two EXISTS made
// the server scan nodes whole instead of probing it by key.
func jobsExpiredSQL(n int) string {
	return `/* rowq:jobs.expired */ SELECT q.name FROM queues q
		WHERE q.name IN (` + sqldb.Placeholders(n) + `) AND EXISTS (
			SELECT 1 FROM jobs FORCE INDEX (jobs_fetch)
			WHERE jobs.queue_name = q.name AND jobs.state = 'grabbed' AND ` + grabExpired + `)
		UNION SELECT q.name FROM queues q
		WHERE q.name IN (` + sqldb.Placeholders(n) + `) AND EXISTS (
			SELECT 1 FROM jobs FORCE INDEX (jobs_fetch)
			WHERE jobs.queue_name = q.name AND jobs.state = 'leased' AND jobs.grabbed_until < NOW(6))`
}

// JobsNextDue tells when each of queues next needs its leader.
func (s *Store) JobsNextDue(ctx context.Context, queues []string) ([]store.QueueDue, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	var due []store.QueueDue
	err := retry(ctx, func() error {
		var err error
		due, err = sqldb.QueryAll(ctx, s.db, sqldb.ScanQueueDue, jobsNextDueSQL(len(queues)), sqldb.StringArgs(queues)...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("look when %d queues are next due: %w", len(queues), mapErr(err))
	}
	return due, nil
}

// JobsExpired returns those of queues that hold an expired grab or lease.
func (s *Store) JobsExpired(ctx context.Context, queues []string) ([]string, error) {
	expired, err := s.queueNames(ctx, func(n int) string { return jobsExpiredSQL(n / 2) }, slices.Concat(queues, queues))
	if err != nil {
		return nil, fmt.Errorf("look for expired grabs in %d queues: %w", len(queues), err)
	}
	return expired, nil
}

// queueNames runs query(len(queues)) with the queues as arguments and
// returns the names it selects.
func (s *Store) queueNames(ctx context.Context, query func(n int) string, queues []string) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	args := sqldb.StringArgs(queues)
	var names []string
	err := retry(ctx, func() error {
		names = names[:0]
		rows, err := s.db.QueryContext(ctx, query(len(queues)), args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var q string
			if err := rows.Scan(&q); err != nil {
				return err
			}
			names = append(names, q)
		}
		return rows.Err()
	})
	return names, mapErr(err)
}
