package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestRouteCache_Changes checks the enqueue path's routing cache: a change
// made through the same API is seen at once, a change made by another node
// within the cache's TTL, and a 404 is never cached.
func TestRouteCache_Changes(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := setupDialect(t, dialect, nil).st
		const ttl = 300 * time.Millisecond
		cached := func(o *options) { o.enq.RouteCacheTTL = ttl }
		a := setup(t, st, cached)
		other := setup(t, st, cached) // another node on the same database
		const job = `{"url":"http://worker.example/run"}`
		queueOf := func(b *bundle) (string, int) {
			var got jobAnswer
			res := b.do(t, "POST", "/job/cat", job)
			if res.status == http.StatusOK {
				if err := json.Unmarshal(res.body, &got); err != nil {
					t.Fatalf("decode %s: %v", res.body, err)
				}
			}
			return got.QueueName, res.status
		}

		// Unrouted with no default queue: 404, not cached.
		if _, status := queueOf(a); status != http.StatusNotFound {
			t.Fatalf("unrouted: status %d, want 404", status)
		}
		other.ok(t, "PUT", "/queue/q1", "", nil)
		other.ok(t, "PUT", "/queue/q2", "", nil)
		other.ok(t, "PUT", "/routing/cat", `{"queue_name":"q1"}`, nil)
		if q, status := queueOf(a); q != "q1" {
			t.Fatalf("routing made on another node: queue %q (status %d), want q1 at once", q, status)
		}

		// A change on this node is seen at once.
		a.ok(t, "PUT", "/routing/cat", `{"queue_name":"q2"}`, nil)
		if q, _ := queueOf(a); q != "q2" {
			t.Fatalf("after PUT /routing on this node: queue %q, want q2", q)
		}

		// A change on another node is seen within the TTL.
		other.ok(t, "DELETE", "/queue/q2", "", nil)
		testworker.WaitFor(t, ttl+10*time.Second, "this node to see the queue deleted on another node", func() bool {
			_, status := queueOf(a)
			return status == http.StatusNotFound
		})
		// And a deletion on this node at once.
		a.ok(t, "PUT", "/queue/q2", "", nil)
		if q, _ := queueOf(a); q != "q2" {
			t.Fatalf("after PUT /queue on this node: queue %q, want q2", q)
		}
		a.ok(t, "DELETE", "/routing/cat", "", nil)
		if _, status := queueOf(a); status != http.StatusNotFound {
			t.Fatalf("after DELETE /routing on this node: status %d, want 404", status)
		}
	})
}

// countingStore counts the routing reads of a real store.
type countingStore struct {
	store.Store
	routingGets atomic.Int64
}

func (s *countingStore) RoutingGet(ctx context.Context, category string) (*store.Routing, error) {
	s.routingGets.Add(1)
	return s.Store.RoutingGet(ctx, category)
}

// TestRouteCache_SavesReads checks that enqueues within the TTL do not read
// the routing again.
func TestRouteCache_SavesReads(t *testing.T) {
	t.Parallel()
	st := &countingStore{Store: dbtest.Open(t, "sqlite")}
	b := setup(t, st, func(o *options) { o.enq.RouteCacheTTL = time.Hour })
	b.ok(t, "PUT", "/queue/q", "", nil)
	b.ok(t, "PUT", "/routing/cat", `{"queue_name":"q"}`, nil)
	for range 10 {
		b.ok(t, "POST", "/job/cat", `{"url":"http://worker.example/run"}`, nil)
	}
	if got := st.routingGets.Load(); got != 1 {
		t.Errorf("routing reads for 10 enqueues = %d, want 1", got)
	}
}
