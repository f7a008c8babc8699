package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store"
)

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
	rows, err := queryRows(ctx, s, func(row pgx.CollectableRow) (stored, error) {
		var r stored
		err := row.Scan(&r.id, &r.created, &r.next, &r.until)
		return r, err
	}, insertGrabbedSQL, args...)
	if err != nil {
		return nil, wrap(err, "insert %d grabbed jobs", len(p.Jobs))
	}
	jobs := make([]*store.Job, len(rows))
	for i, r := range rows {
		jobs[i] = p.Jobs[i].GrabbedJob(r.id, p.Node, r.created.UTC(), r.next.UTC(), r.until.UTC())
	}
	return jobs, nil
}

// jobsDueSQL names the queues of $1 whose earliest waiting job is due: for
// each, the subquery reads one entry of jobs_list (queue_name, state,
// next_try, id), however many jobs wait.
const jobsDueSQL = `/* rowq:jobs.due */ SELECT q FROM unnest($1::text[]) AS q
	WHERE (SELECT next_try FROM jobs WHERE queue_name = q AND state = 'waiting' ORDER BY next_try LIMIT 1) <= now()`

// jobsExpiredSQL names the queues of $1 that hold an expired grab; a
// queue's grabs are its deliveries in flight, few.
const jobsExpiredSQL = `/* rowq:jobs.expired */ SELECT q FROM unnest($1::text[]) AS q
	WHERE EXISTS (SELECT 1 FROM jobs WHERE queue_name = q AND state = 'grabbed' AND grabbed_until <= now())`

// JobsDue returns those of queues that hold a waiting job due now.
func (s *Store) JobsDue(ctx context.Context, queues []string) ([]string, error) {
	due, err := s.queueNames(ctx, jobsDueSQL, queues)
	if err != nil {
		return nil, wrap(err, "look for due jobs in %d queues", len(queues))
	}
	return due, nil
}

// JobsExpired returns those of queues that hold an expired grab.
func (s *Store) JobsExpired(ctx context.Context, queues []string) ([]string, error) {
	expired, err := s.queueNames(ctx, jobsExpiredSQL, queues)
	if err != nil {
		return nil, wrap(err, "look for expired grabs in %d queues", len(queues))
	}
	return expired, nil
}

// queueNames runs query with the queues as $1 and returns the names it
// selects.
func (s *Store) queueNames(ctx context.Context, query string, queues []string) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	return queryRows(ctx, s, pgx.RowTo[string], query, queues)
}
