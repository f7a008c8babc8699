// Package store is the one seam between rowq's logic and SQL. It defines the
// Store interface, the rows it reads and writes, and the errors every dialect
// maps its driver errors onto. Each dialect (store/mysql, store/postgres,
// store/sqlite) implements Store with its own SQL and passes the conformance
// suite in store/storetest.
//
// Every time a Store compares or computes (expiry of a grab, a lease, a
// deferred job) is taken from the database's clock, never the caller's, so
// clock skew between rowq nodes cannot break mutual exclusion.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors every dialect maps its driver errors onto.
var (
	// ErrNotFound means the row asked for does not exist, or (for a
	// compare-and-set) is no longer in the state the caller expected.
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique constraint refused the write.
	ErrConflict = errors.New("conflict")
	// ErrUnavailable means the database could not be reached; the caller may
	// retry later. Dialects wrap the driver's error with it.
	ErrUnavailable = errors.New("database unavailable")
)

// Job states as stored.
const (
	StateWaiting = "waiting" // ready once next_try has passed (deferred before)
	StateGrabbed = "grabbed" // held by a node until grabbed_until
)

// Store is every operation rowq performs on its database. Implementations
// are safe for concurrent use.
type Store interface {
	// Dialect names the SQL dialect: "mysql", "postgres" or "sqlite".
	Dialect() string
	// Migrate applies the embedded schema migrations that are not applied
	// yet. Concurrent calls from several nodes are serialised.
	Migrate(ctx context.Context) error
	// Ping checks that the database answers.
	Ping(ctx context.Context) error
	// Now returns the database's clock.
	Now(ctx context.Context) (time.Time, error)
	// Close releases the connection pools.
	Close() error

	Inspector
	StatsKeeper
	Handoff // perf.go: jobs inserted already grabbed by the accepting node
	Probe   // perf.go: due jobs of many idle queues in one statement
	LockStore
	ScheduleStore

	// NodeHeartbeat registers the node or extends its registration to
	// now + TTL.
	NodeHeartbeat(ctx context.Context, p *NodeHeartbeatParams) error
	// NodeDelete removes the node's registration (clean shutdown).
	NodeDelete(ctx context.Context, id string) error

	// QueuePut creates the queue or replaces its settings; leadership is kept.
	QueuePut(ctx context.Context, q *Queue) (*Queue, error)
	// QueueEnsure creates the queue if it does not exist and returns the
	// stored queue either way.
	QueueEnsure(ctx context.Context, q *Queue) (*Queue, error)
	// QueueGet returns one queue or ErrNotFound.
	QueueGet(ctx context.Context, name string) (*Queue, error)
	// QueueList returns all queues ordered by name.
	QueueList(ctx context.Context) ([]*Queue, error)
	// QueueDelete removes the queue and returns it, or ErrNotFound. Its jobs
	// and routings stay stored.
	QueueDelete(ctx context.Context, name string) (*Queue, error)

	// QueuesClaim makes p.Node the leader of every queue that has no live
	// leader (no leader, or a leader whose node registration has expired).
	QueuesClaim(ctx context.Context, p *QueuesClaimParams) error
	// QueuesLed returns the queues whose leader is node, ordered by name.
	QueuesLed(ctx context.Context, node string) ([]*Queue, error)
	// QueuesRelease gives up every queue led by node.
	QueuesRelease(ctx context.Context, node string) error
	// QueueLeader returns the live node leading the queue, or ErrNotFound.
	QueueLeader(ctx context.Context, queue string) (*Node, error)

	// RoutingPut creates or replaces a routing; ErrNotFound if its queue does
	// not exist.
	RoutingPut(ctx context.Context, r *Routing) (*Routing, error)
	// RoutingGet returns one routing or ErrNotFound.
	RoutingGet(ctx context.Context, category string) (*Routing, error)
	// RoutingList returns all routings ordered by category.
	RoutingList(ctx context.Context) ([]*Routing, error)
	// RoutingDelete removes the routing and returns it, or ErrNotFound.
	RoutingDelete(ctx context.Context, category string) (*Routing, error)

	// JobsInsert stores the jobs in one transaction and returns their ids in
	// the order given. next_try is the database's now + RunAfter. A job
	// whose UniqueKey is taken fails the whole call with ErrConflict; use
	// JobsPush to get the existing job instead.
	JobsInsert(ctx context.Context, jobs []*JobInsertParams) ([]int64, error)
	// JobsGrab marks up to p.Limit due waiting jobs of p.Queue as grabbed by
	// p.Node until now + p.Lease, highest priority first, then oldest
	// next_try, and returns them in that order.
	JobsGrab(ctx context.Context, p *JobsGrabParams) ([]*Job, error)
	// JobsExtend moves grabbed_until to now + p.Lease for every job of
	// p.Queue grabbed by p.Node, and returns how many it moved.
	JobsExtend(ctx context.Context, p *JobsExtendParams) (int64, error)
	// JobsComplete deletes the given jobs where they are still grabbed by
	// p.Node, and returns how many it deleted.
	JobsComplete(ctx context.Context, p *JobsCompleteParams) (int64, error)
	// JobsRelease puts the given jobs, where they are still grabbed by
	// p.Node, back to waiting as they were (fail_count and next_try
	// unchanged), and returns how many it put back.
	JobsRelease(ctx context.Context, p *JobsReleaseParams) (int64, error)
	// JobRetry puts a job grabbed by p.Node back to waiting with
	// fail_count + 1 and next_try = now + p.Delay; ErrNotFound if the job is
	// not grabbed by p.Node.
	JobRetry(ctx context.Context, p *JobRetryParams) error
	// JobFail moves a job grabbed by p.Node to the failure log with
	// fail_count + 1 and the result, in one transaction; ErrNotFound if the
	// job is not grabbed by p.Node.
	JobFail(ctx context.Context, p *JobFailParams) (*FailedJob, error)
	// JobsRescue puts grabbed jobs of queue whose grabbed_until has passed
	// back to waiting, and returns how many.
	JobsRescue(ctx context.Context, queue string) (int64, error)
	// JobGet returns one job of the queue, or ErrNotFound.
	JobGet(ctx context.Context, queue string, id int64) (*Job, error)
	// FailedJobGet returns one failure log entry of the queue, or ErrNotFound.
	FailedJobGet(ctx context.Context, queue string, id int64) (*FailedJob, error)

	JobsExtraStore
}

