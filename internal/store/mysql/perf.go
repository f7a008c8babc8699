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
