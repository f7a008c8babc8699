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

// JobsInsertGrabbedParams are the arguments of Store.JobsInsertGrabbed.
type JobsInsertGrabbedParams struct {
	Node  string
	Lease time.Duration
	Jobs  []*JobInsertParams
}
