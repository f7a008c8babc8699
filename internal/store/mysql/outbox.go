package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// scanOutboxRow scans lead, then sqldb.OutboxCols into r, then tail.
func scanOutboxRow(sc sqldb.Scanner, r *store.OutboxRow, lead []any, tail ...any) error {
	return sc.Scan(append(append(append(lead, sqldb.OutboxDest(r)...), &r.CreatedAt), tail...)...)
}

// OutboxInsert inserts the rows with one multi-row INSERT.
func (s *Store) OutboxInsert(ctx context.Context, rows []*store.OutboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	q, args := sqldb.OutboxInsertSQL(rows)
	err := retry(ctx, func() error {
		_, err := s.db.ExecContext(ctx, q, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("insert %d outbox rows: %w", len(rows), mapErr(err))
	}
	return nil
}

// OutboxRead reads the first rows of the outbox by primary key. It is a
// plain read: READ COMMITTED reads the rows as last committed and waits for
// no lock, so the uncommitted rows of open transactions are not seen, even
// below ids already committed (auto-increment ids are taken at INSERT, not
// at commit). On an empty outbox it is the moving node's probe: one read
// of the primary key's first entry.
func (s *Store) OutboxRead(ctx context.Context, limit int) ([]*store.OutboxRow, error) {
	var rows []*store.OutboxRow
	err := retry(ctx, func() (err error) {
		rows, err = sqldb.QueryAll(ctx, s.db, func(sc sqldb.Scanner) (*store.OutboxRow, error) {
			var r store.OutboxRow
			return &r, scanOutboxRow(sc, &r, []any{&r.ID})
		}, sqldb.OutboxReadSQL, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", mapErr(err))
	}
	return rows, nil
}

// OutboxMove locks the rows by primary key, skipping those another
// transaction holds, deletes them, and inserts their jobs and rejects, in
// one transaction.
func (s *Store) OutboxMove(ctx context.Context, p *store.OutboxMoveParams) (*store.OutboxMoved, error) {
	ids := p.OutboxIDs()
	if len(ids) == 0 {
		return &store.OutboxMoved{}, nil
	}
	info, err := s.server(ctx)
	if err != nil {
		return nil, fmt.Errorf("move %d outbox rows: %w", len(ids), mapErr(err))
	}
	var out *store.OutboxMoved
	err = retry(ctx, func() error {
		out = &store.OutboxMoved{}
		return s.inTx(ctx, func(tx *sql.Tx) error {
			held, err := sqldb.QueryAll(ctx, tx, sqldb.ScanInt64, `/* rowq:outbox.move */ SELECT id FROM rowq_outbox
				WHERE id IN (`+sqldb.Placeholders(len(ids))+`) FOR UPDATE SKIP LOCKED`, idArgs(ids)...)
			if err != nil || len(held) == 0 {
				return err
			}
			if _, err := tx.ExecContext(ctx, `/* rowq:outbox.move */ DELETE FROM rowq_outbox
				WHERE id IN (`+sqldb.Placeholders(len(held))+`)`, idArgs(held)...); err != nil {
				return err
			}
			jobs, rejects := store.OutboxHeld(p, held)
			if len(jobs) > 0 {
				if out.Pushed, err = pushTx(ctx, tx, jobs, info); err != nil {
					return err
				}
				out.Jobs = jobs
			}
			if len(rejects) > 0 {
				if err := insertRejects(ctx, tx, rejects); err != nil {
					return err
				}
				out.Rejected = len(rejects)
			}
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("move %d outbox rows: %w", len(ids), mapErr(err))
	}
	return out, nil
}

// insertRejects stores rejects with one multi-row INSERT.
func insertRejects(ctx context.Context, tx *sql.Tx, rejects []store.OutboxRejectParams) error {
	var q strings.Builder
	q.WriteString(`/* rowq:outbox.reject */ INSERT INTO rowq_outbox_rejects (outbox_id, ` + sqldb.OutboxCols + `, reason, rejected_at) VALUES `)
	args := make([]any, 0, (sqldb.OutboxArgCount+3)*len(rejects))
	for i, r := range rejects {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(" + sqldb.Placeholders(sqldb.OutboxArgCount+3) + ", NOW(6))")
		args = append(append(append(args, r.Row.ID), sqldb.OutboxArgs(r.Row)...), r.Row.CreatedAt, r.Reason)
	}
	_, err := tx.ExecContext(ctx, q.String(), args...)
	return err
}

// OutboxRejects lists rejects by id.
func (s *Store) OutboxRejects(ctx context.Context, p *store.OutboxRejectsParams) ([]*store.OutboxReject, error) {
	var out []*store.OutboxReject
	err := retry(ctx, func() (err error) {
		out, err = sqldb.QueryAll(ctx, s.db, scanOutboxReject, `/* rowq:outbox.rejects */ SELECT id, outbox_id, `+sqldb.OutboxCols+`,
			reason, rejected_at FROM rowq_outbox_rejects WHERE id > ? ORDER BY id LIMIT ?`, p.After, p.Limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("list outbox rejects: %w", mapErr(err))
	}
	return out, nil
}

func scanOutboxReject(sc sqldb.Scanner) (*store.OutboxReject, error) {
	var r store.OutboxReject
	err := scanOutboxRow(sc, &r.Row, []any{&r.ID, &r.Row.ID}, &r.Reason, &r.RejectedAt)
	return &r, err
}

// OutboxRejectsCount counts the rejects.
func (s *Store) OutboxRejectsCount(ctx context.Context) (int64, error) {
	var n int64
	err := retry(ctx, func() error {
		return s.db.QueryRowContext(ctx, `/* rowq:outbox.rejects_count */ SELECT COUNT(*) FROM rowq_outbox_rejects`).Scan(&n)
	})
	if err != nil {
		return 0, fmt.Errorf("count outbox rejects: %w", mapErr(err))
	}
	return n, nil
}

// OutboxListen returns errors.ErrUnsupported: MySQL cannot announce a
// commit, and the moving node probes the outbox instead.
func (s *Store) OutboxListen(context.Context, func(), func()) error { return errors.ErrUnsupported }

// OutboxWaiting does nothing: MySQL announces no commit.
func (s *Store) OutboxWaiting(context.Context, bool) error { return nil }
