package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const jobCols = `id, queue_name, category, url, payload, state, created_at, next_try,
	timeout, max_retries, retry_delay, fail_count, grabbed_by, grabbed_until,
	priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, grabs, progress, progress_message, traceparent, tracestate, deferrals,
	concurrency_key, concurrency_limit, ordered, flow`

func scanJob(row pgx.CollectableRow) (*store.Job, error) { return scanJobAnd(row) }

// scanJobAnd scans jobCols, then the row's further columns into more.
func scanJobAnd(row pgx.CollectableRow, more ...any) (*store.Job, error) {
	var (
		j         store.Job
		payload   []byte
		grabbedBy *string
		key       *string
		pmsg      *string
		tp, ts    *string
		ckey      *string
	)
	err := row.Scan(append([]any{&j.ID, &j.Queue, &j.Category, &j.URL, &payload, &j.State, &j.CreatedAt, &j.NextTry,
		&j.Timeout, &j.MaxRetries, &j.RetryDelay, &j.FailCount, &grabbedBy, &j.GrabbedTil,
		&j.Priority, &key, &j.RetryBackoff, &j.RetryDelayMax, &j.RetryJitter, &j.Grabs, &j.Progress, &pmsg, &tp, &ts, &j.Deferrals,
		&ckey, &j.ConcurrencyLimit, &j.Ordered, &j.Flow}, more...)...)
	if tp != nil {
		j.Trace.Parent = *tp
	}
	if ckey != nil {
		j.ConcurrencyKey = *ckey
	}
	if ts != nil {
		j.Trace.State = *ts
	}
	if pmsg != nil {
		j.ProgressMessage = *pmsg
	}
	if key != nil {
		j.UniqueKey = *key
	}
	if payload != nil {
		j.Payload = payload
	}
	if grabbedBy != nil {
		j.GrabbedBy = *grabbedBy
	}
	j.CreatedAt, j.NextTry = j.CreatedAt.UTC(), j.NextTry.UTC()
	if j.GrabbedTil != nil {
		t := j.GrabbedTil.UTC()
		j.GrabbedTil = &t
	}
	return &j, err
}

// JobsInsert stores the jobs in one statement and returns their ids in the
// order given.
func (s *Store) JobsInsert(ctx context.Context, jobs []*store.JobInsertParams) ([]int64, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	ids, err := queryAll(ctx, s, pgx.RowTo[int64], insertSQL, insertArgs(jobs)...)
	if err != nil {
		return nil, fmt.Errorf("insert %d jobs: %w", len(jobs), mapErr(err))
	}
	return ids, nil
}

// insertSQL inserts rows given as arrays (see insertArgs) and returns their
// ids in the order given: the set-returning functions of a select list run
// in lockstep, so the rows are inserted, numbered and returned in array
// order. (ROWS FROM (unnest(…), …) WITH ORDINALITY … ORDER BY n said the
// same with a tuplestore and a sort; their memory took the statement past
// glibc's 128 KiB trim threshold, so every insert grew and shrank the
// backend's heap, a quarter of PostgreSQL's CPU per job: docs/benchmarks-log.md, 2026-11-22, d946b6e.)
const insertSQL = `/* rowq:jobs.insert */
	INSERT INTO jobs (` + insertCols + `, state)
	SELECT ` + insertValues + `, 'waiting'
	RETURNING id`

// insertGrabbedSQL is insertSQL for jobs already grabbed by $19 until
// now() + $20 seconds (local hand-off).
const insertGrabbedSQL = `/* rowq:jobs.insert_grabbed */
	INSERT INTO jobs (` + insertCols + `, state, grabbed_by, grabbed_until, grabs)
	SELECT ` + insertValues + `, 'grabbed', $19::text, now() + make_interval(secs => $20::float8), 1
	RETURNING id, created_at, next_try, grabbed_until`

