package store

import (
	"cmp"
	"context"
	"encoding/json"
	"math"
	"slices"
	"time"
)

// JobStore writes and reads jobs: enqueue (waiting, or handed off already
// grabbed), grab, acknowledge, retry, fail and rescue, and the probes that
// tell a node which of its queues have work.
type JobStore interface {
	// JobsInsert stores the jobs in one transaction and returns their ids in
	// the order given. next_try is the database's now + RunAfter. A job
	// whose UniqueKey is taken fails the whole call with ErrConflict; use
	// JobsPush to get the existing job instead.
	JobsInsert(ctx context.Context, jobs []*JobInsertParams) ([]int64, error)
	// JobsInsertGrabbed stores the jobs in one transaction as grabbed by
	// p.Node until now + p.Lease (due now, created now; RunAfter must be 0)
	// and returns them as stored, in the order given: the enqueue path
	// gives them to the local dispatcher with no grab in between (local
	// hand-off). Crash safety is a grab's: if the node dies, the jobs are
	// rescued once the lease has passed.
	JobsInsertGrabbed(ctx context.Context, p *JobsInsertGrabbedParams) ([]*Job, error)
	// JobsPush stores the jobs in one transaction (all or none) and
	// reports, in the order given, each job's id. A job with a UniqueKey
	// that a pending job of its queue already holds (or an earlier job of
	// the same call) is not stored: its result names the holder, with
	// Existing set. The database's unique index decides, so concurrent
	// pushes of one key store one job.
	JobsPush(ctx context.Context, jobs []*JobInsertParams) ([]JobPushed, error)
	// JobsGrab marks up to p.Limit due waiting jobs of p.Queue as grabbed by
	// p.Node until now + p.Lease, highest priority first, then oldest
	// next_try, and returns them in that order.
	JobsGrab(ctx context.Context, p *JobsGrabParams) ([]*Job, error)
	// JobsExtend moves grabbed_until to now + p.Lease for every job of
	// p.Queue grabbed by p.Node, and returns how many it moved. It waits
	// for no grab of another node, not even one a node frozen half-way
	// through a transaction holds (see LockWait).
	JobsExtend(ctx context.Context, p *JobsExtendParams) (int64, error)
	// JobsComplete deletes the given jobs where they are still grabbed by
	// p.Node, and returns how many it deleted.
	JobsComplete(ctx context.Context, p *JobsCompleteParams) (int64, error)
	// JobsRelease puts the given jobs, where they are still grabbed by
	// p.Node (with p.Leased: leased, and grabbed by p.Node), back to
	// waiting as they were (fail_count and next_try unchanged), and
	// returns how many it put back.
	JobsRelease(ctx context.Context, p *JobsReleaseParams) (int64, error)
	// JobRetry puts a job grabbed by p.Node back to waiting with
	// fail_count + 1 and next_try = now + p.Delay; ErrNotFound if the job is
	// not grabbed by p.Node.
	JobRetry(ctx context.Context, p *JobRetryParams) error
	// JobsDefer puts jobs grabbed by p.Node back to waiting, each due at
	// the database's now + its Delay, fail_count unchanged, and with
	// p.Count their deferrals + 1; it returns how many it put back. A job
	// no longer grabbed by p.Node is left as it is. The dispatcher defers
	// a job whose worker answered 429 or 503 with Retry-After (Count), and
	// holds back a job whose worker host is slowed down or cut off.
	JobsDefer(ctx context.Context, p *JobsDeferParams) (int64, error)
	// JobFail moves a job grabbed by p.Node to the failure log with
	// fail_count + 1 and the result, in one transaction; ErrNotFound if the
	// job is not grabbed by p.Node.
	JobFail(ctx context.Context, p *JobFailParams) (*FailedJob, error)
	// JobsRescue puts grabbed jobs of queue that have expired back to
	// waiting, and returns how many. A grab has expired when its
	// grabbed_until has passed or its node has no registration at all (it
	// was reaped or deleted: see NodeStore.NodesReap), so a dead node's
	// grabs come back at once when its death was noticed through its
	// session. A grab another transaction holds is left for a later
	// rescue, not waited for; and a rescue holds no grab but those it
	// rescues, so that a node frozen in the middle of one stalls nobody.
	JobsRescue(ctx context.Context, queue string) (int64, error)
	// JobGet returns one job of the queue, or ErrNotFound.
	JobGet(ctx context.Context, queue string, id int64) (*Job, error)

	// JobLease moves a job held by grab p.Grabs (grabbed, or already
	// leased) to StateLeased until the database's now + p.Lease, sets
	// progress and message when given, and returns the new expiry. A job
	// that was rescued and grabbed again, finished or deleted is not held
	// by that grab: ErrNotFound. grabbed_by keeps the node that delivered
	// it, for the record; the lease is the row's, not that node's.
	JobLease(ctx context.Context, p *JobLeaseParams) (time.Time, error)
	// JobHeld returns the job if grab grabs holds it (grabbed or leased),
	// else ErrNotFound.
	JobHeld(ctx context.Context, id int64, grabs int) (*Job, error)
	// JobFinish deletes, retries or fails (p.Outcome) a job held by grab
	// p.Grabs (grabbed or leased; with p.Expired, leased and expired) and,
	// unless p.Expired, records p.Status as that grab's result
	// (JobResult), in one transaction. It returns the job's queue, or
	// ErrNotFound when the grab does not hold the job.
	JobFinish(ctx context.Context, p *JobFinishParams) (string, error)
	// JobsSucceed deletes the jobs that p.Grabs hold (grabbed or leased)
	// and records p.Status as each grab's result (JobResult), in one
	// transaction: the successes of many completions at once, as JobFinish
	// with FinishDelete would write them one by one. It returns, in the
	// order given, the queue of each job it deleted, "" for a grab that
	// did not hold its job.
	JobsSucceed(ctx context.Context, p *JobsSucceedParams) ([]string, error)
	// JobResult returns the status JobFinish recorded for the job's grab,
	// or ErrNotFound.
	JobResult(ctx context.Context, id int64, grabs int) (string, error)
	// JobResultsPurge deletes the results recorded more than age ago and
	// returns how many.
	JobResultsPurge(ctx context.Context, age time.Duration) (int64, error)
	// JobCancel removes a job of the queue, whatever its state, and
	// returns it as it was, or ErrNotFound. A job that was grabbed or
	// leased also gets the result ResultCancelled for its grab (JobResult),
	// so that its worker's next heartbeat or completion learns why; its
	// delivery's outcome, if it still comes, finds no job to write.
	JobCancel(ctx context.Context, queue string, id int64) (*Job, error)
	// JobsLeased returns the id and grab count of every leased job of
	// queue (StateLeased, expired or not), in any order: what a pull
	// queue's leader counts against max_workers.
	JobsLeased(ctx context.Context, queue string) ([]JobGrab, error)
	// JobsLeaseExpired returns up to p.Limit jobs of p.Queue whose lease
	// has run out (StateLeased, grabbed_until passed), in any order. It
	// locks nothing; JobFinish with Expired decides.
	JobsLeaseExpired(ctx context.Context, p *JobsLeaseExpiredParams) ([]*Job, error)

	// JobsNextDue tells, for each of queues that holds a waiting job, a
	// grab or a lease, when it next needs its leader (QueueDue), by the
	// database's clock; queues that hold none are left out. Its cost grows
	// with the number of queues named, not with their waiting jobs: the
	// prober of idle queues (internal/dispatch) asks it once for a queue
	// that parks, then sleeps until the time it gave.
	JobsNextDue(ctx context.Context, queues []string) ([]QueueDue, error)
	// JobsKeyHeads returns, for each of keys that has an ordered job in
	// p.Queue (waiting, grabbed or leased), the id of its oldest ordered
	// job (the lowest): the only job of an ordered key that may be
	// delivered. Jobs of the key without order do not count.
	JobsKeyHeads(ctx context.Context, p *JobsKeyHeadsParams) (map[string]int64, error)
	// JobsKeyBusy counts, per concurrency key, the keyed jobs of p.Queue
	// grabbed by a node other than p.Node or leased (by any node): what a
	// new leader of the queue counts as in delivery beside its own
	// deliveries. Keys with none are left out.
	JobsKeyBusy(ctx context.Context, p *JobsKeyBusyParams) (map[string]int, error)
	// JobsExpired returns those of queues that hold an expired grab (as
	// JobsRescue sees it: grabbed_until passed, or its node unregistered)
	// or an expired lease (JobsLeaseExpired), in any order: the queues
	// whose rescue has something to do.
	JobsExpired(ctx context.Context, queues []string) ([]string, error)
}

