package mysql

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rowq/rowq/internal/store"
)

// NodeHeartbeat registers the node or extends its registration to
// NOW(6) + TTL; started_at keeps the first registration's time.
func (s *Store) NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error {
	ttl := p.TTL.Microseconds()
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, `/* rowq:nodes.heartbeat */
			INSERT INTO nodes (id, host, started_at, expires_at)
			VALUES (?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND)
			ON DUPLICATE KEY UPDATE host = ?, expires_at = NOW(6) + INTERVAL ? MICROSECOND`,
			p.ID, p.Host, ttl, p.Host, ttl)
		return err
	})
	if err != nil {
		return fmt.Errorf("heartbeat node %q: %w", p.ID, mapErr(err))
	}
	return nil
}

// NodeDelete removes the node's registration; the queues it led become
// claimable at once.
func (s *Store) NodeDelete(ctx context.Context, id string) error {
	if _, err := s.db.ExecContext(ctx, `/* rowq:nodes.delete */ DELETE FROM nodes WHERE id = ?`, id); err != nil {
		return fmt.Errorf("delete node %q: %w", id, mapErr(err))
	}
	return nil
}

const queueCols = "name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, paused"

func scanQueue(sc scanner) (*store.Queue, error) {
	var (
		q     store.Queue
		rate  sql.NullFloat64
		burst sql.NullInt64
	)
	if err := sc.Scan(&q.Name, &q.PollingInterval, &q.MaxWorkers, &rate, &burst, &q.Paused); err != nil {
		return nil, err
	}
	if rate.Valid {
		q.MaxDispatchesPerSecond = &rate.Float64
	}
	if burst.Valid {
		b := int(burst.Int64)
		q.MaxBurstSize = &b
	}
	return &q, nil
}

func (s *Store) queryQueues(ctx context.Context, query string, args ...any) ([]*store.Queue, error) {
	rows, err := s.db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var qs []*store.Queue
	for rows.Next() {
		q, err := scanQueue(rows)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, rows.Err()
}

// QueuePut creates the queue or replaces its settings, keeping its leader
// and created_at.
func (s *Store) QueuePut(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	_, err := s.db.ExecContext(ctx, `/* rowq:queues.put */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, NOW(6), NOW(6))
		ON DUPLICATE KEY UPDATE polling_interval = ?, max_workers = ?, max_dispatches_per_second = ?, max_burst_size = ?, updated_at = NOW(6)`,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize,
		q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize)
	if err != nil {
		return nil, fmt.Errorf("put queue %q: %w", q.Name, mapErr(err))
	}
	return s.QueueGet(ctx, q.Name)
}

// QueueEnsure creates the queue if it does not exist and returns the stored
// queue either way.
func (s *Store) QueueEnsure(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	_, err := s.db.ExecContext(ctx, `/* rowq:queues.ensure */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, NOW(6), NOW(6))
		ON DUPLICATE KEY UPDATE name = name`,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize)
	if err != nil {
		return nil, fmt.Errorf("ensure queue %q: %w", q.Name, mapErr(err))
	}
	return s.QueueGet(ctx, q.Name)
}

// QueueGet returns one queue or store.ErrNotFound.
func (s *Store) QueueGet(ctx context.Context, name string) (*store.Queue, error) {
	q, err := scanQueue(s.db.QueryRowContext(ctx, `/* rowq:queues.get */ SELECT `+queueCols+` FROM queues WHERE name = ?`, name))
	if err != nil {
		return nil, fmt.Errorf("get queue %q: %w", name, mapErr(err))
	}
	return q, nil
}

// QueueList returns all queues ordered by name.
func (s *Store) QueueList(ctx context.Context) ([]*store.Queue, error) {
	qs, err := s.queryQueues(ctx, `/* rowq:queues.list */ SELECT `+queueCols+` FROM queues ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", mapErr(err))
	}
	return qs, nil
}

// QueueDelete removes the queue and returns it, or store.ErrNotFound.
func (s *Store) QueueDelete(ctx context.Context, name string) (*store.Queue, error) {
	var q *store.Queue
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		q, err = scanQueue(tx.QueryRowContext(ctx, `/* rowq:queues.delete */ SELECT `+queueCols+` FROM queues WHERE name = ? FOR UPDATE`, name))
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `/* rowq:queues.delete */ DELETE FROM queues WHERE name = ?`, name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delete queue %q: %w", name, mapErr(err))
	}
	return q, nil
}

// QueuesClaim makes p.Node the leader of every queue without a live leader,
// provided p.Node itself is registered and live. It is one UPDATE: InnoDB
// re-checks the WHERE on the latest row version once it holds the row's
// lock, so of two nodes claiming at once only the first sets a queue's
// leader; the second then sees a live leader and skips it.
func (s *Store) QueuesClaim(ctx context.Context, p *store.QueuesClaimParams) error {
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, `/* rowq:queues.claim */
			UPDATE queues SET leader = ?
			WHERE (leader IS NULL OR NOT EXISTS (
					SELECT 1 FROM nodes n WHERE n.id = queues.leader AND n.expires_at > NOW(6)))
			  AND EXISTS (SELECT 1 FROM nodes me WHERE me.id = ? AND me.expires_at > NOW(6))`,
			p.Node, p.Node)
		return err
	})
	if err != nil {
		return fmt.Errorf("claim queues for node %q: %w", p.Node, mapErr(err))
	}
	return nil
}

// QueuesLed returns the queues whose leader is node, ordered by name.
func (s *Store) QueuesLed(ctx context.Context, node string) ([]*store.Queue, error) {
	qs, err := s.queryQueues(ctx, `/* rowq:queues.led */ SELECT `+queueCols+` FROM queues WHERE leader = ? ORDER BY name`, node)
	if err != nil {
		return nil, fmt.Errorf("list queues led by node %q: %w", node, mapErr(err))
	}
	return qs, nil
}

// QueuesRelease gives up every queue led by node.
func (s *Store) QueuesRelease(ctx context.Context, node string) error {
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, `/* rowq:queues.release */ UPDATE queues SET leader = NULL WHERE leader = ?`, node)
		return err
	})
	if err != nil {
		return fmt.Errorf("release queues of node %q: %w", node, mapErr(err))
	}
	return nil
}

// QueueLeader returns the live node leading the queue, or store.ErrNotFound.
func (s *Store) QueueLeader(ctx context.Context, queue string) (*store.Node, error) {
	var n store.Node
	err := s.db.QueryRowContext(ctx, `/* rowq:queues.leader */
		SELECT n.id, n.host, n.started_at, n.expires_at
		FROM queues q JOIN nodes n ON n.id = q.leader
		WHERE q.name = ? AND n.expires_at > NOW(6)`, queue).
		Scan(&n.ID, &n.Host, &n.StartedAt, &n.ExpiresAt)
	if err != nil {
		return nil, fmt.Errorf("get leader of queue %q: %w", queue, mapErr(err))
	}
	return &n, nil
}

const routingCols = "job_category, queue_name"

func scanRouting(sc scanner) (*store.Routing, error) {
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
	n, err := affected(s.db.ExecContext(ctx, `/* rowq:routings.put */
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
