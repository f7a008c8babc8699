package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const routingCols = "job_category, queue_name"

func scanRouting(sc sqldb.Scanner) (*store.Routing, error) {
	var r store.Routing
	if err := sc.Scan(&r.JobCategory, &r.QueueName); err != nil {
		return nil, err
	}
	return &r, nil
}

// RoutingPut creates or replaces a routing, or returns store.ErrNotFound if
// its queue does not exist. The INSERT … SELECT inserts nothing and updates
// nothing without the queue row; with CLIENT_FOUND_ROWS it reports 1 or 2
// rows otherwise, so 0 means no queue.
func (s *Store) RoutingPut(ctx context.Context, r *store.Routing) (*store.Routing, error) {
	n, err := sqldb.Affected(s.db.ExecContext(ctx, `/* rowq:routings.put */
		INSERT INTO routings (job_category, queue_name, created_at, updated_at)
		SELECT ?, q.name, NOW(6), NOW(6) FROM queues q WHERE q.name = ?
		ON DUPLICATE KEY UPDATE queue_name = ?, routings.updated_at = NOW(6)`,
		r.JobCategory, r.QueueName, r.QueueName))
	if err == nil && n == 0 {
		err = fmt.Errorf("queue %q: %w", r.QueueName, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("put routing %q: %w", r.JobCategory, mapErr(err))
	}
	return s.RoutingGet(ctx, r.JobCategory)
}

// RoutingGet returns one routing or store.ErrNotFound.
func (s *Store) RoutingGet(ctx context.Context, category string) (*store.Routing, error) {
	r, err := scanRouting(s.db.QueryRowContext(ctx, `/* rowq:routings.get */ SELECT `+routingCols+` FROM routings WHERE job_category = ?`, category))
	if err != nil {
		return nil, fmt.Errorf("get routing %q: %w", category, mapErr(err))
	}
	return r, nil
}

// RoutingList returns all routings ordered by category.
func (s *Store) RoutingList(ctx context.Context) ([]*store.Routing, error) {
	list, err := func() ([]*store.Routing, error) {
		rows, err := s.db.QueryContext(ctx, `/* rowq:routings.list */ SELECT `+routingCols+` FROM routings ORDER BY job_category`)
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		var list []*store.Routing
		for rows.Next() {
			r, err := scanRouting(rows)
			if err != nil {
				return nil, err
			}
			list = append(list, r)
		}
		return list, rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("list routings: %w", mapErr(err))
	}
	return list, nil
}

// RoutingDelete removes the routing and returns it, or store.ErrNotFound.
func (s *Store) RoutingDelete(ctx context.Context, category string) (*store.Routing, error) {
	var r *store.Routing
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		r, err = scanRouting(tx.QueryRowContext(ctx, `/* rowq:routings.delete */ SELECT `+routingCols+` FROM routings WHERE job_category = ? FOR UPDATE`, category))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `/* rowq:routings.delete */ DELETE FROM routings WHERE job_category = ?`, category)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete routing %q: %w", category, mapErr(err))
	}
	return r, nil
}
