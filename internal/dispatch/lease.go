package dispatch

import (
	"context"
	"crypto/hmac"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/stats"
	"github.com/rowq/rowq/internal/store"
)

// Leases: a worker may answer a delivery with {"status": "accepted",
// "lease": SECONDS}. The job is then leased (store.StateLeased) until the
// database's now + lease: it belongs to the row, not to the node that
// delivered it, so no node extends it with its grabs, no rescue takes it
// while the lease holds, and a change of leadership leaves it alone. The
// worker renews it (Heartbeat) and ends it (Complete) through any node,
// naming the delivery with the lease token every delivery carries
// (Rowq-Lease-Token). A lease that runs out is a failure, retried by the
// job's policy (expireLeases). An accepted job gives its worker slot back:
// max_workers bounds the requests in flight, as Cloud Tasks'
// max_concurrent_dispatches does, and a worker that accepts decides how
// much it takes on (docs/workers.md).
//
// The lease token is "<grabs>.<mac>": the job's grab count (store.Job.Grabs,
// written by the grab's own statement) and an HMAC-SHA256 of the job id and
// that count with the key the nodes share (Config.LeaseKey), cut to 128
// bits. It costs a delivery no write, any node verifies it without a read,
// and a heartbeat or completion checks it against the row with one
// compare-and-set on (id, grabs, state): a job rescued and grabbed again has
// a new count, so the old delivery's token holds it no more.

// LeaseKeySecret names the key that signs lease tokens among the secrets
// the nodes of a database share (store.SecretStore).
const LeaseKeySecret = "lease-key"

// StatusAccepted is the worker's answer that it took the job and will
// complete it later (POST /job/{id}/complete).
const StatusAccepted = "accepted"

// MaxLease bounds a lease, in an accepted answer or a heartbeat.
const MaxLease = 24 * time.Hour

// LeaseTokenHeader carries a delivery's lease token.
const LeaseTokenHeader = "Rowq-Lease-Token"

// resultsKept is how long a completion's result is kept, so that the same
// completion sent again answers the same (JobResultsPurge).
const resultsKept = time.Hour

// expireBatch bounds the expired leases one rescue handles.
const expireBatch = 100

// Reasons a heartbeat or completion is refused (LeaseError.Reason).
const (
	// LeaseLost: the lease is no longer held: it ran out (the job was
	// retried or failed), the job was grabbed again, deleted, or the token
	// is not the token of a delivery of this job.
	LeaseLost = "lease_lost"
	// LeaseCompleted: the delivery was already completed with another
	// result.
	LeaseCompleted = "completed"
	// LeaseCancelled: the job was cancelled.
	LeaseCancelled = "cancelled"
)

// LeaseError refuses a heartbeat or a completion: the worker should stop
// working on the job (HTTP 409).
type LeaseError struct {
	Reason string // LeaseLost, LeaseCompleted or LeaseCancelled
	Msg    string
}

func (e *LeaseError) Error() string { return e.Msg }

// ErrLeaseToken is a lease token that is not of the form rowq gives.
var ErrLeaseToken = errors.New("not a lease token rowq gave")

// newLeaseKey returns a random key, for a dispatcher given none: its
// tokens verify on its own node only.
func newLeaseKey() []byte {
	k := make([]byte, 32)
	_, _ = crand.Read(k)
	return k
}

// leaseToken returns the lease token of grab grabs of job id.
func (d *Dispatcher) leaseToken(id int64, grabs int) string {
	b := make([]byte, 0, 40)
	b = strconv.AppendInt(b, int64(grabs), 10)
	b = append(b, '.')
	return string(base64.RawURLEncoding.AppendEncode(b, d.leaseMAC(id, grabs)))
}

// leaseMAC is the signature of grab grabs of job id: every delivery
// computes one, so the HMACs are pooled rather than made anew.
func (d *Dispatcher) leaseMAC(id int64, grabs int) []byte {
	m, _ := d.macs.Get().(hash.Hash)
	if m == nil {
		m = hmac.New(sha256.New, d.cfg.LeaseKey)
	}
	defer d.macs.Put(m)
	m.Reset()
	var b [48]byte
	msg := append(b[:0], "rowq-lease:"...)
	msg = strconv.AppendInt(msg, id, 10)
	msg = append(msg, ':')
	msg = strconv.AppendInt(msg, int64(grabs), 10)
	m.Write(msg)
	return m.Sum(nil)[:16]
}

// leaseGrab returns the grab a lease token of job id names:
// ErrLeaseToken for a token of the wrong form, a LeaseError for one whose
// signature is not this job's.
func (d *Dispatcher) leaseGrab(id int64, token string) (int, error) {
	n, mac, ok := strings.Cut(token, ".")
	grabs, err := strconv.Atoi(n)
	sum, err2 := base64.RawURLEncoding.DecodeString(mac)
	if !ok || err != nil || err2 != nil || grabs < 1 || len(sum) != 16 {
		return 0, ErrLeaseToken
	}
	if !hmac.Equal(sum, d.leaseMAC(id, grabs)) {
		return 0, &LeaseError{Reason: LeaseLost, Msg: fmt.Sprintf("lease_token: not the token of a delivery of job %d", id)}
	}
	return grabs, nil
}

