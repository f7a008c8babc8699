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
	"github.com/rowq/rowq/internal/testworker"
)

// busyWorker answers every delivery with its code and Retry-After, or
// hangs up with no answer when its code is 0; the answer to the delivery
// that takes gate waits until it is closed.
type busyWorker struct {
	*httptest.Server
	mu         sync.Mutex
	code       int
	retryAfter string
	got        int
	gate       chan struct{}
}

func newBusyWorker(t *testing.T) *busyWorker {
	w := &busyWorker{code: http.StatusOK}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		code, ra, gate := w.code, w.retryAfter, w.gate
		w.got++
		w.gate = nil
		w.mu.Unlock()
		if gate != nil {
			<-gate
		}
		if code == 0 {
			if c, _, err := http.NewResponseController(rw).Hijack(); err == nil {
				c.Close()
			}
			return
		}
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

// holdNext makes the answer to the next delivery wait until the function
// it returns is called, or the test ends.
func (w *busyWorker) holdNext(t *testing.T) (answer func()) {
	g := make(chan struct{})
	w.mu.Lock()
	defer w.mu.Unlock()
	w.gate = g
	answer = sync.OnceFunc(func() { close(g) })
	t.Cleanup(answer) // before the worker's Close, which waits for it
	return answer
}

// TestWork_BreakerOpensHoldsAndAProbeCloses: breakerThreshold deliveries
// that get no answer (the host hangs up) open the host's breaker, and the
// next job is held back undelivered, with no retry spent, until the
// breaker half-opens; then one job goes as the probe, another is held for
// probeWait while it runs, and the probe's answer closes the breaker: the
// next job goes.
func TestWork_BreakerOpensHoldsAndAProbeCloses(t *testing.T) {
	fs := newFlowSetup(t, "sqlite")
	r := fs.r
	work := func(j *store.Job) {
		r.takeSlots(1)
		r.work(j) // gives the slot back
	}
	fs.w.answer(0, "")
	for range breakerThreshold {
		work(fs.grabNew(t))
	}
	held := fs.grabNew(t)
	work(held)
	if got, want := fs.w.deliveries(), breakerThreshold; got != want {
		t.Fatalf("the host got %d deliveries, want %d: none once its breaker opened", got, want)
	}
	if wait := fs.putBack(t, held.ID, 0); wait < defaultBreakerOpen-10*time.Second {
		t.Fatalf("job held by the open breaker is due in %v, want about %v", wait, defaultBreakerOpen)
	}

	// The breaker's time is up: it half-opens at the next job.
	r.flow.mu.Lock()
	r.flow.hosts[hostKey(fs.w.URL)].until = time.Now()
	r.flow.mu.Unlock()
	fs.w.answer(http.StatusOK, "")
	answer := fs.w.holdNext(t)
	probe := fs.grabNew(t)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		work(probe)
	}()
	testworker.WaitFor(t, 30*time.Second, "the probe at the worker", func() bool { return fs.w.deliveries() == breakerThreshold+1 })
	beside := fs.grabNew(t)
	work(beside)
	if wait := fs.putBack(t, beside.ID, 0); wait <= 0 || wait > probeWait+time.Second {
		t.Fatalf("job beside the probe is due in %v, want within %v", wait, probeWait)
	}
	answer()
	<-probed
	if n := r.flow.n.Load(); n != 0 {
		t.Fatalf("%d hosts in trouble after the probe was answered, want none", n)
	}
	work(fs.grabNew(t))
	if got, want := fs.w.deliveries(), breakerThreshold+2; got != want {
		t.Fatalf("the host got %d deliveries, want %d: the probe and the job after it", got, want)
	}
}
