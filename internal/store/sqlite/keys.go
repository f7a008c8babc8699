package sqlite

import (
	"context"
	"fmt"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// keyHeadsSQL selects the oldest ordered job of each of n keys: per key,
// the first entry of its range of jobs_ordered (queue_name,
// concurrency_key, id) WHERE ordered, which holds ordered jobs only. (A
// MIN(id) … GROUP BY concurrency_key would read every entry of the keys'
// ranges: a key with a deep backlog made each head check as long as its
// backlog.) A blocked job heads no key: it holds back none of its key's
// jobs until it is released, and then takes its place (its id) in the
// order; reading its state costs each head one lookup by rowid.
// Arguments: keys, queue.
func keyHeadsSQL(n int) string {
	return `/* rowq:jobs.key_heads */ WITH k(key) AS (VALUES ` + strings.TrimSuffix(strings.Repeat("(?), ", n), ", ") + `)
		SELECT key, head FROM (SELECT key, (SELECT id FROM jobs INDEXED BY jobs_ordered
			WHERE queue_name = ? AND concurrency_key = k.key AND ordered AND state <> 'blocked' ORDER BY id LIMIT 1) AS head FROM k)
		WHERE head IS NOT NULL`
}

// keyBusySQL counts the keyed jobs in delivery that another node grabbed,
// or that a worker accepted. Arguments: queue, node.
const keyBusySQL = `/* rowq:jobs.key_busy */ SELECT concurrency_key, COUNT(*) FROM jobs
	WHERE queue_name = ? AND state IN ('grabbed', 'leased') AND NOT (state = 'grabbed' AND grabbed_by = ?)
		AND concurrency_key IS NOT NULL
	GROUP BY concurrency_key`

// JobsKeyHeads returns the oldest ordered job of each of p.Keys that has
// one.
func (s *Store) JobsKeyHeads(ctx context.Context, p *store.JobsKeyHeadsParams) (map[string]int64, error) {
	if len(p.Keys) == 0 {
		return map[string]int64{}, nil
	}
	heads, err := sqldb.KeyCounts(ctx, s.r, keyHeadsSQL(len(p.Keys)), append(sqldb.StringArgs(p.Keys), p.Queue)...)
	if err != nil {
		return nil, fmt.Errorf("find the oldest jobs of %d keys of queue %q: %w", len(p.Keys), p.Queue, mapErr(err))
	}
	return heads, nil
}

// JobsKeyBusy counts the keyed jobs in delivery that p.Node did not grab.
func (s *Store) JobsKeyBusy(ctx context.Context, p *store.JobsKeyBusyParams) (map[string]int, error) {
	counts, err := sqldb.KeyCounts(ctx, s.r, keyBusySQL, p.Queue, p.Node)
	if err != nil {
		return nil, fmt.Errorf("count keyed jobs in delivery in queue %q: %w", p.Queue, mapErr(err))
	}
	return sqldb.Ints(counts), nil
}
