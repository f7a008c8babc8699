package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// Ordered keys. MySQL has no partial index, so the jobs of ordered keys
// are listed in a table of their own, ordered_jobs (migration 1806), and
// jobs carry no index by key that every job would pay for:
//
//   - an ordered job's row there is inserted in the transaction that
//     inserts the job (insertOrdered), so a job is never without it;
//   - it is deleted after its job, by every path that deletes a job
//     (forgetOrdered), in the same transaction where there is one;
//   - a row left behind all the same (a crash between the complete's two
//     statements) is harmless: JobsKeyHeads checks that each head it finds
//     is still a job, and deletes and looks past the rows that are not.

// keyHeadsSQL selects the oldest ordered job of each of n keys, one probe
// of ordered_jobs_key per key, and whether it is still a job. Arguments:
// queue, keys.
func keyHeadsSQL(n int) string {
	return `/* rowq:jobs.key_heads */ SELECT h.concurrency_key, h.job_id, j.id IS NOT NULL
		FROM (SELECT concurrency_key, MIN(job_id) AS job_id FROM ordered_jobs FORCE INDEX (ordered_jobs_key)
			WHERE queue_name = ? AND concurrency_key IN (` + sqldb.Placeholders(n) + `) GROUP BY concurrency_key) h
		LEFT JOIN jobs j ON j.id = h.job_id`
}

// forgetOrderedSQL deletes the ordered_jobs rows of n job ids whose job is
// gone: a job still there (not held by the caller, and so not deleted)
// keeps its row.
func forgetOrderedSQL(n int) string {
	return `/* rowq:jobs.forget_ordered */ DELETE FROM ordered_jobs WHERE job_id IN (` + sqldb.Placeholders(n) + `)
		AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.id = ordered_jobs.job_id)`
}

// insertOrdered lists in ordered_jobs those of jobs, stored with ids, that
// are ordered. db must be the transaction that inserted them.
func insertOrdered(ctx context.Context, db sqldb.DBTX, jobs []*store.JobInsertParams, ids []int64) error {
	var args []any
	for i, j := range jobs {
		if orderedJob(j) {
			args = append(args, ids[i], j.Queue, j.ConcurrencyKey)
		}
	}
	if len(args) == 0 {
		return nil
	}
	_, err := db.ExecContext(ctx, `/* rowq:jobs.insert_ordered */ INSERT INTO ordered_jobs (job_id, queue_name, concurrency_key)
		VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(args)/3), ", "), args...)
	return err
}

// anyOrdered reports whether jobs hold an ordered job, whose insert then
// takes a transaction (insertOrdered).
func anyOrdered(jobs []*store.JobInsertParams) bool {
	return slices.ContainsFunc(jobs, orderedJob)
}

// orderedJob reports whether j goes in ordered_jobs.
func orderedJob(j *store.JobInsertParams) bool { return j.Ordered && j.ConcurrencyKey != "" }

// forgetOrdered deletes the ordered_jobs rows of those of ids whose job is
// gone.
func forgetOrdered(ctx context.Context, db sqldb.DBTX, ids ...int64) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := db.ExecContext(ctx, forgetOrderedSQL(len(ids)), idArgs(ids)...)
	return err
}

// keyBusySQL counts the keyed jobs in delivery that another node grabbed,
// or that a worker accepted: the queue's grabs and leases, a few ranges of
// jobs_fetch. Arguments: queue, node.
const keyBusySQL = `/* rowq:jobs.key_busy */ SELECT concurrency_key, COUNT(*) FROM jobs FORCE INDEX (jobs_fetch)
	WHERE queue_name = ? AND state IN ('grabbed', 'leased') AND NOT (state = 'grabbed' AND grabbed_by = ?)
		AND concurrency_key IS NOT NULL
	GROUP BY concurrency_key`

// JobsKeyHeads returns the oldest ordered job of each of p.Keys that has
// one. A head that is no longer a job (its ordered_jobs row left behind)
// is deleted, and its key asked again.
func (s *Store) JobsKeyHeads(ctx context.Context, p *store.JobsKeyHeadsParams) (map[string]int64, error) {
	heads := map[string]int64{}
	keys := p.Keys
	for len(keys) > 0 {
		var gone []int64
		var again []string
		err := retry(ctx, func() error {
			gone, again = gone[:0], again[:0]
			rows, err := s.db.QueryContext(ctx, keyHeadsSQL(len(keys)), sqldb.StringArgs(keys, p.Queue)...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var (
					k    string
					id   int64
					live bool
				)
				if err := rows.Scan(&k, &id, &live); err != nil {
					return err
				}
				if live {
					heads[k] = id
				} else {
					gone, again = append(gone, id), append(again, k)
				}
			}
			return rows.Err()
		})
		if err == nil {
			err = forgetOrdered(ctx, s.db, gone...)
		}
		if err != nil {
			return nil, fmt.Errorf("find the oldest jobs of %d keys of queue %q: %w", len(p.Keys), p.Queue, mapErr(err))
		}
		keys = again
	}
	return heads, nil
}

// JobsKeyBusy counts the keyed jobs in delivery that p.Node did not grab.
func (s *Store) JobsKeyBusy(ctx context.Context, p *store.JobsKeyBusyParams) (map[string]int, error) {
	var counts map[string]int64
	err := retry(ctx, func() (err error) {
		counts, err = sqldb.KeyCounts(ctx, s.db, keyBusySQL, p.Queue, p.Node)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("count keyed jobs in delivery in queue %q: %w", p.Queue, mapErr(err))
	}
	return sqldb.Ints(counts), nil
}
