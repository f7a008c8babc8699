package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// cancelJob cancels a job through node s and returns the answer.
func cancelJob(t *testing.T, s *server.Server, q string, id int64) (int, map[string]any) {
	t.Helper()
	return call(t, s, "POST", fmt.Sprintf("/queue/%s/job/%d/cancel", q, id), nil)
}

// waitCancels waits until the queue's statistics count n cancels.
func waitCancels(t *testing.T, s *server.Server, q string, n int) {
	t.Helper()
	testworker.WaitFor(t, 10*time.Second, fmt.Sprintf("%d cancels counted", n), func() bool {
		_, st := call(t, s, "GET", "/queue/"+q+"/stats", nil)
		return st["total_cancels"] == float64(n)
	})
}

// TestCancel_WaitingAndDeferredRemoved: a waiting or deferred job is
// removed and never delivered; a second cancel answers 404.
func TestCancel_WaitingAndDeferredRemoved(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		mustCall(t, s, "POST", "/queue/q/pause", nil) // so that the due job waits
		waiting := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "waiting"})
		deferred := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "deferred", "run_after": 3600})
		for _, id := range []int64{waiting, deferred} {
			code, out := cancelJob(t, s, "q", id)
			if code != 200 || out["status"] != "claimed" || out["id"] != float64(id) {
				t.Fatalf("cancel job %d: %d %v, want 200 with the claimed job", id, code, out)
			}
			if code, _ := jobState(t, s, "q", id); code != 404 {
				t.Fatalf("cancelled job %d: GET answered %d, want 404", id, code)
			}
			if code, out := cancelJob(t, s, "q", id); code != 404 {
				t.Fatalf("second cancel of job %d: %d %v, want 404", id, code, out)
			}
		}
		if code, out := cancelJob(t, s, "nope", waiting); code != 404 {
			t.Fatalf("cancel in a missing queue: %d %v, want 404", code, out)
		}
		mustCall(t, s, "POST", "/queue/q/resume", nil)
		waitCancels(t, s, "q", 2)
		time.Sleep(500 * time.Millisecond)
		if n := w.Distinct(); n != 0 {
			t.Fatalf("cancelled jobs delivered: %d", n)
		}
	})
}

// blocking is a worker whose requests block until their node aborts them
// (or a minute passes), and that reports each abort.
type blocking struct {
	*httptest.Server
	mu       sync.Mutex
	arrived  map[string]int
	aborted  chan string
	answered chan string
}

func newBlocking(t *testing.T) *blocking {
	b := &blocking{arrived: map[string]int{}, aborted: make(chan string, 16), answered: make(chan string, 16)}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body: only then does the server notice a client that
		// went away.
		io.Copy(io.Discard, r.Body)
		id := r.Header.Get("Rowq-Job-Id")
		b.mu.Lock()
		b.arrived[id]++
		b.mu.Unlock()
		select {
		case <-r.Context().Done():
			b.aborted <- id
		case <-time.After(time.Minute):
			b.answered <- id
			fmt.Fprint(w, `{"status":"failure"}`)
		}
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *blocking) deliveries(id int64) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.arrived[fmt.Sprint(id)]
}

// TestCancel_AbortsDeliveryInFlight: a job whose delivery runs is cancelled
// through the node that delivers it and through another node: both
// requests are aborted, and neither job is delivered again.
func TestCancel_AbortsDeliveryInFlight(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := newBlocking(t)
		url := dbtest.URL(t, dialect)
		a := startNode(t, url, steadyLeader)
		setupQueue(t, a, "q", "cat", map[string]any{"max_workers": 5})
		waitLeads(t, 10*time.Second, a, "q", a)
		b := startNode(t, url, steadyLeader)
		for _, via := range []*server.Server{a, b} {
			id := push(t, a, "cat", map[string]any{"url": w.URL, "payload": "slow", "max_retries": 3, "retry_delay": 0})
			testworker.WaitFor(t, 10*time.Second, "the delivery", func() bool { return w.deliveries(id) == 1 })
			code, out := cancelJob(t, via, "q", id)
			if code != 200 || out["status"] != "grabbed" {
				t.Fatalf("cancel job %d: %d %v, want 200 with the grabbed job", id, code, out)
			}
			select {
			case got := <-w.aborted:
				if got != fmt.Sprint(id) {
					t.Fatalf("aborted the delivery of job %s, want %d", got, id)
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("the delivery of job %d cancelled through %s was not aborted", id, via.NodeID())
			}
			time.Sleep(500 * time.Millisecond)
			if n := w.deliveries(id); n != 1 {
				t.Fatalf("cancelled job %d delivered %d times", id, n)
			}
			if code, _ := jobState(t, a, "q", id); code != 404 {
				t.Fatalf("cancelled job %d: GET answered %d, want 404", id, code)
			}
		}
		waitCancels(t, a, "q", 2)
	})
}

