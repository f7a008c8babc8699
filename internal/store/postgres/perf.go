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
