package sqlite

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

const scheduleCols = `name, cron, timezone, category, url, payload, max_retries, retry_delay, timeout,
	misfire, max_catchup, overlap, paused, next_run_at, created_at, updated_at, concurrency_key, concurrency_limit, ordered`

func scanSchedule(row sqldb.Scanner) (*store.Schedule, error) {
	var (
		s                  store.Schedule
		payload            sql.NullString
		next, created, upd int64
		ckey               sql.NullString
	)
	err := row.Scan(&s.Name, &s.Cron, &s.Timezone, &s.Category, &s.URL, &payload, &s.MaxRetries, &s.RetryDelay, &s.Timeout,
		&s.Misfire, &s.MaxCatchup, &s.Overlap, &s.Paused, &next, &created, &upd,
		&ckey, &s.ConcurrencyLimit, &s.Ordered)
	if err != nil {
		return nil, err
	}
	s.ConcurrencyKey = ckey.String
	if payload.Valid {
		s.Payload = []byte(payload.String)
	}
	s.NextRunAt, s.CreatedAt, s.UpdatedAt = fromMicros(next), fromMicros(created), fromMicros(upd)
	return &s, nil
}

const runCols = `id, schedule_name, kind, tick, fired_at, node, job_id, queue_name, reason`

func scanRun(row sqldb.Scanner) (*store.ScheduleRun, error) {
	var (
		r           store.ScheduleRun
		tick, fired int64
		job         sql.NullInt64
		queue       sql.NullString
	)
	if err := row.Scan(&r.ID, &r.Schedule, &r.Kind, &tick, &fired, &r.Node, &job, &queue, &r.Reason); err != nil {
		return nil, err
	}
	r.Tick, r.FiredAt = fromMicros(tick), fromMicros(fired)
	r.JobID, r.Queue, r.Skipped = job.Int64, queue.String, !job.Valid
	return &r, nil
}

