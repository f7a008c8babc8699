package postgres

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

const scheduleCols = `name, cron, timezone, category, url, payload, max_retries, retry_delay, timeout,
	misfire, max_catchup, overlap, paused, next_run_at, created_at, updated_at, concurrency_key, concurrency_limit, ordered`

func scanSchedule(row pgx.CollectableRow) (*store.Schedule, error) {
	var (
		s       store.Schedule
		payload []byte
		ckey    *string
	)
	err := row.Scan(&s.Name, &s.Cron, &s.Timezone, &s.Category, &s.URL, &payload, &s.MaxRetries, &s.RetryDelay, &s.Timeout,
		&s.Misfire, &s.MaxCatchup, &s.Overlap, &s.Paused, &s.NextRunAt, &s.CreatedAt, &s.UpdatedAt,
		&ckey, &s.ConcurrencyLimit, &s.Ordered)
	if ckey != nil {
		s.ConcurrencyKey = *ckey
	}
	if payload != nil {
		s.Payload = payload
	}
	s.NextRunAt, s.CreatedAt, s.UpdatedAt = s.NextRunAt.UTC(), s.CreatedAt.UTC(), s.UpdatedAt.UTC()
	return &s, err
}

const runCols = `id, schedule_name, kind, tick, fired_at, node, job_id, queue_name, reason`

func scanRun(row pgx.CollectableRow) (*store.ScheduleRun, error) {
	var (
		r     store.ScheduleRun
		job   *int64
		queue *string
	)
	err := row.Scan(&r.ID, &r.Schedule, &r.Kind, &r.Tick, &r.FiredAt, &r.Node, &job, &queue, &r.Reason)
	r.Tick, r.FiredAt = r.Tick.UTC(), r.FiredAt.UTC()
	r.Skipped = job == nil
	if job != nil {
		r.JobID = *job
	}
	if queue != nil {
		r.Queue = *queue
	}
	return &r, err
}

func nullPayload(p []byte) *string {
	if p == nil {
		return nil
	}
	s := string(p)
	return &s
}

