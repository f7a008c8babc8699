package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const scheduleCols = "name, cron, timezone, category, url, payload, max_retries, retry_delay, timeout, " +
	"misfire, max_catchup, overlap, paused, next_run_at, created_at, updated_at, concurrency_key, concurrency_limit, ordered"

func scanSchedule(sc sqldb.Scanner) (*store.Schedule, error) {
	var (
		s       store.Schedule
		payload []byte
		ckey    sql.NullString
	)
	err := sc.Scan(&s.Name, &s.Cron, &s.Timezone, &s.Category, &s.URL, &payload, &s.MaxRetries, &s.RetryDelay, &s.Timeout,
		&s.Misfire, &s.MaxCatchup, &s.Overlap, &s.Paused, &s.NextRunAt, &s.CreatedAt, &s.UpdatedAt,
		&ckey, &s.ConcurrencyLimit, &s.Ordered)
	if err != nil {
		return nil, err
	}
	s.ConcurrencyKey = ckey.String
	s.Payload = payload
	return &s, nil
}

const runCols = "id, schedule_name, kind, tick, fired_at, node, job_id, queue_name, reason"

func scanRun(sc sqldb.Scanner) (*store.ScheduleRun, error) {
	var (
		r     store.ScheduleRun
		job   sql.NullInt64
		queue sql.NullString
	)
	if err := sc.Scan(&r.ID, &r.Schedule, &r.Kind, &r.Tick, &r.FiredAt, &r.Node, &job, &queue, &r.Reason); err != nil {
		return nil, err
	}
	r.JobID, r.Queue, r.Skipped = job.Int64, queue.String, !job.Valid
	return &r, nil
}

func getSchedule(ctx context.Context, db interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}, name string) (*store.Schedule, error) {
	return scanSchedule(db.QueryRowContext(ctx, `/* rowq:schedules.get */ SELECT `+scheduleCols+` FROM schedules WHERE name = ?`, name))
}

// SchedulePut creates or replaces a schedule.
func (s *Store) SchedulePut(ctx context.Context, sc *store.Schedule) (*store.Schedule, error) {
	var got *store.Schedule
	err := retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			// The new values are passed again for the UPDATE part rather
			// than read with VALUES(), which MySQL 8.0.20+ deprecates.
			// next_run_at is assigned first: later assignments would
			// change the cron and timezone it compares.
			next := sc.NextRunAt.UTC()
			_, err := tx.ExecContext(ctx, `/* rowq:schedules.put */
				INSERT INTO schedules (`+scheduleCols+`)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NOW(6), NOW(6), ?, ?, ?)
				ON DUPLICATE KEY UPDATE
					next_run_at = IF(cron = ? AND timezone = ? AND paused = 0, next_run_at, ?),
					cron = ?, timezone = ?, category = ?, url = ?, payload = ?, max_retries = ?, retry_delay = ?,
					timeout = ?, misfire = ?, max_catchup = ?, overlap = ?, paused = ?, updated_at = NOW(6),
					concurrency_key = ?, concurrency_limit = ?, ordered = ?`,
				sc.Name, sc.Cron, sc.Timezone, sc.Category, sc.URL, sc.Payload, sc.MaxRetries, sc.RetryDelay, sc.Timeout,
				sc.Misfire, sc.MaxCatchup, sc.Overlap, sc.Paused, next,
				sqldb.NullString(sc.ConcurrencyKey), sc.ConcurrencyLimit, sc.Ordered,
				sc.Cron, sc.Timezone, next,
				sc.Cron, sc.Timezone, sc.Category, sc.URL, sc.Payload, sc.MaxRetries, sc.RetryDelay,
				sc.Timeout, sc.Misfire, sc.MaxCatchup, sc.Overlap, sc.Paused,
				sqldb.NullString(sc.ConcurrencyKey), sc.ConcurrencyLimit, sc.Ordered)
			if err != nil {
				return err
			}
			got, err = getSchedule(ctx, tx, sc.Name)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("put schedule %q: %w", sc.Name, mapErr(err))
	}
	return got, nil
}

// ScheduleGet returns one schedule.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*store.Schedule, error) {
	sc, err := getSchedule(ctx, s.db, name)
	if err != nil {
		return nil, fmt.Errorf("get schedule %q: %w", name, mapErr(err))
	}
	return sc, nil
}

func (s *Store) querySchedules(ctx context.Context, query string, args ...any) ([]*store.Schedule, error) {
	return sqldb.QueryAll(ctx, s.db, scanSchedule, query, args...)
}

// ScheduleList returns a page of schedules by name.
func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, error) {
	out, err := s.querySchedules(ctx, `/* rowq:schedules.list */
		SELECT `+scheduleCols+` FROM schedules WHERE name > ? ORDER BY name LIMIT ?`, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list schedules after %q: %w", p.After, mapErr(err))
	}
	return out, nil
}

