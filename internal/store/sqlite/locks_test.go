package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// fakeClock is the store's clock under the test's control.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Expiry follows the database's clock to the microsecond, whatever time
// the callers' hosts think it is.
func TestLock_ExpiryFollowsTheStoreClock(t *testing.T) {
	t.Parallel()
	s, err := Open(filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clock := &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	s.now = clock.Now
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	acquire := func(owner string) *store.LockAcquireResult {
		t.Helper()
		res, err := s.LockAcquire(ctx, &store.LockAcquireParams{Name: "l", Owner: owner, TTL: 10 * time.Second, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := acquire("a").Lease
	if want := clock.Now().Add(10 * time.Second); !first.ExpiresAt.Equal(want) {
		t.Fatalf("expires_at = %v, want %v", first.ExpiresAt, want)
	}

	clock.Add(10*time.Second - time.Microsecond)
	if res := acquire("b"); res.Lease != nil {
		t.Fatalf("acquired a microsecond before the expiry: %+v", res.Lease)
	}
	// Renewing a microsecond before the expiry keeps the lease.
	r, err := s.LockRenew(ctx, &store.LockRenewParams{Name: "l", Owner: "a", Token: first.Token, TTL: 10 * time.Second})
	if err != nil || !r.ExpiresAt.Equal(clock.Now().Add(10*time.Second)) {
		t.Fatalf("renew before expiry = %+v, %v", r, err)
	}

	clock.Add(10 * time.Second)
	if _, err := s.LockRenew(ctx, &store.LockRenewParams{Name: "l", Owner: "a", Token: first.Token, TTL: time.Minute}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("renew at the expiry: err = %v, want ErrNotFound", err)
	}
	second := acquire("b").Lease
	if second == nil || second.Token != first.Token+1 || !second.AcquiredAt.Equal(clock.Now()) {
		t.Fatalf("acquire at the expiry = %+v, want b with token %d at %v", second, first.Token+1, clock.Now())
	}
}