const (
	insertCols = `queue_name, category, url, payload, created_at, next_try, timeout, max_retries, retry_delay,
		priority, unique_key, retry_backoff, retry_delay_max, retry_jitter, traceparent, tracestate,
		concurrency_key, concurrency_limit, ordered`
	insertValues = `unnest($1::text[]), unnest($2::text[]), unnest($3::text[]), unnest($4::text[]),
		now(), now() + make_interval(secs => unnest($5::float8[])), unnest($6::int[]), unnest($7::int[]), unnest($8::int[]),
		unnest($9::int[]), unnest($10::text[]), unnest($11::text[]), unnest($12::int[]), unnest($13::float8[]),
		unnest($14::text[]), unnest($15::text[]),
		unnest($16::text[]), unnest($17::int[]), unnest($18::bool[])`
)

// insertArgs turns jobs into the arrays insertSQL takes.
func insertArgs(jobs []*store.JobInsertParams) []any {
	var (
		queues     = make([]string, len(jobs))
		categories = make([]string, len(jobs))
		urls       = make([]string, len(jobs))
		payloads   = make([]*string, len(jobs))
		runAfters  = make([]float64, len(jobs))
		timeouts   = make([]int, len(jobs))
		maxRetries = make([]int, len(jobs))
		delays     = make([]int, len(jobs))
		priorities = make([]int, len(jobs))
		keys       = make([]*string, len(jobs))
		backoffs   = make([]string, len(jobs))
		delayMaxes = make([]int, len(jobs))
		jitters    = make([]float64, len(jobs))
		parents    = make([]*string, len(jobs))
		states     = make([]*string, len(jobs))
		ckeys      = make([]*string, len(jobs))
		climits    = make([]int, len(jobs))
		ordered    = make([]bool, len(jobs))
	)
	for i, j := range jobs {
		queues[i], categories[i], urls[i] = j.Queue, j.Category, j.URL
		if len(j.Payload) > 0 {
			p := string(j.Payload)
			payloads[i] = &p
		}
		runAfters[i] = j.RunAfter.Seconds()
		timeouts[i], maxRetries[i], delays[i] = j.Timeout, j.MaxRetries, j.RetryDelay
		priorities[i], backoffs[i], delayMaxes[i], jitters[i] = j.Priority, backoffOrFixed(j.RetryBackoff), j.RetryDelayMax, j.RetryJitter
		if j.UniqueKey != "" {
			k := j.UniqueKey
			keys[i] = &k
		}
		parents[i], states[i] = nullText(j.Trace.Parent), nullText(j.Trace.State)
		ckeys[i], climits[i], ordered[i] = nullText(j.ConcurrencyKey), j.ConcurrencyLimit, j.Ordered
	}
	return []any{queues, categories, urls, payloads, runAfters, timeouts, maxRetries, delays,
		priorities, keys, backoffs, delayMaxes, jitters, parents, states, ckeys, climits, ordered}
}

// nullText is s as an element of a text[] argument: NULL when "".
func nullText(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// grabSelectSQL finds the due jobs of a queue, highest priority then oldest
// first, walking the
// jobs_fetch index without a sort and skipping rows another grab holds.
const grabSelectSQL = `/* rowq:jobs.grab.select */
	SELECT id FROM jobs
	WHERE queue_name = $1 AND state = 'waiting' AND next_try <= now()` + grabKeysSQL + `
	ORDER BY priority DESC, next_try, id
	LIMIT $2
	FOR UPDATE SKIP LOCKED`

// grabKeysSQL marks where grabSelectSQL takes the condition that leaves
// out the jobs of keys the leader holds back enough of (grabKeys).
const grabKeysSQL = "/* keys */"

// grabKeys returns grabSelectSQL for p, with its keys' condition, and the
// condition's argument ($6), if any.
func grabKeys(p *store.JobsGrabParams) (string, []any) {
	switch {
	case p.NoKeys:
		return strings.Replace(grabSelectSQL, grabKeysSQL, " AND concurrency_key IS NULL", 1), nil
	case len(p.SkipKeys) > 0:
		return strings.Replace(grabSelectSQL, grabKeysSQL, " AND (concurrency_key IS NULL OR NOT concurrency_key = ANY($6::text[]))", 1),
			[]any{p.SkipKeys}
	}
	return grabSelectSQL, nil
}

// JobsGrab marks up to p.Limit due waiting jobs of p.Queue as grabbed by
// p.Node until now + p.Lease, and returns them highest priority, then
// oldest next_try first.
func (s *Store) JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error) {
	if p.Limit <= 0 {
		return nil, nil
	}
	sel, keys := grabKeys(p)
	jobs, err := queryAll(ctx, s, scanJob, `/* rowq:jobs.grab */
		UPDATE jobs SET state = $5, grabbed_by = $3, grabbed_until = now() + make_interval(secs => $4), grabs = grabs + 1
		WHERE id IN (`+sel+`)
		RETURNING `+jobCols,
		append([]any{p.Queue, p.Limit, p.Node, p.Lease.Seconds(), store.GrabState(p)}, keys...)...)
	if err != nil {
		return nil, fmt.Errorf("grab jobs from queue %q: %w", p.Queue, mapErr(err))
	}
	// RETURNING follows no ORDER BY.
	slices.SortFunc(jobs, func(a, b *store.Job) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), a.NextTry.Compare(b.NextTry), cmp.Compare(a.ID, b.ID))
	})
	return jobs, nil
}

