package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/sqldb"
)

const lockHolderCols = "name, owner, token, lim, acquired_at, expires_at"

func scanLease(sc sqldb.Scanner) (*store.LockLease, error) {
	var l store.LockLease
	if err := sc.Scan(&l.Name, &l.Owner, &l.Token, &l.Limit, &l.AcquiredAt, &l.ExpiresAt); err != nil {
		return nil, err
	}
	return &l, nil
}

func queryLeases(ctx context.Context, q sqldb.DBTX, query string, args ...any) ([]*store.LockLease, error) {
	return sqldb.QueryAll(ctx, q, scanLease, query, args...)
}

// LockAcquire runs one short transaction: it makes sure the name's row
// exists and locks it (every acquire of the name queues behind that row
// lock), drops expired holders, and then returns the owner's live lease,
// hands out the next token, or reports the holders. When a row it needs
// stays locked for store.LockWait (an acquire or release of the name stuck
// half-way, on a frozen node), it reports the holders as last committed.
func (s *Store) LockAcquire(ctx context.Context, p *store.LockAcquireParams) (*store.LockAcquireResult, error) {
	var res *store.LockAcquireResult
	busy := false
	lockName, err := s.causal(ctx, `/* rowq:locks.acquire */
				SELECT last_token FROM locks WHERE name = ? FOR UPDATE`)
	if err != nil {
		return nil, fmt.Errorf("acquire lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	err = retry(ctx, func() error {
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			res = &store.LockAcquireResult{}
			if _, err := tx.ExecContext(ctx, `/* rowq:locks.acquire */
				INSERT INTO locks (name, last_token, created_at) VALUES (?, 0, NOW(6))
				ON DUPLICATE KEY UPDATE last_token = last_token`, p.Name); err != nil {
				return err
			}
			var last int64
			if err := tx.QueryRowContext(ctx, lockName, p.Name).Scan(&last); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `/* rowq:locks.acquire */
				DELETE FROM lock_holders WHERE name = ? AND expires_at <= NOW(6)`, p.Name); err != nil {
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
			if _, err := tx.ExecContext(ctx, `/* rowq:locks.acquire */
				INSERT INTO lock_holders (name, owner, token, lim, acquired_at, expires_at)
				VALUES (?, ?, ?, ?, NOW(6), NOW(6) + INTERVAL ? MICROSECOND)`,
				p.Name, p.Owner, last+1, p.Limit, p.TTL.Microseconds()); err != nil {
				return err
			}
			res.Lease, err = scanLease(tx.QueryRowContext(ctx, `/* rowq:locks.acquire */
				SELECT `+lockHolderCols+` FROM lock_holders WHERE name = ? AND owner = ?`, p.Name, p.Owner))
			return err
		})
		busy = lockWaitTimedOut(err)
		if busy {
			return nil
		}
		return err
	})
	if busy {
		holders, err := s.LockGet(ctx, p.Name)
		if err != nil {
			return nil, fmt.Errorf("acquire lock %q for %q: %w", p.Name, p.Owner, err)
		}
		return &store.LockAcquireResult{Holders: holders}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	return res, nil
}

// LockRenew moves a live lease's expiry with one compare-and-set UPDATE
// and reads the lease back in the same transaction.
func (s *Store) LockRenew(ctx context.Context, p *store.LockRenewParams) (*store.LockLease, error) {
	var l *store.LockLease
	renew, err := s.causal(ctx, `/* rowq:locks.renew */
				UPDATE lock_holders SET expires_at = NOW(6) + INTERVAL ? MICROSECOND
				WHERE name = ? AND owner = ? AND token = ? AND expires_at > NOW(6)`)
	if err != nil {
		return nil, fmt.Errorf("renew lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	err = retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			n, err := sqldb.Affected(tx.ExecContext(ctx, renew, p.TTL.Microseconds(), p.Name, p.Owner, p.Token))
			if err != nil {
				return err
			}
			if n == 0 {
				return store.ErrNotFound
			}
			l, err = scanLease(tx.QueryRowContext(ctx, `/* rowq:locks.renew */
				SELECT `+lockHolderCols+` FROM lock_holders WHERE name = ? AND owner = ?`, p.Name, p.Owner))
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("renew lock %q for %q: %w", p.Name, p.Owner, notHeld(err))
	}
	return l, nil
}

// LockRelease deletes a live lease, reading it first under a row lock so
// that it can be returned.
func (s *Store) LockRelease(ctx context.Context, p *store.LockReleaseParams) (*store.LockLease, error) {
	var l *store.LockLease
	held, err := s.causal(ctx, `/* rowq:locks.release */
				SELECT `+lockHolderCols+` FROM lock_holders
				WHERE name = ? AND owner = ? AND token = ? AND expires_at > NOW(6) FOR UPDATE`)
	if err != nil {
		return nil, fmt.Errorf("release lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	err = retry(ctx, func() error {
		return s.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			l, err = scanLease(tx.QueryRowContext(ctx, held, p.Name, p.Owner, p.Token))
			if err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `/* rowq:locks.release */
				DELETE FROM lock_holders WHERE name = ? AND owner = ? AND token = ?`, p.Name, p.Owner, p.Token)
			return err
		})
	})
	if err != nil {
		return nil, fmt.Errorf("release lock %q for %q: %w", p.Name, p.Owner, notHeld(err))
	}
	return l, nil
}

// notHeld maps a missing row to store.ErrNotFound and other errors as
// mapErr does.
func notHeld(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return store.ErrNotFound
	}
	return mapErr(err)
}

// LockGet returns the live holders of name, by token.
func (s *Store) LockGet(ctx context.Context, name string) ([]*store.LockLease, error) {
	ls, err := queryLeases(ctx, s.db, `/* rowq:locks.get */
		SELECT `+lockHolderCols+` FROM lock_holders WHERE name = ? AND expires_at > NOW(6) ORDER BY token`, name)
	if err != nil {
		return nil, fmt.Errorf("get lock %q: %w", name, mapErr(err))
	}
	return ls, nil
}

// LockList returns the live holders of up to p.Limit names after p.After.
// The names are picked first (walking the primary key), then their
// holders read.
func (s *Store) LockList(ctx context.Context, p *store.LockListParams) ([]*store.LockLease, error) {
	ls, err := queryLeases(ctx, s.db, `/* rowq:locks.list */
		SELECT `+lockHolderCols+` FROM lock_holders
		WHERE expires_at > NOW(6) AND name IN (
			SELECT name FROM (
				SELECT DISTINCT name FROM lock_holders
				WHERE name > ? AND expires_at > NOW(6) ORDER BY name LIMIT ?) page)
		ORDER BY name, token`, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list locks after %q: %w", p.After, mapErr(err))
	}
	return ls, nil
}

// LockListen returns errors.ErrUnsupported: MySQL cannot announce releases,
// so lock waiters poll.
func (s *Store) LockListen(context.Context, func(), func(string)) error {
	return errors.ErrUnsupported
}