// Beat is a worker's heartbeat for an accepted job.
type Beat struct {
	ID       int64
	Token    string
	Lease    time.Duration // 1 s .. MaxLease
	Progress *float64      // 0..1; nil keeps the last
	Message  *string       // nil keeps the last
}

// Heartbeat renews the lease of an accepted (or still delivered) job to
// now + b.Lease and returns the new expiry; a *LeaseError when the token
// does not hold the job.
func (d *Dispatcher) Heartbeat(ctx context.Context, b *Beat) (time.Time, error) {
	grabs, err := d.leaseGrab(b.ID, b.Token)
	if err != nil {
		return time.Time{}, err
	}
	msg := b.Message
	if msg != nil {
		m := truncate(*msg)
		msg = &m
	}
	until, err := d.cfg.Store.JobLease(ctx, &store.JobLeaseParams{ID: b.ID, Grabs: grabs, Lease: b.Lease, Progress: b.Progress, Message: msg})
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, d.whyNotHeld(ctx, b.ID, grabs, "")
	}
	return until, err
}

// LeaseQueue returns the queue of the job a lease token holds, or "" when
// it holds none (the API's queue confinement); ErrLeaseToken or a
// *LeaseError for a token that is not one of this job's.
func (d *Dispatcher) LeaseQueue(ctx context.Context, id int64, token string) (string, error) {
	grabs, err := d.leaseGrab(id, token)
	if err != nil {
		return "", err
	}
	j, err := d.cfg.Store.JobHeld(ctx, id, grabs)
	if errors.Is(err, store.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return j.Queue, nil
}

// Completion is a worker's result for an accepted job.
type Completion struct {
	ID         int64
	Token      string
	Status     string // StatusSuccess, StatusFailure or StatusPermanentFailure
	Message    string
	RetryAfter *time.Duration // a failure's retry delay; nil: the job's backoff
	// Result is a success's result, kept with Message in the job's
	// history when its queue keeps finished jobs; nil for none.
	Result json.RawMessage
}

// Complete records a worker's result for the delivery its token names, as
// a synchronous answer would have been: success deletes the job, a failure
// with retries left puts it back after RetryAfter or the job's backoff,
// anything else moves it to the failure log. The same completion sent
// again succeeds again; a *LeaseError when the token no longer holds the
// job, or it was completed with another result.
func (d *Dispatcher) Complete(ctx context.Context, c *Completion) error {
	grabs, err := d.leaseGrab(c.ID, c.Token)
	if err != nil {
		return err
	}
	if c.Status == StatusSuccess {
		// Successes, the most common result, go many to a transaction.
		queue, err := d.succeed.Do(ctx, success{grab: store.JobGrab{ID: c.ID, Grabs: grabs}, message: truncate(c.Message), result: c.Result})
		if err != nil {
			return err
		}
		if queue == "" {
			return d.whyNotHeld(ctx, c.ID, grabs, c.Status)
		}
		d.cfg.Stats.Delivered(queue, stats.Success, 0)
		d.leaseEnded(queue, store.JobGrab{ID: c.ID, Grabs: grabs})
		return nil
	}
	// The job's settings decide between a retry and the failure log.
	p := &store.JobFinishParams{ID: c.ID, Grabs: grabs, Status: c.Status, Message: truncate(c.Message), Result: c.Result}
	j, err := d.cfg.Store.JobHeld(ctx, c.ID, grabs)
	if errors.Is(err, store.ErrNotFound) {
		return d.whyNotHeld(ctx, c.ID, grabs, c.Status)
	}
	if err != nil {
		return err
	}
	outcome := d.failOutcome(p, j, c.Status, c.RetryAfter)
	queue, err := d.cfg.Store.JobFinish(ctx, p)
	if errors.Is(err, store.ErrNotFound) {
		return d.whyNotHeld(ctx, c.ID, grabs, c.Status)
	}
	if err != nil {
		return err
	}
	d.cfg.Stats.Delivered(queue, outcome, 0)
	d.leaseEnded(queue, store.JobGrab{ID: c.ID, Grabs: grabs})
	if p.Outcome == store.FinishRetry {
		d.Later(queue)
	}
	return nil
}

// failOutcome sets p's outcome for a failure of j with status: a retry
// after retryAfter or the job's backoff while retries are left, else the
// failure log. It returns the outcome to count.
func (d *Dispatcher) failOutcome(p *store.JobFinishParams, j *store.Job, status string, retryAfter *time.Duration) stats.Outcome {
	if status == StatusFailure && j.FailCount < j.MaxRetries {
		p.Outcome, p.Delay = store.FinishRetry, retryDelay(j, j.FailCount+1, rand.Float64())
		if retryAfter != nil {
			p.Delay = *retryAfter
		}
		return stats.Failure
	}
	p.Outcome = store.FinishFail
	return stats.PermanentFailure
}

// whyNotHeld explains why grab grabs of job id does not hold it: a
// cancelled job LeaseCancelled, a completion with status that was recorded
// answers nil (the same completion again), another result LeaseCompleted,
// anything else LeaseLost.
func (d *Dispatcher) whyNotHeld(ctx context.Context, id int64, grabs int, status string) error {
	got, err := d.cfg.Store.JobResult(ctx, id, grabs)
	switch {
	case err == nil && got == store.ResultCancelled:
		return &LeaseError{Reason: LeaseCancelled, Msg: fmt.Sprintf("job %d was cancelled", id)}
	case err == nil && status != "" && got == status:
		return nil
	case err == nil:
		return &LeaseError{Reason: LeaseCompleted, Msg: fmt.Sprintf("job %d: this delivery was completed with %q", id, got)}
	case errors.Is(err, store.ErrNotFound):
		return &LeaseError{Reason: LeaseLost, Msg: fmt.Sprintf("job %d: the lease is no longer held (it ran out, or the job was delivered again or deleted)", id)}
	}
	return err
}

// accept records a worker's "accepted": the job is leased for lease. A
// job the worker completed before its answer came (or that is no longer
// this node's) is left as it is.
func (r *runner) accept(j *store.Job, lease time.Duration) error {
	d := r.d
	err := d.retryStore(r.logger, "record accepted job", func(ctx context.Context) error {
		_, err := d.cfg.Store.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: j.Grabs, Lease: lease})
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // completed already, or taken from this node
	}
	return err
}