// JobsExtend moves grabbed_until to now + p.Lease for every job of p.Queue
// grabbed by p.Node that no other transaction holds (SKIP LOCKED), and
// returns how many it moved.
func (s *Store) JobsExtend(ctx context.Context, p *store.JobsExtendParams) (int64, error) {
	n, err := s.exec(ctx, `/* rowq:jobs.extend */
		UPDATE jobs SET grabbed_until = now() + make_interval(secs => $3)
		WHERE id IN (
			SELECT id FROM jobs WHERE queue_name = $1 AND state = 'grabbed' AND grabbed_by = $2
			FOR UPDATE SKIP LOCKED)`,
		p.Queue, p.Node, p.Lease.Seconds())
	if err != nil {
		return 0, fmt.Errorf("extend jobs of node %q in queue %q: %w", p.Node, p.Queue, mapErr(err))
	}
	return n, nil
}

// completeSQL deletes the jobs $1 held by node $2 that have no flow.
const completeSQL = `/* rowq:jobs.complete */
	DELETE FROM jobs WHERE id = ANY($1) AND state = 'grabbed' AND grabbed_by = $2` + noFlow

// JobsComplete deletes the given jobs where they are still grabbed by
// p.Node, and returns how many it deleted: those without a flow with one
// statement (completeSQL, or completeKeptSQL that writes their history
// too), then, when it deleted fewer than asked, those with a flow through
// FlowEnd (completeFlow).
func (s *Store) JobsComplete(ctx context.Context, p *store.JobsCompleteParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	var (
		n   int64
		err error
	)
	if len(p.Keep) > 0 {
		n, err = s.completeKept(ctx, p)
	} else {
		n, err = s.exec(ctx, completeSQL, p.IDs, p.Node)
	}
	if err == nil && n < int64(len(p.IDs)) {
		// Those left are jobs with a flow, or no longer held.
		var m int64
		m, err = s.completeFlow(ctx, p)
		n += m
	}
	if err != nil {
		return 0, fmt.Errorf("complete %d jobs of node %q: %w", len(p.IDs), p.Node, mapErr(err))
	}
	return n, nil
}

// JobsRelease puts the given jobs, where still grabbed by p.Node, back to
// waiting, and returns how many it put back.
func (s *Store) JobsRelease(ctx context.Context, p *store.JobsReleaseParams) (int64, error) {
	if len(p.IDs) == 0 {
		return 0, nil
	}
	n, err := s.exec(ctx, `/* rowq:jobs.release */
		UPDATE jobs SET state = 'waiting', grabbed_by = NULL, grabbed_until = NULL
		WHERE id = ANY($1) AND state = $3 AND grabbed_by = $2`,
		p.IDs, p.Node, store.HeldState(p.Leased))
	if err != nil {
		return 0, fmt.Errorf("release %d jobs of node %q: %w", len(p.IDs), p.Node, mapErr(err))
	}
	return n, nil
}