// SchedulePut creates or replaces a schedule.
func (s *Store) SchedulePut(ctx context.Context, sc *store.Schedule) (*store.Schedule, error) {
	got, err := queryOne(ctx, s, scanSchedule, `/* rowq:schedules.put */
		INSERT INTO schedules (`+scheduleCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, now(), now(), $15, $16, $17)
		ON CONFLICT (name) DO UPDATE SET
			next_run_at = CASE WHEN schedules.cron = excluded.cron AND schedules.timezone = excluded.timezone AND NOT schedules.paused
				THEN schedules.next_run_at ELSE excluded.next_run_at END,
			cron = excluded.cron, timezone = excluded.timezone, category = excluded.category,
			url = excluded.url, payload = excluded.payload, max_retries = excluded.max_retries,
			retry_delay = excluded.retry_delay, timeout = excluded.timeout, misfire = excluded.misfire,
			max_catchup = excluded.max_catchup, overlap = excluded.overlap, paused = excluded.paused,
			updated_at = now(), concurrency_key = excluded.concurrency_key,
			concurrency_limit = excluded.concurrency_limit, ordered = excluded.ordered
		RETURNING `+scheduleCols,
		sc.Name, sc.Cron, sc.Timezone, sc.Category, sc.URL, nullPayload(sc.Payload), sc.MaxRetries, sc.RetryDelay, sc.Timeout,
		sc.Misfire, sc.MaxCatchup, sc.Overlap, sc.Paused, sc.NextRunAt, nullText(sc.ConcurrencyKey), sc.ConcurrencyLimit, sc.Ordered)
	if err != nil {
		return nil, fmt.Errorf("put schedule %q: %w", sc.Name, mapErr(err))
	}
	return got, nil
}

// ScheduleGet returns one schedule.
func (s *Store) ScheduleGet(ctx context.Context, name string) (*store.Schedule, error) {
	got, err := queryOne(ctx, s, scanSchedule, `/* rowq:schedules.get */ SELECT `+scheduleCols+` FROM schedules WHERE name = $1`, name)
	if err != nil {
		return nil, fmt.Errorf("get schedule %q: %w", name, mapErr(err))
	}
	return got, nil
}

// ScheduleList returns a page of schedules by name.
func (s *Store) ScheduleList(ctx context.Context, p *store.ScheduleListParams) ([]*store.Schedule, error) {
	out, err := queryAll(ctx, s, scanSchedule, `/* rowq:schedules.list */
		SELECT `+scheduleCols+` FROM schedules WHERE name > $1 ORDER BY name LIMIT $2`, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list schedules after %q: %w", p.After, mapErr(err))
	}
	return out, nil
}

// ScheduleDelete removes a schedule and its runs in one statement.
func (s *Store) ScheduleDelete(ctx context.Context, name string) (*store.Schedule, error) {
	got, err := queryOne(ctx, s, scanSchedule, `/* rowq:schedules.delete */
		WITH runs AS (DELETE FROM schedule_runs WHERE schedule_name = $1)
		DELETE FROM schedules WHERE name = $1 RETURNING `+scheduleCols, name)
	if err != nil {
		return nil, fmt.Errorf("delete schedule %q: %w", name, mapErr(err))
	}
	return got, nil
}

// SchedulePause pauses or resumes a schedule.
func (s *Store) SchedulePause(ctx context.Context, p *store.SchedulePauseParams) (*store.Schedule, error) {
	got, err := queryOne(ctx, s, scanSchedule, `/* rowq:schedules.pause */
		UPDATE schedules SET paused = $2, next_run_at = COALESCE($3, next_run_at), updated_at = now()
		WHERE name = $1 RETURNING `+scheduleCols, p.Name, p.Paused, p.NextRunAt)
	if err != nil {
		return nil, fmt.Errorf("set paused=%t on schedule %q: %w", p.Paused, p.Name, mapErr(err))
	}
	return got, nil
}

// dueSQL is the loop's look at due schedules, run by every node every
// second: it walks the partial index schedules_due without a sort.
const dueSQL = `/* rowq:schedules.due */
	SELECT ` + scheduleCols + ` FROM schedules WHERE NOT paused AND next_run_at <= $1 ORDER BY next_run_at LIMIT $2`

// SchedulesDue returns the unpaused schedules due at p.Before.
func (s *Store) SchedulesDue(ctx context.Context, p *store.SchedulesDueParams) ([]*store.Schedule, error) {
	out, err := queryAll(ctx, s, scanSchedule, dueSQL, p.Before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list due schedules: %w", mapErr(err))
	}
	return out, nil
}

var errLost = errors.New("next_run_at moved")

// insertJob inserts one job in tx with the statement JobsInsert uses.
func insertJob(ctx context.Context, tx pgx.Tx, j *store.JobInsertParams) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, insertSQL, insertArgs([]*store.JobInsertParams{j})...).Scan(&id)
	return id, err
}

func insertRun(ctx context.Context, tx pgx.Tx, r *store.ScheduleRun) error {
	var job *int64
	var queue *string
	if !r.Skipped {
		job, queue = &r.JobID, &r.Queue
	}
	return tx.QueryRow(ctx, `/* rowq:schedules.run.insert */
		INSERT INTO schedule_runs (schedule_name, kind, tick, fired_at, node, job_id, queue_name, reason)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
		r.Schedule, r.Kind, r.Tick, r.FiredAt, r.Node, job, queue, r.Reason).Scan(&r.ID)
}

// pruneRuns keeps the newest store.ScheduleRunsKept runs of a schedule.
func pruneRuns(ctx context.Context, tx pgx.Tx, name string) error {
	_, err := tx.Exec(ctx, `/* rowq:schedules.runs.prune */
		DELETE FROM schedule_runs WHERE schedule_name = $1 AND id < (
			SELECT id FROM schedule_runs WHERE schedule_name = $1 ORDER BY id DESC LIMIT 1 OFFSET $2)`,
		name, store.ScheduleRunsKept-1)
	return err
}

