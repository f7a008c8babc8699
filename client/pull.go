package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rowq/rowq/rowqtype"
)

// Pull workers: a queue with "delivery": "pull" hands its jobs to workers
// that ask for them (POST /queue/{name}/lease) instead of POSTing them to
// a URL; each job is leased to the worker, which renews the lease with
// heartbeats and ends it with a completion (docs/workers.md). Lease is the
// request; Worker is a loop that pulls, runs a Handler on each job,
// heartbeats while it runs and completes the job by its result. These
// calls need a token with the work scope.

// Lease leases up to req.Max jobs of a pull queue (POST
// /queue/{name}/lease), waiting up to req.Wait seconds for a first one; it
// returns none when the wait ends first. A nil req takes the server's
// defaults: one job, no wait, a 60 s lease.
func (c *Client) Lease(ctx context.Context, queue string, req *rowqtype.LeaseRequest) ([]rowqtype.LeasedJob, error) {
	if req == nil {
		req = &rowqtype.LeaseRequest{}
	}
	var out rowqtype.LeasedJobs
	if err := c.Do(ctx, http.MethodPost, "/queue/"+esc(queue)+"/lease", nil, req, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Handler works on one pulled job. Returning nil completes the job with
// success; an error fails it, retried by the job's policy, unless it is
// (or wraps) a *PermanentError, which moves it to the failure log. ctx
// ends when the job's lease is lost (the job was cancelled, or the lease
// ran out and the job went to another worker): the handler should stop,
// and its result is not sent.
type Handler func(ctx context.Context, job *rowqtype.LeasedJob) error

// ResultHandler works one job like a Handler, and returns, with a success
// (a nil error), the job's result: any value encoding/json encodes (a
// json.RawMessage passes as it is), kept in the job's history where its
// queue keeps finished jobs and told to its callbacks (docs/lifecycle.md);
// nil for none.
type ResultHandler func(ctx context.Context, job *rowqtype.LeasedJob) (result any, err error)

// PermanentError fails a job for good: its Handler returned it, and the
// job is not retried.
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err so that the job fails for good.
func Permanent(err error) error { return &PermanentError{Err: err} }

// Worker pulls the jobs of one pull queue and runs Handler on each, up to
// Concurrency at once. While a handler runs, the job's lease is renewed
// every Lease/3; its result completes the job.
type Worker struct {
	Client *Client
	Queue  string
	// Handler, or ResultHandler for jobs that return a result: exactly
	// one of them.
	Handler       Handler
	ResultHandler ResultHandler
	// Concurrency bounds the jobs worked on at once (1).
	Concurrency int
	// Lease is each job's lease, renewed while its handler runs (60 s).
	// A worker that dies holding jobs loses them when it runs out: they
	// are then failures, retried by their policy.
	Lease time.Duration
	// Wait is how long a lease request waits for jobs (20 s, at most 30).
	Wait time.Duration
	// Logger logs what goes wrong (nil: nothing).
	Logger *slog.Logger
}

// Run pulls and works until ctx ends, then stops pulling and waits for
// the handlers in flight: they run to their end (their context is not
// ctx), keep their leases renewed and complete their jobs. It returns
// ctx's error, or, after the handlers in flight, the error of a lease
// request the server refused for good (a 4xx other than 429: no such
// queue, a push queue, a token without the scope), which asking again
// would not mend; other errors are retried with a backoff. A caller that
// cannot wait that long returns without
// waiting for Run: those jobs' leases then run out, and the jobs are
// retried.
func (w *Worker) Run(ctx context.Context) error {
	if w.Client == nil || w.Queue == "" || (w.Handler == nil) == (w.ResultHandler == nil) {
		return errors.New("rowq: Worker needs a Client, a Queue and one of Handler and ResultHandler")
	}
	n := max(w.Concurrency, 1)
	lease := w.Lease
	if lease <= 0 {
		lease = time.Minute
	}
	lease = max(lease, time.Second)
	wait := w.Wait
	if wait <= 0 {
		wait = 20 * time.Second
	}
	wait = min(wait, 30*time.Second)
	log := w.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("queue", w.Queue)

	slots := make(chan struct{}, n) // a token per job in flight
	var wg sync.WaitGroup
	defer wg.Wait()
	backoff := time.Duration(0)
	for ctx.Err() == nil {
		// Wait for a free slot, then ask for as many jobs as are free.
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		free := 1
		for free < min(n, 100) {
			select {
			case slots <- struct{}{}:
				free++
				continue
			default:
			}
			break
		}
		jobs, err := w.Client.Lease(ctx, w.Queue, &rowqtype.LeaseRequest{Max: &free, Wait: new(wait.Seconds()), Lease: new(lease.Seconds())})
		for range free - len(jobs) {
			<-slots
		}
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			var e *Error
			if errors.As(err, &e) && e.Status >= 400 && e.Status < 500 && e.Status != http.StatusTooManyRequests {
				log.Error("lease jobs refused; stopping", "err", err)
				wg.Wait()
				return fmt.Errorf("rowq: lease jobs of queue %q: %w", w.Queue, err)
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 10*time.Second)
			log.Warn("lease jobs failed; retrying", "err", err, "in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		for i := range jobs {
			j := &jobs[i]
			wg.Go(func() {
				defer func() { <-slots }()
				w.work(context.WithoutCancel(ctx), j, lease, log)
			})
		}
	}
	return ctx.Err()
}

// work runs the handler on j, heartbeats while it runs, and completes j by
// its result.
func (w *Worker) work(ctx context.Context, j *rowqtype.LeasedJob, lease time.Duration, log *slog.Logger) {
	log = log.With("job_id", j.ID)
	hctx, lost := context.WithCancel(ctx)
	defer lost()
	result := make(chan handled, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				result <- handled{err: fmt.Errorf("handler panicked: %v", p)}
			}
		}()
		result <- w.handle(hctx, j)
	}()
	beat := time.NewTicker(lease / 3)
	defer beat.Stop()
	secs := lease.Seconds()
	for {
		select {
		case h := <-result:
			if hctx.Err() == nil {
				w.complete(ctx, j, h, lease, log)
			}
			return
		case <-beat.C:
			_, err := w.Client.Heartbeat(ctx, j.ID, &rowqtype.JobHeartbeat{LeaseToken: j.LeaseToken, Lease: &secs})
			if reason := LeaseReason(err); reason != "" {
				log.Info("job's lease lost; its handler is told to stop", "reason", reason)
				lost()
				beat.Stop()
			} else if err != nil {
				log.Warn("heartbeat failed; trying again at the next", "err", err)
			}
		}
	}
}