// JobRetry puts a job grabbed by p.Node back to waiting with fail_count + 1
// and next_try = now + p.Delay; store.ErrNotFound if p.Node does not hold it.
func (s *Store) JobRetry(ctx context.Context, p *store.JobRetryParams) error {
	n, err := s.exec(ctx, `/* rowq:jobs.retry */
		UPDATE jobs SET state = 'waiting', fail_count = fail_count + 1,
			next_try = now() + make_interval(secs => $3), grabbed_by = NULL, grabbed_until = NULL
		WHERE id = $1 AND state = 'grabbed' AND grabbed_by = $2`,
		p.ID, p.Node, p.Delay.Seconds())
	if err != nil {
		return fmt.Errorf("retry job %d: %w", p.ID, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("retry job %d: not grabbed by node %q: %w", p.ID, p.Node, store.ErrNotFound)
	}
	return nil
}

// JobsDefer puts the jobs grabbed by p.Node back to waiting, each due at
// now() + its delay, with one statement over the arrays of ids and delays.
func (s *Store) JobsDefer(ctx context.Context, p *store.JobsDeferParams) (int64, error) {
	if len(p.Jobs) == 0 {
		return 0, nil
	}
	ids, secs := make([]int64, len(p.Jobs)), make([]float64, len(p.Jobs))
	for i, j := range p.Jobs {
		ids[i], secs[i] = j.ID, j.Delay.Seconds()
	}
	count := 0
	if p.Count {
		count = 1
	}
	n, err := s.exec(ctx, `/* rowq:jobs.defer */
		UPDATE jobs SET state = 'waiting', grabbed_by = NULL, grabbed_until = NULL,
			next_try = now() + make_interval(secs => d.secs), deferrals = deferrals + $4
		FROM unnest($1::bigint[], $2::float8[]) AS d(id, secs)
		WHERE jobs.id = d.id AND jobs.state = 'grabbed' AND jobs.grabbed_by = $3`,
		ids, secs, p.Node, count)
	if err != nil {
		return 0, fmt.Errorf("defer %d jobs of node %q: %w", len(p.Jobs), p.Node, mapErr(err))
	}
	return n, nil
}

// JobFail moves a job grabbed by p.Node to the failure log with
// fail_count + 1, in one statement (failSQL, or failKeptSQL that writes
// its history too); a job with a flow goes through FlowEnd (failFlow).
// store.ErrNotFound if p.Node does not hold it.
func (s *Store) JobFail(ctx context.Context, p *store.JobFailParams) (*store.FailedJob, error) {
	q := failSQL
	if p.Keep {
		q = failKeptSQL
	}
	f, err := queryOne(ctx, s, scanFailedJob, q, p.ID, p.Node, p.Status, p.Code, p.Message)
	if errors.Is(err, pgx.ErrNoRows) {
		f, err = s.failFlow(ctx, p, withFlow(q))
	}
	if err != nil {
		return nil, fmt.Errorf("fail job %d of node %q: %w", p.ID, p.Node, mapErr(err))
	}
	return f, nil
}

// failSQL moves the job $1 without a flow held by node $2 to the failure
// log with status $3, code $4 and message $5.
const failSQL = `/* rowq:jobs.fail */
	WITH d AS (
		DELETE FROM jobs WHERE id = $1 AND state = 'grabbed' AND grabbed_by = $2` + noFlow + `
		RETURNING id, queue_name, category, url, payload, fail_count, created_at, grabs,
			timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered)
	INSERT INTO failed_jobs (job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at, grabs,
		timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered)
	SELECT id, queue_name, category, url, payload, $3, $4, $5, fail_count + 1, now(), created_at, grabs,
		timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter, concurrency_key, concurrency_limit, ordered FROM d
	RETURNING ` + failedJobCols

// JobsRescue puts grabbed jobs of queue whose grab has expired
// (grabExpired) and that no other transaction holds (SKIP LOCKED) back to
// waiting, and returns how many. Their next_try is kept, so they come first
// in the next grab.
func (s *Store) JobsRescue(ctx context.Context, queue string) (int64, error) {
	n, err := s.exec(ctx, rescueSQL, queue)
	if err != nil {
		return 0, fmt.Errorf("rescue jobs of queue %q: %w", queue, mapErr(err))
	}
	return n, nil
}

// rescueSQL puts the queue $1's expired grabs back to waiting. A plain
// UPDATE would wait for a row that another transaction holds and that
// matched when last committed.
const rescueSQL = `/* rowq:jobs.rescue */
	UPDATE jobs SET state = 'waiting', grabbed_by = NULL, grabbed_until = NULL
	WHERE id IN (
		SELECT id FROM jobs WHERE queue_name = $1 AND state = 'grabbed' AND ` + grabExpired + `
		FOR UPDATE OF jobs SKIP LOCKED)`

// grabExpired is the condition on a grabbed row of jobs that its grab has
// expired: its lease has passed, or its node has no registration (reaped or
// deleted). Inside an OR the NOT EXISTS stays a subplan, one primary key
// probe of nodes for each of the queue's grabs, which are few (its
// deliveries in flight).
const grabExpired = `(jobs.grabbed_until <= now() OR NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.id = jobs.grabbed_by))`

// JobGet returns one job of the queue, or store.ErrNotFound.
func (s *Store) JobGet(ctx context.Context, queue string, id int64) (*store.Job, error) {
	j, err := queryOne(ctx, s, scanJob, `/* rowq:jobs.get */ SELECT `+jobCols+` FROM jobs WHERE id = $1 AND queue_name = $2`, id, queue)
	if err != nil {
		return nil, fmt.Errorf("get job %d of queue %q: %w", id, queue, mapErr(err))
	}
	return j, nil
}

func backoffOrFixed(b string) string {
	if b == "" {
		return store.BackoffFixed
	}
	return b
}

// insertUniqueSQL is insertSQL that stores nothing when the job's unique
// key is taken. ON CONFLICT waits for a concurrent insert of the same key
// to commit or roll back, and an insert that does nothing does not abort
// the transaction.
var insertUniqueSQL = strings.Replace(insertSQL, "RETURNING id",
	"ON CONFLICT (queue_name, unique_key) WHERE unique_key IS NOT NULL DO NOTHING RETURNING id", 1)

// uniqueAttempts bounds how often a push retries a key whose holder left
// between the INSERT that collided and the SELECT that looked for it.
const uniqueAttempts = 10

// JobsPush stores the jobs in one transaction: those without a unique key
// with one statement, the others one by one with ON CONFLICT DO NOTHING,
// reading the holder of a taken key (READ COMMITTED: each statement sees
// what committed before it).
func (s *Store) JobsPush(ctx context.Context, jobs []*store.JobInsertParams) ([]store.JobPushed, error) {
	if len(jobs) == 0 {
		return nil, nil
	}
	var out []store.JobPushed
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = pushTx(ctx, tx, jobs)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("push %d jobs: %w", len(jobs), mapErr(err))
	}
	return out, nil
}

