package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// statsUpsertSQL adds counters and sets gauges; VALUES(col) is the value
// the row would have been inserted with (MariaDB and MySQL 8 both take it).
const statsUpsertSQL = `/* rowq:stats.add */ INSERT INTO queue_stats
	(queue_name, node_id, pushes, pops, successes, failures, permanent_failures, completes, elapsed_ms, wait_ms, cancels,
	 busy_workers, pushes_per_second, pops_per_second, updated_at)
	VALUES %s
	ON DUPLICATE KEY UPDATE
		pushes = pushes + VALUES(pushes), pops = pops + VALUES(pops),
		successes = successes + VALUES(successes), failures = failures + VALUES(failures),
		permanent_failures = permanent_failures + VALUES(permanent_failures),
		completes = completes + VALUES(completes), elapsed_ms = elapsed_ms + VALUES(elapsed_ms),
		wait_ms = wait_ms + VALUES(wait_ms),
		cancels = cancels + VALUES(cancels),
		busy_workers = VALUES(busy_workers), pushes_per_second = VALUES(pushes_per_second),
		pops_per_second = VALUES(pops_per_second), updated_at = VALUES(updated_at)`

func statsUpsert(ctx context.Context, db sqldb.DBTX, node string, ds []*store.StatsDelta) error {
	rows := make([]string, len(ds))
	args := make([]any, 0, 13*len(ds))
	for i, d := range ds {
		rows[i] = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NOW(6))"
		args = append(args, d.Queue, node, d.Pushes, d.Pops, d.Successes, d.Failures, d.PermanentFailures,
			d.Completes, d.ElapsedMs, d.WaitMs, d.Cancels, d.BusyWorkers, d.PushesPerSecond, d.PopsPerSecond)
	}
	_, err := db.ExecContext(ctx, fmt.Sprintf(statsUpsertSQL, strings.Join(rows, ", ")), args...)
	return err
}

// StatsAdd adds the node's deltas to its rows in one statement, in queue
// order.
func (s *Store) StatsAdd(ctx context.Context, p *store.StatsAddParams) error {
	if len(p.Deltas) == 0 {
		return nil
	}
	ds := slices.SortedFunc(slices.Values(p.Deltas), func(a, b *store.StatsDelta) int { return strings.Compare(a.Queue, b.Queue) })
	if err := retry(ctx, func() error { return statsUpsert(ctx, s.db, p.Node, ds) }); err != nil {
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
	where, names := "", p.Names()
	if len(names) > 0 {
		where = " WHERE queue_name IN (" + sqldb.Placeholders(len(names)) + ")"
	}
	args := sqldb.StringArgs(names)
	out := map[string]*store.QueueStats{}
	rows, err := s.db.QueryContext(ctx, `/* rowq:stats.get */ SELECT q.name, q.max_workers,
		EXISTS (SELECT 1 FROM nodes n WHERE n.id = q.leader AND n.expires_at > NOW(6))
		FROM queues q`+strings.Replace(where, "queue_name", "q.name", 1), args...)
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
	fresh := p.Fresh.Microseconds()
	rows, err = s.db.QueryContext(ctx, `/* rowq:stats.get */ SELECT queue_name,
		SUM(pushes), SUM(pops), SUM(successes), SUM(failures), SUM(permanent_failures), SUM(completes), SUM(elapsed_ms), SUM(wait_ms), SUM(cancels),
		SUM(CASE WHEN updated_at > NOW(6) - INTERVAL ? MICROSECOND THEN busy_workers ELSE 0 END),
		SUM(CASE WHEN updated_at > NOW(6) - INTERVAL ? MICROSECOND THEN pushes_per_second ELSE 0 END),
		SUM(CASE WHEN updated_at > NOW(6) - INTERVAL ? MICROSECOND THEN pops_per_second ELSE 0 END)
		FROM queue_stats`+where+` GROUP BY queue_name`, append([]any{fresh, fresh, fresh}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name string
			c    store.StatsCounters
			busy int
			push float64
			pop  float64
		)
		if err := rows.Scan(&name, &c.Pushes, &c.Pops, &c.Successes, &c.Failures, &c.PermanentFailures, &c.Completes, &c.ElapsedMs, &c.WaitMs, &c.Cancels,
			&busy, &push, &pop); err != nil {
			return nil, err
		}
		if q := out[name]; q != nil {
			q.StatsCounters, q.BusyWorkers, q.PushesPerSecond, q.PopsPerSecond = c, busy, push, pop
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = s.db.QueryContext(ctx, `/* rowq:stats.outstanding */ SELECT queue_name, COUNT(*) FROM jobs`+where+` GROUP BY queue_name`, args...)
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
// rows, in one short transaction.
func (s *Store) StatsFold(ctx context.Context, p *store.StatsFoldParams) (int64, error) {
	var n int64
	err := retry(ctx, func() error {
		n = 0
		return s.inTx(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, `/* rowq:stats.fold */ SELECT queue_name, node_id,
				pushes, pops, successes, failures, permanent_failures, completes, elapsed_ms, wait_ms, cancels
				FROM queue_stats
				WHERE node_id <> '' AND updated_at < NOW(6) - INTERVAL ? MICROSECOND
				  AND node_id NOT IN (SELECT id FROM nodes)
				ORDER BY queue_name, node_id LIMIT 1000 FOR UPDATE`, p.OlderThan.Microseconds())
			if err != nil {
				return err
			}
			sums := map[string]*store.StatsDelta{}
			var keys []any
			for rows.Next() {
				var q, node string
				var c store.StatsCounters
				if err := rows.Scan(&q, &node, &c.Pushes, &c.Pops, &c.Successes, &c.Failures, &c.PermanentFailures, &c.Completes, &c.ElapsedMs, &c.WaitMs, &c.Cancels); err != nil {
					rows.Close()
					return err
				}
				if sums[q] == nil {
					sums[q] = &store.StatsDelta{Queue: q}
				}
				sums[q].Add(&c)
				keys = append(keys, q, node)
			}
			rows.Close()
			if err := rows.Err(); err != nil || len(keys) == 0 {
				return err
			}
			n = int64(len(keys) / 2)
			_, err = tx.ExecContext(ctx, `/* rowq:stats.fold */ DELETE FROM queue_stats WHERE (queue_name, node_id) IN (`+
				strings.TrimSuffix(strings.Repeat("(?, ?), ", len(keys)/2), ", ")+`)`, keys...)
			if err != nil {
				return err
			}
			ds := make([]*store.StatsDelta, 0, len(sums))
			for _, d := range sums {
				ds = append(ds, d)
			}
			slices.SortFunc(ds, func(a, b *store.StatsDelta) int { return strings.Compare(a.Queue, b.Queue) })
			return statsUpsert(ctx, tx, "", ds)
		})
	})
	if err != nil {
		return 0, fmt.Errorf("fold stats of vanished nodes: %w", mapErr(err))
	}
	return n, nil
}