// TestCancel_AcceptedJobLearnsOnHeartbeat: a job a worker accepted is
// cancelled; its next heartbeat and completion answer 409 "cancelled", and
// it is not delivered again.
func TestCancel_AcceptedJobLearnsOnHeartbeat(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := accepting(t, 60)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "long", "max_retries": 3, "retry_delay": 0})
		waitLeased(t, s, "q", id)
		if code, out := cancelJob(t, s, "q", id); code != 200 || out["status"] != "leased" {
			t.Fatalf("cancel: %d %v, want 200 with the leased job", code, out)
		}
		tok := leaseToken(t, w, "long", 0)
		for _, req := range []struct {
			path string
			body map[string]any
		}{
			{"heartbeat", map[string]any{"lease_token": tok, "lease": 60}},
			{"complete", map[string]any{"lease_token": tok, "status": "success"}},
			{"heartbeat", map[string]any{"lease_token": tok, "lease": 60}},
		} {
			code, out := call(t, s, "POST", fmt.Sprintf("/job/%d/%s", id, req.path), req.body)
			if code != 409 || out["reason"] != "cancelled" {
				t.Fatalf("%s after the cancel: %d %v, want 409 cancelled", req.path, code, out)
			}
		}
		waitCancels(t, s, "q", 1)
		if n := w.Count("long"); n != 1 {
			t.Fatalf("cancelled job delivered %d times", n)
		}
	})
}

// TestCancel_RacesCompletion cancels accepted jobs while their worker
// completes them: for each job exactly one wins, the loser learns it, and
// the statistics count each job once.
func TestCancel_RacesCompletion(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const n = 20
		w := accepting(t, 60)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": n})
		ids := make([]int64, n)
		for i := range ids {
			ids[i] = push(t, s, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprint("job-", i)})
		}
		for _, id := range ids {
			waitLeased(t, s, "q", id)
		}
		type result struct {
			cancel, complete int
			reason           any
		}
		results := make([]result, n)
		var wg sync.WaitGroup
		for i, id := range ids {
			tok := leaseToken(t, w, fmt.Sprint("job-", i), 0)
			wg.Go(func() { results[i].cancel, _ = cancelJob(t, s, "q", id) })
			wg.Go(func() {
				var out map[string]any
				results[i].complete, out = call(t, s, "POST", fmt.Sprintf("/job/%d/complete", id), map[string]any{"lease_token": tok, "status": "success"})
				results[i].reason = out["reason"]
			})
		}
		wg.Wait()
		cancels, successes := 0, 0
		for i, r := range results {
			switch {
			case r.cancel == 200 && r.complete == 409 && r.reason == "cancelled":
				cancels++
			case r.complete == 200 && r.cancel == 404:
				successes++
			default:
				t.Fatalf("job %d: cancel %d, complete %d (%v): want exactly one to win", ids[i], r.cancel, r.complete, r.reason)
			}
		}
		waitCancels(t, s, "q", cancels)
		_, st := call(t, s, "GET", "/queue/q/stats", nil)
		if st["total_successes"] != float64(successes) {
			t.Fatalf("stats count %v successes, want %d (and %d cancels)", st["total_successes"], successes, cancels)
		}
		t.Logf("%d cancels won, %d completions won", cancels, successes)
	})
}