// pushTx is JobsPush inside the transaction tx; the outbox moves its
// rows with it.
func pushTx(ctx context.Context, tx pgx.Tx, jobs []*store.JobInsertParams) ([]store.JobPushed, error) {
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
		rows, _ := tx.Query(ctx, insertSQL, insertArgs(plain)...)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return nil, err
		}
		for k, id := range ids {
			out[at[k]].ID = id
		}
	}
	for _, i := range store.KeyedInOrder(jobs) {
		var err error
		if out[i], err = pushUnique(ctx, tx, jobs[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// pushUnique inserts a job with a unique key, or finds the pending job
// that holds the key.
func pushUnique(ctx context.Context, tx pgx.Tx, j *store.JobInsertParams) (store.JobPushed, error) {
	for range uniqueAttempts {
		rows, _ := tx.Query(ctx, insertUniqueSQL, insertArgs([]*store.JobInsertParams{j})...)
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return store.JobPushed{}, err
		}
		if len(ids) == 1 {
			return store.JobPushed{ID: ids[0]}, nil
		}
		rows, _ = tx.Query(ctx, `/* rowq:jobs.push_unique */ SELECT `+jobCols+`
			FROM jobs WHERE queue_name = $1 AND unique_key = $2`, j.Queue, j.UniqueKey)
		held, err := pgx.CollectExactlyOneRow(rows, scanJob)
		if errors.Is(err, pgx.ErrNoRows) {
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
// now() + p.Lease with one INSERT and returns them in order. The INSERT
// returns what the database decided (id and times); the rest is p's.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]*store.Job, error) {
	if len(p.Jobs) == 0 {
		return nil, nil
	}
	type stored struct {
		id                   int64
		created, next, until time.Time
	}
	args := append(insertArgs(p.Jobs), p.Node, p.Lease.Seconds())
	rows, err := queryAll(ctx, s, func(row pgx.CollectableRow) (stored, error) {
		var r stored
		err := row.Scan(&r.id, &r.created, &r.next, &r.until)
		return r, err
	}, insertGrabbedSQL, args...)
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), mapErr(err))
	}
	jobs := make([]*store.Job, len(rows))
	for i, r := range rows {
		jobs[i] = p.Jobs[i].GrabbedJob(r.id, p.Node, r.created.UTC(), r.next.UTC(), r.until.UTC())
	}
	return jobs, nil
}

// jobsNextDueSQL tells, for each queue of $1, how many microseconds from
// now its earliest waiting job is due and its earliest grab or lease runs
// out: the first subquery reads one entry of jobs_list (queue_name, state,
// next_try, id), however many jobs wait; the second the queue's grabs and
// leases.
const jobsNextDueSQL = `/* rowq:jobs.next_due */ SELECT q,
		(EXTRACT(EPOCH FROM w - now()) * 1000000)::bigint, (EXTRACT(EPOCH FROM g - now()) * 1000000)::bigint
	FROM unnest($1::text[]) AS q, LATERAL (SELECT
		(SELECT next_try FROM jobs WHERE queue_name = q AND state = 'waiting' ORDER BY next_try LIMIT 1) AS w,
		(SELECT MIN(grabbed_until) FROM jobs WHERE queue_name = q AND state IN ('grabbed', 'leased')) AS g) t
	WHERE w IS NOT NULL OR g IS NOT NULL`

// jobsExpiredSQL names the queues of $1 that hold an expired grab
// (grabExpired) or an expired lease; a queue's grabs are its deliveries in
// flight, few, and its leases its accepted jobs.
const jobsExpiredSQL = `/* rowq:jobs.expired */ SELECT q FROM unnest($1::text[]) AS q
	WHERE EXISTS (SELECT 1 FROM jobs WHERE queue_name = q AND state = 'grabbed' AND ` + grabExpired + `)
		OR EXISTS (SELECT 1 FROM jobs WHERE queue_name = q AND state = 'leased' AND grabbed_until <= now())`

// JobsNextDue tells when each of queues next needs its leader.
func (s *Store) JobsNextDue(ctx context.Context, queues []string) ([]store.QueueDue, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	due, err := queryAll(ctx, s, func(row pgx.CollectableRow) (store.QueueDue, error) {
		return sqldb.ScanQueueDue(row)
	}, jobsNextDueSQL, queues)
	if err != nil {
		return nil, fmt.Errorf("look when %d queues are next due: %w", len(queues), mapErr(err))
	}
	return due, nil
}

// JobsExpired returns those of queues that hold an expired grab.
func (s *Store) JobsExpired(ctx context.Context, queues []string) ([]string, error) {
	expired, err := s.queueNames(ctx, jobsExpiredSQL, queues)
	if err != nil {
		return nil, fmt.Errorf("look for expired grabs in %d queues: %w", len(queues), mapErr(err))
	}
	return expired, nil
}

// queueNames runs query with the queues as $1 and returns the names it
// selects.
func (s *Store) queueNames(ctx context.Context, query string, queues []string) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	return queryAll(ctx, s, pgx.RowTo[string], query, queues)
}
