package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// statsConflictSQL adds counters and sets gauges of an existing row.
const statsConflictSQL = ` ON CONFLICT (queue_name, node_id) DO UPDATE SET
	pushes = queue_stats.pushes + excluded.pushes, pops = queue_stats.pops + excluded.pops,
	successes = queue_stats.successes + excluded.successes, failures = queue_stats.failures + excluded.failures,
	permanent_failures = queue_stats.permanent_failures + excluded.permanent_failures,
	completes = queue_stats.completes + excluded.completes, elapsed_ms = queue_stats.elapsed_ms + excluded.elapsed_ms,
	wait_ms = queue_stats.wait_ms + excluded.wait_ms,
	cancels = queue_stats.cancels + excluded.cancels,
	busy_workers = excluded.busy_workers, pushes_per_second = excluded.pushes_per_second,
	pops_per_second = excluded.pops_per_second, updated_at = excluded.updated_at`

const statsCols = `queue_name, node_id, pushes, pops, successes, failures, permanent_failures, completes, elapsed_ms, wait_ms, cancels,
	busy_workers, pushes_per_second, pops_per_second, updated_at`

// StatsAdd adds the node's deltas to its rows in one statement, in queue
// order.
func (s *Store) StatsAdd(ctx context.Context, p *store.StatsAddParams) error {
	if len(p.Deltas) == 0 {
		return nil
	}
	ds := slices.SortedFunc(slices.Values(p.Deltas), func(a, b *store.StatsDelta) int { return strings.Compare(a.Queue, b.Queue) })
	rows := make([]string, len(ds))
	args := make([]any, 0, 14*len(ds))
	for i, d := range ds {
		b := len(args)
		ph := make([]string, 14)
		for k := range ph {
			ph[k] = fmt.Sprintf("$%d", b+k+1)
		}
		rows[i] = "(" + strings.Join(ph, ", ") + ", now())"
		args = append(args, d.Queue, p.Node, d.Pushes, d.Pops, d.Successes, d.Failures, d.PermanentFailures,
			d.Completes, d.ElapsedMs, d.WaitMs, d.Cancels, d.BusyWorkers, d.PushesPerSecond, d.PopsPerSecond)
	}
	_, err := s.exec(ctx, `/* rowq:stats.add */ INSERT INTO queue_stats (`+statsCols+`) VALUES `+strings.Join(rows, ", ")+statsConflictSQL, args...)
	if err != nil {
		return fmt.Errorf("add stats of node %q: %w", p.Node, mapErr(err))
	}
	return nil
}

// StatsGet reads the queues, the sums of their stats rows and their job
// counts (an index count on jobs_fetch) with three statements.
func (s *Store) StatsGet(ctx context.Context, p *store.StatsGetParams) (map[string]*store.QueueStats, error) {
	out, err := s.statsGet(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("get stats: %w", mapErr(err))
	}
	return out, nil
}

