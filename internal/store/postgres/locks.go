package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rowq/rowq/internal/store"
)

// LockChannel is the LISTEN/NOTIFY channel on which a release announces
// the lock's name, so that waiters on every node try again at once.
const LockChannel = "rowq_lock_released"

// Lock SQL reads the clock with clock_timestamp(), not now(): now() is the
// start of the transaction, which may have waited for the name's row lock,
// and a lease is to last its full TTL from when it is granted.
const lockHolderCols = `name, owner, token, lim, acquired_at, expires_at`

func scanLease(row pgx.CollectableRow) (*store.LockLease, error) {
	var l store.LockLease
	err := row.Scan(&l.Name, &l.Owner, &l.Token, &l.Limit, &l.AcquiredAt, &l.ExpiresAt)
	l.AcquiredAt, l.ExpiresAt = l.AcquiredAt.UTC(), l.ExpiresAt.UTC()
	return &l, err
}

// LockAcquire runs one short transaction: it makes sure the name's row
// exists and locks it (every acquire of the name queues behind that row
// lock), drops expired holders, and then returns the owner's live lease,
// hands out the next token, or reports the holders. When a row it needs
// stays locked for store.LockWait (an acquire or release of the name stuck
// half-way, on a frozen node), it reports the holders as last committed.
func (s *Store) LockAcquire(ctx context.Context, p *store.LockAcquireParams) (*store.LockAcquireResult, error) {
	var res *store.LockAcquireResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = &store.LockAcquireResult{}
		var last int64
		err := tx.QueryRow(ctx, `/* rowq:locks.acquire */
			INSERT INTO locks (name, last_token, created_at) VALUES ($1, 0, clock_timestamp())
			ON CONFLICT (name) DO UPDATE SET last_token = locks.last_token
			RETURNING last_token`, p.Name).Scan(&last)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `/* rowq:locks.acquire */
			DELETE FROM lock_holders WHERE name = $1 AND expires_at <= clock_timestamp()`, p.Name); err != nil {
			return err
		}
		rows, _ := tx.Query(ctx, `/* rowq:locks.acquire */
			SELECT `+lockHolderCols+` FROM lock_holders WHERE name = $1 ORDER BY token`, p.Name)
		holders, err := pgx.CollectRows(rows, scanLease)
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
		if _, err := tx.Exec(ctx, `/* rowq:locks.acquire */
			UPDATE locks SET last_token = $2 WHERE name = $1`, p.Name, last+1); err != nil {
			return err
		}
		// One clock_timestamp() for both columns: each call reads the
		// clock anew, and the lease must last exactly its TTL.
		rows, _ = tx.Query(ctx, `/* rowq:locks.acquire */
			WITH c AS (SELECT clock_timestamp() AS t)
			INSERT INTO lock_holders (name, owner, token, lim, acquired_at, expires_at)
			SELECT $1::text, $2::text, $3::bigint, $4::integer, c.t, c.t + make_interval(secs => $5) FROM c
			RETURNING `+lockHolderCols,
			p.Name, p.Owner, last+1, p.Limit, seconds(p.TTL.Microseconds()))
		res.Lease, err = pgx.CollectExactlyOneRow(rows, scanLease)
		return err
	})
	if isCode(err, codeLockNotAvailable) {
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

// seconds turns microseconds into the seconds make_interval takes, exactly
// (a float64 holds any microsecond count below 2^53).
func seconds(us int64) float64 { return float64(us) / 1e6 }

// LockRenew moves a live lease's expiry with one compare-and-set UPDATE.
func (s *Store) LockRenew(ctx context.Context, p *store.LockRenewParams) (*store.LockLease, error) {
	l, err := queryOne(ctx, s, scanLease, `/* rowq:locks.renew */
		UPDATE lock_holders SET expires_at = clock_timestamp() + make_interval(secs => $4)
		WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp()
		RETURNING `+lockHolderCols,
		p.Name, p.Owner, p.Token, seconds(p.TTL.Microseconds()))
	if err != nil {
		return nil, fmt.Errorf("renew lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	return l, nil
}

// LockRelease deletes a live lease and, in the same transaction, notifies
// LockChannel with the name: the notification goes out on commit.
func (s *Store) LockRelease(ctx context.Context, p *store.LockReleaseParams) (*store.LockLease, error) {
	var l *store.LockLease
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, `/* rowq:locks.release */
			DELETE FROM lock_holders
			WHERE name = $1 AND owner = $2 AND token = $3 AND expires_at > clock_timestamp()
			RETURNING `+lockHolderCols, p.Name, p.Owner, p.Token)
		var err error
		if l, err = pgx.CollectExactlyOneRow(rows, scanLease); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `/* rowq:locks.notify */ SELECT pg_notify($1, $2)`, LockChannel, p.Name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("release lock %q for %q: %w", p.Name, p.Owner, mapErr(err))
	}
	return l, nil
}

// LockGet returns the live holders of name, by token.
func (s *Store) LockGet(ctx context.Context, name string) ([]*store.LockLease, error) {
	ls, err := queryAll(ctx, s, scanLease, `/* rowq:locks.get */
		SELECT `+lockHolderCols+` FROM lock_holders WHERE name = $1 AND expires_at > clock_timestamp() ORDER BY token`, name)
	if err != nil {
		return nil, fmt.Errorf("get lock %q: %w", name, mapErr(err))
	}
	return ls, nil
}

// LockList returns the live holders of up to p.Limit names after p.After.
func (s *Store) LockList(ctx context.Context, p *store.LockListParams) ([]*store.LockLease, error) {
	ls, err := queryAll(ctx, s, scanLease, `/* rowq:locks.list */
		WITH page AS (
			SELECT DISTINCT name FROM lock_holders
			WHERE name > $1 AND expires_at > clock_timestamp() ORDER BY name LIMIT $2)
		SELECT `+lockHolderCols+` FROM lock_holders
		WHERE name IN (SELECT name FROM page) AND expires_at > clock_timestamp()
		ORDER BY name, token`, p.After, p.Limit)
	if err != nil {
		return nil, fmt.Errorf("list locks after %q: %w", p.After, mapErr(err))
	}
	return ls, nil
}

// LockListen calls ready once it listens, then fn with the name of every
// lock released on any node, until ctx ends or the connection fails. It
// holds one connection of the pool for LISTEN.
func (s *Store) LockListen(ctx context.Context, ready func(), fn func(name string)) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("listen for lock releases: %w", mapErr(err))
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `/* rowq:locks.listen */ LISTEN `+LockChannel); err != nil {
		return fmt.Errorf("listen for lock releases: %w", mapErr(err))
	}
	defer func() {
		// The connection goes back to the pool: stop listening on it, or
		// drop it if that fails.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(ctx, `/* rowq:locks.unlisten */ UNLISTEN `+LockChannel); err != nil {
			conn.Conn().Close(ctx)
		}
	}()
	ready()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("listen for lock releases: %w", mapErr(err))
		}
		fn(n.Payload)
	}
}
