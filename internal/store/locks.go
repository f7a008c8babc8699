package store

import (
	"context"
	"time"
)

// LockStore is the part of Store that keeps named leases (locks and
// semaphores). A name has a row that is never deleted and holds the last
// fencing token handed out, so that tokens keep growing across expiry,
// release and restarts; each live holder has a row of its own with its
// expiry. Expiry is judged by the database's clock.
type LockStore interface {
	// LockAcquire gives p.Owner a lease on p.Name when it can have one now:
	// it drops expired holders, returns p.Owner's live lease unchanged if
	// it already holds one, and otherwise takes the next token if the live
	// holders stay within p.Limit and within the limit of every live
	// holder. When it cannot, the result has no Lease and lists the live
	// holders. An acquire or release of the name that another transaction
	// keeps in progress for LockWait (a node frozen half-way through one)
	// counts as a holder: the result then lists the live holders as last
	// committed, which may be none.
	LockAcquire(ctx context.Context, p *LockAcquireParams) (*LockAcquireResult, error)
	// LockRenew moves the expiry of a live lease to now + p.TTL and returns
	// the lease; ErrNotFound if that lease (name, owner, token) is not
	// live.
	LockRenew(ctx context.Context, p *LockRenewParams) (*LockLease, error)
	// LockRelease ends a live lease and returns it; ErrNotFound if that
	// lease is not live.
	LockRelease(ctx context.Context, p *LockReleaseParams) (*LockLease, error)
	// LockGet returns the live holders of name, by token.
	LockGet(ctx context.Context, name string) ([]*LockLease, error)
	// LockList returns the live holders of up to p.Limit names greater than
	// p.After, by name then token.
	LockList(ctx context.Context, p *LockListParams) ([]*LockLease, error)
	// LockListen calls ready once it listens, then fn with the name of
	// every lock released on any node, until ctx ends or the connection
	// fails. A dialect that cannot announce releases (MySQL, SQLite: the
	// waiters poll) returns errors.ErrUnsupported at once.
	LockListen(ctx context.Context, ready func(), fn func(name string)) error
}

// LockLease is one holder of a lock.
type LockLease struct {
	Name  string
	Owner string
	// Token is the fencing token: larger than every token handed out for
	// Name before it.
	Token int64
	// Limit is the number of simultaneous holders this holder accepted.
	Limit      int
	AcquiredAt time.Time
	ExpiresAt  time.Time
}

// LockAcquireParams are the arguments of LockStore.LockAcquire.
type LockAcquireParams struct {
	Name  string
	Owner string
	TTL   time.Duration // kept to the microsecond
	Limit int           // 1 for a lock, more for a semaphore
}

// LockAcquireResult is the outcome of LockStore.LockAcquire.
type LockAcquireResult struct {
	// Lease is the caller's lease, nil when the lock could not be had.
	Lease *LockLease
	// Holders are the live holders, when Lease is nil.
	Holders []*LockLease
}

// LockRenewParams are the arguments of LockStore.LockRenew.
type LockRenewParams struct {
	Name  string
	Owner string
	Token int64
	TTL   time.Duration
}

// LockReleaseParams are the arguments of LockStore.LockRelease.
type LockReleaseParams struct {
	Name  string
	Owner string
	Token int64
}

// LockListParams are the arguments of LockStore.LockList.
type LockListParams struct {
	After string // names greater than this; "" for the first page
	Limit int    // names per page
}

// LockHasRoom reports whether one more holder may join the live holders
// when it asks for limit: the holders after it joins must stay within its
// own limit and within the limit every live holder accepted, so that an
// exclusive holder (limit 1) is never joined, whatever the newcomer asks.
func LockHasRoom(holders []*LockLease, limit int) bool {
	for _, h := range holders {
		limit = min(limit, h.Limit)
	}
	return len(holders) < limit
}
