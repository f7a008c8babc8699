package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// keyHeadsSQL selects the oldest ordered job of each key of $2: one probe
// of jobs_ordered (queue_name, concurrency_key, id) WHERE ordered per key.
// A blocked job takes its place in its key's order when it is released:
// until then it holds back none of its key's jobs (a parent of its own
// key behind it would wait for it for ever), and the probe walks past it.
const keyHeadsSQL = `/* rowq:jobs.key_heads */ SELECT k, (SELECT MIN(id) FROM jobs WHERE queue_name = $1 AND concurrency_key = k AND ordered
		AND state <> 'blocked')
	FROM unnest($2::text[]) AS k`

// keyBusySQL counts the keyed jobs in delivery that another node ($2)
// grabbed, or that a worker accepted.
const keyBusySQL = `/* rowq:jobs.key_busy */ SELECT concurrency_key, COUNT(*) FROM jobs
	WHERE queue_name = $1 AND state IN ('grabbed', 'leased') AND NOT (state = 'grabbed' AND grabbed_by = $2)
		AND concurrency_key IS NOT NULL
	GROUP BY concurrency_key`

// keyCount is a row of keyHeadsSQL or keyBusySQL.
type keyCount struct {
	key string
	n   *int64 // nil: the key has no job
}

func scanKeyCount(row pgx.CollectableRow) (keyCount, error) {
	var c keyCount
	err := row.Scan(&c.key, &c.n)
	return c, err
}

// JobsKeyHeads returns the oldest ordered job of each of p.Keys that has
// one.
func (s *Store) JobsKeyHeads(ctx context.Context, p *store.JobsKeyHeadsParams) (map[string]int64, error) {
	heads := map[string]int64{}
	if len(p.Keys) == 0 {
		return heads, nil
	}
	rows, err := queryAll(ctx, s, scanKeyCount, keyHeadsSQL, p.Queue, p.Keys)
	if err != nil {
		return nil, fmt.Errorf("find the oldest jobs of %d keys of queue %q: %w", len(p.Keys), p.Queue, mapErr(err))
	}
	for _, r := range rows {
		if r.n != nil {
			heads[r.key] = *r.n
		}
	}
	return heads, nil
}

// JobsKeyBusy counts the keyed jobs in delivery that p.Node did not grab.
func (s *Store) JobsKeyBusy(ctx context.Context, p *store.JobsKeyBusyParams) (map[string]int, error) {
	rows, err := queryAll(ctx, s, scanKeyCount, keyBusySQL, p.Queue, p.Node)
	if err != nil {
		return nil, fmt.Errorf("count keyed jobs in delivery in queue %q: %w", p.Queue, mapErr(err))
	}
	busy := make(map[string]int, len(rows))
	for _, r := range rows {
		busy[r.key] = int(*r.n)
	}
	return busy, nil
}
