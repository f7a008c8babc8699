package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const queueCols = `name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, paused, delivery, keep_finished`

func scanQueue(row sqldb.Scanner) (*store.Queue, error) {
	var (
		q     store.Queue
		rate  sql.NullFloat64
		burst sql.NullInt64
	)
	if err := row.Scan(&q.Name, &q.PollingInterval, &q.MaxWorkers, &rate, &burst, &q.Paused, &q.Delivery, &q.KeepFinished); err != nil {
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

func queryQueues(ctx context.Context, db *sql.DB, query string, args ...any) ([]*store.Queue, error) {
	qs, err := sqldb.QueryAll(ctx, db, scanQueue, query, args...)
	return qs, mapErr(err)
}

// QueuePut creates or replaces a queue's settings.
func (s *Store) QueuePut(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	now := s.micros()
	row := s.w.QueryRowContext(ctx, `/* rowq:queues.put */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, delivery, keep_finished, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET polling_interval = excluded.polling_interval, max_workers = excluded.max_workers,
			max_dispatches_per_second = excluded.max_dispatches_per_second, max_burst_size = excluded.max_burst_size,
			delivery = excluded.delivery, keep_finished = excluded.keep_finished, updated_at = excluded.updated_at
		RETURNING `+queueCols,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, store.DeliveryOf(q), q.KeepFinished, now, now)
	got, err := scanQueue(row)
	if err != nil {
		return nil, fmt.Errorf("put queue %q: %w", q.Name, mapErr(err))
	}
	return got, nil
}

// QueueEnsure creates the queue if it is missing.
func (s *Store) QueueEnsure(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	now := s.micros()
	_, err := s.w.ExecContext(ctx, `/* rowq:queues.ensure */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, delivery, keep_finished, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO NOTHING`,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, store.DeliveryOf(q), q.KeepFinished, now, now)
	if err != nil {
		return nil, fmt.Errorf("ensure queue %q: %w", q.Name, mapErr(err))
	}
	return s.QueueGet(ctx, q.Name)
}

// QueueGet returns one queue.
func (s *Store) QueueGet(ctx context.Context, name string) (*store.Queue, error) {
	q, err := scanQueue(s.r.QueryRowContext(ctx, `/* rowq:queues.get */ SELECT `+queueCols+` FROM queues WHERE name = ?`, name))
	if err != nil {
		return nil, fmt.Errorf("get queue %q: %w", name, mapErr(err))
	}
	return q, nil
}

// QueueList returns every queue by name.
func (s *Store) QueueList(ctx context.Context, p *store.QueueListParams) ([]*store.Queue, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	qs, err := queryQueues(ctx, s.r, `/* rowq:queues.list */ SELECT `+queueCols+` FROM queues WHERE name > ? ORDER BY name LIMIT ?`, p.After, limit)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	return qs, nil
}

// QueueDelete removes a queue and returns it.
func (s *Store) QueueDelete(ctx context.Context, name string) (*store.Queue, error) {
	q, err := scanQueue(s.w.QueryRowContext(ctx, `/* rowq:queues.delete */ DELETE FROM queues WHERE name = ? RETURNING `+queueCols, name))
	if err != nil {
		return nil, fmt.Errorf("delete queue %q: %w", name, mapErr(err))
	}
	return q, nil
}

// QueuesClaim makes the node the leader of up to p.Limit queues (0: all)
// without a live leader, in name order. SQLite has one writer: no claim
// races another.
func (s *Store) QueuesClaim(ctx context.Context, p *store.QueuesClaimParams) error {
	limit := p.Limit
	if limit <= 0 {
		limit = -1 // SQLite: no bound
	}
	now := s.micros()
	_, err := s.w.ExecContext(ctx, `/* rowq:queues.claim */
		UPDATE queues SET leader = ?1
		WHERE name IN (SELECT name FROM queues
				WHERE leader IS NULL OR leader NOT IN (SELECT id FROM nodes WHERE expires_at > ?2)
				ORDER BY name LIMIT ?3)
		  AND EXISTS (SELECT 1 FROM nodes WHERE id = ?1 AND expires_at > ?2)`, p.Node, now, limit)
	if err != nil {
		return fmt.Errorf("claim queues for node %q: %w", p.Node, mapErr(err))
	}
	return nil
}

// QueuesLed returns the queues whose leader is p.Node (whose settings
// changed at or after p.Since, if set), ordered by name, and the clock at
// the read. It walks the index (leader, updated_at).
func (s *Store) QueuesLed(ctx context.Context, p *store.QueuesLedParams) (*store.LedQueues, error) {
	var (
		qs  []*store.Queue
		err error
	)
	now := s.micros()
	if p.Since.IsZero() {
		qs, err = queryQueues(ctx, s.r, `/* rowq:queues.led */ SELECT `+queueCols+` FROM queues WHERE leader = ? ORDER BY name`, p.Node)
	} else {
		qs, err = queryQueues(ctx, s.r, `/* rowq:queues.led_since */
			SELECT `+queueCols+` FROM queues WHERE leader = ? AND updated_at >= ? ORDER BY name`, p.Node, p.Since.UnixMicro())
	}
	if err != nil {
		return nil, fmt.Errorf("list queues led by %q: %w", p.Node, err)
	}
	out := &store.LedQueues{Queues: qs}
	if len(qs) > 0 {
		out.At = fromMicros(now)
	}
	return out, nil
}

// QueuesRelease gives up the node's queues.
func (s *Store) QueuesRelease(ctx context.Context, node string) error {
	if _, err := s.w.ExecContext(ctx, `/* rowq:queues.release */ UPDATE queues SET leader = NULL WHERE leader = ?`, node); err != nil {
		return fmt.Errorf("release queues of node %q: %w", node, mapErr(err))
	}
	return nil
}

// QueuesYield gives up the queues of p.Queues that p.Node leads.
func (s *Store) QueuesYield(ctx context.Context, p *store.QueuesYieldParams) error {
	if len(p.Queues) == 0 {
		return nil
	}
	args := make([]any, 0, len(p.Queues)+1)
	args = append(args, p.Node)
	for _, q := range p.Queues {
		args = append(args, q)
	}
	if _, err := s.w.ExecContext(ctx, `/* rowq:queues.yield */ UPDATE queues SET leader = NULL
		WHERE leader = ? AND name IN (`+sqldb.Placeholders(len(p.Queues))+`)`, args...); err != nil {
		return fmt.Errorf("yield %d queues of node %q: %w", len(p.Queues), p.Node, mapErr(err))
	}
	return nil
}

// QueueLeader returns the live node that leads the queue.
func (s *Store) QueueLeader(ctx context.Context, queue string) (*store.Node, error) {
	var (
		n                  store.Node
		started, expiresAt int64
	)
	err := s.r.QueryRowContext(ctx, `/* rowq:queues.leader */
		SELECT n.id, n.host, n.started_at, n.expires_at FROM queues q JOIN nodes n ON n.id = q.leader
		WHERE q.name = ? AND n.expires_at > ?`, queue, s.micros()).Scan(&n.ID, &n.Host, &started, &expiresAt)
	if err != nil {
		return nil, fmt.Errorf("get leader of queue %q: %w", queue, mapErr(err))
	}
	n.StartedAt, n.ExpiresAt = fromMicros(started), fromMicros(expiresAt)
	return &n, nil
}

// QueueSetPaused pauses or resumes the queue and returns it, or
// store.ErrNotFound.
func (s *Store) QueueSetPaused(ctx context.Context, name string, paused bool) (*store.Queue, error) {
	q, err := scanQueue(s.w.QueryRowContext(ctx, `/* rowq:queues.set_paused */
		UPDATE queues SET paused = ?, updated_at = ? WHERE name = ? RETURNING `+queueCols, paused, s.micros(), name))
	if err != nil {
		return nil, fmt.Errorf("set paused=%t on queue %q: %w", paused, name, mapErr(err))
	}
	return q, nil
}
