// Package sqlite is the embedded SQLite dialect of the store: rowq's
// zero-setup default. It uses modernc.org/sqlite (pure Go, no cgo).
//
// Writes go through one connection (SQLite has one writer at a time; a pool
// of writers only trades SQLITE_BUSY errors), reads through a pool of their
// own, in WAL mode. SQLite has no server clock: the database's clock is the
// clock of the host that holds the file, which every process sharing the
// file also reads. Times are stored as integer microseconds since the epoch.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"sort"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/migrate"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite store.
type Store struct {
	w   *sql.DB // the one writer connection
	r   *sql.DB // readers
	now func() time.Time
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the SQLite database file at path.
func Open(path string) (*Store, error) {
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "synchronous(FULL)", "foreign_keys(1)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite %s: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	return &Store{w: w, r: r, now: time.Now}, nil
}

// Dialect returns "sqlite".
func (s *Store) Dialect() string { return "sqlite" }

// Migrate applies the embedded migrations.
func (s *Store) Migrate(ctx context.Context) error {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return err
	}
	r := &migrate.Runner{DB: s.w, FS: sub, Transactional: true, Placeholder: func(int) string { return "?" }}
	return mapErr(r.Run(ctx))
}

// Ping checks that the file can be read.
func (s *Store) Ping(ctx context.Context) error { return mapErr(s.r.PingContext(ctx)) }

// Now returns the host's clock.
func (s *Store) Now(context.Context) (time.Time, error) { return s.now().UTC(), nil }

// Close closes both pools.
func (s *Store) Close() error { return errors.Join(s.r.Close(), s.w.Close()) }

func (s *Store) micros() int64 { return s.now().UnixMicro() }

func fromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// mapErr maps SQLite errors onto the store's errors. It is the only place
// that knows SQLite's error codes.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return fmt.Errorf("%w: %w", store.ErrConflict, err)
		case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_IOERR:
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
	}
	return err
}

// NodeHeartbeat registers the node or extends its registration.
func (s *Store) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	now := s.micros()
	_, err := s.w.ExecContext(ctx, `/* rowq:nodes.heartbeat */
		INSERT INTO nodes (id, host, started_at, expires_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, expires_at = excluded.expires_at`,
		p.ID, p.Host, now, now+p.TTL.Microseconds())
	if err != nil {
		return fmt.Errorf("heartbeat node %q: %w", p.ID, mapErr(err))
	}
	return nil
}

// NodeDelete removes the node's registration.
func (s *Store) NodeDelete(ctx context.Context, id string) error {
	if _, err := s.w.ExecContext(ctx, `/* rowq:nodes.delete */ DELETE FROM nodes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete node %q: %w", id, mapErr(err))
	}
	return nil
}

const queueCols = `name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, paused`

func scanQueue(row interface{ Scan(...any) error }) (*store.Queue, error) {
	var (
		q     store.Queue
		rate  sql.NullFloat64
		burst sql.NullInt64
	)
	if err := row.Scan(&q.Name, &q.PollingInterval, &q.MaxWorkers, &rate, &burst, &q.Paused); err != nil {
		return nil, err
	}
	if rate.Valid {
		q.MaxDispatchesPerSecond = &rate.Float64
	}
	if burst.Valid {
		b := int(burst.Int64)
		q.MaxBurstSize = &b
	}
	return &q, nil
}

func queryQueues(ctx context.Context, db *sql.DB, query string, args ...any) ([]*store.Queue, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var qs []*store.Queue
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			return nil, mapErr(err)
		}
		qs = append(qs, q)
	}
	return qs, mapErr(rows.Err())
}

// QueuePut creates or replaces a queue's settings.
func (s *Store) QueuePut(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	now := s.micros()
	row := s.w.QueryRowContext(ctx, `/* rowq:queues.put */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET polling_interval = excluded.polling_interval, max_workers = excluded.max_workers,
			max_dispatches_per_second = excluded.max_dispatches_per_second, max_burst_size = excluded.max_burst_size,
			updated_at = excluded.updated_at
		RETURNING `+queueCols,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, now, now)
	got, err := scanQueue(row)
	if err != nil {
		return nil, fmt.Errorf("put queue %q: %w", q.Name, mapErr(err))
	}
	return got, nil
}

// QueueEnsure creates the queue if it is missing.
func (s *Store) QueueEnsure(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	now := s.micros()
	_, err := s.w.ExecContext(ctx, `/* rowq:queues.ensure */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, now, now)
	if err != nil {
		return nil, fmt.Errorf("ensure queue %q: %w", q.Name, mapErr(err))
	}
	return s.QueueGet(ctx, q.Name)
}

