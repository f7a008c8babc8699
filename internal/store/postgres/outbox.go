package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

// OutboxChannel is the LISTEN/NOTIFY channel on which the outbox's
// trigger (migration 1700) announces the commit of a transaction that
// inserted into rowq_outbox.
const OutboxChannel = "rowq_outbox"

// outboxDest are the destinations of lead, then sqldb.OutboxCols into r (ordered
// as the boolean it is here), then
// tail.
func outboxDest(r *store.OutboxRow, lead []any, tail ...any) []any {
	return append(append(lead, &r.Category, &r.URL, &r.Payload, &r.RunAfter, &r.MaxRetries, &r.RetryDelay,
		&r.Timeout, &r.Priority, &r.UniqueKey, &r.TraceParent, &r.TraceState,
		&r.ConcurrencyKey, &r.ConcurrencyLimit, &r.Ordered, &r.CreatedAt), tail...)
}

// values returns n rows of VALUES with width numbered parameters each,
// then suffix: ($1, $2), ($3, $4).
func values(n, width int, suffix string) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		for k := range width {
			if k > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "$%d", i*width+k+1)
		}
		b.WriteString(suffix + ")")
	}
	return b.String()
}

// outboxReadSQL reads the first rows of the outbox: a walk of the primary
// key from its start, which stops at the limit.
const outboxReadSQL = `/* rowq:outbox.read */ SELECT id, ` + sqldb.OutboxCols + ` FROM rowq_outbox ORDER BY id LIMIT $1`

// OutboxInsert inserts the rows with one multi-row INSERT.
func (s *Store) OutboxInsert(ctx context.Context, rows []*store.OutboxRow) error {
	if len(rows) == 0 {
		return nil
	}
	args := make([]any, 0, sqldb.OutboxArgCount*len(rows))
	for _, r := range rows {
		args = append(args, sqldb.OutboxArgs(r)...)
	}
	_, err := retry(ctx, func() (struct{}, error) {
		_, err := s.pool.Exec(ctx, `/* rowq:outbox.insert */ INSERT INTO rowq_outbox (`+sqldb.OutboxWritten+`)
			VALUES `+values(len(rows), sqldb.OutboxArgCount, ""), args...)
		return struct{}{}, err
	})
	if err != nil {
		return fmt.Errorf("insert %d outbox rows: %w", len(rows), mapErr(err))
	}
	return nil
}

// OutboxRead reads the first rows of the outbox by primary key. A
// snapshot holds committed rows only, and a plain read waits for no lock.
func (s *Store) OutboxRead(ctx context.Context, limit int) ([]*store.OutboxRow, error) {
	out, err := retry(ctx, func() ([]*store.OutboxRow, error) {
		rows, _ := s.pool.Query(ctx, outboxReadSQL, limit)
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.OutboxRow, error) {
			var r store.OutboxRow
			return &r, row.Scan(outboxDest(&r, []any{&r.ID})...)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("read the outbox: %w", mapErr(err))
	}
	return out, nil
}

// OutboxMove deletes the rows no other transaction holds (skipping the
// others) with one statement, and inserts their jobs and rejects, in one
// transaction.
func (s *Store) OutboxMove(ctx context.Context, p *store.OutboxMoveParams) (*store.OutboxMoved, error) {
	ids := p.OutboxIDs()
	if len(ids) == 0 {
		return &store.OutboxMoved{}, nil
	}
	var out *store.OutboxMoved
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		out = &store.OutboxMoved{}
		rows, _ := tx.Query(ctx, `/* rowq:outbox.move */ DELETE FROM rowq_outbox WHERE id IN (
			SELECT id FROM rowq_outbox WHERE id = ANY($1) FOR UPDATE SKIP LOCKED) RETURNING id`, ids)
		held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil || len(held) == 0 {
			return err
		}
		jobs, rejects := store.OutboxHeld(p, held)
		if len(jobs) > 0 {
			if out.Pushed, err = pushTx(ctx, tx, jobs); err != nil {
				return err
			}
			out.Jobs = jobs
		}
		if len(rejects) > 0 {
			args := make([]any, 0, (sqldb.OutboxArgCount+3)*len(rejects))
			for _, r := range rejects {
				args = append(append(append(args, r.Row.ID), sqldb.OutboxArgs(r.Row)...), r.Row.CreatedAt, r.Reason)
			}
			if _, err := tx.Exec(ctx, `/* rowq:outbox.reject */ INSERT INTO rowq_outbox_rejects
				(outbox_id, `+sqldb.OutboxCols+`, reason, rejected_at) VALUES `+values(len(rejects), sqldb.OutboxArgCount+3, ", now()"), args...); err != nil {
				return err
			}
			out.Rejected = len(rejects)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("move %d outbox rows: %w", len(ids), mapErr(err))
	}
	return out, nil
}

// OutboxRejects lists rejects by id.
func (s *Store) OutboxRejects(ctx context.Context, p *store.OutboxRejectsParams) ([]*store.OutboxReject, error) {
	out, err := retry(ctx, func() ([]*store.OutboxReject, error) {
		rows, _ := s.pool.Query(ctx, `/* rowq:outbox.rejects */ SELECT id, outbox_id, `+sqldb.OutboxCols+`, reason, rejected_at
			FROM rowq_outbox_rejects WHERE id > $1 ORDER BY id LIMIT $2`, p.After, p.Limit)
		return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.OutboxReject, error) {
			var r store.OutboxReject
			return &r, row.Scan(outboxDest(&r.Row, []any{&r.ID, &r.Row.ID}, &r.Reason, &r.RejectedAt)...)
		})
	})
	if err != nil {
		return nil, fmt.Errorf("list outbox rejects: %w", mapErr(err))
	}
	return out, nil
}

// OutboxRejectsCount counts the rejects.
func (s *Store) OutboxRejectsCount(ctx context.Context) (int64, error) {
	n, err := retry(ctx, func() (int64, error) {
		var n int64
		err := s.pool.QueryRow(ctx, `/* rowq:outbox.rejects_count */ SELECT count(*) FROM rowq_outbox_rejects`).Scan(&n)
		return n, err
	})
	if err != nil {
		return 0, fmt.Errorf("count outbox rejects: %w", mapErr(err))
	}
	return n, nil
}

// OutboxListen calls ready once it listens on OutboxChannel, then fn for
// every notification, until ctx ends or the connection fails. It holds
// one connection of the pool.
func (s *Store) OutboxListen(ctx context.Context, ready func(), fn func()) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen for outbox inserts: %w", mapErr(err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `/* rowq:outbox.listen */ LISTEN `+OutboxChannel); err != nil {
		return fmt.Errorf("listen for outbox inserts: %w", mapErr(err))
	}
	defer func() {
		// The connection goes back to the pool: stop listening on it, or
		// drop it if that fails.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `/* rowq:outbox.unlisten */ UNLISTEN `+OutboxChannel); err != nil {
			conn.Conn().Close(ctx)
		}
	}()
	ready()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen for outbox inserts: %w", mapErr(err))
		}
		fn()
	}
}

// OutboxWaiting sets whether the trigger on rowq_outbox announces commits
// (rowq_outbox_listener.waiting).
func (s *Store) OutboxWaiting(ctx context.Context, waiting bool) error {
	if _, err := s.exec(ctx, `/* rowq:outbox.waiting */ UPDATE rowq_outbox_listener SET waiting = $1 WHERE waiting <> $1`, waiting); err != nil {
		return fmt.Errorf("set whether the outbox mover waits: %w", mapErr(err))
	}
	return nil
}