// SchedulePut creates or replaces a schedule.
func (s *Store) SchedulePut(ctx context.Context, sc *store.Schedule) (*store.Schedule, error) {
	now := s.micros()
	got, err := scanSchedule(s.w.QueryRowContext(ctx, `/* rowq:schedules.put */
		INSERT INTO schedules (`+scheduleCols+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET
			next_run_at = CASE WHEN schedules.cron = excluded.cron AND schedules.timezone = excluded.timezone AND schedules.paused = 0
				THEN schedules.next_run_at ELSE excluded.next_run_at END,
			cron = excluded.cron, timezone = excluded.timezone, category = excluded.category,
			url = excluded.url, payload = excluded.payload, max_retries = excluded.max_retries,
			retry_delay = excluded.retry_delay, timeout = excluded.timeout, misfire = excluded.misfire,
			max_catchup = excluded.max_catchup, overlap = excluded.overlap, paused = excluded.paused,
			updated_at = excluded.updated_at, concurrency_key = excluded.concurrency_key,
			concurrency_limit = excluded.concurrency_limit, ordered = excluded.ordered
		RETURNING `+scheduleCols,
		sc.Name, sc.Cron, sc.Timezone, sc.Category, sc.URL, nullPayload(sc.Payload), sc.MaxRetries, sc.RetryDelay, sc.Timeout,
		sc.Misfire, sc.MaxCatchup, sc.Overlap, sc.Paused, sc.NextRunAt.UnixMicro(), now, now,
		sqldb.NullString(sc.ConcurrencyKey), sc.ConcurrencyLimit, sc.Ordered))
	if err != nil {
		return nil, fmt.Errorf("put schedule %q: %w", sc.Name, mapErr(err))
	}
	return got, nil
}

// ScheduleGet returns one schedule.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*store.Schedule, error) {
	got, err := scanSchedule(s.r.QueryRowContext(ctx, `/* rowq:schedules.get */ SELECT `+scheduleCols+` FROM schedules WHERE name = ?`, name))
	if err != nil {
		return nil, fmt.Errorf("get schedule %q: %w", name, mapErr(err))
	}
	return got, nil
}

func (s *Store) querySchedules(ctx context.Context, query string, args ...any) ([]*store.Schedule, error) {
	out, err := sqldb.QueryAll(ctx, s.r, scanSchedule, query, args...)
	return out, mapErr(err)
}

// ScheduleList returns a page of schedules by name.
func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, error) {
	out, err := s.querySchedules(ctx, `/* rowq:schedules.list */
		SELECT `+scheduleCols+` FROM schedules WHERE name > ? ORDER BY name LIMIT ?`, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list schedules after %q: %w", p.After, err)
	}
	return out, nil
}

// ScheduleDelete removes a schedule and its runs.
func (s *Store) ScheduleDelete(ctx context.Context, name string) (*store.Schedule, error) {
	var got *store.Schedule
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		got, err = scanSchedule(tx.QueryRowContext(ctx, `/* rowq:schedules.delete */
			DELETE FROM schedules WHERE name = ? RETURNING `+scheduleCols, name))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `/* rowq:schedules.delete.runs */ DELETE FROM schedule_runs WHERE schedule_name = ?`, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete schedule %q: %w", name, err)
	}
	return got, nil
}

// SchedulePause pauses or resumes a schedule.
func (s *Store) SchedulePause(ctx context.Context, p *store.SchedulePauseParams) (*store.Schedule, error) {
	var next any
	if p.NextRunAt != nil {
		next = p.NextRunAt.UnixMicro()
	}
	got, err := scanSchedule(s.w.QueryRowContext(ctx, `/* rowq:schedules.pause */
		UPDATE schedules SET paused = ?, next_run_at = COALESCE(?, next_run_at), updated_at = ?
		WHERE name = ? RETURNING `+scheduleCols, p.Paused, next, s.micros(), p.Name))
	if err != nil {
		return nil, fmt.Errorf("set paused=%t on schedule %q: %w", p.Paused, p.Name, mapErr(err))
	}
	return got, nil
}

// dueSQL is the loop's look at due schedules, run by every node every
// second: EXPLAIN QUERY PLAN must show the schedules_due index and no sort.
const dueSQL = `/* rowq:schedules.due */
	SELECT ` + scheduleCols + ` FROM schedules WHERE paused = 0 AND next_run_at <= ? ORDER BY next_run_at LIMIT ?`

// SchedulesDue returns the unpaused schedules due at p.Before.
func (s *Store) SchedulesDue(ctx context.Context, p *store.SchedulesDueParams) ([]*store.Schedule, error) {
	out, err := s.querySchedules(ctx, dueSQL, p.Before.UnixMicro(), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list due schedules: %w", err)
	}
	return out, nil
}

var errLost = errors.New("next_run_at moved")

// insertJob inserts one job in tx with the statement JobsInsert uses.
func insertJob(ctx context.Context, tx *sql.Tx, j *store.JobInsertParams, now int64) (int64, error) {
	res, err := tx.ExecContext(ctx, insertSQL, insertArgs(j, now)...)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

func insertRun(ctx context.Context, tx *sql.Tx, r *store.ScheduleRun) error {
	var job, queue any
	if !r.Skipped {
		job, queue = r.JobID, r.Queue
	}
	res, err := tx.ExecContext(ctx, `/* rowq:schedules.run.insert */
		INSERT INTO schedule_runs (schedule_name, kind, tick, fired_at, node, job_id, queue_name, reason)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		r.Schedule, r.Kind, r.Tick.UnixMicro(), r.FiredAt.UnixMicro(), r.Node, job, queue, r.Reason)
	if err != nil {
		return err
	}
	r.ID, err = res.LastInsertId()
	return err
}

// pruneRuns keeps the newest store.ScheduleRunsKept runs of a schedule.
func pruneRuns(ctx context.Context, tx *sql.Tx, name string) error {
	_, err := tx.ExecContext(ctx, `/* rowq:schedules.runs.prune */
		DELETE FROM schedule_runs WHERE schedule_name = ?1 AND id < (
			SELECT id FROM schedule_runs WHERE schedule_name = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)`,
		name, store.ScheduleRunsKept-1)
	return err
}

// ScheduleFire fires a tick in one transaction. SQLite has one writer, so
// a node racing on the same tick runs after this transaction and its
// compare-and-set matches nothing.
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) ([]*store.ScheduleRun, error) {
	var runs []*store.ScheduleRun
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `/* rowq:schedules.fire.advance */
			UPDATE schedules SET next_run_at = ? WHERE name = ? AND next_run_at = ? AND paused = 0`,
			p.Next.UnixMicro(), p.Name, p.Expect.UnixMicro())
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return errLost
		}
		now := s.micros()
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
			var fired bool
			err := tx.QueryRowContext(ctx, `/* rowq:schedules.fire.seen */
				SELECT EXISTS (SELECT 1 FROM schedule_runs WHERE schedule_name = ? AND kind = 'tick' AND tick = ?)`, p.Name, ri.Tick.UnixMicro()).Scan(&fired)
			if err != nil {
				return err
			}
			if fired {
				continue
			}
			r := &store.ScheduleRun{Schedule: p.Name, Kind: store.RunTick, Tick: ri.Tick.UTC(), FiredAt: fromMicros(now), Node: p.Node, Reason: ri.Reason, Skipped: ri.Job == nil}
			if ri.Job != nil && prev != 0 {
				var stored bool
				err := tx.QueryRowContext(ctx, `/* rowq:schedules.fire.overlap */ SELECT EXISTS (SELECT 1 FROM jobs WHERE id = ?)`, prev).Scan(&stored)
				if err != nil {
					return err
				}
				if stored {
					r.Skipped, r.Reason = true, store.OverlapReason(prev)
				}
			}
			if !r.Skipped {
				if r.JobID, err = insertJob(ctx, tx, ri.Job, now); err != nil {
					return err
				}
				r.Queue = ri.Job.Queue
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
	if errors.Is(err, errLost) {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("fire schedule %q at %s: %w", p.Name, p.Expect.UTC().Format(time.RFC3339), err)
	}
	return runs, nil
}

