package dispatch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// busyWorker answers every delivery with its code and Retry-After.
type busyWorker struct {
	*httptest.Server
	mu         sync.Mutex
	code       int
	retryAfter string
	got        int
}

func newBusyWorker(t *testing.T) *busyWorker {
	w := &busyWorker{code: http.StatusOK}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		code, ra := w.code, w.retryAfter
		w.got++
		w.mu.Unlock()
		if ra != "" {
			rw.Header().Set("Retry-After", ra)
		}
		rw.WriteHeader(code)
		if code == http.StatusOK {
			rw.Write([]byte(`{"status":"success"}`))
			return
		}
		rw.Write([]byte(`<html>busy</html>`))
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *busyWorker) answer(code int, retryAfter string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.code, w.retryAfter = code, retryAfter
}

func (w *busyWorker) deliveries() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.got
}

// flowSetup is a store, a dispatcher that is not started, a runner of
// queue q (jobs with no retry left), and a worker.
type flowSetup struct {
	s store.Store
	r *runner
	w *busyWorker
}

func newFlowSetup(t *testing.T, dialect string) *flowSetup {
	s := dbtest.Open(t, dialect)
	q, err := s.QueuePut(context.Background(), &store.Queue{Name: "q", PollingInterval: 200, MaxWorkers: 4})
	if err != nil {
		t.Fatal(err)
	}
	d := New(Config{Store: s, Node: "n1"})
	t.Cleanup(func() { d.Stop(context.Background()) })
	return &flowSetup{s: s, r: newRunner(d, q), w: newBusyWorker(t)}
}

// grabNew inserts a job for the worker (max_retries 0) and grabs it.
func (fs *flowSetup) grabNew(t *testing.T) *store.Job {
	t.Helper()
	ctx := context.Background()
	if _, err := fs.s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: fs.w.URL, Timeout: 5, RetryDelay: 1}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := fs.s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("grab: %v, %d jobs", err, len(jobs))
	}
	return jobs[0]
}

// stored returns the job as stored, or nil once it left the jobs table.
func (fs *flowSetup) stored(t *testing.T, id int64) *store.Job {
	t.Helper()
	j, err := fs.s.JobGet(context.Background(), "q", id)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// putBack checks that job id is waiting with no retry spent and the
// given deferrals, and returns how long until it is due.
func (fs *flowSetup) putBack(t *testing.T, id int64, deferrals int) time.Duration {
	t.Helper()
	now, err := fs.s.Now(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	j := fs.stored(t, id)
	if j == nil || j.State != store.StateWaiting || j.FailCount != 0 || j.Deferrals != deferrals {
		t.Fatalf("job = %+v, want waiting, fail_count 0, deferrals %d", j, deferrals)
	}
	return j.NextTry.Sub(now)
}

// failed returns the failure log entry of job id, or nil.
func (fs *flowSetup) failed(t *testing.T, id int64) *store.FailedJob {
	t.Helper()
	fj, err := fs.s.FailedJobsList(context.Background(), &store.FailedJobsListParams{Queue: "q", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fj {
		if f.JobID == id {
			return f
		}
	}
	return nil
}

// TestProcess_WorkerBusy: a 429 or 503 with Retry-After (seconds or an
// HTTP date) defers the job without spending a retry (it has none) and
// slows its host; one without Retry-After is an ordinary failure; a job
// deferred maxDeferrals times fails on the next such answer.
func TestProcess_WorkerBusy(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		fs := newFlowSetup(t, dialect)
		ctx := context.Background()

		fs.w.answer(http.StatusTooManyRequests, "2")
		j := fs.grabNew(t)
		first := j.ID
		fs.r.process(j)
		if wait := fs.putBack(t, j.ID, 1); wait < time.Second || wait > 2*time.Second {
			t.Fatalf("deferred job due in %v, want about 2s", wait)
		}
		if hs := fs.r.flow.snapshot(); len(hs) != 1 || hs[0].Rate == nil || hs[0].Host != hostKey(fs.w.URL) {
			t.Fatalf("after a 429 the hosts are %+v, want the worker's, slowed", hs)
		}

		// An HTTP date, on a 503.
		fs.w.answer(http.StatusServiceUnavailable, time.Now().Add(3*time.Second).UTC().Format(http.TimeFormat))
		j = fs.grabNew(t)
		fs.r.process(j)
		if wait := fs.putBack(t, j.ID, 1); wait < time.Second {
			t.Fatalf("after 503 with an HTTP date: job due in %v, want about 3s", wait)
		}
		// Out of the way of the grabs below, once due.
		for _, id := range []int64{first, j.ID} {
			if _, err := fs.s.JobDelete(ctx, "q", id); err != nil {
				t.Fatal(err)
			}
		}

		// Without Retry-After: an ordinary failure, here the last.
		fs.w.answer(http.StatusTooManyRequests, "")
		j = fs.grabNew(t)
		fs.r.process(j)
		if got := fs.stored(t, j.ID); got != nil {
			t.Fatalf("after 429 without Retry-After: job = %+v, want it in the failure log", got)
		}
		if f := fs.failed(t, j.ID); f == nil || f.Code != http.StatusTooManyRequests {
			t.Fatalf("failure log entry of the 429 = %+v", f)
		}

		// A job deferred maxDeferrals times already.
		j = fs.grabNew(t)
		for i := range maxDeferrals {
			if _, err := fs.s.JobsDefer(ctx, &store.JobsDeferParams{Node: "n1", Jobs: []store.JobDelay{{ID: j.ID}}, Count: true}); err != nil {
				t.Fatal(err)
			}
			jobs, err := fs.s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Minute})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("grab after deferral %d: %v, %d jobs", i+1, err, len(jobs))
			}
			j = jobs[0]
		}
		if j.Deferrals != maxDeferrals {
			t.Fatalf("deferrals = %d, want %d", j.Deferrals, maxDeferrals)
		}
		fs.w.answer(http.StatusTooManyRequests, "1")
		fs.r.process(j)
		if got := fs.stored(t, j.ID); got != nil {
			t.Fatalf("after its 21st 429: job = %+v, want it in the failure log", got)
		}
		if f := fs.failed(t, j.ID); f == nil || !strings.Contains(f.Message, "deferrals") {
			t.Fatalf("failure log entry after 20 deferrals = %+v", f)
		}
	})
}

// TestWork_HoldsJobsOfAHostInTrouble: a job whose host's breaker is open
// is not delivered: it goes back to waiting until the breaker half-opens,
// with no retry spent and no deferral counted, and its slot comes free.
func TestWork_HoldsJobsOfAHostInTrouble(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		fs := newFlowSetup(t, dialect)
		j := fs.grabNew(t)
		fs.r.flow.hosts = map[string]*hostState{hostKey(fs.w.URL): {state: store.BreakerOpen, fails: 5, until: time.Now().Add(time.Minute)}}
		fs.r.flow.n.Store(1)
		fs.r.slots.inflight.Store(1)
		fs.r.work(j)
		if n := fs.w.deliveries(); n != 0 {
			t.Fatalf("the worker got %d deliveries from a host held back", n)
		}
		if n := fs.r.slots.inflight.Load(); n != 0 {
			t.Fatalf("slots taken after the hold = %d", n)
		}
		if wait := fs.putBack(t, j.ID, 0); wait < 50*time.Second {
			t.Fatalf("held job due in %v, want when the breaker half-opens (about 1 min)", wait)
		}
	})
}
