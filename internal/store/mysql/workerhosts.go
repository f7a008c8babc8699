package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// WorkerHostsSet replaces the queue's worker hosts: a DELETE, then one
// multi-row INSERT, in one transaction.
func (s *Store) WorkerHostsSet(ctx context.Context, p *store.WorkerHostsSetParams) error {
	q, args := sqldb.WorkerHostsInsertSQL(p, "NOW(6)", func(t time.Time) any { return t })
	err := retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, sqldb.WorkerHostsDeleteSQL, p.Queue); err != nil || len(p.Hosts) == 0 {
				return err
			}
			_, err := tx.ExecContext(ctx, q, args...)
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("record %d worker hosts of queue %q: %w", len(p.Hosts), p.Queue, mapErr(err))
	}
	return nil
}

// WorkerHostsList returns the worker hosts that the current leader of
// each queue recorded.
func (s *Store) WorkerHostsList(ctx context.Context, queue string) ([]*store.WorkerHost, error) {
	var hosts []*store.WorkerHost
	err := retry(ctx, func() (err error) {
		hosts, err = sqldb.QueryAll(ctx, s.db, func(sc sqldb.Scanner) (*store.WorkerHost, error) {
			var (
				h     store.WorkerHost
				rate  sql.NullFloat64
				until sql.NullTime
			)
			if err := sc.Scan(&h.Queue, &h.Host, &rate, &h.Breaker, &h.Failures, &until, &h.UpdatedAt); err != nil {
				return nil, err
			}
			if rate.Valid {
				h.Rate = &rate.Float64
			}
			if until.Valid {
				h.OpenUntil = &until.Time
			}
			return &h, nil
		}, sqldb.WorkerHostsListSQL, queue, queue)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list worker hosts of queue %q: %w", queue, mapErr(err))
	}
	return hosts, nil
}