// ScheduleTrigger enqueues one run of a schedule now.
func (s *Store) ScheduleTrigger(ctx context.Context, p *store.ScheduleTriggerParams) (*store.ScheduleRun, error) {
	var r *store.ScheduleRun
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var one int
		if err := tx.QueryRowContext(ctx, `/* rowq:schedules.trigger.check */ SELECT 1 FROM schedules WHERE name = ?`, p.Name).Scan(&one); err != nil {
			return err
		}
		now := s.micros()
		id, err := insertJob(ctx, tx, p.Job, now)
		if err != nil {
			return err
		}
		r = &store.ScheduleRun{Schedule: p.Name, Kind: store.RunTrigger, Tick: fromMicros(now), FiredAt: fromMicros(now), Node: p.Node, JobID: id, Queue: p.Job.Queue}
		if err := insertRun(ctx, tx, r); err != nil {
			return err
		}
		return pruneRuns(ctx, tx, p.Name)
	})
	if err != nil {
		return nil, fmt.Errorf("trigger schedule %q: %w", p.Name, err)
	}
	return r, nil
}

// ScheduleRuns returns a page of a schedule's runs, newest first.
func (s *Store) ScheduleRuns(ctx context.Context, p *store.ScheduleRunsParams) ([]*store.ScheduleRun, error) {
	before := p.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	out, err := sqldb.QueryAll(ctx, s.r, scanRun, `/* rowq:schedules.runs */
		SELECT `+runCols+` FROM schedule_runs WHERE schedule_name = ? AND id < ? ORDER BY id DESC LIMIT ?`,
		p.Name, before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list runs of schedule %q: %w", p.Name, mapErr(err))
	}
	return out, nil
}
