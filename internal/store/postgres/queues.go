package postgres

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// QueueSetPaused pauses or resumes the queue and returns it, or
// store.ErrNotFound.
func (s *Store) QueueSetPaused(ctx context.Context, name string, paused bool) (*store.Queue, error) {
	q, err := queryOne(ctx, s, scanQueue, `/* rowq:queues.set_paused */
		UPDATE queues SET paused = $2, updated_at = now() WHERE name = $1 RETURNING `+queueCols, name, paused)
	if err != nil {
		return nil, fmt.Errorf("set paused=%t on queue %q: %w", paused, name, mapErr(err))
	}
	return q, nil
}

const queueCols = `name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, paused, delivery, keep_finished`

func scanQueue(row pgx.CollectableRow) (*store.Queue, error) { return scanQueueAnd(row) }

// scanQueueAnd scans queueCols, then more columns into extra.
func scanQueueAnd(row pgx.CollectableRow, extra ...any) (*store.Queue, error) {
	var q store.Queue
	err := row.Scan(append([]any{&q.Name, &q.PollingInterval, &q.MaxWorkers, &q.MaxDispatchesPerSecond, &q.MaxBurstSize, &q.Paused, &q.Delivery, &q.KeepFinished}, extra...)...)
	return &q, err
}

// QueuePut creates the queue or replaces its settings, keeping its leader
// and created_at.
func (s *Store) QueuePut(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	got, err := queryOne(ctx, s, scanQueue, `/* rowq:queues.put */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, delivery, keep_finished, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now())
		ON CONFLICT (name) DO UPDATE SET
			polling_interval = EXCLUDED.polling_interval,
			max_workers = EXCLUDED.max_workers,
			max_dispatches_per_second = EXCLUDED.max_dispatches_per_second,
			max_burst_size = EXCLUDED.max_burst_size,
			delivery = EXCLUDED.delivery,
			keep_finished = EXCLUDED.keep_finished,
			updated_at = EXCLUDED.updated_at
		RETURNING `+queueCols,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, store.DeliveryOf(q), q.KeepFinished)
	if err != nil {
		return nil, fmt.Errorf("put queue %q: %w", q.Name, mapErr(err))
	}
	return got, nil
}

// QueueEnsure creates the queue if it does not exist and returns the stored
// queue either way.
func (s *Store) QueueEnsure(ctx context.Context, q *store.Queue) (*store.Queue, error) {
	_, err := s.exec(ctx, `/* rowq:queues.ensure */
		INSERT INTO queues (name, polling_interval, max_workers, max_dispatches_per_second, max_burst_size, delivery, keep_finished, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, now(), now())
		ON CONFLICT (name) DO NOTHING`,
		q.Name, q.PollingInterval, q.MaxWorkers, q.MaxDispatchesPerSecond, q.MaxBurstSize, store.DeliveryOf(q), q.KeepFinished)
	if err != nil {
		return nil, fmt.Errorf("ensure queue %q: %w", q.Name, mapErr(err))
	}
	return s.QueueGet(ctx, q.Name)
}

// QueueGet returns one queue or store.ErrNotFound.
func (s *Store) QueueGet(ctx context.Context, name string) (*store.Queue, error) {
	q, err := queryOne(ctx, s, scanQueue, `/* rowq:queues.get */ SELECT `+queueCols+` FROM queues WHERE name = $1`, name)
	if err != nil {
		return nil, fmt.Errorf("get queue %q: %w", name, mapErr(err))
	}
	return q, nil
}

// QueueList returns all queues ordered by name.
func (s *Store) QueueList(ctx context.Context, p *store.QueueListParams) ([]*store.Queue, error) {
	var limit *int // NULL: no limit
	if p.Limit > 0 {
		limit = &p.Limit
	}
	qs, err := queryAll(ctx, s, scanQueue, `/* rowq:queues.list */ SELECT `+queueCols+` FROM queues WHERE name > $1 ORDER BY name LIMIT $2`, p.After, limit)
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", mapErr(err))
	}
	return qs, nil
}

// QueueDelete removes the queue and returns it, or store.ErrNotFound.
func (s *Store) QueueDelete(ctx context.Context, name string) (*store.Queue, error) {
	q, err := queryOne(ctx, s, scanQueue, `/* rowq:queues.delete */ DELETE FROM queues WHERE name = $1 RETURNING `+queueCols, name)
	if err != nil {
		return nil, fmt.Errorf("delete queue %q: %w", name, mapErr(err))
	}
	return q, nil
}

