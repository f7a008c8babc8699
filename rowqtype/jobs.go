package rowqtype

import (
	"encoding/json"
	"time"
)

// JobRequest is the body of POST /job/{category}: a job to enqueue.
// Durations are seconds; a nil field takes the server's default (0, and
// retry_backoff "fixed").
type JobRequest struct {
	URL        string          `json:"url"`               // the worker's URL, http or https (required but for a pull queue's jobs)
	Payload    json.RawMessage `json:"payload,omitempty"` // the body sent to the worker; null or absent for none
	RunAfter   *int            `json:"run_after,omitempty"`
	MaxRetries *int            `json:"max_retries,omitempty"`
	RetryDelay *int            `json:"retry_delay,omitempty"`
	Timeout    *int            `json:"timeout,omitempty"` // bounds a delivery; 0 means none
	// rowq's additions (docs/jobs.md).
	Priority      *int     `json:"priority,omitempty"`        // -1000..1000, higher first
	UniqueKey     *string  `json:"unique_key,omitempty"`      // one pending job per queue and key
	RetryBackoff  *string  `json:"retry_backoff,omitempty"`   // "fixed" or "exponential"
	RetryDelayMax *int     `json:"retry_delay_max,omitempty"` // cap of an exponential delay
	RetryJitter   *float64 `json:"retry_jitter,omitempty"`    // 0..1, a fraction of each delay
	// ConcurrencyKey bounds the jobs of the queue with this key in
	// delivery at once to ConcurrencyLimit (default 1); with Ordered, the
	// key's jobs go one at a time in enqueue order (docs/flow-control.md).
	// Not on a pull queue.
	ConcurrencyKey   *string `json:"concurrency_key,omitempty"`   // 1..191 characters
	ConcurrencyLimit *int    `json:"concurrency_limit,omitempty"` // 1..10000, only with a key
	Ordered          *bool   `json:"ordered,omitempty"`           // only with a key and limit 1
	// TraceParent and TraceState are the job's W3C trace context, sent
	// with each delivery; they take the place of the request's
	// traceparent and tracestate headers for this job (docs/api.md).
	TraceParent *string `json:"traceparent,omitempty"`
	TraceState  *string `json:"tracestate,omitempty"` // only with traceparent
	// The job's flow (docs/lifecycle.md): callbacks enqueued, in the
	// transaction that records its outcome, when it succeeds, fails for
	// good, or ends however (cancelled included); each is a job of its
	// own (category, url unless it routes to a pull queue, payload and
	// the usual options, no flow of its own), routed and checked now.
	OnSuccess *BatchJob `json:"on_success,omitempty"`
	OnFailure *BatchJob `json:"on_failure,omitempty"`
	OnFinish  *BatchJob `json:"on_finish,omitempty"`
	// DependsOn are the jobs this one waits for (it is stored blocked
	// until each has succeeded): earlier jobs of the same POST /jobs by
	// index, or existing jobs by id. OnParentFailure says what it does
	// when one fails for good or is cancelled: OnParentCancel (the
	// default), OnParentFail or OnParentRun. A job with a flow is always
	// a new job: no unique_key.
	DependsOn       []JobRef `json:"depends_on,omitempty"`
	OnParentFailure *string  `json:"on_parent_failure,omitempty"`
}

// Values of JobRequest.OnParentFailure.
const (
	// OnParentCancel cancels the job, and in turn its own dependents.
	OnParentCancel = "cancel"
	// OnParentFail moves the job to the failure log without running it
	// (status "parent-failed"); its dependents follow their own policies.
	OnParentFail = "fail"
	// OnParentRun runs the job anyway, once every parent has ended.
	OnParentRun = "run"
)

// JobRef names a parent of a job (JobRequest.DependsOn): exactly one of
// Index, an earlier job of the same POST /jobs (0-based), and ID, an
// existing job.
type JobRef struct {
	Index *int   `json:"index,omitempty"`
	ID    *int64 `json:"id,omitempty"`
}

// BatchJob is one element of POST /jobs: a JobRequest and its category.
type BatchJob struct {
	Category string `json:"category"`
	JobRequest
}

// JobsRequest is the body of POST /jobs: 1 to 1,000 jobs stored in one
// transaction, all or none; with Batch, they make a batch, of up to
// 10,000 jobs.
type JobsRequest struct {
	Jobs  []*BatchJob   `json:"jobs"`
	Batch *BatchRequest `json:"batch,omitempty"`
}

// BatchRequest makes the jobs of a POST /jobs a batch (docs/lifecycle.md),
// created with them and closed at once. OnSuccess is enqueued when every
// job of the batch succeeded, OnFinish when every job has ended however;
// each exactly once, in the transaction that records the last outcome,
// with the batch's counts and Meta in its payload. A job of a batch has no
// unique_key.
type BatchRequest struct {
	OnSuccess *BatchJob       `json:"on_success,omitempty"`
	OnFinish  *BatchJob       `json:"on_finish,omitempty"`
	Meta      json.RawMessage `json:"meta,omitempty"` // a JSON object, kept as sent
}

