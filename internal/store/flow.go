package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// A job's flow is what happens around it beyond its own delivery:
// callbacks on its outcome (on_success, on_failure, on_finish), the jobs
// that depend on it and those it waits for (depends_on), and the batch it
// belongs to. A job with any of these has Job.Flow set (the column
// jobs.flow) and a row in job_flows; a job without keeps today's path and
// cost: every statement that ends jobs without reading them excludes flow
// rows (flow = 0) and ends the others through a read path.
//
// Every dialect statement that ends a job (JobsComplete, JobsSucceed,
// JobFail, JobFinish that deletes or fails, JobCancel, JobDelete) calls
// FlowEnd, in its own transaction, for the ended jobs that have Flow set,
// after it removed them from jobs: callbacks are inserted, dependents
// released or ended, and batches counted in the transaction that records
// the outcome, so that a crash can neither lose nor double them. After the
// commit the dialect tells its FlowHook the queues where that made jobs
// due.
//
// A blocked job (StateBlocked) waits for its parents: grabs, probes and
// rescues never see it. Its next_try is what it was enqueued with (now +
// run_after), so a job released after that is due at once.

// StateBlocked is the state of a job that waits for parents (depends_on).
const StateBlocked = "blocked"

// What a job does when one of its parents failed for good or was
// cancelled (FlowJobParams.OnParentFailure).
const (
	// ParentFailureCancel cancels the job and, in turn, its dependents.
	ParentFailureCancel = "cancel"
	// ParentFailureFail moves the job to the failure log without running
	// it (status "parent-failed"), which fails its dependents in turn as
	// their own policies say.
	ParentFailureFail = "fail"
	// ParentFailureRun counts the parent as done: the job runs anyway.
	ParentFailureRun = "run"
)

// FailedParent is the failure log status of a job failed because a
// parent failed (ParentFailureFail).
const FailedParent = "parent-failed"

// FlowStore enqueues jobs with a flow and reads flows and batches.
type FlowStore interface {
	// JobsInsertFlow stores p's jobs, their flows and p's batch in one
	// transaction, all or none. A job with parents that have not all
	// succeeded is stored blocked. A parent given by id must be live (in
	// jobs, any state) or have finished: kept in the history as succeeded
	// (then it counts as done), or as failed or cancelled (then, unless the
	// job's OnParentFailure is ParentFailureRun, *ParentError; with run, as
	// done). A parent that is neither live nor kept is *ParentError.
	JobsInsertFlow(ctx context.Context, p *FlowInsertParams) (*FlowInserted, error)
	// FlowGet returns the flow of a live job: its batch, the parents it
	// still waits for and its dependents; ErrNotFound when the job is not
	// live or has no flow.
	FlowGet(ctx context.Context, id int64) (*FlowInfo, error)
	// JobsBlocked returns up to p.Limit blocked jobs of p.Queue, lowest id
	// first, after p.After, each with the parents it waits for.
	JobsBlocked(ctx context.Context, p *JobsBlockedParams) ([]*BlockedJob, error)
	// BatchGet returns batch id, or ErrNotFound.
	BatchGet(ctx context.Context, id int64) (*Batch, error)
	// BatchesList returns up to p.Limit batches, newest (highest id) first,
	// before p.Before when not 0.
	BatchesList(ctx context.Context, p *BatchesListParams) ([]*Batch, error)
	// FlowWatch sets the function the store calls, after a commit, with
	// what ending flow jobs did (FlowDone), when it did anything; nil for
	// none. Dialects embed FlowHook for it.
	FlowWatch(fn func(FlowDone))
}

// FlowInsertParams are the arguments of FlowStore.JobsInsertFlow.
type FlowInsertParams struct {
	Jobs []*FlowJobParams
	// Batch, when not nil, creates a batch of all of Jobs.
	Batch *BatchParams
}

// FlowJobParams is one job of JobsInsertFlow and its flow. Job.UniqueKey
// must be "": a job with a flow is always a new job.
type FlowJobParams struct {
	Job *JobInsertParams
	// Callbacks, each a job resolved (routed, defaulted) when this one was
	// enqueued; nil for none. Their own payload is wrapped at the outcome
	// (CallbackPayload).
	OnSuccess, OnFailure, OnFinish *JobInsertParams
	// DependsOn are the job's parents: earlier jobs of the same call
	// (Index) or existing jobs (ID).
	DependsOn []FlowParent
	// OnParentFailure is a ParentFailure* ("" reads as cancel).
	OnParentFailure string
}

// HasFlow reports whether the job has anything of a flow but a batch.
func (p *FlowJobParams) HasFlow() bool {
	return p.OnSuccess != nil || p.OnFailure != nil || p.OnFinish != nil || len(p.DependsOn) > 0
}