// ScheduleDelete removes a schedule and its runs.
func (s *Store) ScheduleDelete(ctx context.Context, name string) (*store.Schedule, error) {
	var got *store.Schedule
	err := retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			got, err = scanSchedule(tx.QueryRowContext(ctx, `/* rowq:schedules.delete.lock */
				SELECT `+scheduleCols+` FROM schedules WHERE name = ? FOR UPDATE`, name))
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `/* rowq:schedules.delete.runs */ DELETE FROM schedule_runs WHERE schedule_name = ?`, name); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `/* rowq:schedules.delete */ DELETE FROM schedules WHERE name = ?`, name)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("delete schedule %q: %w", name, mapErr(err))
	}
	return got, nil
}

// SchedulePause pauses or resumes a schedule.
func (s *Store) SchedulePause(ctx context.Context, p *store.SchedulePauseParams) (*store.Schedule, error) {
	var next any
	if p.NextRunAt != nil {
		next = p.NextRunAt.UTC()
	}
	var got *store.Schedule
	err := retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			n, err := sqldb.Affected(tx.ExecContext(ctx, `/* rowq:schedules.pause */
				UPDATE schedules SET paused = ?, next_run_at = COALESCE(?, next_run_at), updated_at = NOW(6)
				WHERE name = ?`, p.Paused, next, p.Name))
			if err != nil {
				return err
			}
			if n == 0 {
				return store.ErrNotFound
			}
			got, err = getSchedule(ctx, tx, p.Name)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("set paused=%t on schedule %q: %w", p.Paused, p.Name, mapErr(err))
	}
	return got, nil
}

// dueSQL is the loop's look at due schedules, run by every node every
// second: it walks schedules_due (paused, next_run_at) without a sort.
const dueSQL = `/* rowq:schedules.due */
	SELECT ` + scheduleCols + ` FROM schedules WHERE paused = 0 AND next_run_at <= ? ORDER BY next_run_at LIMIT ?`

// SchedulesDue returns the unpaused schedules due at p.Before.
func (s *Store) SchedulesDue(ctx context.Context, p *store.SchedulesDueParams) ([]*store.Schedule, error) {
	out, err := s.querySchedules(ctx, dueSQL, p.Before.UTC(), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list due schedules: %w", mapErr(err))
	}
	return out, nil
}

// errLost ends a firing transaction whose compare-and-set matched nothing.
var errLost = errors.New("next_run_at moved")

// ScheduleFire fires a tick in one transaction, which first locks the
// schedule's row at the tick expected. A row another transaction holds is
// skipped, not waited for: that is a node firing the tick (racing, or
// frozen half-way), or a change to the schedule, and the tick is fired
// exactly once either way (the next look finds it still due if that
// transaction did not fire it).
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) ([]*store.ScheduleRun, error) {
	info, err := s.server(ctx)
	if err != nil {
		return nil, fmt.Errorf("fire schedule %q: %w", p.Name, mapErr(err))
	}
	var runs []*store.ScheduleRun
	err = retry(ctx, func() error {
		runs = nil
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var one int
			err := tx.QueryRowContext(ctx, `/* rowq:schedules.fire.lock */
				SELECT 1 FROM schedules WHERE name = ? AND next_run_at = ? AND paused = 0 FOR UPDATE SKIP LOCKED`,
				p.Name, p.Expect.UTC()).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return errLost
			}
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `/* rowq:schedules.fire.advance */
				UPDATE schedules SET next_run_at = ? WHERE name = ?`, p.Next.UTC(), p.Name); err != nil {
				return err
			}
			var now time.Time
			if err := tx.QueryRowContext(ctx, `/* rowq:now */ SELECT NOW(6)`).Scan(&now); err != nil {
				return err
			}
			var prev int64
			if p.SkipOverlap {
				err := tx.QueryRowContext(ctx, `/* rowq:schedules.fire.previous */
					SELECT job_id FROM schedule_runs WHERE schedule_name = ? AND job_id IS NOT NULL
					ORDER BY id DESC LIMIT 1`, p.Name).Scan(&prev)
				if err != nil && !errors.Is(err, sql.ErrNoRows) {
					return err
				}
			}
			for _, ri := range p.Runs {
				var fired int
				err := tx.QueryRowContext(ctx, `/* rowq:schedules.fire.seen */
					SELECT COUNT(*) FROM schedule_runs WHERE schedule_name = ? AND kind = 'tick' AND tick = ?`, p.Name, ri.Tick.UTC()).Scan(&fired)
				if err != nil {
					return err
				}
				if fired > 0 {
					continue
				}
				r := &store.ScheduleRun{Schedule: p.Name, Kind: store.RunTick, Tick: ri.Tick.UTC(), FiredAt: now, Node: p.Node, Reason: ri.Reason, Skipped: ri.Job == nil}
				if ri.Job != nil && prev != 0 {
					var stored int
					err = tx.QueryRowContext(ctx, `/* rowq:schedules.fire.overlap */ SELECT COUNT(*) FROM jobs WHERE id = ?`, prev).Scan(&stored)
					if err != nil {
						return err
					}
					if stored > 0 {
						r.Skipped, r.Reason = true, store.OverlapReason(prev)
					}
				}
				if !r.Skipped {
					var ids []int64
					if err := insertChunk(ctx, tx, []*store.JobInsertParams{ri.Job}, info, &ids); err != nil {
						return err
					}
					r.JobID, r.Queue = ids[0], ri.Job.Queue
					if p.SkipOverlap {
						prev = r.JobID
					}
				}
				if err := insertRun(ctx, tx, r); err != nil {
					return err
				}
				runs = append(runs, r)
			}
			return pruneRuns(ctx, tx, p.Name)
		})
	})
	if errors.Is(err, errLost) {
		return nil, fmt.Errorf("fire schedule %q at %s: %w", p.Name, p.Expect.UTC().Format(time.RFC3339), store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("fire schedule %q at %s: %w", p.Name, p.Expect.UTC().Format(time.RFC3339), mapErr(err))
	}
	return runs, nil
}

