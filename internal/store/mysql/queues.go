package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"math"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// QueueSetPaused pauses or resumes the queue and returns it, or
// store.ErrNotFound.
func (s *Store) QueueSetPaused(ctx context.Context, name string, paused bool) (*store.Queue, error) {
	var n int64
	err := retry(ctx, func() (err error) {
		n, err = sqldb.Affected(s.db.ExecContext(ctx, `/* rowq:queues.set_paused */
			UPDATE queues SET paused = ?, updated_at = NOW(6) WHERE name = ?`, paused, name))
		return err
	})
	if err == nil && n == 0 {
		err = store.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("set paused=%t on queue %q: %w", paused, name, mapErr(err))
	}
	return s.QueueGet(ctx, name)
}

const queueCols = "name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, paused, delivery, keep_finished"

func scanQueue(sc sqldb.Scanner) (*store.Queue, error) { return scanQueueAnd(sc) }

// scanQueueAnd scans queueCols, then more columns into extra.
func scanQueueAnd(sc sqldb.Scanner, extra ...any) (*store.Queue, error) {
	var (
		q     store.Queue
		rate  sql.NullFloat64
		burst sql.NullInt64
	)
	dest := append([]any{&q.Name, &q.PollingInterval, &q.MaxWorkers, &rate, &burst, &q.Paused, &q.Delivery, &q.KeepFinished}, extra...)
	if err := sc.Scan(dest...); err != nil {
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
	return sqldb.QueryAll(ctx, s.db, scanQueue, query, args...)
}

// QueuePut creates the queue or replaces its settings, keeping its leader
// and created_at.
func (s *Store) QueuePut(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	_, err := s.db.ExecContext(ctx, `/* rowq:queues.put */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, delivery, keep_finished, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, NOW(6), NOW(6))
		ON DUPLICATE KEY UPDATE polling_interval = ?, max_workers = ?, max_dispatches_per_second = ?, max_burst_size = ?, delivery = ?, keep_finished = ?, updated_at = NOW(6)`,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, store.DeliveryOf(q), q.KeepFinished,
		q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, store.DeliveryOf(q), q.KeepFinished)
	if err != nil {
		return nil, fmt.Errorf("put queue %q: %w", q.Name, mapErr(err))
	}
	return s.QueueGet(ctx, q.Name)
}

// QueueEnsure creates the queue if it does not exist and returns the stored
// queue either way.
func (s *Store) QueueEnsure(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	_, err := s.db.ExecContext(ctx, `/* rowq:queues.ensure */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, delivery, keep_finished, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, NOW(6), NOW(6))
		ON DUPLICATE KEY UPDATE name = name`,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, store.DeliveryOf(q), q.KeepFinished)
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
func (s *Store) QueueList(ctx context.Context, p *store.QueueListParams) ([]*store.Queue, error) {
	qs, err := s.queryQueues(ctx, `/* rowq:queues.list */ SELECT `+queueCols+` FROM queues WHERE name > ? ORDER BY name LIMIT ?`, p.After, limitAll(p.Limit))
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

// QueuesClaim makes p.Node the leader of up to p.Limit queues (0: all)
// without a live leader, in name order, provided p.Node itself is registered
// and live. It is one UPDATE: InnoDB re-checks the WHERE on the latest row
// version once it holds the row's lock, so of two nodes claiming at once only
// the first sets a queue's leader; the second then sees a live leader and
// skips it.
func (s *Store) QueuesClaim(ctx context.Context, p *store.QueuesClaimParams) error {
	limit := limitAll(p.Limit)
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, `/* rowq:queues.claim */
			UPDATE queues SET leader = ?
			WHERE (leader IS NULL OR NOT EXISTS (
					SELECT 1 FROM nodes n WHERE n.id = queues.leader AND n.expires_at > NOW(6)))
			  AND EXISTS (SELECT 1 FROM nodes me WHERE me.id = ? AND me.expires_at > NOW(6))
			ORDER BY name LIMIT ?`,
			p.Node, p.Node, limit)
		return err
	})
	if err != nil {
		return fmt.Errorf("claim queues for node %q: %w", p.Node, mapErr(err))
	}
	return nil
}

// QueuesLed returns the queues whose leader is p.Node (whose settings
// changed at or after p.Since, if set), ordered by name, and NOW(6) at the
// read. It walks the index (leader, updated_at).
func (s *Store) QueuesLed(ctx context.Context, p *store.QueuesLedParams) (*store.LedQueues, error) {
	var (
		out store.LedQueues
		err error
	)
	scan := func(sc sqldb.Scanner) (*store.Queue, error) { return scanQueueAnd(sc, &out.At) }
	if p.Since.IsZero() {
		out.Queues, err = sqldb.QueryAll(ctx, s.db, scan, `/* rowq:queues.led */
			SELECT `+queueCols+`, NOW(6) FROM queues WHERE leader = ? ORDER BY name`, p.Node)
	} else {
		out.Queues, err = sqldb.QueryAll(ctx, s.db, scan, `/* rowq:queues.led_since */
			SELECT `+queueCols+`, NOW(6) FROM queues WHERE leader = ? AND updated_at >= ? ORDER BY name`, p.Node, p.Since)
	}
	if err != nil {
		return nil, fmt.Errorf("list queues led by node %q: %w", p.Node, mapErr(err))
	}
	return &out, nil
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
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, `/* rowq:queues.yield */ UPDATE queues SET leader = NULL
			WHERE leader = ? AND name IN (`+sqldb.Placeholders(len(p.Queues))+`)`, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("yield %d queues of node %q: %w", len(p.Queues), p.Node, mapErr(err))
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

// limitAll is a LIMIT for n, where 0 means no limit.
func limitAll(n int) int {
	if n <= 0 {
		return math.MaxInt32
	}
	return n
}
