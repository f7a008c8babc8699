package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// FlowTx is what FlowEnd needs of the transaction that records outcomes.
// Each dialect implements it over its own transaction, with its own SQL.
type FlowTx interface {
	// FlowsOf returns the job_flows rows of ids, in any order; a job
	// without one is left out.
	FlowsOf(ctx context.Context, ids []int64) ([]*JobFlow, error)
	// FlowChildren returns the edges from parents to their dependents that
	// are still blocked, with each such child's job and flow rows locked
	// (children locked in ascending id order), in any order.
	FlowChildren(ctx context.Context, parents []int64) ([]FlowChild, error)
	// FlowSetPending sets the pending parents count of each child given.
	FlowSetPending(ctx context.Context, pending map[int64]int) error
	// FlowRelease moves the blocked jobs ids to waiting (next_try left as
	// enqueued) and returns their queues, each once.
	FlowRelease(ctx context.Context, ids []int64) ([]string, error)
	// FlowEndBlocked ends the blocked jobs ids without running them, and
	// returns them as they were: FinishedCancelled deletes them,
	// FinishedFailed moves them to the failure log (status FailedParent,
	// code 0, fail_count unchanged + 1); either writes their history where
	// their queue keeps it, with message.
	FlowEndBlocked(ctx context.Context, ids []int64, status, message string) ([]*Job, error)
	// FlowForget deletes the job_flows rows of ids and every edge whose
	// parent or child is one of ids.
	FlowForget(ctx context.Context, ids []int64) error
	// FlowInsertJobs inserts jobs as waiting (callbacks).
	FlowInsertJobs(ctx context.Context, jobs []*JobInsertParams) error
	// BatchCount adds n to batch id's counts (Pending decreases by their
	// sum), sets finished_at to the database's now when Pending reaches 0,
	// and returns the batch as it is then, with its callbacks; the row is
	// locked. ErrNotFound when the batch is gone.
	BatchCount(ctx context.Context, id int64, n BatchCounts) (*BatchRow, error)
}

// JobFlow is a job_flows row.
type JobFlow struct {
	JobID   int64
	BatchID int64 // 0 for none
	// OnSuccess, OnFailure, OnFinish: the callbacks (EncodeCallback); nil
	// for none.
	OnSuccess, OnFailure, OnFinish *JobInsertParams
	// Pending counts the parents it still waits for.
	Pending         int
	OnParentFailure string
}

// FlowChild is one edge from an ended parent to a blocked dependent.
type FlowChild struct {
	Parent, Child int64
	// Pending and OnParentFailure are the child's, as locked.
	Pending         int
	OnParentFailure string
}

// BatchCounts are outcomes added to a batch.
type BatchCounts struct{ Succeeded, Failed, Cancelled int }

// BatchRow is a batch as BatchCount leaves it, with its callbacks.
type BatchRow struct {
	Batch
	OnSuccess, OnFinish *JobInsertParams
}

// FlowEnded is a job that an outcome's transaction ended, as it was.
type FlowEnded struct {
	Job *Job
	// Status is FinishedSucceeded, FinishedFailed or FinishedCancelled.
	Status  string
	Message string
	Result  json.RawMessage // nil for none
}

// FlowEnd applies the flows of ended jobs in tx, the transaction that
// ended them (removed them from jobs): it inserts the callbacks their
// outcome calls for, counts them in their batches (and inserts a batch's
// callbacks when its last job ended), and counts them as done for their
// dependents, which it releases when they wait for nothing more, or ends
// in turn (cancel, fail) as their OnParentFailure says, and so on down.
// Jobs without Flow are passed over. It returns what it did, for
// FlowHook.Done after the commit.
func FlowEnd(ctx context.Context, tx FlowTx, ended []FlowEnded) (FlowDone, error) {
	var e flowEnd
	for work := withFlow(ended); len(work) > 0; {
		next, err := e.round(ctx, tx, work)
		if err != nil {
			return FlowDone{}, err
		}
		work = next
	}
	if err := e.countBatches(ctx, tx); err != nil {
		return FlowDone{}, err
	}
	if len(e.calls) > 0 {
		if err := tx.FlowInsertJobs(ctx, e.calls); err != nil {
			return FlowDone{}, fmt.Errorf("insert %d callbacks: %w", len(e.calls), err)
		}
		for _, c := range e.calls {
			e.done.Queues = appendOnce(e.done.Queues, c.Queue)
		}
		e.done.Callbacks = len(e.calls)
	}
	return e.done, nil
}