// claimSQL takes up to $2 queues without a live leader, in name order, if
// the claiming node is live itself. Two nodes may race: the loser's UPDATE
// waits for the winner's row lock, then re-checks its WHERE on the new row
// (leader = winner). The NOT EXISTS sits under an OR, so it stays a subplan
// that this re-check evaluates again, rather than an anti-join the re-check
// would not redo. TestQueuesClaim_RaceOneLeader holds that. The subquery
// picks the candidates without locking them; the outer WHERE decides.
const claimSQL = `/* rowq:queues.claim */
	UPDATE queues SET leader = $1
	WHERE (leader IS NULL OR NOT EXISTS (
			SELECT 1 FROM nodes WHERE nodes.id = queues.leader AND nodes.expires_at > now()))
		AND EXISTS (SELECT 1 FROM nodes WHERE id = $1 AND expires_at > now())
		AND name IN (SELECT c.name FROM queues c
			WHERE c.leader IS NULL OR NOT EXISTS (
				SELECT 1 FROM nodes WHERE nodes.id = c.leader AND nodes.expires_at > now())
			ORDER BY c.name LIMIT $2)`

// QueuesClaim makes p.Node the leader of up to p.Limit queues (0: all)
// without a live leader.
func (s *Store) QueuesClaim(ctx context.Context, p *store.QueuesClaimParams) error {
	limit := p.Limit
	if limit <= 0 {
		limit = math.MaxInt32
	}
	if _, err := s.exec(ctx, claimSQL, p.Node, limit); err != nil {
		return fmt.Errorf("claim queues for node %q: %w", p.Node, mapErr(err))
	}
	return nil
}

// QueuesLed returns the queues whose leader is p.Node (whose settings
// changed at or after p.Since, if set), ordered by name, and now() at the
// read. It walks the index (leader, updated_at).
func (s *Store) QueuesLed(ctx context.Context, p *store.QueuesLedParams) (*store.LedQueues, error) {
	var (
		out store.LedQueues
		err error
	)
	scan := func(row pgx.CollectableRow) (*store.Queue, error) { return scanQueueAnd(row, &out.At) }
	if p.Since.IsZero() {
		out.Queues, err = queryAll(ctx, s, scan, `/* rowq:queues.led */
			SELECT `+queueCols+`, now() FROM queues WHERE leader = $1 ORDER BY name`, p.Node)
	} else {
		out.Queues, err = queryAll(ctx, s, scan, `/* rowq:queues.led_since */
			SELECT `+queueCols+`, now() FROM queues WHERE leader = $1 AND updated_at >= $2 ORDER BY name`, p.Node, p.Since)
	}
	if err != nil {
		return nil, fmt.Errorf("list queues led by node %q: %w", p.Node, mapErr(err))
	}
	return &out, nil
}

// QueuesRelease gives up every queue led by node.
func (s *Store) QueuesRelease(ctx context.Context, node string) error {
	if _, err := s.exec(ctx, `/* rowq:queues.release */ UPDATE queues SET leader = NULL WHERE leader = $1`, node); err != nil {
		return fmt.Errorf("release queues of node %q: %w", node, mapErr(err))
	}
	return nil
}

// QueuesYield gives up the queues of p.Queues that p.Node leads.
func (s *Store) QueuesYield(ctx context.Context, p *store.QueuesYieldParams) error {
	if len(p.Queues) == 0 {
		return nil
	}
	if _, err := s.exec(ctx, `/* rowq:queues.yield */ UPDATE queues SET leader = NULL
		WHERE leader = $1 AND name = ANY($2)`, p.Node, p.Queues); err != nil {
		return fmt.Errorf("yield %d queues of node %q: %w", len(p.Queues), p.Node, mapErr(err))
	}
	return nil
}

// QueueLeader returns the live node leading the queue, or store.ErrNotFound.
func (s *Store) QueueLeader(ctx context.Context, queue string) (*store.Node, error) {
	n, err := queryOne(ctx, s, scanNode, `/* rowq:queues.leader */
		SELECT n.id, n.host, n.started_at, n.expires_at
		FROM queues q JOIN nodes n ON n.id = q.leader
		WHERE q.name = $1 AND n.expires_at > now()`, queue)
	if err != nil {
		return nil, fmt.Errorf("get leader of queue %q: %w", queue, mapErr(err))
	}
	return n, nil
}
