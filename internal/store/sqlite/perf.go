package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rowq/rowq/internal/store"
)

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// now + p.Lease in one transaction and returns them in order. The times
// are the host's clock, read in the transaction: the rows are known
// without reading them back.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]*store.Job, error) {
	if len(p.Jobs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(p.Jobs))
	now, err := s.jobsInsert(ctx, p.Jobs, p, ids)
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), err)
	}
	jobs := make([]*store.Job, len(p.Jobs))
	for i, j := range p.Jobs {
		jobs[i] = j.GrabbedJob(ids[i], p.Node, fromMicros(now), fromMicros(now+j.RunAfter.Microseconds()), fromMicros(now+p.Lease.Microseconds()))
	}
	return jobs, nil
}

// jobsDueSQL names the queues of a JSON array whose earliest waiting job is
// due by the time given: for each, the subquery reads one entry of
// jobs_list (queue_name, state, next_try, id), however many jobs wait.
const jobsDueSQL = `/* rowq:jobs.due */ SELECT q.value FROM json_each(?) AS q
	WHERE (SELECT next_try FROM jobs WHERE queue_name = q.value AND state = 'waiting' ORDER BY next_try LIMIT 1) <= ?`

// jobsExpiredSQL names the queues of a JSON array that hold a grab expired
// by the time given; a queue's grabs are its deliveries in flight, few.
const jobsExpiredSQL = `/* rowq:jobs.expired */ SELECT q.value FROM json_each(?) AS q
	WHERE EXISTS (SELECT 1 FROM jobs WHERE queue_name = q.value AND state = 'grabbed' AND grabbed_until < ?)`

// JobsDue returns those of queues that hold a waiting job due now. It reads
// on a reader connection, so it does not wait for the single writer.
func (s *Store) JobsDue(ctx context.Context, queues []string) ([]string, error) {
	due, err := s.queueNames(ctx, jobsDueSQL, queues)
	if err != nil {
		return nil, fmt.Errorf("look for due jobs in %d queues: %w", len(queues), err)
	}
	return due, nil
}

// JobsExpired returns those of queues that hold an expired grab, reading
// as JobsDue does.
func (s *Store) JobsExpired(ctx context.Context, queues []string) ([]string, error) {
	expired, err := s.queueNames(ctx, jobsExpiredSQL, queues)
	if err != nil {
		return nil, fmt.Errorf("look for expired grabs in %d queues: %w", len(queues), err)
	}
	return expired, nil
}

// queueNames runs query with the queues (a JSON array) and now, on a
// reader connection, and returns the names it selects.
func (s *Store) queueNames(ctx context.Context, query string, queues []string) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	list, err := json.Marshal(queues)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, query, string(list), s.micros())
	if err != nil {
		return nil, mapErr(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, mapErr(err)
		}
		names = append(names, q)
	}
	return names, mapErr(rows.Err())
}
