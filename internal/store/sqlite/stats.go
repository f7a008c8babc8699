package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// statsUpsertSQL adds counters and sets gauges of an existing row.
const statsUpsertSQL = `/* rowq:stats.add */ INSERT INTO queue_stats
	(queue_name, node_id, pushes, pops, successes, failures, permanent_failures, completes, elapsed_ms, wait_ms, cancels,
	 busy_workers, pushes_per_second, pops_per_second, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (queue_name, node_id) DO UPDATE SET
		pushes = pushes + excluded.pushes, pops = pops + excluded.pops,
		successes = successes + excluded.successes, failures = failures + excluded.failures,
		permanent_failures = permanent_failures + excluded.permanent_failures,
		completes = completes + excluded.completes, elapsed_ms = elapsed_ms + excluded.elapsed_ms,
		wait_ms = wait_ms + excluded.wait_ms,
		cancels = cancels + excluded.cancels,
		busy_workers = excluded.busy_workers, pushes_per_second = excluded.pushes_per_second,
		pops_per_second = excluded.pops_per_second, updated_at = excluded.updated_at`

func (s *Store) statsUpsert(ctx context.Context, tx *sql.Tx, node string, ds []*store.StatsDelta) error {
	stmt, err := tx.PrepareContext(ctx, statsUpsertSQL)
	if err != nil {
		return err
	}
	defer stmt.Close()
	now := s.micros()
	for _, d := range ds {
		if _, err := stmt.ExecContext(ctx, d.Queue, node, d.Pushes, d.Pops, d.Successes, d.Failures, d.PermanentFailures,
			d.Completes, d.ElapsedMs, d.WaitMs, d.Cancels, d.BusyWorkers, d.PushesPerSecond, d.PopsPerSecond, now); err != nil {
			return err
		}
	}
	return nil
}

// StatsAdd adds the node's deltas to its rows in one transaction.
func (s *Store) StatsAdd(ctx context.Context, p *store.StatsAddParams) error {
	if len(p.Deltas) == 0 {
		return nil
	}
	ds := slices.SortedFunc(slices.Values(p.Deltas), func(a, b *store.StatsDelta) int { return strings.Compare(a.Queue, b.Queue) })
	if err := s.inTx(ctx, func(tx *sql.Tx) error { return s.statsUpsert(ctx, tx, p.Node, ds) }); err != nil {
		return fmt.Errorf("add stats of node %q: %w", p.Node, err)
	}
	return nil
}

// StatsGet reads the queues, the sums of their stats rows and their job
// counts (an index count on jobs_fetch).
func (s *Store) StatsGet(ctx context.Context, p *store.StatsGetParams) (map[string]*store.QueueStats, error) {
	out, err := s.statsGet(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("get stats: %w", mapErr(err))
	}
	return out, nil
}

func (s *Store) statsGet(ctx context.Context, p *store.StatsGetParams) (map[string]*store.QueueStats, error) {
	// The statements filter only when p asks for some queues, so that
	// reading them walks only their part of each index.
	where, names := "", p.Names()
	if len(names) > 0 {
		where = " WHERE queue_name IN (" + sqldb.Placeholders(len(names)) + ")"
	}
	now := s.micros()
	out := map[string]*store.QueueStats{}
	rows, err := s.r.QueryContext(ctx, `/* rowq:stats.get */ SELECT q.name, q.max_workers,
		EXISTS (SELECT 1 FROM nodes n WHERE n.id = q.leader AND n.expires_at > ?)
		FROM queues q`+strings.Replace(where, "queue_name", "q.name", 1), sqldb.StringArgs(names, now)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var q store.QueueStats
		if err := rows.Scan(&q.Queue, &q.MaxWorkers, &q.Active); err != nil {
			return nil, err
		}
		out[q.Queue] = &q
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return out, nil
	}
	fresh := now - p.Fresh.Microseconds()
	rows, err = s.r.QueryContext(ctx, `/* rowq:stats.get */ SELECT queue_name,
		SUM(pushes), SUM(pops), SUM(successes), SUM(failures), SUM(permanent_failures), SUM(completes), SUM(elapsed_ms), SUM(wait_ms), SUM(cancels),
		TOTAL(CASE WHEN updated_at > ? THEN busy_workers ELSE 0 END),
		TOTAL(CASE WHEN updated_at > ? THEN pushes_per_second ELSE 0 END),
		TOTAL(CASE WHEN updated_at > ? THEN pops_per_second ELSE 0 END)
		FROM queue_stats`+where+` GROUP BY queue_name`, sqldb.StringArgs(names, fresh, fresh, fresh)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name string
			c    store.StatsCounters
			busy float64
			push float64
			pop  float64
		)
		if err := rows.Scan(&name, &c.Pushes, &c.Pops, &c.Successes, &c.Failures, &c.PermanentFailures, &c.Completes, &c.ElapsedMs, &c.WaitMs, &c.Cancels,
			&busy, &push, &pop); err != nil {
			return nil, err
		}
		if q := out[name]; q != nil {
			q.StatsCounters, q.BusyWorkers, q.PushesPerSecond, q.PopsPerSecond = c, int(busy), push, pop
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = s.r.QueryContext(ctx, `/* rowq:stats.outstanding */ SELECT queue_name, COUNT(*) FROM jobs`+where+` GROUP BY queue_name`,
		sqldb.StringArgs(names)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			return nil, err
		}
		if q := out[name]; q != nil {
			q.Outstanding = n
		}
	}
	return out, rows.Err()
}

// StatsFold folds up to 1000 rows of vanished nodes into the node-less
// rows, in one transaction.
func (s *Store) StatsFold(ctx context.Context, p *store.StatsFoldParams) (int64, error) {
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, `/* rowq:stats.fold */ DELETE FROM queue_stats WHERE rowid IN (
				SELECT rowid FROM queue_stats
				WHERE node_id <> '' AND updated_at < ? AND node_id NOT IN (SELECT id FROM nodes)
				ORDER BY queue_name, node_id LIMIT 1000)
			RETURNING queue_name, pushes, pops, successes, failures, permanent_failures, completes, elapsed_ms, wait_ms, cancels`,
			s.micros()-p.OlderThan.Microseconds())
		if err != nil {
			return err
		}
		sums := map[string]*store.StatsDelta{}
		for rows.Next() {
			var q string
			var c store.StatsCounters
			if err := rows.Scan(&q, &c.Pushes, &c.Pops, &c.Successes, &c.Failures, &c.PermanentFailures, &c.Completes, &c.ElapsedMs, &c.WaitMs, &c.Cancels); err != nil {
				rows.Close()
				return err
			}
			if sums[q] == nil {
				sums[q] = &store.StatsDelta{Queue: q}
			}
			sums[q].Add(&c)
			n++
		}
		rows.Close()
		if err := rows.Err(); err != nil || n == 0 {
			return err
		}
		ds := make([]*store.StatsDelta, 0, len(sums))
		for _, d := range sums {
			ds = append(ds, d)
		}
		return s.statsUpsert(ctx, tx, "", ds)
	})
	if err != nil {
		return 0, fmt.Errorf("fold stats of vanished nodes: %w", err)
	}
	return n, nil
}