// QueueDue is when a queue next needs its leader, from the database's now
// at the look: Job until its earliest waiting job is due (zero or less:
// due now), Expiry until its earliest grab or lease runs out; Never when
// it holds none.
type QueueDue struct {
	Queue       string
	Job, Expiry time.Duration
}

// Never is a QueueDue's time when the queue holds nothing of the kind.
const Never = time.Duration(math.MaxInt64)

// Retry backoff kinds of a job (JobOptions.RetryBackoff).
const (
	// BackoffFixed waits RetryDelay before every retry (Fireworq's way).
	BackoffFixed = "fixed"
	// BackoffExponential waits min(RetryDelayMax, RetryDelay·2^(n-1))
	// before the n-th retry.
	BackoffExponential = "exponential"
)

// Job is a stored job.
type Job struct {
	ID         int64
	Queue      string
	Category   string
	URL        string
	Payload    json.RawMessage // nil when the job has none
	State      string          // StateWaiting, StateGrabbed or StateLeased
	CreatedAt  time.Time
	NextTry    time.Time
	Timeout    int // seconds, 0 = none
	MaxRetries int
	RetryDelay int // seconds
	FailCount  int
	GrabbedBy  string     // node id, "" unless grabbed
	GrabbedTil *time.Time // nil unless grabbed or leased
	// Grabs counts the job's grabs (hand-off included): the lease token
	// of a delivery names it.
	Grabs int
	// Deferrals counts the times the job was deferred by its worker's 429
	// or 503 with Retry-After (JobsDefer with Count), which spend none of
	// its retries.
	Deferrals int
	// Progress (0..1, nil: never told) and ProgressMessage are what the
	// worker that accepted the job last told in a heartbeat.
	Progress        *float64
	ProgressMessage string
	// Trace is the W3C trace context the job was enqueued with.
	Trace Trace
	// Flow tells that the job has a flow (callbacks, dependents, parents
	// or a batch: flow.go): its outcome goes through FlowEnd.
	Flow bool
	JobOptions
}

