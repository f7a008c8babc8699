package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
)

// Delivery: a worker slot delivers its job (POST to the worker,
// protocol.go), records the outcome, and goes on with the read-ahead's
// next job while there is one.

// work delivers j, then, in the same worker slot, the next parked job of
// its key (keys.go) or the read-ahead's next jobs while there are some and
// the queue is neither paused, throttled (the run loop gives the
// read-ahead back) nor stopping, and the node is not stale
// (Dispatcher.fresh); then it gives the slot back.
func (r *runner) work(j *store.Job) {
	for j != nil {
		accepted := false
		if wait := r.flow.admit(j); wait > 0 {
			r.hold(j, wait) // its host may not take it now (flow.go)
		} else {
			accepted = r.process(j)
		}
		q := r.settings.Load()
		more := !r.stopped() && !q.Paused && q.MaxDispatchesPerSecond == nil && r.d.fresh()
		done := j
		j = nil
		if done.ConcurrencyKey != "" {
			j = r.keyEnd(done, accepted, more)
		}
		if j == nil && more {
			var low bool
			if j, low = r.ahead.next(); low {
				r.signalFreed()
			}
		}
	}
	r.releaseSlots(1)
}

// ackItem is one acknowledgement: the job and the worker's message and
// result (nil: none), which its history records when its queue keeps its
// finished jobs (keep), and its callbacks get when it has a flow (flow).
type ackItem struct {
	job        *store.Job
	note       *store.FinishNote
	keep, flow bool
}

// succeeded is the acknowledgement of j after the success res: with the
// worker's message and result when queue settings q keep finished jobs
// or j has a flow.
func succeeded(j *store.Job, q *store.Queue, res *Result) ackItem {
	a := ackItem{job: j, keep: q.KeepFinished > 0, flow: j.Flow}
	if a.keep || a.flow {
		a.note = &store.FinishNote{ID: j.ID, Message: res.Message, Result: res.Output}
	}
	return a
}

// ack deletes a delivered job with the next spaced DELETE (ackGap). The
// job's worker slot stays taken until it commits, so that a crash
// redelivers at most max_workers jobs (and as many acknowledged in the
// background, ackLater); when three quarters of the slots wait so, the
// DELETE goes at once, or a queue with few slots or fast workers would
// spend its slots' time waiting. So it does when now: the job's ordered
// key has jobs parked behind it (keys.go), whose head check waits for the
// commit.
func (r *runner) ack(ctx context.Context, j ackItem, now bool) error {
	n := r.acking.Add(1)
	defer r.acking.Add(-1)
	if now || 4*n >= 3*int64(r.settings.Load().MaxWorkers) {
		r.d.complete.Flush()
	}
	_, err := r.d.complete.Do(ctx, j)
	return err
}

// ackAsync acknowledges a delivered job without waiting for the commit:
// the acknowledgement takes a worker slot of its own, which it holds until
// its DELETE commits, as the job's slot would be held while it waited in
// ack. The delivery's goroutine then gives its slot back, or goes on with
// the next job in it, at once, instead of sleeping until the commit and
// being woken again (a wake-up per job: docs/benchmarks.md). It reports
// false, and does nothing, when no slot is free; ack then waits as before
// (and takeSlots has sent the pending acknowledgements).
func (r *runner) ackAsync(a ackItem, elapsed time.Duration) bool {
	if r.takeSlots(1) == 0 {
		return false
	}
	r.slots.wg.Add(1)
	if n := r.acking.Add(1); 4*n >= 3*int64(r.settings.Load().MaxWorkers) {
		r.d.complete.Flush()
	}
	r.d.complete.Go(a, func(_ struct{}, err error) {
		r.acking.Add(-1)
		if err != nil {
			// Retried as ack is, off the batcher's goroutine.
			go func() {
				defer r.slots.wg.Done()
				defer r.releaseSlots(1)
				jl := jobLog{r: r, id: a.job.ID}
				r.ackRetried(jl.get, a, elapsed)
			}()
			return
		}
		r.d.cfg.Stats.Delivered(r.name, stats.Success, elapsed)
		r.releaseSlots(1)
		r.slots.wg.Done()
	})
	return true
}