// ScheduleFire fires a tick in one transaction, whose UPDATE locks the
// schedule's row at the tick expected. A row another transaction holds is
// skipped, not waited for: that is a node firing the tick (racing, or
// frozen half-way), or a change to the schedule, and the tick is fired
// exactly once either way (the next look finds it still due if that
// transaction did not fire it).
func (s *Store) ScheduleFire(ctx context.Context, p *store.ScheduleFireParams) ([]*store.ScheduleRun, error) {
	var runs []*store.ScheduleRun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		runs = nil
		var now time.Time
		err := tx.QueryRow(ctx, `/* rowq:schedules.fire.advance */
			UPDATE schedules SET next_run_at = $1 WHERE name = (
				SELECT name FROM schedules WHERE name = $2 AND next_run_at = $3 AND NOT paused
				FOR UPDATE SKIP LOCKED)
			RETURNING now()`, p.Next, p.Name, p.Expect).Scan(&now)
		if errors.Is(err, pgx.ErrNoRows) {
			return errLost
		}
		if err != nil {
			return err
		}
		now = now.UTC()
		var prev int64
		if p.SkipOverlap {
			err := tx.QueryRow(ctx, `/* rowq:schedules.fire.previous */
				SELECT job_id FROM schedule_runs WHERE schedule_name = $1 AND job_id IS NOT NULL
				ORDER BY id DESC LIMIT 1`, p.Name).Scan(&prev)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		for _, ri := range p.Runs {
			var fired bool
			err := tx.QueryRow(ctx, `/* rowq:schedules.fire.seen */
				SELECT EXISTS (SELECT 1 FROM schedule_runs WHERE schedule_name = $1 AND kind = 'tick' AND tick = $2)`, p.Name, ri.Tick).Scan(&fired)
			if err != nil {
				return err
			}
			if fired {
				continue
			}
			r := &store.ScheduleRun{Schedule: p.Name, Kind: store.RunTick, Tick: ri.Tick.UTC(), FiredAt: now, Node: p.Node, Reason: ri.Reason, Skipped: ri.Job == nil}
			if ri.Job != nil && prev != 0 {
				var stored bool
				err := tx.QueryRow(ctx, `/* rowq:schedules.fire.overlap */ SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1)`, prev).Scan(&stored)
				if err != nil {
					return err
				}
				if stored {
					r.Skipped, r.Reason = true, store.OverlapReason(prev)
				}
			}
			if !r.Skipped {
				if r.JobID, err = insertJob(ctx, tx, ri.Job); err != nil {
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
		return nil, fmt.Errorf("fire schedule %q at %s: %w", p.Name, p.Expect.UTC().Format(time.RFC3339), mapErr(pgx.ErrNoRows))
	}
	if err != nil {
		return nil, fmt.Errorf("fire schedule %q at %s: %w", p.Name, p.Expect.UTC().Format(time.RFC3339), mapErr(err))
	}
	return runs, nil
}

// ScheduleTrigger enqueues one run of a schedule now.
func (s *Store) ScheduleTrigger(ctx context.Context, p *store.ScheduleTriggerParams) (*store.ScheduleRun, error) {
	var r *store.ScheduleRun
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var now time.Time
		// The share lock keeps a concurrent delete from orphaning the run.
		err := tx.QueryRow(ctx, `/* rowq:schedules.trigger.lock */
			SELECT now() FROM schedules WHERE name = $1 FOR SHARE`, p.Name).Scan(&now)
		if err != nil {
			return err
		}
		id, err := insertJob(ctx, tx, p.Job)
		if err != nil {
			return err
		}
		r = &store.ScheduleRun{Schedule: p.Name, Kind: store.RunTrigger, Tick: now.UTC(), FiredAt: now.UTC(), Node: p.Node, JobID: id, Queue: p.Job.Queue}
		if err := insertRun(ctx, tx, r); err != nil {
			return err
		}
		return pruneRuns(ctx, tx, p.Name)
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
	out, err := queryAll(ctx, s, scanRun, `/* rowq:schedules.runs */
		SELECT `+runCols+` FROM schedule_runs WHERE schedule_name = $1 AND id < $2 ORDER BY id DESC LIMIT $3`,
		p.Name, before, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list runs of schedule %q: %w", p.Name, mapErr(err))
	}
	return out, nil
}