// flowEnd is the state of one FlowEnd.
type flowEnd struct {
	calls   []*JobInsertParams
	batches map[int64]*BatchCounts
	order   []int64 // batch ids met, each once (counted in ascending order)
	done    FlowDone
}

func withFlow(ended []FlowEnded) []FlowEnded {
	var out []FlowEnded
	for _, e := range ended {
		if e.Job.Flow {
			out = append(out, e)
		}
	}
	return out
}

// round applies the flows of the jobs work ended, and returns the
// dependents it ended in turn.
func (e *flowEnd) round(ctx context.Context, tx FlowTx, work []FlowEnded) ([]FlowEnded, error) {
	ids := make([]int64, len(work))
	for i, w := range work {
		ids[i] = w.Job.ID
	}
	flows, err := tx.FlowsOf(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read flows of %d jobs: %w", len(ids), err)
	}
	byID := make(map[int64]*JobFlow, len(flows))
	for _, f := range flows {
		byID[f.JobID] = f
	}
	status := make(map[int64]string, len(work))
	for _, w := range work {
		status[w.Job.ID] = w.Status
		if f := byID[w.Job.ID]; f != nil {
			if err := e.callbacks(w, f); err != nil {
				return nil, err
			}
			e.count(f.BatchID, w.Status)
		}
	}
	children, err := tx.FlowChildren(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("read dependents of %d jobs: %w", len(ids), err)
	}
	if err := tx.FlowForget(ctx, ids); err != nil {
		return nil, fmt.Errorf("forget flows of %d jobs: %w", len(ids), err)
	}
	return e.dependents(ctx, tx, children, status)
}

// callbacks queues the callbacks of f that w's outcome calls for.
func (e *flowEnd) callbacks(w FlowEnded, f *JobFlow) error {
	var cbs []*JobInsertParams
	switch w.Status {
	case FinishedSucceeded:
		cbs = append(cbs, f.OnSuccess)
	case FinishedFailed:
		cbs = append(cbs, f.OnFailure)
	}
	cbs = append(cbs, f.OnFinish)
	for _, cb := range cbs {
		if cb == nil {
			continue
		}
		payload, err := CallbackPayload(w, cb.Payload)
		if err != nil {
			return err
		}
		c := *cb
		c.Payload = payload
		e.calls = append(e.calls, &c)
	}
	return nil
}

// count adds an outcome to batch id (0: none).
func (e *flowEnd) count(id int64, status string) {
	if id == 0 {
		return
	}
	if e.batches == nil {
		e.batches = map[int64]*BatchCounts{}
	}
	n := e.batches[id]
	if n == nil {
		n = &BatchCounts{}
		e.batches[id] = n
		e.order = append(e.order, id)
	}
	switch status {
	case FinishedSucceeded:
		n.Succeeded++
	case FinishedFailed:
		n.Failed++
	default:
		n.Cancelled++
	}
}

// childOutcome is what the parents ended in one round do to a child.
type childOutcome struct {
	pending int
	// failed names a parent that failed or was cancelled under a policy
	// other than run (0: none), and how it ended.
	failed       int64
	failedStatus string
	policy       string
}

