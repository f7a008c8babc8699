package store

import (
	"encoding/json"
	"time"
)

// Leases: a worker that answers a delivery with "accepted" holds the job
// under a lease of its own (StateLeased until grabbed_until), renews it with
// heartbeats and ends it with a completion (docs/workers.md). A lease token
// names one grab of one job: the job's id and its Grabs, which every grab
// increments. The token's signature is the dispatcher's business; the store
// guards every write with the grab it names.

// StateLeased is the state of a job a worker accepted: held by the worker
// until grabbed_until, whichever node delivered it. No node extends it
// (JobsExtend) or rescues it (JobsRescue); a lease that runs out is a
// failure (JobsLeaseExpired, JobFinish).
const StateLeased = "leased"

// ResultCancelled is the result JobCancel records for the grab of a job
// it cancelled while grabbed or leased.
const ResultCancelled = "cancelled"

// Outcomes of JobFinish.
const (
	// FinishDelete deletes the job (success).
	FinishDelete = "delete"
	// FinishRetry puts it back to waiting with fail_count + 1 and
	// next_try = now + Delay.
	FinishRetry = "retry"
	// FinishFail moves it to the failure log with fail_count + 1.
	FinishFail = "fail"
)

// JobLeaseParams are the arguments of JobStore.JobLease.
type JobLeaseParams struct {
	ID    int64
	Grabs int           // the grab the lease holds (the token's)
	Lease time.Duration // the new expiry is the database's now + Lease
	// Progress (0..1) and Message replace the stored ones; nil leaves
	// them as they are.
	Progress *float64
	Message  *string
}

// JobFinishParams are the arguments of JobStore.JobFinish.
type JobFinishParams struct {
	ID    int64
	Grabs int
	// Outcome is FinishDelete, FinishRetry or FinishFail.
	Outcome string
	Delay   time.Duration // FinishRetry: next_try = now + Delay
	// Status is the result recorded (JobResult) and, for FinishFail, the
	// failure log's status; Code and Message go to the failure log.
	Status  string
	Code    int
	Message string
	// Expired finishes the job only if its lease has run out (state
	// leased, grabbed_until passed), and records no result: a worker
	// that completes it later learns that its lease was lost.
	Expired bool
	// Result is the worker's result of a success (FinishDelete), kept
	// with Message in the job's history when its queue keeps finished
	// jobs; nil for none. Whether it does, JobFinish reads in the
	// statement that locks the job (no statement more).
	Result json.RawMessage
}

// JobsSucceedParams are the arguments of JobStore.JobsSucceed.
type JobsSucceedParams struct {
	Grabs  []JobGrab
	Status string // the result recorded for each grab
	// Notes, when not nil, holds for each of Grabs (same index) the
	// worker's message and result, which the job's history keeps when its
	// queue keeps finished jobs (JobsSucceed reads that in the statement
	// that locks the jobs: no statement more for a queue that keeps none).
	// Without Notes such a job's history has neither.
	Notes []FinishNote
}

// JobsLeaseExpiredParams are the arguments of JobStore.JobsLeaseExpired.
type JobsLeaseExpiredParams struct {
	Queue string
	Limit int
}