func (s *Store) statsGet(ctx context.Context, p *store.StatsGetParams) (map[string]*store.QueueStats, error) {
	// The statements filter only when p asks for some queues, so that
	// reading them walks only their part of each index (a generic plan of
	// "$1 IS NULL OR …" would walk all of it), with the names as $1.
	where, args := "", []any{}
	if names := p.Names(); len(names) > 0 {
		where, args = " WHERE queue_name = ANY($1)", []any{names}
	}
	qs, err := queryAll(ctx, s, func(row pgx.CollectableRow) (*store.QueueStats, error) {
		var q store.QueueStats
		return &q, row.Scan(&q.Queue, &q.MaxWorkers, &q.Active)
	}, `/* rowq:stats.get */ SELECT q.name, q.max_workers,
		EXISTS (SELECT 1 FROM nodes n WHERE n.id = q.leader AND n.expires_at > now())
		FROM queues q`+strings.Replace(where, "queue_name", "q.name", 1), args...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*store.QueueStats, len(qs))
	for _, q := range qs {
		out[q.Queue] = q
	}
	if len(out) == 0 {
		return out, nil
	}
	// The freshness cutoff is the argument after the names, if any.
	fresh := fmt.Sprintf("updated_at > now() - make_interval(secs => $%d)", len(args)+1)
	sums, err := queryAll(ctx, s, func(row pgx.CollectableRow) (*store.QueueStats, error) {
		var q store.QueueStats
		return &q, row.Scan(&q.Queue, &q.Pushes, &q.Pops, &q.Successes, &q.Failures, &q.PermanentFailures, &q.Completes, &q.ElapsedMs, &q.WaitMs, &q.Cancels,
			&q.BusyWorkers, &q.PushesPerSecond, &q.PopsPerSecond)
	}, `/* rowq:stats.get */ SELECT queue_name,
		SUM(pushes)::bigint, SUM(pops)::bigint, SUM(successes)::bigint, SUM(failures)::bigint,
		SUM(permanent_failures)::bigint, SUM(completes)::bigint, SUM(elapsed_ms)::bigint, SUM(wait_ms)::bigint, SUM(cancels)::bigint,
		COALESCE(SUM(busy_workers) FILTER (WHERE `+fresh+`), 0)::integer,
		COALESCE(SUM(pushes_per_second) FILTER (WHERE `+fresh+`), 0),
		COALESCE(SUM(pops_per_second) FILTER (WHERE `+fresh+`), 0)
		FROM queue_stats`+where+` GROUP BY queue_name`, append(args, p.Fresh.Seconds())...)
	if err != nil {
		return nil, err
	}
	for _, sum := range sums {
		if q := out[sum.Queue]; q != nil {
			q.StatsCounters, q.BusyWorkers, q.PushesPerSecond, q.PopsPerSecond = sum.StatsCounters, sum.BusyWorkers, sum.PushesPerSecond, sum.PopsPerSecond
		}
	}
	type count struct {
		queue string
		n     int64
	}
	counts, err := queryAll(ctx, s, func(row pgx.CollectableRow) (count, error) {
		var c count
		return c, row.Scan(&c.queue, &c.n)
	}, `/* rowq:stats.outstanding */ SELECT queue_name, COUNT(*) FROM jobs`+where+` GROUP BY queue_name`, args...)
	if err != nil {
		return nil, err
	}
	for _, c := range counts {
		if q := out[c.queue]; q != nil {
			q.Outstanding = c.n
		}
	}
	return out, nil
}

// StatsFold folds up to 1000 rows of vanished nodes into the node-less
// rows with one statement: delete them, sum them per queue, upsert.
func (s *Store) StatsFold(ctx context.Context, p *store.StatsFoldParams) (int64, error) {
	n, err := queryOne(ctx, s, pgx.RowTo[int64], `/* rowq:stats.fold */
		WITH gone AS (
			DELETE FROM queue_stats WHERE (queue_name, node_id) IN (
				SELECT queue_name, node_id FROM queue_stats
				WHERE node_id <> '' AND updated_at < now() - make_interval(secs => $1)
				  AND node_id NOT IN (SELECT id FROM nodes)
				ORDER BY queue_name, node_id LIMIT 1000 FOR UPDATE)
			RETURNING *
		), folded AS (
			INSERT INTO queue_stats (`+statsCols+`)
			SELECT queue_name, '', SUM(pushes), SUM(pops), SUM(successes), SUM(failures), SUM(permanent_failures),
				SUM(completes), SUM(elapsed_ms), SUM(wait_ms), SUM(cancels), 0, 0, 0, now()
			FROM gone GROUP BY queue_name
			ORDER BY queue_name`+statsConflictSQL+`
		)
		SELECT COUNT(*) FROM gone`, p.OlderThan.Seconds())
	if err != nil {
		return 0, fmt.Errorf("fold stats of vanished nodes: %w", mapErr(err))
	}
	return n, nil
}
