package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/rowq/rowq/internal/store"
)

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// now() + p.Lease with one INSERT and returns their ids in order.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]int64, error) {
	jobs := p.Jobs
	if len(jobs) == 0 {
		return nil, nil
	}
	var (
		queues     = make([]string, len(jobs))
		categories = make([]string, len(jobs))
		urls       = make([]string, len(jobs))
		payloads   = make([]*string, len(jobs))
		timeouts   = make([]int, len(jobs))
		maxRetries = make([]int, len(jobs))
		delays     = make([]int, len(jobs))
	)
	for i, j := range jobs {
		queues[i], categories[i], urls[i] = j.Queue, j.Category, j.URL
		if len(j.Payload) > 0 {
			pl := string(j.Payload)
			payloads[i] = &pl
		}
		timeouts[i], maxRetries[i], delays[i] = j.Timeout, j.MaxRetries, j.RetryDelay
	}
	ids, err := queryRows(ctx, s, pgx.RowTo[int64], `/* rowq:jobs.insert_grabbed */
		INSERT INTO jobs (queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay,
			grabbed_by, grabbed_until)
		SELECT q, c, u, p, 'grabbed', now(), now(), t, m, d, $8::text, now() + make_interval(secs => $9::float8)
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::int[], $7::int[])
			WITH ORDINALITY AS j (q, c, u, p, t, m, d, n)
		ORDER BY n
		RETURNING id`,
		queues, categories, urls, payloads, timeouts, maxRetries, delays, p.Node, p.Lease.Seconds())
	if err != nil {
		return nil, wrap(err, "insert %d grabbed jobs", len(jobs))
	}
	return ids, nil
}
