package httpapi

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/rowq/rowq/internal/lock"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/rowqtype"
)

// Limits on lock inputs.
const (
	maxOwnerLen  = 255     // characters
	maxLockTTL   = 86400.0 // seconds
	maxLockWait  = 300.0   // seconds: the request stays open that long
	maxLockLimit = 1000
)

// toLeaseJSON shows a lease as the API does: the caller's own (acquire,
// renew, release) or a holder in a listing.
func toLeaseJSON(l *store.LockLease) *rowqtype.Lease {
	return &rowqtype.Lease{Name: l.Name, Owner: l.Owner, Token: l.Token, AcquiredAt: l.AcquiredAt.UTC(),
		ExpiresAt: l.ExpiresAt.UTC(), Limit: l.Limit}
}

func toLeasesJSON(ls []*store.LockLease) []*rowqtype.Lease {
	out := make([]*rowqtype.Lease, len(ls))
	for i, l := range ls {
		out[i] = toLeaseJSON(l)
	}
	return out
}

// conflict answers 409 with c as the body: the holders (acquire), or that
// the lease is not held (renew, release).
func conflict(c *rowqtype.LockConflict) error {
	return &apiError{status: http.StatusConflict, msg: c.Error, body: c}
}

// checkOwner validates who holds a lease: 1..255 printable characters,
// not starting or ending with a space (MySQL's _bin collations ignore
// trailing spaces, which would make "a" and "a " one owner there).
func checkOwner(v *string) error {
	switch {
	case v == nil || *v == "":
		return errorf(http.StatusBadRequest, "owner: required: who holds the lock, such as host:pid")
	case !utf8.ValidString(*v):
		return errorf(http.StatusBadRequest, "owner: must be UTF-8 text")
	case strings.TrimSpace(*v) != *v:
		return errorf(http.StatusBadRequest, "owner: must not start or end with a space, got %q", *v)
	case utf8.RuneCountInString(*v) > maxOwnerLen:
		return errorf(http.StatusBadRequest, "owner: at most %d characters, got %d", maxOwnerLen, utf8.RuneCountInString(*v))
	}
	for _, c := range *v {
		if !unicode.IsPrint(c) {
			return errorf(http.StatusBadRequest, "owner: printable characters only, got %q", *v)
		}
	}
	return nil
}

// seconds validates a duration in seconds (decimals allowed, kept to the
// microsecond) in (0, hi], or [0, hi] when zeroOK.
func seconds(field string, v *float64, hi float64, zeroOK bool) (time.Duration, error) {
	if v == nil {
		return 0, errorf(http.StatusBadRequest, "%s: required, in seconds", field)
	}
	us := math.Round(*v * 1e6)
	switch {
	case zeroOK && (*v < 0 || *v > hi):
		return 0, errorf(http.StatusBadRequest, "%s: must be 0..%g seconds, got %v", field, hi, *v)
	case !zeroOK && (us < 1 || *v > hi):
		return 0, errorf(http.StatusBadRequest, "%s: must be more than 0 and at most %g seconds (to the microsecond), got %v", field, hi, *v)
	}
	return time.Duration(us) * time.Microsecond, nil
}

func checkToken(v *int64) error {
	if v == nil {
		return errorf(http.StatusBadRequest, "token: required: the token of the lease acquired")
	}
	if *v < 1 {
		return errorf(http.StatusBadRequest, "token: must be >= 1, got %d", *v)
	}
	return nil
}

func (a *API) acquireLock(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	var req rowqtype.LockAcquireRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := checkOwner(req.Owner); err != nil {
		return nil, err
	}
	ttl, err := seconds("ttl", req.TTL, maxLockTTL, false)
	if err != nil {
		return nil, err
	}
	wait := time.Duration(0)
	if req.Wait != nil {
		if wait, err = seconds("wait", req.Wait, maxLockWait, true); err != nil {
			return nil, err
		}
	}
	if err := checkRange("limit", req.Limit, 1, maxLockLimit); err != nil {
		return nil, err
	}
	l, err := a.cfg.Locks.Acquire(r.Context(), &lock.AcquireParams{
		Name: name, Owner: *req.Owner, TTL: ttl, Wait: wait, Limit: valueOr(req.Limit, 1),
	})
	var held *lock.HeldError
	if errors.As(err, &held) {
		return nil, conflict(&rowqtype.LockConflict{Error: held.Error(), Holders: toLeasesJSON(held.Holders)})
	}
	if err != nil {
		return nil, err
	}
	return toLeaseJSON(l), nil
}