// Node is a registered rowq process.
type Node struct {
	ID        string
	Host      string
	StartedAt time.Time
	ExpiresAt time.Time
}

// NodeHeartbeatParams are the arguments of Store.NodeHeartbeat.
type NodeHeartbeatParams struct {
	ID   string
	Host string // address peers and operators can reach it at
	TTL  time.Duration
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
}

// QueuesClaimParams are the arguments of Store.QueuesClaim.
type QueuesClaimParams struct {
	Node string
}

// Routing sends jobs of a category to a queue.
type Routing struct {
	JobCategory string
	QueueName   string
}

// Job is a stored job.
type Job struct {
	ID         int64
	Queue      string
	Category   string
	URL        string
	Payload    json.RawMessage // nil when the job has none
	State      string          // StateWaiting or StateGrabbed
	CreatedAt  time.Time
	NextTry    time.Time
	Timeout    int // seconds, 0 = none
	MaxRetries int
	RetryDelay int // seconds
	FailCount  int
	GrabbedBy  string     // node id, "" unless grabbed
	GrabbedTil *time.Time // nil unless grabbed
	JobExtra
}

// JobInsertParams is one job to insert.
type JobInsertParams struct {
	Queue      string
	Category   string
	URL        string
	Payload    json.RawMessage // nil for none
	RunAfter   time.Duration   // delay from the database's now
	Timeout    int             // seconds
	MaxRetries int
	RetryDelay int // seconds
	JobExtra
}

// JobsGrabParams are the arguments of Store.JobsGrab.
type JobsGrabParams struct {
	Queue string
	Node  string
	Limit int
	Lease time.Duration
}

// JobsExtendParams are the arguments of Store.JobsExtend.
type JobsExtendParams struct {
	Queue string
	Node  string
	Lease time.Duration
}

// JobsCompleteParams are the arguments of Store.JobsComplete.
type JobsCompleteParams struct {
	Node string
	IDs  []int64
}

// JobsReleaseParams are the arguments of Store.JobsRelease.
type JobsReleaseParams struct {
	Node string
	IDs  []int64
}

// JobRetryParams are the arguments of Store.JobRetry.
type JobRetryParams struct {
	ID    int64
	Node  string
	Delay time.Duration
}

// JobFailParams are the arguments of Store.JobFail.
type JobFailParams struct {
	ID      int64
	Node    string
	Status  string // worker result: "failure" or "permanent-failure"
	Code    int    // HTTP status code, 0 when there was no response
	Message string
}

// FailedJob is an entry of the failure log.
type FailedJob struct {
	ID        int64
	JobID     int64
	Queue     string
	Category  string
	URL       string
	Payload   json.RawMessage
	Status    string
	Code      int
	Message   string
	FailCount int
	FailedAt  time.Time
	CreatedAt time.Time // when the job was created
	// The job's settings, kept so that a retry from the log restores them.
	// Entries written before these were kept read as zero.
	Timeout    int
	MaxRetries int
	RetryDelay int
	JobExtra
}
