package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/rowq/rowq/internal/store"
)

// JobsInsertGrabbed stores the jobs already grabbed by p.Node until
// NOW(6) + p.Lease, with multi-row INSERTs in one transaction (one
// statement for a batch of usual size), and returns their ids in order.
func (s *Store) JobsInsertGrabbed(ctx context.Context, p *store.JobsInsertGrabbedParams) ([]int64, error) {
	if len(p.Jobs) == 0 {
		return nil, nil
	}
	step, err := s.autoIncrementStep(ctx)
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), mapErr(err))
	}
	chunks := chunkInserts(p.Jobs)
	var ids []int64
	err = retry(ctx, func() error {
		ids = ids[:0]
		if len(chunks) == 1 {
			return insertGrabbedChunk(ctx, s.db, p, chunks[0], step, &ids)
		}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			for _, c := range chunks {
				if err := insertGrabbedChunk(ctx, tx, p, c, step, &ids); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("insert %d grabbed jobs: %w", len(p.Jobs), mapErr(err))
	}
	return ids, nil
}

// insertGrabbedChunk is insertChunk for jobs grabbed at birth; the ids
// follow the same rule.
func insertGrabbedChunk(ctx context.Context, db execer, p *store.JobsInsertGrabbedParams, jobs []*store.JobInsertParams, step int64, ids *[]int64) error {
	var q strings.Builder
	q.WriteString(`/* rowq:jobs.insert_grabbed */ INSERT INTO jobs
		(queue_name, category, url, payload, state, created_at, next_try, timeout, max_retries, retry_delay, fail_count, grabbed_by, grabbed_until)
		VALUES `)
	args := make([]any, 0, 9*len(jobs))
	for i, j := range jobs {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, 'grabbed', NOW(6), NOW(6), ?, ?, ?, 0, ?, NOW(6) + INTERVAL ? MICROSECOND)")
		args = append(args, j.Queue, j.Category, j.URL, j.Payload, j.Timeout, j.MaxRetries, j.RetryDelay, p.Node, p.Lease.Microseconds())
	}
	res, err := db.ExecContext(ctx, q.String(), args...)
	if err != nil {
		return err
	}
	first, err := res.LastInsertId()
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != int64(len(jobs)) {
		return fmt.Errorf("inserted %d rows, want %d", n, len(jobs))
	}
	for i := range jobs {
		*ids = append(*ids, first+int64(i)*step)
	}
	return nil
}
