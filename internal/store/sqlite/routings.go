package sqlite

import (
	"context"
	"fmt"

	"github.com/rowq/rowq/internal/store"
)

// RoutingPut creates or replaces a routing.
func (s *Store) RoutingPut(ctx context.Context, r *store.Routing) (*store.Routing, error) {
	now := s.micros()
	res, err := s.w.ExecContext(ctx, `/* rowq:routings.put */
		INSERT INTO routings (job_category, queue_name, created_at, updated_at)
		SELECT ?1, ?2, ?3, ?3 WHERE EXISTS (SELECT 1 FROM queues WHERE name = ?2)
		ON CONFLICT (job_category) DO UPDATE SET queue_name = excluded.queue_name, updated_at = excluded.updated_at`,
		r.JobCategory, r.QueueName, now)
	if err == nil {
		var n int64
		if n, err = res.RowsAffected(); err == nil && n == 0 {
			err = fmt.Errorf("queue %q: %w", r.QueueName, store.ErrNotFound)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("put routing %q: %w", r.JobCategory, mapErr(err))
	}
	return &store.Routing{JobCategory: r.JobCategory, QueueName: r.QueueName}, nil
}

// RoutingGet returns one routing.
func (s *Store) RoutingGet(ctx context.Context, category string) (*store.Routing, error) {
	r := store.Routing{JobCategory: category}
	err := s.r.QueryRowContext(ctx, `/* rowq:routings.get */ SELECT queue_name FROM routings WHERE job_category = ?`, category).Scan(&r.QueueName)
	if err != nil {
		return nil, fmt.Errorf("get routing %q: %w", category, mapErr(err))
	}
	return &r, nil
}

// RoutingList returns every routing by category.
func (s *Store) RoutingList(ctx context.Context) ([]*store.Routing, error) {
	rows, err := s.r.QueryContext(ctx, `/* rowq:routings.list */ SELECT job_category, queue_name FROM routings ORDER BY job_category`)
	if err != nil {
		return nil, fmt.Errorf("list routings: %w", mapErr(err))
	}
	defer rows.Close()
	var rs []*store.Routing
	for rows.Next() {
		var r store.Routing
		if err := rows.Scan(&r.JobCategory, &r.QueueName); err != nil {
			return nil, fmt.Errorf("list routings: %w", mapErr(err))
		}
		rs = append(rs, &r)
	}
	return rs, mapErr(rows.Err())
}

// RoutingDelete removes a routing and returns it.
func (s *Store) RoutingDelete(ctx context.Context, category string) (*store.Routing, error) {
	r := store.Routing{JobCategory: category}
	err := s.w.QueryRowContext(ctx, `/* rowq:routings.delete */ DELETE FROM routings WHERE job_category = ? RETURNING queue_name`, category).Scan(&r.QueueName)
	if err != nil {
		return nil, fmt.Errorf("delete routing %q: %w", category, mapErr(err))
	}
	return &r, nil
}