// handled is what a handler returned.
type handled struct {
	result any
	err    error
}

func (w *Worker) handle(ctx context.Context, j *rowqtype.LeasedJob) handled {
	if w.ResultHandler != nil {
		v, err := w.ResultHandler(ctx, j)
		return handled{v, err}
	}
	return handled{err: w.Handler(ctx, j)}
}

// maxCompletionMessage is where a completion's message is cut, in bytes.
// The server refuses a message longer than 4096 bytes (MaxLeaseMessage in
// internal/validate; a test checks the cut is not above it), and a
// refused completion leaves the job to wait out its lease. Any cut up to
// 4096 would do, as a cut message is never longer than the cut; 4000 is
// the Python client's cut too (MAX_MESSAGE).
const maxCompletionMessage = 4000

// completionMessage is msg as the server gets it, at most
// maxCompletionMessage bytes: invalid UTF-8 is replaced first, as JSON
// would send it (each bad byte a 3-byte U+FFFD), so that what is measured
// is what is sent; then it is cut on a character's boundary.
func completionMessage(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	if len(msg) > maxCompletionMessage {
		msg = strings.ToValidUTF8(msg[:maxCompletionMessage], "")
	}
	return msg
}

// complete reports what the handler returned, trying again while the
// server is away, for at most the lease. A result that cannot be encoded,
// or that the server refuses as too large (413), is dropped with a note in
// the message, and the success stands, as rowq does for a push worker's.
func (w *Worker) complete(ctx context.Context, j *rowqtype.LeasedJob, h handled, lease time.Duration, log *slog.Logger) {
	done := &rowqtype.JobCompletion{LeaseToken: j.LeaseToken, Status: "success"}
	var perm *PermanentError
	switch err := h.err; {
	case errors.As(err, &perm):
		done.Status, done.Message = "permanent-failure", err.Error()
	case err != nil:
		done.Status, done.Message = "failure", err.Error()
	case h.result != nil:
		b, err := json.Marshal(h.result)
		if err != nil {
			done.Message = "result dropped: " + err.Error()
		} else if string(b) != "null" {
			done.Result = b
		}
	}
	done.Message = completionMessage(done.Message)
	wait := 100 * time.Millisecond
	for deadline := time.Now().Add(lease); ; {
		_, err := w.Client.Complete(ctx, j.ID, done)
		if err == nil {
			return
		}
		if reason := LeaseReason(err); reason != "" {
			log.Info("job's lease lost before its completion", "reason", reason, "status", done.Status)
			return
		}
		var e *Error
		if errors.As(err, &e) && e.Status == http.StatusRequestEntityTooLarge && done.Result != nil {
			log.Warn("job's result refused as too large; completing without it", "bytes", len(done.Result))
			done.Message = completionMessage(fmt.Sprintf("result dropped: %d bytes, refused by the server as too large", len(done.Result)))
			done.Result = nil
			continue
		}
		if time.Now().Add(wait).After(deadline) {
			log.Warn("complete job failed; its lease runs out and it is retried", "err", err)
			return
		}
		time.Sleep(wait)
		wait = min(2*wait, 5*time.Second)
	}
}
