package store

import (
	"context"
	"time"
)

// WorkerHostStore records the worker hosts whose deliveries a queue's
// leader slows down or holds back (internal/dispatch's flow control), so
// that every node can show them: the API, the dashboard and /metrics.
// Only the leader writes a queue's hosts; readers see the rows of the
// queue's current leader only, so a former leader's rows are ignored
// until the new one writes its own.
type WorkerHostStore interface {
	// WorkerHostsSet replaces the worker hosts recorded for p.Queue with
	// p.Hosts, written by p.Node (none: it deletes them), in one
	// transaction.
	WorkerHostsSet(ctx context.Context, p *WorkerHostsSetParams) error
	// WorkerHostsList returns the worker hosts recorded for queue ("":
	// every queue) by the queue's current leader, ordered by queue then
	// host.
	WorkerHostsList(ctx context.Context, queue string) ([]*WorkerHost, error)
}

// Circuit breaker states of a worker host (WorkerHost.Breaker).
const (
	BreakerClosed   = "closed"    // deliveries go
	BreakerOpen     = "open"      // deliveries wait until OpenUntil
	BreakerHalfOpen = "half-open" // one probe delivery decides
)

// WorkerHost is a worker host (the host:port of job URLs) of a queue that
// its leader slows down or holds back.
type WorkerHost struct {
	Queue string
	Host  string
	// Rate is the dispatches per second the host gets since it answered
	// 429 or 503; nil when it is not slowed down.
	Rate *float64
	// Breaker is BreakerClosed, BreakerOpen or BreakerHalfOpen; Failures
	// counts the host's consecutive connection failures and timeouts.
	Breaker  string
	Failures int
	// OpenUntil is when an open breaker half-opens, by the leader's clock
	// (for display only); nil unless open.
	OpenUntil *time.Time
	UpdatedAt time.Time
}

// WorkerHostsSetParams are the arguments of WorkerHostStore.WorkerHostsSet.
type WorkerHostsSetParams struct {
	Queue string
	Node  string
	Hosts []*WorkerHost
}
