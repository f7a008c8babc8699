package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rowq/rowq/internal/store"
)

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// now + p.Lease in one transaction and returns their ids in order.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]int64, error) {
	if len(p.Jobs) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(p.Jobs))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		stmt, err := tx.PrepareContext(ctx, `/* rowq:jobs.insert_grabbed */
			INSERT INTO jobs (queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay,
				grabbed_by, grabbed_until)
			VALUES (?, ?, ?, ?, 'grabbed', ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer stmt.Close()
		now := s.micros()
		for i, j := range p.Jobs {
			res, err := stmt.ExecContext(ctx, j.Queue, j.Category, j.URL, nullPayload(j.Payload), now, now,
				j.Timeout, j.MaxRetries, j.RetryDelay, p.Node, now+p.Lease.Microseconds())
			if err != nil {
				return err
			}
			if ids[i], err = res.LastInsertId(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), err)
	}
	return ids, nil
}
