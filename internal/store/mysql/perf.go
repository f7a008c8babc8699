package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/rowq/rowq/internal/store"
)

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
	step, err := s.autoIncrementStep(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), mapErr(err))
	}
	chunks := chunkInserts(p.Jobs)
	var jobs []*store.Job
	err = retry(ctx, func() error {
		jobs = jobs[:0]
		if len(chunks) == 1 {
			return s.insertGrabbedChunk(ctx, s.db, chunks[0], p, step, &jobs)
		}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			for _, c := range chunks {
				if err := s.insertGrabbedChunk(ctx, tx, c, p, step, &jobs); err != nil {
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
// with one multi-row INSERT, and appends them as stored.
func (s *Store) insertGrabbedChunk(ctx context.Context, db dbtx, jobs []*store.JobInsertParams, p *store.JobsInsertGrabbedParams, step int64, out *[]*store.Job) error {
	if s.returning.Load() {
		q, args := insertSQL(jobs, p, nil)
		rows, err := db.QueryContext(ctx, q+" RETURNING id, created_at, next_try, grabbed_until", args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for i := 0; rows.Next(); i++ {
			var (
				id                   int64
				created, next, until time.Time
			)
			if err := rows.Scan(&id, &created, &next, &until); err != nil {
				return err
			}
			if i >= len(jobs) {
				return fmt.Errorf("inserted more rows than %d", len(jobs))
			}
			*out = append(*out, jobs[i].GrabbedJob(id, p.Node, created, next, until))
		}
		return rows.Err()
	}
	var at time.Time
	if err := db.QueryRowContext(ctx, "/* rowq:jobs.insert */ SELECT NOW(6)").Scan(&at); err != nil {
		return err
	}
	q, args := insertSQL(jobs, p, &at)
	var ids []int64
	if err := execInsert(ctx, db, q, args, len(jobs), step, &ids); err != nil {
		return err
	}
	for i, j := range jobs {
		*out = append(*out, j.GrabbedJob(ids[i], p.Node, at, at.Add(micros(j.RunAfter)), at.Add(micros(p.Lease))))
	}
	return nil
}

// micros is d in whole microseconds, as INTERVAL … MICROSECOND adds it.
func micros(d time.Duration) time.Duration { return time.Duration(d.Microseconds()) * time.Microsecond }

// jobsDueSQL names the queues, of n given, whose earliest waiting job is
// due: for each, the subquery walks jobs_list (queue_name, next_try, id)
// from its start to the first waiting job, past the grabbed ones (the
// deliveries in flight, few), however many jobs wait. (An EXISTS …
// next_try <= NOW(6) would become a semi-join that reads every due job.)
func jobsDueSQL(n int) string {
	return `/* rowq:jobs.due */ SELECT q.name FROM queues q
		WHERE q.name IN (` + placeholders(n) + `) AND (
			SELECT j.next_try FROM jobs j FORCE INDEX (jobs_list)
			WHERE j.queue_name = q.name AND j.state = 'waiting' ORDER BY j.next_try LIMIT 1) <= NOW(6)`
}

// jobsExpiredSQL names the queues, of n given, that hold an expired grab;
// a queue's grabs, its deliveries in flight, are few: its range of
// jobs_fetch (queue_name, state, …).
func jobsExpiredSQL(n int) string {
	return `/* rowq:jobs.expired */ SELECT q.name FROM queues q
		WHERE q.name IN (` + placeholders(n) + `) AND EXISTS (
			SELECT 1 FROM jobs j FORCE INDEX (jobs_fetch)
			WHERE j.queue_name = q.name AND j.state = 'grabbed' AND j.grabbed_until < NOW(6))`
}

// JobsDue returns those of queues that hold a waiting job due now.
func (s *Store) JobsDue(ctx context.Context, queues []string) ([]string, error) {
	due, err := s.queueNames(ctx, jobsDueSQL, queues)
	if err != nil {
		return nil, fmt.Errorf("look for due jobs in %d queues: %w", len(queues), err)
	}
	return due, nil
}

// JobsExpired returns those of queues that hold an expired grab.
func (s *Store) JobsExpired(ctx context.Context, queues []string) ([]string, error) {
	expired, err := s.queueNames(ctx, jobsExpiredSQL, queues)
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
	args := make([]any, len(queues))
	for i, q := range queues {
		args[i] = q
	}
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
