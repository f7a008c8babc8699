package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/rowqtype"
)

// serve runs a node on a fresh database of the dialect and returns a
// client of it and the store behind it.
func serve(t *testing.T, dialect string) (*client.Client, store.Store) {
	t.Helper()
	c, s := startServer(t, dialect)
	return c, s.Store()
}

func TestAcquireRenewRelease(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		c, _ := serve(t, dialect)
		ctx := t.Context()
		l, err := c.Acquire(ctx, "report", "a", client.AcquireOptions{TTL: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if l.Token != 1 || l.Owner != "a" || l.Limit != 1 || l.ExpiresAt.Sub(l.AcquiredAt) != 10*time.Second {
			t.Fatalf("lease = %+v", l)
		}
		_, err = c.Acquire(ctx, "report", "b", client.AcquireOptions{TTL: time.Second, Wait: 200 * time.Millisecond})
		var held *client.HeldError
		if !errors.As(err, &held) || !client.IsConflict(err) || len(held.Holders) != 1 || held.Holders[0].Owner != "a" {
			t.Fatalf("acquire of a held lock: err = %v, want a HeldError naming a", err)
		}
		r, err := c.Renew(ctx, l, time.Minute)
		if err != nil || r.Token != l.Token || !r.ExpiresAt.After(l.ExpiresAt) {
			t.Fatalf("renew = %+v, %v", r, err)
		}
		if _, err := c.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Release(ctx, l); !client.IsConflict(err) {
			t.Fatalf("second release: err = %v, want 409", err)
		}
		if _, err := c.Renew(ctx, l, time.Minute); !client.IsConflict(err) {
			t.Fatalf("renew after release: err = %v, want 409", err)
		}
		h, err := c.Lock(ctx, "report")
		if err != nil || len(h.Holders) != 0 {
			t.Fatalf("Lock after release = %+v, %v", h, err)
		}
	})
}

// Hold keeps the lease past its TTL by renewing it, and releases it after.
func TestHold_RenewsAndReleases(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		c, _ := serve(t, dialect)
		ctx := t.Context()
		var token int64
		err := c.Hold(ctx, "job", "me", client.AcquireOptions{TTL: 2 * time.Second}, func(ctx context.Context, l *rowqtype.Lease) error {
			token = l.Token
			// Outlive the TTL twice over.
			for range 4 {
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-time.After(time.Second):
				}
				h, err := c.Lock(ctx, "job")
				if err != nil {
					return err
				}
				if len(h.Holders) != 1 || h.Holders[0].Token != l.Token {
					return errors.New("lease not held while Hold runs")
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		h, err := c.Lock(ctx, "job")
		if err != nil || len(h.Holders) != 0 || token != 1 {
			t.Fatalf("after Hold: holders %+v, %v (token %d)", h, err, token)
		}
	})
}

// When the lease is taken away, Hold cancels the function's context and
// reports ErrLeaseLost.
func TestHold_LostLeaseCancelsFunction(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		c, st := serve(t, dialect)
		var sawCause atomic.Bool
		err := c.Hold(t.Context(), "job", "me", client.AcquireOptions{TTL: 600 * time.Millisecond}, func(ctx context.Context, l *rowqtype.Lease) error {
			// An operator (or an expiry) ends the lease behind our back.
			if _, err := st.LockRelease(ctx, &store.LockReleaseParams{Name: l.Name, Owner: l.Owner, Token: l.Token}); err != nil {
				return err
			}
			select {
			case <-ctx.Done():
				sawCause.Store(errors.Is(context.Cause(ctx), client.ErrLeaseLost))
				return ctx.Err()
			case <-time.After(time.Minute):
				return errors.New("function not cancelled within a minute of losing the lease")
			}
		})
		if !errors.Is(err, client.ErrLeaseLost) || !sawCause.Load() {
			t.Fatalf("Hold = %v (cause seen %v), want ErrLeaseLost", err, sawCause.Load())
		}
	})
}

// A function that fails while holding the lock has its error returned,
// and the lock is released.
func TestHold_ReturnsFunctionError(t *testing.T) {
	t.Parallel()
	c, _ := serve(t, "sqlite")
	boom := errors.New("boom")
	err := c.Hold(t.Context(), "job", "me", client.AcquireOptions{TTL: time.Minute}, func(context.Context, *rowqtype.Lease) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("Hold = %v, want boom", err)
	}
	if h, err := c.Lock(t.Context(), "job"); err != nil || len(h.Holders) != 0 {
		t.Fatalf("after Hold: %+v, %v", h, err)
	}
}
