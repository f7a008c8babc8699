package store

import (
	"context"
	"time"
)

// Handoff is what the enqueue path needs to give a job straight to the
// node that accepted it (local hand-off): the job is written already
// grabbed by that node, so no grab has to find it.
type Handoff interface {
	// JobsInsertGrabbed stores the jobs in one transaction as grabbed by
	// p.Node until now + p.Lease (due now, created now; RunAfter must be 0)
	// and returns their ids in the order given. Crash safety is a grab's:
	// if the node dies, the jobs are rescued once the lease has passed.
	JobsInsertGrabbed(ctx context.Context, p *JobsInsertGrabbedParams) ([]int64, error)
}

// Probe looks for due jobs in many queues with one statement, so that a
// node's idle queues cost one query per polling interval, not one each.
type Probe interface {
	// JobsDue returns those of queues that hold a waiting job due now (by
	// the database's clock), in any order. Its cost grows with the number
	// of queues, not with their jobs.
	JobsDue(ctx context.Context, queues []string) ([]string, error)
	// JobsExpired returns those of queues that hold a grab whose
	// grabbed_until has passed (as JobsRescue sees it), in any order: the
	// queues whose rescue has something to do.
	JobsExpired(ctx context.Context, queues []string) ([]string, error)
}

// JobsInsertGrabbedParams are the arguments of Store.JobsInsertGrabbed.
type JobsInsertGrabbedParams struct {
	Node  string
	Lease time.Duration
	Jobs  []*JobInsertParams
}