// expireLeases fails the queue's jobs whose lease ran out: each is retried
// by its policy, or moved to the failure log, with "lease expired".
func (r *runner) expireLeases() {
	d := r.d
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	jobs, err := d.cfg.Store.JobsLeaseExpired(ctx, &store.JobsLeaseExpiredParams{Queue: r.name, Limit: expireBatch})
	if err != nil {
		r.storeErr("find expired leases", err)
		return
	}
	retried := false
	for _, j := range jobs {
		p := &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Status: StatusFailure, Message: "lease expired", Expired: true}
		outcome := d.failOutcome(p, j, StatusFailure, nil)
		if _, err := d.cfg.Store.JobFinish(ctx, p); err != nil {
			if !errors.Is(err, store.ErrNotFound) { // renewed or completed meanwhile
				r.storeErr("fail expired lease", err)
			}
			continue
		}
		r.logger().Info("lease expired", "job_id", j.ID, "fail_count", j.FailCount+1, "retry", p.Outcome == store.FinishRetry)
		d.cfg.Stats.Delivered(r.name, outcome, 0)
		r.leaseEnded(store.JobGrab{ID: j.ID, Grabs: j.Grabs})
		retried = retried || p.Outcome == store.FinishRetry
	}
	if retried {
		r.nudge() // a retry without delay is due now; a later one is looked at when the runner parks
	}
}

// delivery is a delivery running on this node (Dispatcher.deliveries).
type delivery struct {
	cancel context.CancelCauseFunc
}

// errCancelled is the cause of a delivery aborted because its job was
// cancelled.
var errCancelled = errors.New("job cancelled")

// JobCancelled tells that job j was cancelled (the cancel has committed,
// and removed it; j is the job as it was): it is counted; if a node held
// it (grabbed: its grabbed_by), that delivery is aborted, here or through
// a nudge to the queue's leader, which is the node that delivers the
// queue's jobs but for the moments after a change of leadership; if it was
// leased to a puller, its worker slot comes free.
func (d *Dispatcher) JobCancelled(j *store.Job) {
	d.cfg.Stats.Cancelled(j.Queue)
	switch {
	case j.State == store.StateLeased:
		d.leaseEnded(j.Queue, store.JobGrab{ID: j.ID, Grabs: j.Grabs})
	case j.State != store.StateGrabbed:
	case j.GrabbedBy == d.cfg.Node:
		d.Abort(j.Queue, j.ID)
	case d.cfg.Nudger != nil:
		d.cfg.Nudger.Cancel(j.Queue, j.ID)
	}
}

// Abort aborts the delivery of job id of queue if it runs on this node,
// or drops it from the jobs parked behind their key (keys.go), and
// reports whether it did. The job must be gone (cancelled): the aborted
// delivery records no outcome.
func (d *Dispatcher) Abort(queue string, id int64) bool {
	v, ok := d.deliveries.Load(id)
	if ok {
		v.(*delivery).cancel(errCancelled)
		return true
	}
	r := d.runner(queue)
	return r != nil && r.unparkCancelled(id)
}

// purgeResults deletes the completion results older than resultsKept.
func (d *Dispatcher) purgeResults() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.cfg.Store.JobResultsPurge(ctx, resultsKept); err != nil {
		d.log.Debug("purge job results failed", "err", err)
	}
}
