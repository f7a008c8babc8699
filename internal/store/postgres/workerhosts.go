package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// WorkerHostsSet replaces the queue's worker hosts: a DELETE, then one
// INSERT over arrays, in one transaction.
func (s *Store) WorkerHostsSet(ctx context.Context, p *store.WorkerHostsSetParams) error {
	var (
		hosts    = make([]string, len(p.Hosts))
		rates    = make([]*float64, len(p.Hosts))
		breakers = make([]string, len(p.Hosts))
		failures = make([]int, len(p.Hosts))
		until    = make([]*time.Time, len(p.Hosts))
	)
	for i, h := range p.Hosts {
		hosts[i], rates[i], breakers[i], failures[i], until[i] = h.Host, h.Rate, h.Breaker, h.Failures, h.OpenUntil
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `/* rowq:worker_hosts.set */ DELETE FROM worker_hosts WHERE queue_name = $1`, p.Queue); err != nil {
			return err
		}
		if len(p.Hosts) == 0 {
			return nil
		}
		_, err := tx.Exec(ctx, `/* rowq:worker_hosts.set */
			INSERT INTO worker_hosts (queue_name, host, node, rate, breaker, failures, open_until, updated_at)
			SELECT $1, unnest($2::text[]), $3, unnest($4::float8[]), unnest($5::text[]), unnest($6::int[]), unnest($7::timestamptz[]), now()`,
			p.Queue, hosts, p.Node, rates, breakers, failures, until)
		return err
	})
	if err != nil {
		return fmt.Errorf("record %d worker hosts of queue %q: %w", len(p.Hosts), p.Queue, mapErr(err))
	}
	return nil
}

// WorkerHostsList returns the worker hosts that the current leader of
// each queue recorded.
func (s *Store) WorkerHostsList(ctx context.Context, queue string) ([]*store.WorkerHost, error) {
	hosts, err := queryAll(ctx, s, func(row pgx.CollectableRow) (*store.WorkerHost, error) {
		var h store.WorkerHost
		err := row.Scan(&h.Queue, &h.Host, &h.Rate, &h.Breaker, &h.Failures, &h.OpenUntil, &h.UpdatedAt)
		h.UpdatedAt = h.UpdatedAt.UTC()
		if h.OpenUntil != nil {
			t := h.OpenUntil.UTC()
			h.OpenUntil = &t
		}
		return &h, err
	}, `/* rowq:worker_hosts.list */
		SELECT w.queue_name, w.host, w.rate, w.breaker, w.failures, w.open_until, w.updated_at
		FROM worker_hosts w JOIN queues q ON q.name = w.queue_name AND q.leader = w.node
		WHERE $1 = '' OR w.queue_name = $1
		ORDER BY w.queue_name, w.host`, queue)
	if err != nil {
		return nil, fmt.Errorf("list worker hosts of queue %q: %w", queue, mapErr(err))
	}
	return hosts, nil
}
