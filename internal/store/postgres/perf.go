package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store"
)

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// now() + p.Lease with one INSERT and returns their ids in order.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]int64, error) {
	if len(p.Jobs) == 0 {
		return nil, nil
	}
	args := append(insertArgs(p.Jobs), p.Node, p.Lease.Seconds())
	ids, err := queryRows(ctx, s, pgx.RowTo[int64], insertGrabbedSQL, args...)
	if err != nil {
		return nil, wrap(err, "insert %d grabbed jobs", len(p.Jobs))
	}
	return ids, nil
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
