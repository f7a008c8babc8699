package store

import "context"

// RoutingStore keeps the routings that send each job category to a queue.
type RoutingStore interface {
	// RoutingPut creates or replaces a routing; ErrNotFound if its queue does
	// not exist.
	RoutingPut(ctx context.Context, r *Routing) (*Routing, error)
	// RoutingGet returns one routing or ErrNotFound.
	RoutingGet(ctx context.Context, category string) (*Routing, error)
	// RoutingList returns all routings ordered by category.
	RoutingList(ctx context.Context) ([]*Routing, error)
	// RoutingDelete removes the routing and returns it, or ErrNotFound.
	RoutingDelete(ctx context.Context, category string) (*Routing, error)
}

// Routing sends jobs of a category to a queue.
type Routing struct {
	JobCategory string
	QueueName   string
}
