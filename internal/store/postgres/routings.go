package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

const routingCols = `job_category, queue_name`

func scanRouting(row pgx.CollectableRow) (*store.Routing, error) {
	var r store.Routing
	err := row.Scan(&r.JobCategory, &r.QueueName)
	return &r, err
}

// RoutingPut creates or replaces a routing; store.ErrNotFound if its queue
// does not exist.
func (s *Store) RoutingPut(ctx context.Context, r *store.Routing) (*store.Routing, error) {
	got, err := queryOne(ctx, s, scanRouting, `/* rowq:routings.put */
		INSERT INTO routings (job_category, queue_name, created_at, updated_at)
		SELECT $1, $2, now(), now() WHERE EXISTS (SELECT 1 FROM queues WHERE name = $2)
		ON CONFLICT (job_category) DO UPDATE SET queue_name = EXCLUDED.queue_name, updated_at = EXCLUDED.updated_at
		RETURNING `+routingCols,
		r.JobCategory, r.QueueName)
	if err != nil {
		return nil, fmt.Errorf("put routing %q to queue %q: %w", r.JobCategory, r.QueueName, mapErr(err))
	}
	return got, nil
}

// RoutingGet returns one routing or store.ErrNotFound.
func (s *Store) RoutingGet(ctx context.Context, category string) (*store.Routing, error) {
	r, err := queryOne(ctx, s, scanRouting, `/* rowq:routings.get */ SELECT `+routingCols+` FROM routings WHERE job_category = $1`, category)
	if err != nil {
		return nil, fmt.Errorf("get routing %q: %w", category, mapErr(err))
	}
	return r, nil
}

// RoutingList returns all routings ordered by category.
func (s *Store) RoutingList(ctx context.Context) ([]*store.Routing, error) {
	rs, err := queryAll(ctx, s, scanRouting, `/* rowq:routings.list */ SELECT `+routingCols+` FROM routings ORDER BY job_category`)
	if err != nil {
		return nil, fmt.Errorf("list routings: %w", mapErr(err))
	}
	return rs, nil
}

// RoutingDelete removes the routing and returns it, or store.ErrNotFound.
func (s *Store) RoutingDelete(ctx context.Context, category string) (*store.Routing, error) {
	r, err := queryOne(ctx, s, scanRouting, `/* rowq:routings.delete */ DELETE FROM routings WHERE job_category = $1 RETURNING `+routingCols, category)
	if err != nil {
		return nil, fmt.Errorf("delete routing %q: %w", category, mapErr(err))
	}
	return r, nil
}