func insertRun(ctx context.Context, tx *sql.Tx, r *store.ScheduleRun) error {
	var job, queue any
	if !r.Skipped {
		job, queue = r.JobID, r.Queue
	}
	res, err := tx.ExecContext(ctx, `/* rowq:schedules.run.insert */
		INSERT INTO schedule_runs (schedule_name, kind, tick, fired_at, node, job_id, queue_name, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, r.Schedule, r.Kind, r.Tick, r.FiredAt, r.Node, job, queue, r.Reason)
	if err != nil {
		return err
	}
	r.ID, err = res.LastInsertId()
	return err
}

// pruneRuns keeps the newest store.ScheduleRunsKept runs of a schedule.
func pruneRuns(ctx context.Context, tx *sql.Tx, name string) error {
	var oldest int64
	err := tx.QueryRowContext(ctx, `/* rowq:schedules.runs.prune.find */
		SELECT id FROM schedule_runs WHERE schedule_name = ? ORDER BY id DESC LIMIT 1 OFFSET ?`,
		name, store.ScheduleRunsKept-1).Scan(&oldest)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = tx.ExecContext(ctx, `/* rowq:schedules.runs.prune */
		DELETE FROM schedule_runs WHERE schedule_name = ? AND id < ?`, name, oldest)
	return err
}

// ScheduleTrigger enqueues one run of a schedule now.
func (s *Store) ScheduleTrigger(ctx context.Context, p *store.ScheduleTriggerParams) (*store.ScheduleRun, error) {
	info, err := s.server(ctx)
	if err != nil {
		return nil, fmt.Errorf("trigger schedule %q: %w", p.Name, mapErr(err))
	}
	var r *store.ScheduleRun
	err = retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var now time.Time
			// The shared lock keeps a concurrent delete from orphaning the run.
			err := tx.QueryRowContext(ctx, `/* rowq:schedules.trigger.lock */
				SELECT NOW(6) FROM schedules WHERE name = ? LOCK IN SHARE MODE`, p.Name).Scan(&now)
			if err != nil {
				return err
			}
			var ids []int64
			if err := insertChunk(ctx, tx, []*store.JobInsertParams{p.Job}, info, &ids); err != nil {
				return err
			}
			r = &store.ScheduleRun{Schedule: p.Name, Kind: store.RunTrigger, Tick: now, FiredAt: now, Node: p.Node, JobID: ids[0], Queue: p.Job.Queue}
			if err := insertRun(ctx, tx, r); err != nil {
				return err
			}
			return pruneRuns(ctx, tx, p.Name)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("trigger schedule %q: %w", p.Name, mapErr(err))
	}
	return r, nil
}

// ScheduleRuns returns a page of a schedule's runs, newest first.
func (s *Store) ScheduleRuns(ctx context.Context, p *store.ScheduleRunsParams) ([]*store.ScheduleRun, error) {
	before := p.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := sqldb.QueryAll(ctx, s.db, scanRun, `/* rowq:schedules.runs */
		SELECT `+runCols+` FROM schedule_runs WHERE schedule_name = ? AND id < ? ORDER BY id DESC LIMIT ?`,
		p.Name, before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list runs of schedule %q: %w", p.Name, mapErr(err))
	}
	return out, nil
}
