package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// outboxDest are the destinations of lead, then sqldb.OutboxCols into r (the
// time into *created), then tail.
func outboxDest(r *store.OutboxRow, created *int64, lead []any, tail ...any) []any {
	return append(append(append(lead, sqldb.OutboxDest(r)...), created), tail...)
}

// OutboxInsert inserts the rows with one multi-row INSERT.
func (s *Store) OutboxInsert(ctx context.Context, rows []*store.OutboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	q, args := sqldb.OutboxInsertSQL(rows)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("insert %d outbox rows: %w", len(rows), err)
	}
	return nil
}

// OutboxRead reads the first rows of the outbox by primary key, on a
// reader connection: WAL readers see committed transactions only and wait
// for no writer.
func (s *Store) OutboxRead(ctx context.Context, limit int) ([]*store.OutboxRow, error) {
	rows, err := sqldb.QueryAll(ctx, s.r, func(sc sqldb.Scanner) (*store.OutboxRow, error) {
		var r store.OutboxRow
		var created int64
		err := sc.Scan(outboxDest(&r, &created, []any{&r.ID})...)
		r.CreatedAt = fromMicros(created)
		return &r, err
	}, sqldb.OutboxReadSQL, limit)
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", mapErr(err))
	}
	return rows, nil
}

// OutboxMove deletes the rows still there and inserts their jobs and
// rejects, in one transaction of the one writer.
func (s *Store) OutboxMove(ctx context.Context, p *store.OutboxMoveParams) (*store.OutboxMoved, error) {
	ids := p.OutboxIDs()
	if len(ids) == 0 {
		return &store.OutboxMoved{}, nil
	}
	var out *store.OutboxMoved
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		out = &store.OutboxMoved{}
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		held, err := sqldb.QueryAll(ctx, tx, sqldb.ScanInt64, `/* rowq:outbox.move */ DELETE FROM rowq_outbox
			WHERE id IN (`+sqldb.Placeholders(len(ids))+`) RETURNING id`, args...)
		if err != nil || len(held) == 0 {
			return err
		}
		now := s.micros()
		jobs, rejects := store.OutboxHeld(p, held)
		if len(jobs) > 0 {
			if out.Pushed, err = pushTx(ctx, tx, jobs, now); err != nil {
				return err
			}
			out.Jobs = jobs
		}
		for _, r := range rejects {
			if _, err := tx.ExecContext(ctx, `/* rowq:outbox.reject */ INSERT INTO rowq_outbox_rejects
				(outbox_id, `+sqldb.OutboxCols+`, reason, rejected_at) VALUES (`+sqldb.Placeholders(sqldb.OutboxArgCount+4)+`)`,
				append(append([]any{r.Row.ID}, sqldb.OutboxArgs(r.Row)...), r.Row.CreatedAt.UnixMicro(), r.Reason, now)...); err != nil {
				return err
			}
		}
		out.Rejected = len(rejects)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("move %d outbox rows: %w", len(ids), err)
	}
	return out, nil
}

// OutboxRejects lists rejects by id.
func (s *Store) OutboxRejects(ctx context.Context, p *store.OutboxRejectsParams) ([]*store.OutboxReject, error) {
	out, err := sqldb.QueryAll(ctx, s.r, func(sc sqldb.Scanner) (*store.OutboxReject, error) {
		var r store.OutboxReject
		var created, rejected int64
		err := sc.Scan(outboxDest(&r.Row, &created, []any{&r.ID, &r.Row.ID}, &r.Reason, &rejected)...)
		r.Row.CreatedAt, r.RejectedAt = fromMicros(created), fromMicros(rejected)
		return &r, err
	}, `/* rowq:outbox.rejects */ SELECT id, outbox_id, `+sqldb.OutboxCols+`, reason, rejected_at
		FROM rowq_outbox_rejects WHERE id > ? ORDER BY id LIMIT ?`, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list outbox rejects: %w", mapErr(err))
	}
	return out, nil
}

// OutboxRejectsCount counts the rejects.
func (s *Store) OutboxRejectsCount(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, `/* rowq:outbox.rejects_count */ SELECT COUNT(*) FROM rowq_outbox_rejects`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count outbox rejects: %w", mapErr(err))
	}
	return n, nil
}

// OutboxListen returns errors.ErrUnsupported: SQLite cannot announce a
// commit to another process, and the moving node probes the outbox
// instead.
func (s *Store) OutboxListen(context.Context, func(), func()) error { return errors.ErrUnsupported }

// OutboxWaiting does nothing: SQLite announces no commit.
func (s *Store) OutboxWaiting(context.Context, bool) error { return nil }
