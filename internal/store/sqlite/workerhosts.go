package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// WorkerHostsSet replaces the queue's worker hosts: a DELETE, then one
// multi-row INSERT, in one transaction.
func (s *Store) WorkerHostsSet(ctx context.Context, p *store.WorkerHostsSetParams) error {
	q, args := sqldb.WorkerHostsInsertSQL(p, strconv.FormatInt(s.micros(), 10), func(t time.Time) any { return t.UnixMicro() })
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, sqldb.WorkerHostsDeleteSQL, p.Queue); err != nil || len(p.Hosts) == 0 {
			return err
		}
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("record %d worker hosts of queue %q: %w", len(p.Hosts), p.Queue, err)
	}
	return nil
}

// WorkerHostsList returns the worker hosts that the current leader of
// each queue recorded.
func (s *Store) WorkerHostsList(ctx context.Context, queue string) ([]*store.WorkerHost, error) {
	hosts, err := sqldb.QueryAll(ctx, s.r, func(sc sqldb.Scanner) (*store.WorkerHost, error) {
		var (
			h       store.WorkerHost
			rate    sql.NullFloat64
			until   sql.NullInt64
			updated int64
		)
		if err := sc.Scan(&h.Queue, &h.Host, &rate, &h.Breaker, &h.Failures, &until, &updated); err != nil {
			return nil, err
		}
		if rate.Valid {
			h.Rate = &rate.Float64
		}
		if until.Valid {
			t := fromMicros(until.Int64)
			h.OpenUntil = &t
		}
		h.UpdatedAt = fromMicros(updated)
		return &h, nil
	}, sqldb.WorkerHostsListSQL, queue, queue)
	if err != nil {
		return nil, fmt.Errorf("list worker hosts of queue %q: %w", queue, mapErr(err))
	}
	return hosts, nil
}