func (a *API) renewLock(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	var req rowqtype.LockRenewRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if err := checkOwner(req.Owner); err != nil {
		return nil, err
	}
	if err := checkToken(req.Token); err != nil {
		return nil, err
	}
	ttl, err := seconds("ttl", req.TTL, maxLockTTL, false)
	if err != nil {
		return nil, err
	}
	l, err := a.cfg.Locks.Renew(r.Context(), &store.LockRenewParams{Name: name, Owner: *req.Owner, Token: *req.Token, TTL: ttl})
	if errors.Is(err, lock.ErrNotHeld) {
		return nil, conflict(notHeldConflict(name, *req.Owner, *req.Token))
	}
	if err != nil {
		return nil, err
	}
	return toLeaseJSON(l), nil
}

func (a *API) releaseLock(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	var owner *string
	if q.Has("owner") {
		o := q.Get("owner")
		owner = &o
	}
	if err := checkOwner(owner); err != nil {
		return nil, err
	}
	var token *int64
	if q.Has("token") {
		n, err := strconv.ParseInt(q.Get("token"), 10, 64)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "token: want an integer, got %q", q.Get("token"))
		}
		token = &n
	}
	if err := checkToken(token); err != nil {
		return nil, err
	}
	l, err := a.cfg.Locks.Release(r.Context(), &store.LockReleaseParams{Name: name, Owner: *owner, Token: *token})
	if errors.Is(err, lock.ErrNotHeld) {
		return nil, conflict(notHeldConflict(name, *owner, *token))
	}
	if err != nil {
		return nil, err
	}
	return toLeaseJSON(l), nil
}

func notHeldConflict(name, owner string, token int64) *rowqtype.LockConflict {
	return &rowqtype.LockConflict{Error: "lock " + strconv.Quote(name) + ": the lease of owner " + strconv.Quote(owner) +
		" with token " + strconv.FormatInt(token, 10) + " is not held (it expired, was released, or never was)"}
}

func (a *API) getLock(r *http.Request) (any, error) {
	name := r.PathValue("name")
	if err := checkName("name", name); err != nil {
		return nil, err
	}
	hs, err := a.cfg.Store.LockGet(r.Context(), name)
	if err != nil {
		return nil, err
	}
	return &rowqtype.Lock{Name: name, Holders: toLeasesJSON(hs)}, nil
}

// listLocks answers GET /locks: held locks by name.
func (a *API) listLocks(r *http.Request) (any, error) {
	pq, err := parsePageQuery(r)
	if err != nil {
		return nil, err
	}
	p := &store.LockListParams{Limit: pq.limit + 1}
	if pq.cursor != "" {
		if p.After, err = decodeNameCursor(pq.cursor, cursorLock); err != nil {
			return nil, err
		}
	}
	ls, err := a.cfg.Store.LockList(r.Context(), p)
	if err != nil {
		return nil, err
	}
	page := &rowqtype.LockPage{Locks: []*rowqtype.Lock{}}
	for _, l := range ls {
		if n := len(page.Locks); n == 0 || page.Locks[n-1].Name != l.Name {
			page.Locks = append(page.Locks, &rowqtype.Lock{Name: l.Name})
		}
		last := page.Locks[len(page.Locks)-1]
		last.Holders = append(last.Holders, toLeaseJSON(l))
	}
	if len(page.Locks) > pq.limit {
		page.Locks = page.Locks[:pq.limit]
		page.NextCursor = encodeNameCursor(cursorLock, page.Locks[pq.limit-1].Name)
	}
	// A confined token sees its own locks; the cursor still goes past
	// the others, so a page may hold fewer than limit.
	page.Locks = visible(r.Context(), page.Locks, func(l *rowqtype.Lock) string { return l.Name })
	return page, nil
}
