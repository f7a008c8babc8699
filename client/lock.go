package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/rowq/rowq/rowqtype"
)

// AcquireOptions are the terms of an acquire.
type AcquireOptions struct {
	// TTL is how long the lease lasts unless renewed (required; kept to
	// the microsecond, at most 24 h).
	TTL time.Duration
	// Wait is how long to wait for the lock if it is taken; 0 tries once.
	// Waits longer than the server's bound (300 s) or the HTTP client's
	// timeout are made of several requests.
	Wait time.Duration
	// Limit is the number of simultaneous holders; 0 means 1 (a lock),
	// more makes a semaphore.
	Limit int
}

// HeldError is the answer to an acquire that did not get the lock within
// its wait; it unwraps to the server's 409 *Error.
type HeldError struct {
	Name    string
	Holders []*rowqtype.Lease
	Err     *Error
}

func (e *HeldError) Error() string { return e.Err.Error() }
func (e *HeldError) Unwrap() error { return e.Err }

// ErrLeaseLost is the cause of the context Hold gives its function when
// the lease could not be renewed: it expired, or was taken or released.
var ErrLeaseLost = errors.New("rowq: lock lease lost")

// DefaultOwner names this process as a lock owner: host:pid.
func DefaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// maxWaitPerRequest keeps each waiting request well within the server's
// wait bound and a client's usual timeout.
const maxWaitPerRequest = 25 * time.Second

// Acquire takes a lease on the lock name for owner (PUT /lock/{name}). It
// returns a *HeldError (IsConflict) when the lock stayed taken for
// opt.Wait. Acquiring again with the same owner while holding the lock
// returns the same lease, so a lost answer can be retried safely.
func (c *Client) Acquire(ctx context.Context, name, owner string, opt AcquireOptions) (*rowqtype.Lease, error) {
	limit := opt.Limit
	if limit == 0 {
		limit = 1
	}
	deadline := time.Now().Add(opt.Wait)
	for {
		wait := min(max(time.Until(deadline), 0), maxWaitPerRequest)
		in := &rowqtype.LockAcquireRequest{Owner: &owner, TTL: new(opt.TTL.Seconds()), Wait: new(wait.Seconds()), Limit: &limit}
		var out rowqtype.Lease
		err := c.Do(ctx, http.MethodPut, "/lock/"+esc(name), nil, in, &out)
		if err == nil {
			return &out, nil
		}
		var e *Error
		if !errors.As(err, &e) || e.Status != http.StatusConflict {
			return nil, err
		}
		held := &HeldError{Name: name, Err: e}
		var body rowqtype.LockConflict
		if json.Unmarshal(e.Body, &body) == nil {
			held.Holders = body.Holders
		}
		if time.Until(deadline) <= 0 {
			return nil, held
		}
	}
}

// Renew extends the lease to the database's now + ttl (POST
// /lock/{name}/renew) and returns it; a 409 (IsConflict) means the lease
// is no longer held.
func (c *Client) Renew(ctx context.Context, l *rowqtype.Lease, ttl time.Duration) (*rowqtype.Lease, error) {
	var out rowqtype.Lease
	in := &rowqtype.LockRenewRequest{Owner: &l.Owner, Token: &l.Token, TTL: new(ttl.Seconds())}
	if err := c.Do(ctx, http.MethodPost, "/lock/"+esc(l.Name)+"/renew", nil, in, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Release ends the lease (DELETE /lock/{name}) and returns it; a 409
// (IsConflict) means it was not held any more.
func (c *Client) Release(ctx context.Context, l *rowqtype.Lease) (*rowqtype.Lease, error) {
	var out rowqtype.Lease
	q := url.Values{"owner": {l.Owner}, "token": {strconv.FormatInt(l.Token, 10)}}
	if err := c.Do(ctx, http.MethodDelete, "/lock/"+esc(l.Name), q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Lock returns the live holders of a lock (GET /lock/{name}); none when
// it is free.
func (c *Client) Lock(ctx context.Context, name string) (*rowqtype.Lock, error) {
	var out rowqtype.Lock
	if err := c.Do(ctx, http.MethodGet, "/lock/"+esc(name), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Locks returns a page of held locks by name (GET /locks). opts may be
// nil; its Order is not used.
func (c *Client) Locks(ctx context.Context, opts *ListOptions) (*rowqtype.LockPage, error) {
	var out rowqtype.LockPage
	if err := c.Do(ctx, http.MethodGet, "/locks", opts.query(), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Hold acquires the lock name for owner, runs fn while holding it and
// releases it when fn returns. It renews the lease in the background every
// third of opt.TTL; if the lease is lost (the server says it is not held,
// or no renewal succeeded before it would expire) fn's context is
// cancelled with cause ErrLeaseLost and Hold returns an error wrapping
// ErrLeaseLost, whatever fn returns. Otherwise it returns fn's error.
func (c *Client) Hold(ctx context.Context, name, owner string, opt AcquireOptions, fn func(ctx context.Context, l *rowqtype.Lease) error) error {
	l, err := c.Acquire(ctx, name, owner, opt)
	if err != nil {
		return err
	}
	// Renew once at once: the lease then lasts at least TTL from when the
	// renewal was sent, a bound by this host's clock that the acquire
	// alone does not give (it may have been granted during a wait, or
	// earlier to the same owner).
	sent := time.Now()
	renewed, err := c.Renew(ctx, l, opt.TTL)
	if err != nil {
		relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer relCancel()
		c.Release(relCtx, l) // best effort; the lease expires anyway
		if IsConflict(err) {
			return fmt.Errorf("hold lock %q: %w", name, ErrLeaseLost)
		}
		return fmt.Errorf("renew lock %q: %w", name, err)
	}
	l = renewed
	validUntil := sent.Add(opt.TTL)
	fnCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	renewing := make(chan struct{})
	go func() {
		defer close(renewing)
		c.keepRenewed(fnCtx, l, opt.TTL, validUntil, cancel)
	}()
	fnErr := fn(fnCtx, l)
	lost := errors.Is(context.Cause(fnCtx), ErrLeaseLost)
	cancel(nil)
	<-renewing
	if lost {
		return fmt.Errorf("hold lock %q: %w", name, ErrLeaseLost)
	}
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer relCancel()
	if _, err := c.Release(relCtx, l); err != nil && fnErr == nil {
		if IsConflict(err) {
			return fmt.Errorf("hold lock %q: %w", name, ErrLeaseLost)
		}
		return fmt.Errorf("release lock %q: %w", name, err)
	}
	return fnErr
}

// keepRenewed renews l every third of ttl until ctx ends, and calls
// lost(ErrLeaseLost) when the server says the lease is gone or when
// validUntil (by this host's clock, a lower bound of the lease's end)
// passes without a successful renewal.
func (c *Client) keepRenewed(ctx context.Context, l *rowqtype.Lease, ttl time.Duration, validUntil time.Time, lost context.CancelCauseFunc) {
	next := ttl / 3
	for {
		timer := time.NewTimer(min(next, time.Until(validUntil)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if !time.Now().Before(validUntil) {
			lost(ErrLeaseLost)
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, max(time.Until(validUntil), time.Millisecond))
		_, err := c.Renew(rctx, l, ttl)
		cancel()
		switch {
		case err == nil:
			validUntil = sent.Add(ttl)
			next = ttl / 3
		case IsConflict(err):
			lost(ErrLeaseLost)
			return
		default:
			// The server or the network failed: try again soon, while
			// the lease may still be live.
			next = max(ttl/10, 50*time.Millisecond)
		}
	}
}
