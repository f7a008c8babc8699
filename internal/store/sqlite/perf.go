package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/rowq/rowq/internal/store"
)

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// now + p.Lease in one transaction and returns their ids in order.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]int64, error) {
	return s.jobsInsert(ctx, p.Jobs, p)
}

// jobsDueSQL names the queues of a JSON array whose earliest waiting job is
// due by the time given: for each, the subquery reads one entry of
// jobs_list (queue_name, state, next_try, id), however many jobs wait.
const jobsDueSQL = `/* rowq:jobs.due */ SELECT q.value FROM json_each(?) AS q
	WHERE (SELECT next_try FROM jobs WHERE queue_name = q.value AND state = 'waiting' ORDER BY next_try LIMIT 1) <= ?`

// JobsDue returns those of queues that hold a waiting job due now. It reads
// on a reader connection, so it does not wait for the single writer.
func (s *Store) JobsDue(ctx context.Context, queues []string) ([]string, error) {
	if len(queues) == 0 {
		return nil, nil
	}
	names, err := json.Marshal(queues)
	if err != nil {
		return nil, err
	}
	rows, err := s.r.QueryContext(ctx, jobsDueSQL, string(names), s.micros())
	if err != nil {
		return nil, fmt.Errorf("look for due jobs in %d queues: %w", len(queues), mapErr(err))
	}
	defer rows.Close()
	var due []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return nil, fmt.Errorf("look for due jobs in %d queues: %w", len(queues), mapErr(err))
		}
		due = append(due, q)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("look for due jobs in %d queues: %w", len(queues), mapErr(err))
	}
	return due, nil
}