// dependents counts the ended parents for their children: a child whose
// parents have all succeeded is released; one whose parent failed or was
// cancelled is ended as its policy says (those ended are returned, for the
// next round).
func (e *flowEnd) dependents(ctx context.Context, tx FlowTx, children []FlowChild, status map[int64]string) ([]FlowEnded, error) {
	outs := map[int64]*childOutcome{}
	var order []int64
	for _, c := range children {
		o := outs[c.Child]
		if o == nil {
			o = &childOutcome{pending: c.Pending, policy: c.OnParentFailure}
			outs[c.Child] = o
			order = append(order, c.Child)
		}
		o.pending--
		if st := status[c.Parent]; st != FinishedSucceeded && o.policy != ParentFailureRun && o.failed == 0 {
			o.failed, o.failedStatus = c.Parent, st
		}
	}
	slices.Sort(order)
	pending := map[int64]int{}
	var release, cancel, fail []int64
	for _, id := range order {
		o := outs[id]
		switch {
		case o.failed != 0 && o.policy == ParentFailureFail:
			fail = append(fail, id)
		case o.failed != 0:
			cancel = append(cancel, id)
		case o.pending <= 0:
			release = append(release, id)
		default:
			pending[id] = o.pending
		}
	}
	if len(pending) > 0 {
		if err := tx.FlowSetPending(ctx, pending); err != nil {
			return nil, fmt.Errorf("count parents of %d jobs: %w", len(pending), err)
		}
	}
	if len(release) > 0 {
		queues, err := tx.FlowRelease(ctx, release)
		if err != nil {
			return nil, fmt.Errorf("release %d jobs: %w", len(release), err)
		}
		for _, q := range queues {
			e.done.Queues = appendOnce(e.done.Queues, q)
		}
		e.done.Released += len(release)
	}
	var next []FlowEnded
	for _, end := range []struct {
		ids    []int64
		status string
	}{{cancel, FinishedCancelled}, {fail, FinishedFailed}} {
		for _, id := range end.ids {
			o := outs[id]
			msg := fmt.Sprintf("parent %d %s", o.failed, o.failedStatus)
			jobs, err := tx.FlowEndBlocked(ctx, []int64{id}, end.status, msg)
			if err != nil {
				return nil, fmt.Errorf("end job %d: %w", id, err)
			}
			for _, j := range jobs {
				next = append(next, FlowEnded{Job: j, Status: end.status, Message: msg})
			}
			e.done.Ended += len(jobs)
		}
	}
	return next, nil
}

// countBatches writes the outcomes counted per batch, and queues the
// callbacks of each batch whose last job ended.
func (e *flowEnd) countBatches(ctx context.Context, tx FlowTx) error {
	// Batch rows are locked in ascending id order, as the children are:
	// two transactions that end jobs of the same batches (ids and batch
	// ids need not rise together: batches enqueued concurrently) must not
	// lock them in opposite orders and wait for a deadlock's detection.
	slices.Sort(e.order)
	for _, id := range e.order {
		b, err := tx.BatchCount(ctx, id, *e.batches[id])
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("count outcomes of batch %d: %w", id, err)
		}
		if b.Pending > 0 {
			continue
		}
		cbs := []*JobInsertParams{b.OnFinish}
		if b.Failed == 0 && b.Cancelled == 0 {
			cbs = append([]*JobInsertParams{b.OnSuccess}, cbs...)
		}
		for _, cb := range cbs {
			if cb == nil {
				continue
			}
			payload, err := BatchCallbackPayload(&b.Batch, cb.Payload)
			if err != nil {
				return err
			}
			c := *cb
			c.Payload = payload
			e.calls = append(e.calls, &c)
		}
	}
	return nil
}

func appendOnce(ss []string, s string) []string {
	if slices.Contains(ss, s) {
		return ss
	}
	return append(ss, s)
}

// CallbackPayload is the payload of a callback of the ended job w: the job
// as it ended, and the callback's own payload.
func CallbackPayload(w FlowEnded, own json.RawMessage) (json.RawMessage, error) {
	attempts := w.Job.FailCount
	if w.Job.State != StateWaiting && w.Job.State != StateBlocked {
		attempts++
	}
	v := struct {
		Job struct {
			ID       int64           `json:"id"`
			Queue    string          `json:"queue_name"`
			Category string          `json:"category"`
			Status   string          `json:"status"`
			Attempts int             `json:"attempts"`
			Result   json.RawMessage `json:"result,omitempty"`
			Message  string          `json:"message"`
		} `json:"job"`
		Payload json.RawMessage `json:"payload,omitempty"`
	}{Payload: nilIfEmpty(own)}
	v.Job.ID, v.Job.Queue, v.Job.Category = w.Job.ID, w.Job.Queue, w.Job.Category
	v.Job.Status, v.Job.Attempts, v.Job.Result, v.Job.Message = w.Status, attempts, nilIfEmpty(w.Result), w.Message
	return json.Marshal(v)
}

