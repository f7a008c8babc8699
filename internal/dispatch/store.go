package dispatch

import (
	"context"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// Store is what the dispatcher asks of the database: the methods of
// store.Store it calls and no others, by what it calls them for, so that
// its rules can be tested against a small fake as well as a real store.
type Store interface {
	Leadership
	Deliveries
	Leases
	// WorkerHostsSet records the worker hosts a queue's runner slows down
	// or holds back (flow.go).
	WorkerHostsSet(ctx context.Context, p *store.WorkerHostsSetParams) error
}

// Leadership is the node's registration and the queues it leads: the
// leadership cycle (dispatch.go), the database session (session.go) and
// the spread of queues over nodes (spread.go).
type Leadership interface {
	NodeHeartbeat(ctx context.Context, p *store.NodeHeartbeatParams) error
	NodeDelete(ctx context.Context, id string) error
	NodeSessionOpen(ctx context.Context, id string) (store.NodeSession, error)
	NodesGlance(ctx context.Context) (*store.Glance, error)
	NodesLive(ctx context.Context) (*store.Cluster, error)
	NodesReap(ctx context.Context) ([]string, error)
	NodesReapExpired(ctx context.Context) ([]string, error)
	QueueLeader(ctx context.Context, queue string) (*store.Node, error)
	QueuesClaim(ctx context.Context, p *store.QueuesClaimParams) error
	QueuesLed(ctx context.Context, p *store.QueuesLedParams) (*store.LedQueues, error)
	QueuesRelease(ctx context.Context, node string) error
	QueuesYield(ctx context.Context, p *store.QueuesYieldParams) error
}

// Deliveries are a runner's jobs: grabs and their outcomes (runner.go,
// deliver.go, readahead.go, flow.go), keys (keys.go), pulled jobs
// (pull.go) and the prober's looks (probe.go).
type Deliveries interface {
	JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error)
	JobsComplete(ctx context.Context, p *store.JobsCompleteParams) (int64, error)
	JobsSucceed(ctx context.Context, p *store.JobsSucceedParams) ([]string, error)
	JobFail(ctx context.Context, p *store.JobFailParams) (*store.FailedJob, error)
	JobRetry(ctx context.Context, p *store.JobRetryParams) error
	JobsDefer(ctx context.Context, p *store.JobsDeferParams) (int64, error)
	JobsExtend(ctx context.Context, p *store.JobsExtendParams) (int64, error)
	JobsRescue(ctx context.Context, queue string) (int64, error)
	JobsRelease(ctx context.Context, p *store.JobsReleaseParams) (int64, error)
	JobsNextDue(ctx context.Context, queues []string) ([]store.QueueDue, error)
	JobsExpired(ctx context.Context, queues []string) ([]string, error)
	JobsKeyBusy(ctx context.Context, p *store.JobsKeyBusyParams) (map[string]int, error)
	JobsKeyHeads(ctx context.Context, p *store.JobsKeyHeadsParams) (map[string]int64, error)
	JobsLeased(ctx context.Context, queue string) ([]store.JobGrab, error)
}

// Leases are the accepted and pulled jobs a worker holds: heartbeats,
// completions, expiry and the results kept for a completion's retry
// (lease.go).
type Leases interface {
	JobHeld(ctx context.Context, id int64, grabs int) (*store.Job, error)
	JobLease(ctx context.Context, p *store.JobLeaseParams) (time.Time, error)
	JobFinish(ctx context.Context, p *store.JobFinishParams) (string, error)
	JobResult(ctx context.Context, id int64, grabs int) (string, error)
	JobResultsPurge(ctx context.Context, age time.Duration) (int64, error)
	JobsLeaseExpired(ctx context.Context, p *store.JobsLeaseExpiredParams) ([]*store.Job, error)
	// FinishedPrune deletes a queue's finished jobs older than its
	// keep_finished, a batch at a time (finished.go).
	FinishedPrune(ctx context.Context, p *store.FinishedPruneParams) (int64, error)
}

var _ Store = store.Store(nil)