// ParentIDs returns the parents p's jobs name by id, ascending, each once:
// the rows JobsInsertFlow locks.
func (p *FlowInsertParams) ParentIDs() []int64 {
	var ids []int64
	for _, j := range p.Jobs {
		for _, d := range j.DependsOn {
			if d.ID > 0 {
				ids = append(ids, d.ID)
			}
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// ParentError returns, as a *ParentError, the first parent p names by id
// that is neither live nor finished in a way its dependent accepts (kept
// in the history as succeeded, or as failed or cancelled under policy
// run); nil when there is none. status holds the history status of the
// parents that are kept ("" or absent: not kept).
func (p *FlowInsertParams) ParentError(live map[int64]bool, status map[int64]string) error {
	for i, j := range p.Jobs {
		for k, d := range j.DependsOn {
			if d.ID <= 0 || live[d.ID] {
				continue
			}
			switch st := status[d.ID]; {
			case st == FinishedSucceeded:
			case st != "" && j.OnParentFailure == ParentFailureRun:
			default:
				return &ParentError{Job: i, Item: k, Parent: d, Status: st}
			}
		}
	}
	return nil
}

// FlowParent names a parent of a job of JobsInsertFlow: ID > 0 names an
// existing job; else Index names an earlier job of the same call.
type FlowParent struct {
	Index int
	ID    int64
}

// BatchParams is the batch JobsInsertFlow creates with its jobs.
type BatchParams struct {
	// OnSuccess fires when every job of the batch succeeded, OnFinish when
	// every job has ended, however; nil for none.
	OnSuccess, OnFinish *JobInsertParams
	Meta                json.RawMessage // nil for none
}

// FlowInserted is what JobsInsertFlow stored.
type FlowInserted struct {
	IDs     []int64 // in the order given
	Blocked []bool  // in the order given: stored blocked
	BatchID int64   // 0 without a batch
}

// ParentError is JobsInsertFlow's answer to a parent it cannot wait for.
type ParentError struct {
	Job    int        // index of the job in FlowInsertParams.Jobs
	Item   int        // index of the parent in its DependsOn
	Parent FlowParent // as given
	// Status is the parent's history status (FinishedFailed or
	// FinishedCancelled), or "" when it is neither live nor kept.
	Status string
}

func (e *ParentError) Error() string {
	if e.Status == "" {
		return fmt.Sprintf("job %d does not exist, or finished and was forgotten", e.Parent.ID)
	}
	return fmt.Sprintf("job %d has %s", e.Parent.ID, e.Status)
}

// FlowInfo is the flow of a live job (FlowStore.FlowGet).
type FlowInfo struct {
	JobID   int64
	BatchID int64 // 0 for none
	// WaitsFor are the parents it still waits for, Dependents the jobs
	// that wait for it; both by id, ascending.
	WaitsFor, Dependents []int64
	OnParentFailure      string
	// Callbacks tells which callbacks it has: "on_success", "on_failure",
	// "on_finish", in that order.
	Callbacks []string
}

// BlockedJob is a blocked job and the parents it still waits for.
type BlockedJob struct {
	Job      *Job
	WaitsFor []int64 // ascending
}

// JobsBlockedParams are the arguments of FlowStore.JobsBlocked.
type JobsBlockedParams struct {
	Queue string
	After int64 // 0: from the start
	Limit int
}

// Batch is a batch of jobs and its counts. Pending counts the jobs not yet
// ended; the others are counted by their outcome.
type Batch struct {
	ID                           int64
	Total, Pending               int
	Succeeded, Failed, Cancelled int
	CreatedAt                    time.Time
	FinishedAt                   *time.Time // nil while jobs are pending
	Meta                         json.RawMessage
	HasOnSuccess, HasOnFinish    bool
}

// BatchesListParams are the arguments of FlowStore.BatchesList.
type BatchesListParams struct {
	Before int64 // 0: from the newest
	Limit  int
}

// FlowDone is what FlowEnd did in one transaction.
type FlowDone struct {
	// Queues are those where jobs became due (callbacks, released
	// dependents), each once: the ones to wake.
	Queues []string
	// Callbacks counts the callback jobs inserted (batches' included),
	// Released the dependents released, Ended the dependents ended
	// (cancelled or failed) because a parent failed.
	Callbacks, Released, Ended int
}

// Add adds o to d (the Queues each once).
func (d *FlowDone) Add(o FlowDone) {
	for _, q := range o.Queues {
		d.Queues = appendOnce(d.Queues, q)
	}
	d.Callbacks += o.Callbacks
	d.Released += o.Released
	d.Ended += o.Ended
}

// FlowHook calls the function FlowStore.FlowWatch set. Dialects embed it.
type FlowHook struct {
	fn atomic.Pointer[func(FlowDone)]
}

// FlowWatch sets the function Done calls.
func (h *FlowHook) FlowWatch(fn func(FlowDone)) {
	if fn == nil {
		h.fn.Store(nil)
		return
	}
	h.fn.Store(&fn)
}

// Done tells the watcher what d did, if anything; call it after the
// commit.
func (h *FlowHook) Done(d FlowDone) {
	if d.Callbacks == 0 && d.Released == 0 && d.Ended == 0 {
		return
	}
	if fn := h.fn.Load(); fn != nil {
		(*fn)(d)
	}
}
