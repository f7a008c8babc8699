package mysql

import (
	"context"
	"fmt"

	"github.com/rowq/rowq/internal/store"
)

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// NOW(6) + p.Lease, as JobsInsert stores waiting jobs, and returns their ids
// in order.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]int64, error) {
	if len(p.Jobs) == 0 {
		return nil, nil
	}
	ids, err := s.jobsInsert(ctx, p.Jobs, p)
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), mapErr(err))
	}
	return ids, nil
}

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