// Trace is a job's W3C trace context, sent with each of its deliveries
// (internal/tracing checks it); "" for none. The failure log does not
// keep it.
type Trace struct {
	Parent string // traceparent, version 00 form
	State  string // tracestate, at most 512 characters
}

// GrabState is the state JobsGrab leaves its jobs in: StateLeased for a
// puller (p.Leased), else StateGrabbed.
func GrabState(p *JobsGrabParams) string { return HeldState(p.Leased) }

// HeldState is the state of a job its holder has: StateLeased for a
// pulled job (leased), else StateGrabbed.
func HeldState(leased bool) string {
	if leased {
		return StateLeased
	}
	return StateGrabbed
}

// JobGrab names one grab of a job: the job's id and its grab count
// (Job.Grabs), which a lease token names too.
type JobGrab struct {
	ID    int64
	Grabs int
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
	Trace      Trace
	JobOptions
}

// JobsGrabParams are the arguments of JobStore.JobsGrab.
type JobsGrabParams struct {
	Queue string
	Node  string
	Limit int
	Lease time.Duration
	// Leased grabs the jobs for a puller of a pull queue: StateLeased
	// until now + Lease, held by the lease their grab count names (as an
	// accepted job is), not by the node's grab; grabbed_by still names the
	// node, for the record and for JobsRelease.
	Leased bool
	// SkipKeys leaves out the jobs of these concurrency keys, and NoKeys
	// every keyed job: the leader holds back so many of them already
	// (internal/dispatch, keys.go).
	SkipKeys []string
	NoKeys   bool
}

// JobsKeyHeadsParams are the arguments of JobStore.JobsKeyHeads.
type JobsKeyHeadsParams struct {
	Queue string
	Keys  []string
}

// JobsKeyBusyParams are the arguments of JobStore.JobsKeyBusy.
type JobsKeyBusyParams struct {
	Queue string
	Node  string
}

// JobsExtendParams are the arguments of JobStore.JobsExtend.
type JobsExtendParams struct {
	Queue string
	Node  string
	Lease time.Duration
}

// JobsCompleteParams are the arguments of JobStore.JobsComplete.
type JobsCompleteParams struct {
	Node string
	IDs  []int64
	// Ordered lists those of IDs whose jobs are ordered (Job.Ordered): a
	// store that lists ordered jobs apart (MySQL's ordered_jobs) forgets
	// them too, at no cost to the others.
	Ordered []int64
	// Keep lists those of IDs whose queue keeps its finished jobs, with
	// what their history records: the store writes it (FinishedStore) in
	// the transaction that deletes them. Empty: the jobs are deleted, as
	// without history, by the same statement.
	Keep []FinishNote
	// Flow holds the notes of those of IDs whose jobs have Flow (as
	// grabbed): what FlowEnd tells their callbacks. The store ends every
	// job with Flow through FlowEnd, noted or not (a dependent may have
	// been added to a job after its grab), and the others by a statement
	// that leaves flow rows alone (flow = 0), so that a batch without flow
	// jobs costs what it did.
	Flow []FinishNote
}

