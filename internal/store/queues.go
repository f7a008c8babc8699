package store

import (
	"context"
	"time"
)

// QueueStore keeps queues' settings and which node leads each.
type QueueStore interface {
	// QueuePut creates the queue or replaces its settings; leadership is kept.
	QueuePut(ctx context.Context, q *Queue) (*Queue, error)
	// QueueEnsure creates the queue if it does not exist and returns the
	// stored queue either way.
	QueueEnsure(ctx context.Context, q *Queue) (*Queue, error)
	// QueueGet returns one queue or ErrNotFound.
	QueueGet(ctx context.Context, name string) (*Queue, error)
	// QueueList returns the queues named after p.After, ordered by name,
	// at most p.Limit of them (0: all).
	QueueList(ctx context.Context, p *QueueListParams) ([]*Queue, error)
	// QueueDelete removes the queue and returns it, or ErrNotFound. Its jobs
	// and routings stay stored.
	QueueDelete(ctx context.Context, name string) (*Queue, error)
	// QueueSetPaused pauses or resumes the queue and returns it, or
	// ErrNotFound.
	QueueSetPaused(ctx context.Context, name string, paused bool) (*Queue, error)

	// QueuesClaim makes p.Node the leader of queues that have no live
	// leader (no leader, or a leader whose node registration has expired),
	// at most p.Limit of them in name order (0: all), provided p.Node is
	// registered and live. Of two nodes claiming at once, only one leads
	// each queue.
	QueuesClaim(ctx context.Context, p *QueuesClaimParams) error
	// QueuesLed returns the queues whose leader is p.Node, ordered by name:
	// all of them, or, with p.Since, those whose settings changed at or
	// after it. Since is the database's clock: the At of an earlier read.
	QueuesLed(ctx context.Context, p *QueuesLedParams) (*LedQueues, error)
	// QueuesRelease gives up every queue led by node.
	QueuesRelease(ctx context.Context, node string) error
	// QueuesYield gives up the queues of p.Queues that p.Node leads, so
	// that other nodes claim them (spreading queues over the nodes); the
	// others are left alone.
	QueuesYield(ctx context.Context, p *QueuesYieldParams) error
	// QueueLeader returns the live node leading the queue, or ErrNotFound.
	QueueLeader(ctx context.Context, queue string) (*Node, error)
}

// Queue is a queue's settings.
type Queue struct {
	Name string
	// PollingInterval is how often, in milliseconds, the dispatcher looks
	// for due jobs when nothing woke it.
	PollingInterval int
	// MaxWorkers bounds the deliveries in flight for this queue.
	MaxWorkers int
	// MaxDispatchesPerSecond throttles deliveries; nil means unlimited.
	MaxDispatchesPerSecond *float64
	// MaxBurstSize is the throttle's bucket size; nil means the default.
	MaxBurstSize *int
	// Paused queues accept jobs but dispatch none. QueuePut and
	// QueueEnsure keep it; QueueSetPaused sets it.
	Paused bool
	// Delivery is DeliveryPush or DeliveryPull; "" is stored as push.
	Delivery string
	// KeepFinished is how long, in seconds, the queue keeps its finished
	// jobs (finished.go); 0 keeps none: a job that succeeds is deleted.
	KeepFinished int
}

// Deliveries of a queue (Queue.Delivery).
const (
	// DeliveryPush POSTs each job to its url.
	DeliveryPush = "push"
	// DeliveryPull hands jobs to the workers that ask for them (a lease
	// request); its jobs need no url.
	DeliveryPull = "pull"
)

// Pull reports whether the queue's jobs are pulled by workers.
func (q *Queue) Pull() bool { return q.Delivery == DeliveryPull }

// DeliveryOf returns the delivery to store for q: push unless pull.
func DeliveryOf(q *Queue) string {
	if q.Pull() {
		return DeliveryPull
	}
	return DeliveryPush
}

// QueuesClaimParams are the arguments of QueueStore.QueuesClaim.
type QueuesClaimParams struct {
	Node string
	// Limit bounds the queues claimed; 0 claims every free queue.
	Limit int
}

// QueuesYieldParams are the arguments of QueueStore.QueuesYield.
type QueuesYieldParams struct {
	Node   string
	Queues []string
}

// QueueListParams are the arguments of QueueStore.QueueList.
type QueueListParams struct {
	After string // "" from the first
	Limit int    // 0: no limit
}

// QueuesLedParams are the arguments of QueueStore.QueuesLed.
type QueuesLedParams struct {
	Node string
	// Since, if not zero, leaves out the queues whose settings last
	// changed before it.
	Since time.Time
}

// LedQueues is a read of the queues a node leads (QueueStore.QueuesLed).
type LedQueues struct {
	Queues []*Queue
	// At is the database's clock at the read; zero when it found no queue.
	// A statement that changed settings before At, but committed after
	// the read, has At a little after its change: a later read from At
	// minus a few seconds sees it.
	At time.Time
}
