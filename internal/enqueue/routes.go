package enqueue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// UnroutableError says why a category has no queue to go to.
type UnroutableError struct {
	Category string
	// Queue is the queue the category is routed to, which does not
	// exist; "" when the category has no routing and there is no default
	// queue.
	Queue string
}

func (e *UnroutableError) Error() string {
	if e.Queue != "" {
		return fmt.Sprintf("category %q is routed to queue %q, which does not exist", e.Category, e.Queue)
	}
	return fmt.Sprintf("no routing for category %q and no default queue", e.Category)
}

// Destination is where a category's jobs go: their queue, and whether
// workers pull them (a pull queue's jobs need no url).
type Destination struct {
	Queue string
	Pull  bool
}

// Route finds the queue for a category: its routing, whose queue must
// exist, else the default queue; an *UnroutableError when neither
// applies. Answers that lead to an insert are cached (see routeCache).
func (s *Service) Route(ctx context.Context, category string) (Destination, error) {
	if d, ok := s.routes.get(category); ok {
		return d, nil
	}
	started := time.Now()
	rt, err := s.cfg.Store.RoutingGet(ctx, category)
	switch {
	case err == nil:
		q, err := s.cfg.Store.QueueGet(ctx, rt.QueueName)
		if errors.Is(err, store.ErrNotFound) {
			return Destination{}, &UnroutableError{Category: category, Queue: rt.QueueName}
		} else if err != nil {
			return Destination{}, fmt.Errorf("route category %q: %w", category, err)
		}
		d := Destination{Queue: q.Name, Pull: q.Pull()}
		s.routes.put(category, d, started)
		return d, nil
	case !errors.Is(err, store.ErrNotFound):
		return Destination{}, fmt.Errorf("route category %q: %w", category, err)
	case s.cfg.DefaultQueue != "":
		// The default queue is made at start, as a push queue; an
		// operator may have made it a pull queue since.
		d := Destination{Queue: s.cfg.DefaultQueue}
		q, err := s.cfg.Store.QueueGet(ctx, s.cfg.DefaultQueue)
		switch {
		case err == nil:
			d.Pull = q.Pull()
		case !errors.Is(err, store.ErrNotFound):
			return Destination{}, fmt.Errorf("route category %q to the default queue: %w", category, err)
		}
		s.routes.put(category, d, started)
		return d, nil
	default:
		return Destination{}, &UnroutableError{Category: category}
	}
}

// RoutesChanged tells that a routing or a queue changed through this node
// (committed): the next enqueues read the routings afresh.
func (s *Service) RoutesChanged() { s.routes.clear() }

// routeCache remembers, for a short time, which queue a category's jobs go
// to, so that an enqueue does not read the routing and its queue from the
// database every time. Routings and queues change rarely; enqueues are the
// hot path.
//
// A change made through this node (RoutesChanged) clears the cache at once. A change
// made on another node (or directly in the database) is seen here within
// ttl: that is the bound on how long this node may still route a category
// to a queue that was deleted or re-routed elsewhere. Only answers that
// lead to an insert are cached; a 404 is looked up every time, so a queue or
// routing created anywhere is usable at once.
type routeCache struct {
	ttl time.Duration

	mu        sync.RWMutex
	entries   map[string]routeEntry
	lastClear time.Time // when clear last ran
}

type routeEntry struct {
	dest    Destination
	expires time.Time
}

// maxRouteEntries bounds the cache; past it the cache starts over, which
// costs one read per category and keeps memory flat whatever the number of
// categories.
const maxRouteEntries = 10000

func newRouteCache(ttl time.Duration) *routeCache {
	return &routeCache{ttl: ttl, entries: map[string]routeEntry{}}
}

// get returns the cached destination of category, if still fresh.
func (c *routeCache) get(category string) (Destination, bool) {
	if c.ttl <= 0 {
		return Destination{}, false
	}
	c.mu.RLock()
	e, ok := c.entries[category]
	c.mu.RUnlock()
	if !ok || time.Now().After(e.expires) {
		return Destination{}, false
	}
	return e.dest, true
}

// put remembers that category's jobs go to d. started is when the
// lookup began: an entry is fresh for ttl from the read, not from its end,
// and a lookup that began before the last clear is not cached at all, so a
// read racing a change on this node cannot bring back the old answer.
func (c *routeCache) put(category string, d Destination, started time.Time) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !started.After(c.lastClear) {
		return
	}
	if len(c.entries) >= maxRouteEntries {
		c.entries = map[string]routeEntry{}
	}
	c.entries[category] = routeEntry{dest: d, expires: started.Add(c.ttl)}
}

// clear forgets everything: a routing or queue changed on this node.
func (c *routeCache) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = map[string]routeEntry{}
	c.lastClear = time.Now()
}