// QueueGet returns one queue.
func (s *Store) QueueGet(ctx context.Context, name string) (*store.Queue, error) {
	q, err := scanQueue(s.r.QueryRowContext(ctx, `/* rowq:queues.get */ SELECT `+queueCols+` FROM queues WHERE name = ?`, name))
	if err != nil {
		return nil, fmt.Errorf("get queue %q: %w", name, mapErr(err))
	}
	return q, nil
}

// QueueList returns every queue by name.
func (s *Store) QueueList(ctx context.Context) ([]*store.Queue, error) {
	qs, err := queryQueues(ctx, s.r, `/* rowq:queues.list */ SELECT `+queueCols+` FROM queues ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return qs, nil
}

// QueueDelete removes a queue and returns it.
func (s *Store) QueueDelete(ctx context.Context, name string) (*store.Queue, error) {
	q, err := scanQueue(s.w.QueryRowContext(ctx, `/* rowq:queues.delete */ DELETE FROM queues WHERE name = ? RETURNING `+queueCols, name))
	if err != nil {
		return nil, fmt.Errorf("delete queue %q: %w", name, mapErr(err))
	}
	return q, nil
}

// QueuesClaim makes the node the leader of every queue without a live leader.
func (s *Store) QueuesClaim(ctx context.Context, p *store.QueuesClaimParams) error {
	now := s.micros()
	_, err := s.w.ExecContext(ctx, `/* rowq:queues.claim */
		UPDATE queues SET leader = ?1
		WHERE (leader IS NULL OR leader NOT IN (SELECT id FROM nodes WHERE expires_at > ?2))
		  AND EXISTS (SELECT 1 FROM nodes WHERE id = ?1 AND expires_at > ?2)`, p.Node, now)
	if err != nil {
		return fmt.Errorf("claim queues for node %q: %w", p.Node, mapErr(err))
	}
	return nil
}

// QueuesLed returns the queues the node leads.
func (s *Store) QueuesLed(ctx context.Context, node string) ([]*store.Queue, error) {
	qs, err := queryQueues(ctx, s.r, `/* rowq:queues.led */ SELECT `+queueCols+` FROM queues WHERE leader = ? ORDER BY name`, node)
	if err != nil {
		return nil, fmt.Errorf("list queues led by %q: %w", node, err)
	}
	return qs, nil
}

// QueuesRelease gives up the node's queues.
func (s *Store) QueuesRelease(ctx context.Context, node string) error {
	if _, err := s.w.ExecContext(ctx, `/* rowq:queues.release */ UPDATE queues SET leader = NULL WHERE leader = ?`, node); err != nil {
		return fmt.Errorf("release queues of node %q: %w", node, mapErr(err))
	}
	return nil
}

// QueueLeader returns the live node that leads the queue.
func (s *Store) QueueLeader(ctx context.Context, queue string) (*store.Node, error) {
	var (
		n                  store.Node
		started, expiresAt int64
	)
	err := s.r.QueryRowContext(ctx, `/* rowq:queues.leader */
		SELECT n.id, n.host, n.started_at, n.expires_at FROM queues q JOIN nodes n ON n.id = q.leader
		WHERE q.name = ? AND n.expires_at > ?`, queue, s.micros()).Scan(&n.ID, &n.Host, &started, &expiresAt)
	if err != nil {
		return nil, fmt.Errorf("get leader of queue %q: %w", queue, mapErr(err))
	}
	n.StartedAt, n.ExpiresAt = fromMicros(started), fromMicros(expiresAt)
	return &n, nil
}

// RoutingPut creates or replaces a routing.
func (s *Store) RoutingPut(ctx context.Context, r *store.Routing) (*store.Routing, error) {
	now := s.micros()
	res, err := s.w.ExecContext(ctx, `/* rowq:routings.put */
		INSERT INTO routings (job_category, queue_name, created_at, updated_at)
		SELECT ?1, ?2, ?3, ?3 WHERE EXISTS (SELECT 1 FROM queues WHERE name = ?2)
		ON CONFLICT (job_category) DO UPDATE SET queue_name = excluded.queue_name, updated_at = excluded.updated_at`,
		r.JobCategory, r.QueueName, now)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = fmt.Errorf("queue %q: %w", r.QueueName, store.ErrNotFound)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("put routing %q: %w", r.JobCategory, mapErr(err))
	}
	return &store.Routing{JobCategory: r.JobCategory, QueueName: r.QueueName}, nil
}

// RoutingGet returns one routing.
func (s *Store) RoutingGet(ctx context.Context, category string) (*store.Routing, error) {
	r := store.Routing{JobCategory: category}
	err := s.r.QueryRowContext(ctx, `/* rowq:routings.get */ SELECT queue_name FROM routings WHERE job_category = ?`, category).Scan(&r.QueueName)
	if err != nil {
		return nil, fmt.Errorf("get routing %q: %w", category, mapErr(err))
	}
	return &r, nil
}

// RoutingList returns every routing by category.
func (s *Store) RoutingList(ctx context.Context) ([]*store.Routing, error) {
	rows, err := s.r.QueryContext(ctx, `/* rowq:routings.list */ SELECT job_category, queue_name FROM routings ORDER BY job_category`)
	if err != nil {
		return nil, fmt.Errorf("list routings: %w", mapErr(err))
	}
	defer rows.Close()
	var rs []*store.Routing
	for rows.Next() {
		var r store.Routing
		if err := rows.Scan(&r.JobCategory, &r.QueueName); err != nil {
			return nil, fmt.Errorf("list routings: %w", mapErr(err))
		}
		rs = append(rs, &r)
	}
	return rs, mapErr(rows.Err())
}

// RoutingDelete removes a routing and returns it.
func (s *Store) RoutingDelete(ctx context.Context, category string) (*store.Routing, error) {
	r := store.Routing{JobCategory: category}
	err := s.w.QueryRowContext(ctx, `/* rowq:routings.delete */ DELETE FROM routings WHERE job_category = ? RETURNING queue_name`, category).Scan(&r.QueueName)
	if err != nil {
		return nil, fmt.Errorf("delete routing %q: %w", category, mapErr(err))
	}
	return &r, nil
}

const jobCols = `id, queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count, grabbed_by, grabbed_until,
	priority, unique_key, retry_backoff, retry_delay_max, retry_jitter`

func scanJob(row interface{ Scan(...any) error }) (*store.Job, error) {
	var (
		j                  store.Job
		payload, grabbedBy sql.NullString
		created, next      int64
		grabbedUntil       sql.NullInt64
		key                sql.NullString
	)
	err := row.Scan(&j.ID, &j.Queue, &j.Category, &j.URL, &payload, &j.State, &created, &next,
		&j.Timeout, &j.MaxRetries, &j.RetryDelay, &j.FailCount, &grabbedBy, &grabbedUntil,
		&j.Priority, &key, &j.RetryBackoff, &j.RetryDelayMax, &j.RetryJitter)
	if err != nil {
		return nil, err
	}
	j.UniqueKey = key.String
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

func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return mapErr(err)
	}
	defer tx.Rollback()
	if err := fn(tx); err != nil {
		return mapErr(err)
	}
	return mapErr(tx.Commit())
}

// grabSQL is the fetch; EXPLAIN QUERY PLAN of its inner SELECT must show the
// jobs_fetch index and no temporary B-tree for ORDER BY.
const grabSQL = `/* rowq:jobs.grab */
	UPDATE jobs SET state = 'grabbed', grabbed_by = ?1, grabbed_until = ?2
	WHERE id IN (` + grabSelectSQL + `)
	RETURNING ` + jobCols

const grabSelectSQL = `SELECT id FROM jobs WHERE queue_name = ?3 AND state = 'waiting' AND next_try <= ?4 ORDER BY priority DESC, next_try, id LIMIT ?5`

// JobsGrab marks due jobs as grabbed by the node and returns them.
func (s *Store) JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error) {
	now := s.micros()
	rows, err := s.w.QueryContext(ctx, grabSQL, p.Node, now+p.Lease.Microseconds(), p.Queue, now, p.Limit)
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

func affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, mapErr(err)
	}
	n, err := res.RowsAffected()
	return n, mapErr(err)
}

// JobsComplete deletes jobs the node still holds.
func (s *Store) JobsComplete(ctx context.Context, p *store.JobsCompleteParams) (int64, error) {
	n, err := s.execHeld(ctx, `/* rowq:jobs.complete */ DELETE FROM jobs`, p.IDs, p.Node)
	if err != nil {
		return 0, fmt.Errorf("complete %d jobs: %w", len(p.IDs), err)
	}
	return n, nil
}

// JobsRelease puts the given jobs, where still grabbed by p.Node, back to
// waiting, and returns how many it put back.
func (s *Store) JobsRelease(ctx context.Context, p *store.JobsReleaseParams) (int64, error) {
	n, err := s.execHeld(ctx, `/* rowq:jobs.release */
		UPDATE jobs SET state = 'waiting', grabbed_by = NULL, grabbed_until = NULL`, p.IDs, p.Node)
	if err != nil {
		return 0, fmt.Errorf("release %d jobs: %w", len(p.IDs), err)
	}
	return n, nil
}

// execHeld runs stmt on those of ids that node still holds (it appends
// the WHERE clause) and returns how many rows it changed.
func (s *Store) execHeld(ctx context.Context, stmt string, ids []int64, node string) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	args := make([]any, 0, len(ids)+1)
	args = append(args, node)
	for _, id := range ids {
		args = append(args, id)
	}
	stmt += ` WHERE state = 'grabbed' AND grabbed_by = ? AND id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)`
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

const failedCols = `id, job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at,
	timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter`

func scanFailed(row interface{ Scan(...any) error }) (*store.FailedJob, error) {
	var (
		f                 store.FailedJob
		payload           sql.NullString
		failedAt, created int64
	)
	err := row.Scan(&f.ID, &f.JobID, &f.Queue, &f.Category, &f.URL, &payload, &f.Status, &f.Code, &f.Message, &f.FailCount, &failedAt, &created,
		&f.Timeout, &f.MaxRetries, &f.RetryDelay, &f.Priority, &f.RetryBackoff, &f.RetryDelayMax, &f.RetryJitter)
	if err != nil {
		return nil, err
	}
	if payload.Valid {
		f.Payload = []byte(payload.String)
	}
	f.FailedAt, f.CreatedAt = fromMicros(failedAt), fromMicros(created)
	return &f, nil
}

// JobFail moves a held job to the failure log.
func (s *Store) JobFail(ctx context.Context, p *store.JobFailParams) (*store.FailedJob, error) {
	var f *store.FailedJob
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		row := tx.QueryRowContext(ctx, `/* rowq:jobs.fail */
			INSERT INTO failed_jobs (job_id, queue_name, category, url, payload, status, code, message, fail_count, failed_at, created_at,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter)
			SELECT id, queue_name, category, url, payload, ?, ?, ?, fail_count + 1, ?, created_at,
				timeout, max_retries, retry_delay, priority, retry_backoff, retry_delay_max, retry_jitter
			FROM jobs WHERE id = ? AND state = 'grabbed' AND grabbed_by = ?
			RETURNING `+failedCols, p.Status, p.Code, p.Message, s.micros(), p.ID, p.Node)
		var err error
		if f, err = scanFailed(row); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `/* rowq:jobs.fail_delete */ DELETE FROM jobs WHERE id = ?`, p.ID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("fail job %d: %w", p.ID, err)
	}
	return f, nil
}

// JobsRescue frees expired grabs of the queue.
func (s *Store) JobsRescue(ctx context.Context, queue string) (int64, error) {
	res, err := s.w.ExecContext(ctx, `/* rowq:jobs.rescue */
		UPDATE jobs SET state = 'waiting', grabbed_by = NULL, grabbed_until = NULL
		WHERE queue_name = ? AND state = 'grabbed' AND grabbed_until < ?`, queue, s.micros())
	n, err := affected(res, err)
	if err != nil {
		return 0, fmt.Errorf("rescue jobs of queue %q: %w", queue, err)
	}
	return n, nil
}

// JobGet returns one job of the queue.
func (s *Store) JobGet(ctx context.Context, queue string, id int64) (*store.Job, error) {
	j, err := scanJob(s.r.QueryRowContext(ctx, `/* rowq:jobs.get */ SELECT `+jobCols+` FROM jobs WHERE id = ? AND queue_name = ?`, id, queue))
	if err != nil {
		return nil, fmt.Errorf("get job %d: %w", id, mapErr(err))
	}
	return j, nil
}

// FailedJobGet returns one failure log entry of the queue.
func (s *Store) FailedJobGet(ctx context.Context, queue string, id int64) (*store.FailedJob, error) {
	f, err := scanFailed(s.r.QueryRowContext(ctx, `/* rowq:failed.get */ SELECT `+failedCols+` FROM failed_jobs WHERE id = ? AND queue_name = ?`, id, queue))
	if err != nil {
		return nil, fmt.Errorf("get failed job %d: %w", id, mapErr(err))
	}
	return f, nil
}
