package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const lockHolderCols = "name, owner, token, lim, acquired_at, expires_at"

func scanLease(row sqldb.Scanner) (*store.LockLease, error) {
	var (
		l             store.LockLease
		acquired, exp int64
	)
	if err := row.Scan(&l.Name, &l.Owner, &l.Token, &l.Limit, &acquired, &exp); err != nil {
		return nil, err
	}
	l.AcquiredAt, l.ExpiresAt = fromMicros(acquired), fromMicros(exp)
	return &l, nil
}

func queryLeases(ctx context.Context, q sqldb.DBTX, query string, args ...any) ([]*store.LockLease, error) {
	return sqldb.QueryAll(ctx, q, scanLease, query, args...)
}

// LockAcquire runs one write transaction (SQLite's one writer serialises
// acquires, across processes sharing the file too). The clock is read
// once the transaction holds the write lock.
func (s *Store) LockAcquire(ctx context.Context, p *store.LockAcquireParams) (*store.LockAcquireResult, error) {
	var res *store.LockAcquireResult
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		res = &store.LockAcquireResult{}
		now := s.micros()
		var last int64
		err := tx.QueryRowContext(ctx, `/* rowq:locks.acquire */
			INSERT INTO locks (name, last_token, created_at) VALUES (?, 0, ?)
			ON CONFLICT (name) DO UPDATE SET last_token = last_token
			RETURNING last_token`, p.Name, now).Scan(&last)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `/* rowq:locks.acquire */
			DELETE FROM lock_holders WHERE name = ? AND expires_at <= ?`, p.Name, now); err != nil {
			return err
		}
		holders, err := queryLeases(ctx, tx, `/* rowq:locks.acquire */
			SELECT `+lockHolderCols+` FROM lock_holders WHERE name = ? ORDER BY token`, p.Name)
		if err != nil {
			return err
		}
		for _, h := range holders {
			if h.Owner == p.Owner {
				res.Lease = h
				return nil
			}
		}
		if !store.LockHasRoom(holders, p.Limit) {
			res.Holders = holders
			return nil
		}
		if _, err := tx.ExecContext(ctx, `/* rowq:locks.acquire */
			UPDATE locks SET last_token = ? WHERE name = ?`, last+1, p.Name); err != nil {
			return err
		}
		res.Lease, err = scanLease(tx.QueryRowContext(ctx, `/* rowq:locks.acquire */
			INSERT INTO lock_holders (name, owner, token, lim, acquired_at, expires_at)
			VALUES (?, ?, ?, ?, ?, ?)
			RETURNING `+lockHolderCols,
			p.Name, p.Owner, last+1, p.Limit, now, now+p.TTL.Microseconds()))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("acquire lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	return res, nil
}

// LockRenew moves a live lease's expiry with one compare-and-set UPDATE.
func (s *Store) LockRenew(ctx context.Context, p *store.LockRenewParams) (*store.LockLease, error) {
	var l *store.LockLease
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		now := s.micros()
		var err error
		l, err = scanLease(tx.QueryRowContext(ctx, `/* rowq:locks.renew */
			UPDATE lock_holders SET expires_at = ?
			WHERE name = ? AND owner = ? AND token = ? AND expires_at > ?
			RETURNING `+lockHolderCols,
			now+p.TTL.Microseconds(), p.Name, p.Owner, p.Token, now))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("renew lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	return l, nil
}

// LockRelease deletes a live lease and returns it.
func (s *Store) LockRelease(ctx context.Context, p *store.LockReleaseParams) (*store.LockLease, error) {
	var l *store.LockLease
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		l, err = scanLease(tx.QueryRowContext(ctx, `/* rowq:locks.release */
			DELETE FROM lock_holders
			WHERE name = ? AND owner = ? AND token = ? AND expires_at > ?
			RETURNING `+lockHolderCols,
			p.Name, p.Owner, p.Token, s.micros()))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("release lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	return l, nil
}

// LockGet returns the live holders of name, by token.
func (s *Store) LockGet(ctx context.Context, name string) ([]*store.LockLease, error) {
	ls, err := queryLeases(ctx, s.r, `/* rowq:locks.get */
		SELECT `+lockHolderCols+` FROM lock_holders WHERE name = ? AND expires_at > ? ORDER BY token`, name, s.micros())
	if err != nil {
		return nil, fmt.Errorf("get lock %q: %w", name, mapErr(err))
	}
	return ls, nil
}

// LockList returns the live holders of up to p.Limit names after p.After.
func (s *Store) LockList(ctx context.Context, p *store.LockListParams) ([]*store.LockLease, error) {
	ls, err := queryLeases(ctx, s.r, `/* rowq:locks.list */
		WITH page AS (
			SELECT DISTINCT name FROM lock_holders
			WHERE name > ?1 AND expires_at > ?2 ORDER BY name LIMIT ?3)
		SELECT `+lockHolderCols+` FROM lock_holders
		WHERE name IN (SELECT name FROM page) AND expires_at > ?2
		ORDER BY name, token`, p.After, s.micros(), p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list locks after %q: %w", p.After, mapErr(err))
	}
	return ls, nil
}

// LockListen returns errors.ErrUnsupported: SQLite cannot announce releases,
// so lock waiters poll.
func (s *Store) LockListen(context.Context, func(), func(string)) error {
	return errors.ErrUnsupported
}