// ackLater acknowledges j, delivered, in the background, and reports
// whether it does: the success of a key without order whose next jobs
// wait (keys.go) frees its worker slot for them at once, where the slot
// would otherwise wait for the commit (ack). Such an acknowledgement holds
// no slot, so a crash may redeliver, beside max_workers jobs in slots, as
// many acknowledged later; beyond that many pending (runner.acking), it
// is not done in the background.
func (r *runner) ackLater(log func() *slog.Logger, j ackItem, elapsed time.Duration) bool {
	max := int64(r.settings.Load().MaxWorkers)
	for {
		n := r.acking.Load()
		if n >= max {
			return false
		}
		if r.acking.CompareAndSwap(n, n+1) {
			break
		}
	}
	d := r.d
	d.acks.Add(1)
	go func() {
		defer d.acks.Done()
		defer r.acking.Add(-1)
		r.ackRetried(log, j, elapsed)
	}()
	return true
}

// ackRetried acknowledges a, delivered in elapsed, in the next batch,
// retrying until it commits or the job is no longer this node's, and
// counts the delivery: the background acknowledgements' common end
// (ackLater, and ackAsync's after a failed batch).
func (r *runner) ackRetried(log func() *slog.Logger, a ackItem, elapsed time.Duration) {
	err := r.d.retryStoreWithin(log, "acknowledge job", 0, func(ctx context.Context) error {
		_, err := r.d.complete.Do(ctx, a)
		return err
	})
	r.recorded(log, stats.Success, elapsed, err)
}

