package rowqtype

import "time"

// Lease is a holder of a lock: the caller's own (the answer of an
// acquire, renew or release) or one listed by GET /lock/{name} and
// GET /locks.
type Lease struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
	// Token is the fencing token: larger than every token handed out for
	// the name before. Pass it to the resource the lock protects, which
	// refuses a token smaller than the largest it has seen.
	Token      int64     `json:"token"`
	AcquiredAt time.Time `json:"acquired_at"`
	ExpiresAt  time.Time `json:"expires_at"` // by the database's clock
	Limit      int       `json:"limit"`      // holders allowed at once
}

// Lock is a lock with its live holders (none when it is free).
type Lock struct {
	Name    string   `json:"name"`
	Holders []*Lease `json:"holders"`
}

// LockPage is one page of GET /locks, held locks by name; NextCursor is
// left out on the last.
type LockPage struct {
	Locks      []*Lock `json:"locks"`
	NextCursor string  `json:"next_cursor,omitempty"`
}

// LockAcquireRequest is the body of PUT /lock/{name}. Durations are
// seconds, kept to the microsecond.
type LockAcquireRequest struct {
	Owner *string  `json:"owner,omitempty"` // who holds the lease, such as host:pid (required)
	TTL   *float64 `json:"ttl,omitempty"`   // how long the lease lasts unless renewed (required)
	Wait  *float64 `json:"wait,omitempty"`  // how long to wait for a taken lock; nil or 0 tries once
	Limit *int     `json:"limit,omitempty"` // holders at once; nil means 1, a lock
}

// LockRenewRequest is the body of POST /lock/{name}/renew; every field is
// required.
type LockRenewRequest struct {
	Owner *string  `json:"owner,omitempty"`
	Token *int64   `json:"token,omitempty"`
	TTL   *float64 `json:"ttl,omitempty"` // seconds from the database's now
}

// LockConflict is the body of a lock's 409: an acquire that did not get
// the lock within its wait lists the holders; a renew or release of a
// lease no longer held has only the message.
type LockConflict struct {
	Error   string   `json:"error"`
	Holders []*Lease `json:"holders,omitempty"`
}