// BatchCallbackPayload is the payload of a callback of a finished batch:
// its counts and meta, and the callback's own payload.
func BatchCallbackPayload(b *Batch, own json.RawMessage) (json.RawMessage, error) {
	v := struct {
		Batch struct {
			ID         int64           `json:"id"`
			Total      int             `json:"total"`
			Succeeded  int             `json:"succeeded"`
			Failed     int             `json:"failed"`
			Cancelled  int             `json:"cancelled"`
			CreatedAt  time.Time       `json:"created_at"`
			FinishedAt *time.Time      `json:"finished_at,omitempty"`
			Meta       json.RawMessage `json:"meta,omitempty"`
		} `json:"batch"`
		Payload json.RawMessage `json:"payload,omitempty"`
	}{Payload: nilIfEmpty(own)}
	v.Batch.ID, v.Batch.Total, v.Batch.Succeeded, v.Batch.Failed, v.Batch.Cancelled = b.ID, b.Total, b.Succeeded, b.Failed, b.Cancelled
	v.Batch.CreatedAt, v.Batch.FinishedAt, v.Batch.Meta = b.CreatedAt, b.FinishedAt, nilIfEmpty(b.Meta)
	return json.Marshal(v)
}

func nilIfEmpty(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return b
}

// callbackJSON is how a callback is kept in job_flows and batches: a
// resolved job, with its delay in milliseconds.
type callbackJSON struct {
	Queue            string          `json:"queue"`
	Category         string          `json:"category"`
	URL              string          `json:"url"`
	Payload          json.RawMessage `json:"payload,omitempty"`
	RunAfterMS       int64           `json:"run_after_ms,omitempty"`
	Timeout          int             `json:"timeout,omitempty"`
	MaxRetries       int             `json:"max_retries,omitempty"`
	RetryDelay       int             `json:"retry_delay,omitempty"`
	Priority         int             `json:"priority,omitempty"`
	RetryBackoff     string          `json:"retry_backoff,omitempty"`
	RetryDelayMax    int             `json:"retry_delay_max,omitempty"`
	RetryJitter      float64         `json:"retry_jitter,omitempty"`
	ConcurrencyKey   string          `json:"concurrency_key,omitempty"`
	ConcurrencyLimit int             `json:"concurrency_limit,omitempty"`
	Ordered          bool            `json:"ordered,omitempty"`
	TraceParent      string          `json:"traceparent,omitempty"`
	TraceState       string          `json:"tracestate,omitempty"`
}

// EncodeCallback is how dialects keep a callback in a column: nil (SQL
// NULL) for none.
func EncodeCallback(p *JobInsertParams) ([]byte, error) {
	if p == nil {
		return nil, nil
	}
	return json.Marshal(callbackJSON{
		Queue: p.Queue, Category: p.Category, URL: p.URL, Payload: nilIfEmpty(p.Payload),
		RunAfterMS: p.RunAfter.Milliseconds(), Timeout: p.Timeout, MaxRetries: p.MaxRetries, RetryDelay: p.RetryDelay,
		Priority: p.Priority, RetryBackoff: p.RetryBackoff, RetryDelayMax: p.RetryDelayMax, RetryJitter: p.RetryJitter,
		ConcurrencyKey: p.ConcurrencyKey, ConcurrencyLimit: p.ConcurrencyLimit, Ordered: p.Ordered,
		TraceParent: p.Trace.Parent, TraceState: p.Trace.State,
	})
}

// DecodeCallback reads what EncodeCallback wrote; nil or empty is none.
func DecodeCallback(b []byte) (*JobInsertParams, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var c callbackJSON
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("decode callback: %w", err)
	}
	p := &JobInsertParams{
		Queue: c.Queue, Category: c.Category, URL: c.URL, Payload: c.Payload,
		RunAfter: time.Duration(c.RunAfterMS) * time.Millisecond, Timeout: c.Timeout, MaxRetries: c.MaxRetries, RetryDelay: c.RetryDelay,
		Trace: Trace{Parent: c.TraceParent, State: c.TraceState},
	}
	p.Priority, p.RetryBackoff, p.RetryDelayMax, p.RetryJitter = c.Priority, c.RetryBackoff, c.RetryDelayMax, c.RetryJitter
	p.ConcurrencyKey, p.ConcurrencyLimit, p.Ordered = c.ConcurrencyKey, c.ConcurrencyLimit, c.Ordered
	return p, nil
}
