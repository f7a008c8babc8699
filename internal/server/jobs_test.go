package server_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestServer_PauseHoldsJobsAndResumeDispatches pauses a queue: it accepts
// jobs but delivers none until resumed, and then delivers in priority order.
func TestServer_PauseHoldsJobsAndResumeDispatches(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 1, "polling_interval": 50})
		// Wait until this node leads the queue, so that a delivery would show.
		waitLeads(t, 10*time.Second, s, "q", nil)
		if out := mustCall(t, s, "POST", "/queue/q/pause", nil); out["paused"] != true {
			t.Fatalf("pause answered %v", out)
		}
		for i, p := range []int{-5, 0, 10, 3} {
			push(t, s, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("p%d-%d", p, i), "priority": p})
		}
		time.Sleep(time.Second) // many polls: room for a wrong delivery to show
		if n := w.Distinct(); n != 0 {
			t.Fatalf("paused queue delivered %d jobs", n)
		}
		if out := mustCall(t, s, "POST", "/queue/q/resume", nil); out["paused"] != false {
			t.Fatalf("resume answered %v", out)
		}
		testworker.WaitFor(t, 20*time.Second, "4 deliveries after resume", func() bool { return w.Distinct() == 4 })
		if got, want := fmt.Sprint(w.Arrivals()), "[p10-2 p3-3 p0-1 p-5-0]"; got != want {
			t.Fatalf("delivery order %s, want %s (priority, highest first)", got, want)
		}
	})
}

// TestServer_RetryAfterOverridesDelay has a worker ask for a retry in one
// second of a job whose retry_delay is an hour.
func TestServer_RetryAfterOverridesDelay(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			if attempt == 1 || body == "no-retries-left" {
				return 503, `{"status":"failure","message":"busy","retry_after":1}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": "retry-soon", "max_retries": 1, "retry_delay": 3600})
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "no-retries-left", "retry_delay": 3600})
		testworker.WaitFor(t, 20*time.Second, "second delivery", func() bool { return w.Count("retry-soon") == 2 })
		d := w.Of("retry-soon")
		if gap := d[1].At.Sub(d[0].At); gap < 900*time.Millisecond {
			t.Fatalf("retried after %v, want about retry_after = 1s", gap)
		}
		// retry_after does not add retries: a job without any fails.
		testworker.WaitFor(t, 20*time.Second, "failure log entry", func() bool { return failedEntry(t, s, "q", id) != nil })
		if n := w.Count("no-retries-left"); n != 1 {
			t.Fatalf("job without retries delivered %d times", n)
		}
	})
}

// TestServer_ExponentialBackoff checks the gaps between the retries of a
// job with retry_backoff exponential: 1 s, then 2 s.
func TestServer_ExponentialBackoff(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 500, `{"status":"failure"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"polling_interval": 50})
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "backoff", "max_retries": 2,
			"retry_backoff": "exponential", "retry_delay": 1, "retry_delay_max": 60})
		testworker.WaitFor(t, 30*time.Second, "failure log entry", func() bool { return failedEntry(t, s, "q", id) != nil })
		d := w.Of("backoff")
		if len(d) != 3 {
			t.Fatalf("delivered %d times, want 3", len(d))
		}
		if g1, g2 := d[1].At.Sub(d[0].At), d[2].At.Sub(d[1].At); g1 < 900*time.Millisecond || g2 < 1900*time.Millisecond {
			t.Fatalf("retry gaps %v, %v; want at least 1s then 2s", g1, g2)
		}
		f := failedEntry(t, s, "q", id)
		if f.RetryBackoff != "exponential" || f.RetryDelayMax != 60 || f.MaxRetries != 2 || f.FailCount != 3 {
			t.Fatalf("failure log entry %+v, want the job's backoff settings", f)
		}
	})
}

// TestServer_FailedJobRetryDeliversAgain retries a failed job from the
// failure log: it is delivered again under its old id.
func TestServer_FailedJobRetryDeliversAgain(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			if attempt == 1 {
				return 200, `{"status":"permanent-failure"}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "again", "timeout": 5})
		testworker.WaitFor(t, 20*time.Second, "failure log entry", func() bool { return failedEntry(t, s, "q", id) != nil })
		f := failedEntry(t, s, "q", id)
		out := mustCall(t, s, "POST", fmt.Sprintf("/queue/q/failed/%d/retry", f.ID), nil)
		if out["id"] != float64(id) || out["timeout"] != float64(5) {
			t.Fatalf("retry answered %v, want job %d with timeout 5", out, id)
		}
		testworker.WaitFor(t, 20*time.Second, "second delivery", func() bool { return w.Count("again") == 2 })
		testworker.WaitFor(t, 20*time.Second, "job done", func() bool {
			_, err := s.Store().JobGet(t.Context(), "q", id)
			return err != nil
		})
		if failedEntry(t, s, "q", id) != nil {
			t.Fatal("retried job is in the failure log again")
		}
	})
}

// TestServer_UniqueKeyAcrossNodes enqueues one key through two nodes at
// once: one job, every answer names it, and it is delivered once.
func TestServer_UniqueKeyAcrossNodes(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		url := dbtest.URL(t, dialect)
		a := startNode(t, url, nil)
		b := startNode(t, url, nil)
		// Paused while enqueuing: a job delivered and done would free the key.
		setupQueue(t, a, "q", "cat", map[string]any{"paused": true})
		const n = 16
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			ids = map[int64]int{}
		)
		for i := range n {
			node := a
			if i%2 == 1 {
				node = b
			}
			wg.Go(func() {
				id := push(t, node, "cat", map[string]any{"url": w.URL, "payload": "once", "unique_key": "k"})
				mu.Lock()
				ids[id]++
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(ids) != 1 {
			t.Fatalf("one key through two nodes gave ids %v, want one", ids)
		}
		mustCall(t, b, "POST", "/queue/q/resume", nil)
		testworker.WaitFor(t, 20*time.Second, "the delivery", func() bool { return w.Count("once") >= 1 })
		time.Sleep(300 * time.Millisecond) // room for a duplicate to show
		if got := w.Count("once"); got != 1 {
			t.Fatalf("keyed job delivered %d times, want 1", got)
		}
	})
}

// TestServer_PushJobsDelivered enqueues a batch with POST /jobs: every job
// is delivered once.
func TestServer_PushJobsDelivered(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 20})
		const n = 300
		jobs := make([]map[string]any, n)
		for i := range jobs {
			jobs[i] = map[string]any{"category": "cat", "url": w.URL, "payload": map[string]int{"n": i}}
		}
		out := mustCall(t, s, "POST", "/jobs", map[string]any{"jobs": jobs})
		if got, _ := out["jobs"].([]any); len(got) != n {
			t.Fatalf("POST /jobs answered %d jobs, want %d", len(got), n)
		}
		testworker.WaitFor(t, 60*time.Second, "every delivery", func() bool { return w.Distinct() == n })
		for i := range n {
			if got := w.Count(fmt.Sprintf(`{"n":%d}`, i)); got != 1 {
				t.Errorf("job %d delivered %d times", i, got)
			}
		}
	})
}