// PushedJob is the answer to an enqueue (POST /job/{category}, each
// element of POST /jobs) and to a retried failure log entry: the job as
// stored, or the pending job that already held the request's unique key.
type PushedJob struct {
	ID         int64           `json:"id"`
	QueueName  string          `json:"queue_name"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	RunAfter   int             `json:"run_after"`
	MaxRetries int             `json:"max_retries"`
	RetryDelay int             `json:"retry_delay"`
	Timeout    int             `json:"timeout"`
	// rowq's additions.
	Priority      int     `json:"priority"`
	RetryBackoff  string  `json:"retry_backoff"`
	RetryDelayMax int     `json:"retry_delay_max"`
	RetryJitter   float64 `json:"retry_jitter"`
	// UniqueKey and Existing are sent only when the request gave a unique
	// key. Existing is then true when a pending job held the key: the job
	// described is that one, and nothing was enqueued.
	UniqueKey string `json:"unique_key,omitempty"`
	Existing  *bool  `json:"existing,omitempty"`
	// The job's concurrency key, its limit and whether it is ordered,
	// sent only when it has a key.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	Ordered          bool   `json:"ordered,omitempty"`
	// Blocked is sent, true, for a job stored blocked: it waits for
	// parents (depends_on) that have not all succeeded.
	Blocked bool `json:"blocked,omitempty"`
}

// PushedJobs is the answer to POST /jobs, in the order of the request;
// BatchID names the batch the request made, left out without one.
type PushedJobs struct {
	Jobs    []*PushedJob `json:"jobs"`
	BatchID int64        `json:"batch_id,omitempty"`
}

// Values of Job.Status.
const (
	JobStatusClaimed = "claimed" // waiting or deferred
	JobStatusGrabbed = "grabbed" // held by a node for delivery
	// JobStatusLeased: a worker accepted the job and holds it until
	// grabbed_until (its lease), renewed by its heartbeats.
	JobStatusLeased = "leased"
	// JobStatusBlocked: the job waits for parents (depends_on); Flow says
	// which.
	JobStatusBlocked = "blocked"
)

// Job is a stored job as the inspection endpoints answer it
// (GET /queue/{name}/job/{id}, the waiting, deferred and grabbed
// listings).
type Job struct {
	ID         int64           `json:"id"`
	QueueName  string          `json:"queue_name"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Status     string          `json:"status"` // JobStatusClaimed, JobStatusGrabbed, JobStatusLeased or JobStatusBlocked
	CreatedAt  time.Time       `json:"created_at"`
	NextTry    time.Time       `json:"next_try"`
	Timeout    int             `json:"timeout"`
	FailCount  int             `json:"fail_count"`
	MaxRetries int             `json:"max_retries"`
	RetryDelay int             `json:"retry_delay"`
	// GrabbedBy and GrabbedUntil are rowq's, sent for a grabbed job: the
	// node that holds it, and until when unless a delivery extends it.
	GrabbedBy    string     `json:"grabbed_by,omitempty"`
	GrabbedUntil *time.Time `json:"grabbed_until,omitempty"`
	// Progress (0..1) and Message are rowq's, sent when the worker that
	// accepted the job told them in a heartbeat.
	Progress *float64 `json:"progress,omitempty"`
	Message  string   `json:"message,omitempty"`
	// TraceParent and TraceState are rowq's, sent when the job has a W3C
	// trace context: what each delivery carries (see docs/operations.md).
	TraceParent string `json:"traceparent,omitempty"`
	TraceState  string `json:"tracestate,omitempty"`
	// Deferrals is rowq's: how often the job's worker answered 429 or 503
	// with Retry-After (docs/flow-control.md); left out when 0.
	Deferrals int `json:"deferrals,omitempty"`
	// ConcurrencyKey, ConcurrencyLimit and Ordered are rowq's, sent when
	// the job has a key (docs/flow-control.md). A job held back by its key
	// is grabbed by the queue's leader, and holds no worker slot.
	ConcurrencyKey   string `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int    `json:"concurrency_limit,omitempty"`
	Ordered          bool   `json:"ordered,omitempty"`
	// Flow is rowq's, sent for a job with a flow (callbacks, parents,
	// dependents or a batch: docs/lifecycle.md).
	Flow *JobFlow `json:"flow,omitempty"`
}

// JobFlow is the flow of a live job. GET /queue/{name}/job/{id} sends all
// of it; GET /queue/{name}/blocked sends WaitsFor only.
type JobFlow struct {
	// WaitsFor are the parents the job still waits for, ascending; empty
	// once it is no longer blocked.
	WaitsFor []int64 `json:"waits_for"`
	// Dependents are the jobs that wait for this one, ascending.
	Dependents []int64 `json:"dependents,omitempty"`
	BatchID    int64   `json:"batch_id,omitempty"`
	// OnParentFailure is sent for a blocked job: what it does if a parent
	// fails.
	OnParentFailure string `json:"on_parent_failure,omitempty"`
	// Callbacks names those the job has: "on_success", "on_failure",
	// "on_finish".
	Callbacks []string `json:"callbacks,omitempty"`
}

// JobPage is one page of a job listing; NextCursor, the cursor of the
// next page, is left out on the last.
type JobPage struct {
	Jobs       []*Job `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty"`
}