// process delivers one job and records the outcome: success removes it,
// a 429 or 503 with Retry-After defers it without spending a retry (up to
// maxDeferrals times, flow.go), a failure with retries left puts it back
// after the worker's retry_after or else the job's backoff (retryDelay),
// anything else moves it to the failure log. The outcome also tells the
// flow control of the job's worker host. It reports whether the worker
// accepted the job (which is then leased, in delivery still).
func (r *runner) process(j *store.Job) (accepted bool) {
	d := r.d
	d.cfg.Stats.Busy(r.name, 1)
	defer d.cfg.Stats.Busy(r.name, -1)
	began := time.Now()
	// Not derived from deliverCtx: a child of a context that every
	// delivery shares would register with it, under its lock, at each
	// start and end. The hard stop cancels the deliveries it finds
	// (stopHard); one stored after that sees deliverCtx ended.
	ctx, cancel := context.WithCancelCause(context.Background())
	dl := &delivery{cancel: cancel}
	d.deliveries.Store(j.ID, dl)
	if d.deliverCtx.Err() != nil {
		cancel(context.Canceled)
	}
	traced, span := d.cfg.Tracer.Deliver(ctx, r.name, j)
	res := deliver(traced, &d.cfg, j, d.leaseToken(j.ID, j.Grabs))
	span.Delivered(res.Status, res.Code, res.Message)
	d.deliveries.CompareAndDelete(j.ID, dl)
	aborted := errors.Is(context.Cause(ctx), errCancelled)
	cancel(nil)
	elapsed := time.Since(began)
	if d.deliverCtx.Err() != nil {
		return false // hard stop: the grab expires and the job is delivered again
	}
	jl := jobLog{r: r, id: j.ID}
	log := jl.get
	if aborted {
		r.flow.observe(j, nil, began, began.Add(elapsed), 0, nil)
		log().Debug("delivery aborted: the job was cancelled")
		return false // the cancel removed the job
	}
	q := r.settings.Load()
	r.flow.observe(j, &res, began, began.Add(elapsed), r.slots.inflight.Load(), q.MaxDispatchesPerSecond)
	if res.Defer != nil && j.Deferrals >= maxDeferrals {
		// Deferred enough: from now on an ordinary failure (flow.go).
		if res.Status != StatusPermanentFailure {
			res.Status = StatusFailure
		}
		res.RetryAfter = cmp.Or(res.RetryAfter, res.Defer)
		res.Message = truncate(fmt.Sprintf("worker answered %d with Retry-After after %d deferrals, now counted as a failure: %s", res.Code, j.Deferrals, res.Message))
		res.Defer = nil
	}
	var err error
	outcome := stats.PermanentFailure
	switch {
	case res.Defer != nil:
		// The worker asked to come back later: no retry is spent.
		outcome = stats.Failure
		log().Debug("worker busy; job deferred", "code", res.Code, "delay", *res.Defer, "deferrals", j.Deferrals+1)
		err = d.retryStore(log, "defer job", func(ctx context.Context) error {
			n, err := d.cfg.Store.JobsDefer(ctx, &store.JobsDeferParams{Node: d.cfg.Node, Jobs: []store.JobDelay{{ID: j.ID, Delay: *res.Defer}}, Count: true})
			if err == nil && n == 0 {
				err = store.ErrNotFound
			}
			return err
		})
		r.later()
	case res.Status == StatusAccepted:
		// Counted when the worker completes it (Dispatcher.Complete); its
		// worker slot comes free now.
		log().Debug("job accepted", "lease", res.Lease)
		if err := r.accept(j, res.Lease); err != nil && d.deliverCtx.Err() == nil {
			log().Warn("job was taken from this node before its acceptance was recorded; it will be delivered again", "err", err)
		}
		r.later() // its lease runs out some day
		return true
	case res.Status == StatusSuccess:
		outcome = stats.Success
		waits := r.keyWaits(j)
		a := succeeded(j, q, &res)
		if waits && !j.Ordered && r.ackLater(log, a, elapsed) {
			return false
		}
		if j.ConcurrencyKey == "" && r.ackAsync(a, elapsed) {
			return false
		}
		err = d.retryStoreWithin(log, "acknowledge job", 0, func(ctx context.Context) error { return r.ack(ctx, a, waits) })
	case res.Status == StatusFailure && j.FailCount < j.MaxRetries:
		outcome = stats.Failure
		delay := retryDelay(j, j.FailCount+1, rand.Float64())
		if res.RetryAfter != nil {
			delay = *res.RetryAfter
		}
		log().Debug("job failed; will retry", "code", res.Code, "message", res.Message, "fail_count", j.FailCount+1, "delay", delay)
		err = d.retryStore(log, "retry job", func(ctx context.Context) error {
			return d.cfg.Store.JobRetry(ctx, &store.JobRetryParams{ID: j.ID, Node: d.cfg.Node, Delay: delay})
		})
		r.later()
	default:
		log().Info("job failed", "status", res.Status, "code", res.Code, "message", res.Message, "fail_count", j.FailCount+1)
		err = d.retryStore(log, "fail job", func(ctx context.Context) error {
			_, err := d.cfg.Store.JobFail(ctx, &store.JobFailParams{ID: j.ID, Node: d.cfg.Node, Status: res.Status, Code: res.Code, Message: res.Message, Keep: q.KeepFinished > 0})
			return err
		})
	}
	r.recorded(log, outcome, elapsed, err)
	return false
}

// recorded counts a delivery whose outcome the store recorded (err nil):
// a delivery whose outcome was lost is delivered, and counted, again.
func (r *runner) recorded(log func() *slog.Logger, outcome stats.Outcome, elapsed time.Duration, err error) {
	switch {
	case err == nil:
		r.d.cfg.Stats.Delivered(r.name, outcome, elapsed)
	case r.d.deliverCtx.Err() == nil:
		log().Warn("job was taken from this node before its outcome was recorded; it will be delivered again", "err", err)
	}
}

// jobLog is the runner's logger with a job's id, made when first asked
// for: most deliveries log nothing, and slog's With costs allocations.
type jobLog struct {
	r  *runner
	id int64
	l  *slog.Logger
}

func (jl *jobLog) get() *slog.Logger {
	if jl.l == nil {
		jl.l = jl.r.logger().With("job_id", jl.id)
	}
	return jl.l
}