// JobsReleaseParams are the arguments of JobStore.JobsRelease.
type JobsReleaseParams struct {
	Node string
	IDs  []int64
	// Leased releases jobs the node grabbed leased (JobsGrabParams.Leased)
	// for a puller that went away before it got them; else grabbed jobs.
	Leased bool
}

// JobRetryParams are the arguments of JobStore.JobRetry.
type JobRetryParams struct {
	ID    int64
	Node  string
	Delay time.Duration
}

// JobsDeferParams are the arguments of JobStore.JobsDefer.
type JobsDeferParams struct {
	Node string
	Jobs []JobDelay
	// Count adds one to each job's deferrals.
	Count bool
}

// JobDelay is one job of JobsDeferParams and when it is due again.
type JobDelay struct {
	ID    int64
	Delay time.Duration
}

// JobFailParams are the arguments of JobStore.JobFail.
type JobFailParams struct {
	ID      int64
	Node    string
	Status  string // worker result: "failure" or "permanent-failure"
	Code    int    // HTTP status code, 0 when there was no response
	Message string
	// Keep writes the job's history (FinishedStore) in the same
	// transaction: its queue keeps its finished jobs.
	Keep bool
}

// JobsInsertGrabbedParams are the arguments of JobStore.JobsInsertGrabbed.
type JobsInsertGrabbedParams struct {
	Node  string
	Lease time.Duration
	Jobs  []*JobInsertParams
}

// GrabbedJob returns the job JobsInsertGrabbed stores for p with this id,
// created (and due) at created plus RunAfter, grabbed by node until until,
// with p's settings as every dialect stores them (no payload as nil, an
// empty backoff as BackoffFixed). Dialects that know the row's id and times
// without reading the row back build their result with it.
func (p *JobInsertParams) GrabbedJob(id int64, node string, created, nextTry, until time.Time) *Job {
	j := &Job{
		ID: id, Queue: p.Queue, Category: p.Category, URL: p.URL, Payload: p.Payload,
		State: StateGrabbed, CreatedAt: created, NextTry: nextTry,
		Timeout: p.Timeout, MaxRetries: p.MaxRetries, RetryDelay: p.RetryDelay,
		GrabbedBy: node, GrabbedTil: &until, Grabs: 1, Trace: p.Trace, JobOptions: p.JobOptions,
	}
	if len(j.Payload) == 0 {
		j.Payload = nil
	}
	if j.RetryBackoff == "" {
		j.RetryBackoff = BackoffFixed
	}
	return j
}

// JobOptions holds rowq's own job settings beside Fireworq's. It is embedded
// in Job, JobInsertParams and FailedJob so that every node, and a retry
// from the failure log, sees the same settings.
type JobOptions struct {
	// Priority orders due jobs of a queue: higher first, ties by next_try
	// then id.
	Priority int
	// UniqueKey, when not "", allows one pending job (waiting or grabbed)
	// per queue and key. The failure log does not keep it.
	UniqueKey string
	// RetryBackoff is BackoffFixed or BackoffExponential ("" reads as
	// fixed).
	RetryBackoff string
	// RetryDelayMax caps an exponential delay, in seconds; 0 = no cap.
	RetryDelayMax int
	// RetryJitter spreads each retry delay by up to ± this fraction of it
	// (0..1).
	RetryJitter float64
	// ConcurrencyKey, when not "", bounds the jobs of the queue with this
	// key that are in delivery at once to ConcurrencyLimit (1 or more;
	// 0 when there is no key). With Ordered, the jobs of the key go one
	// at a time, oldest (lowest id) first, a job waiting for every older
	// job of its key to leave the queue (docs/flow-control.md). The queue's
	// leader keeps the counts (internal/dispatch, keys.go).
	ConcurrencyKey   string
	ConcurrencyLimit int
	Ordered          bool
}

// JobPushed is the outcome of one job of JobStore.JobsPush.
type JobPushed struct {
	ID int64
	// Existing is set when a pending job with the same unique key was
	// found instead of storing a new one; Job is then that job.
	Existing bool
	Job      *Job
}

// KeyedInOrder returns the indexes of the jobs that have a unique key,
// ordered by queue and key. Dialects insert keyed jobs in this order so
// that two pushes of the same keys take the index locks in the same order
// instead of deadlocking.
func KeyedInOrder(jobs []*JobInsertParams) []int {
	var idx []int
	for i, j := range jobs {
		if j.UniqueKey != "" {
			idx = append(idx, i)
		}
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		return cmp.Or(cmp.Compare(jobs[a].Queue, jobs[b].Queue), cmp.Compare(jobs[a].UniqueKey, jobs[b].UniqueKey))
	})
	return idx
}
