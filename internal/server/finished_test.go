package server_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// waitFinished waits until job id of queue q shows one of the finished
// statuses and returns it.
func waitFinished(t *testing.T, s *server.Server, q string, id int64) map[string]any {
	t.Helper()
	var job map[string]any
	testworker.WaitFor(t, 30*time.Second, fmt.Sprintf("job %d finished", id), func() bool {
		_, job = jobState(t, s, q, id)
		switch job["status"] {
		case "succeeded", "failed", "cancelled":
			return true
		}
		return false
	})
	return job
}

// TestFinished_PushHistoryAndResults: a queue with keep_finished keeps its
// succeeded, failed and cancelled jobs with their attempts, times, last
// message and result; a success whose result is over --max-result-bytes
// still succeeds (even with "status" after a result longer than the
// answer rowq holds), its result dropped with a note; a queue without
// keep_finished keeps nothing; the listing pages them newest first and
// filters them.
func TestFinished_PushHistoryAndResults(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		big := strings.Repeat("x", 200<<10) // over the 64 KiB cap and the 128 KiB rowq holds
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			switch body {
			case "small":
				return 200, `{"status":"success","message":"done","result":{"rows":3}}`, 0
			case "big":
				return 200, `{"result":{"blob":"` + big + `"},"message":"m","status":"success"}`, 0
			case "fail":
				if attempt == 1 {
					return 500, `{"status":"failure","message":"first"}`, 0
				}
				return 500, `{"status":"permanent-failure","message":"bad"}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		setupQueue(t, s, "q", "cat", map[string]any{"keep_finished": 3600})
		setupQueue(t, s, "plain", "other", nil)
		if out := mustCall(t, s, "GET", "/queue/q", nil); out["keep_finished"] != 3600.0 {
			t.Fatalf("GET /queue/q = %v, want keep_finished 3600", out)
		}
		small := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "small"})
		large := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "big"})
		failed := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "fail", "max_retries": 1, "retry_delay": 0})
		plain := push(t, s, "other", map[string]any{"url": w.URL, "payload": "plain"})
		waiting := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "later", "run_after": 3600})

		job := waitFinished(t, s, "q", small)
		result, _ := job["result"].(map[string]any)
		if job["status"] != "succeeded" || job["attempts"] != 1.0 || job["message"] != "done" || result["rows"] != 3.0 ||
			job["queue_name"] != "q" || job["category"] != "cat" {
			t.Fatalf("succeeded job = %v", job)
		}
		for _, f := range []string{"created_at", "started_at", "finished_at"} {
			if _, err := time.Parse(time.RFC3339Nano, fmt.Sprint(job[f])); err != nil {
				t.Fatalf("succeeded job's %s = %v: %v", f, job[f], err)
			}
		}
		job = waitFinished(t, s, "q", large)
		if job["status"] != "succeeded" || job["result"] != nil ||
			!strings.HasPrefix(fmt.Sprint(job["message"]), "result dropped: ") || !strings.HasSuffix(fmt.Sprint(job["message"]), "; m") {
			t.Fatalf("succeeded job with a result over the cap = %v", job)
		}
		job = waitFinished(t, s, "q", failed)
		if job["status"] != "failed" || job["attempts"] != 2.0 || job["message"] != "bad" || job["result"] != nil {
			t.Fatalf("failed job = %v", job)
		}
		testworker.WaitFor(t, 30*time.Second, "the plain queue's job delivered", func() bool { return w.Count("plain") == 1 })
		testworker.WaitFor(t, 30*time.Second, "the plain queue's job gone", func() bool {
			code, _ := jobState(t, s, "plain", plain)
			return code == 404
		})
		if code, out := jobState(t, s, "q", waiting); code != 200 || out["status"] != "claimed" {
			t.Fatalf("a waiting job of a queue that keeps history: %d %v, want it live as before", code, out)
		}
		mustCall(t, s, "POST", fmt.Sprintf("/queue/q/job/%d/cancel", waiting), nil)
		if job := waitFinished(t, s, "q", waiting); job["status"] != "cancelled" || job["attempts"] != 0.0 || job["started_at"] != nil {
			t.Fatalf("cancelled job = %v", job)
		}

		checkFinishedListing(t, s, waiting)
	})
}

// checkFinishedListing checks GET /queue/q/finished on the four finished
// jobs of TestFinished_PushHistoryAndResults, the cancelled job newest,
// and the refusals of bad parameters.
func checkFinishedListing(t *testing.T, s *server.Server, newest int64) {
	t.Helper()
	// Newest first, two by two; filters.
	var ids []float64
	cursor := ""
	for page := 0; page < 3; page++ {
		path := "/queue/q/finished?limit=2"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		out := mustCall(t, s, "GET", path, nil)
		for _, f := range out["finished_jobs"].([]any) {
			ids = append(ids, f.(map[string]any)["id"].(float64))
		}
		next, _ := out["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(ids) != 4 || ids[0] != float64(newest) {
		t.Fatalf("listed ids %v, want 4 with the cancelled job %d first", ids, newest)
	}
	for q, want := range map[string]int{"status=failed": 1, "status=succeeded": 2, "category=cat": 4, "category=none": 0,
		"since=2000-01-01T00:00:00Z": 4, "until=2000-01-01T00:00:00Z": 0} {
		out := mustCall(t, s, "GET", "/queue/q/finished?"+q, nil)
		if got := len(out["finished_jobs"].([]any)); got != want {
			t.Errorf("GET /queue/q/finished?%s: %d jobs, want %d", q, got, want)
		}
	}
	for q, field := range map[string]string{"status=done": "status", "since=yesterday": "since", "until=1": "until",
		"limit=0": "limit", "cursor=abc": "cursor", "category=" + url.QueryEscape("a b"): "category"} {
		if code, out := call(t, s, "GET", "/queue/q/finished?"+q, nil); code != 400 || !strings.HasPrefix(fmt.Sprint(out["error"]), field+":") {
			t.Errorf("GET /queue/q/finished?%s: %d %v, want 400 naming %s", q, code, out, field)
		}
	}
	if code, _ := call(t, s, "GET", "/queue/nope/finished", nil); code != 404 {
		t.Errorf("GET /queue/nope/finished: %d, want 404", code)
	}
	for _, v := range []any{-1, 366*24*3600 + 1, "1h"} {
		if code, out := call(t, s, "PUT", "/queue/q", map[string]any{"keep_finished": v}); code != 400 || !strings.Contains(fmt.Sprint(out["error"]), "keep_finished") {
			t.Errorf("PUT /queue/q with keep_finished %v: %d %v, want 400 naming keep_finished", v, code, out)
		}
	}
}

// TestFinished_CompleteResult: a completion's result is kept in the
// history of a pull queue that keeps finished jobs; one over
// --max-result-bytes answers 413 and records nothing (the job stays
// leased, and a completion within the cap then succeeds); a result on a
// failure answers 400.
func TestFinished_CompleteResult(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), func(c *config.Config) { c.MaxResultBytes = 32 })
		pullQueue(t, s, "q", "cat", map[string]any{"keep_finished": 60})
		a := push(t, s, "cat", map[string]any{"payload": 1})
		b := push(t, s, "cat", map[string]any{"payload": 2})
		jobs := lease(t, s, "q", map[string]any{"max": 2, "wait": 5, "lease": 60})
		if len(jobs) != 2 {
			t.Fatalf("leased %d jobs, want 2", len(jobs))
		}
		byID := map[int64]leasedJob{jobs[0].ID: jobs[0], jobs[1].ID: jobs[1]}
		ja, jb := byID[a], byID[b]
		mustCall(t, s, "POST", fmt.Sprintf("/job/%d/complete", a), map[string]any{
			"lease_token": ja.LeaseToken, "status": "success", "message": "ok", "result": []any{1, "two"}})
		job := waitFinished(t, s, "q", a)
		if r, _ := job["result"].([]any); job["status"] != "succeeded" || job["message"] != "ok" || len(r) != 2 || r[1] != "two" {
			t.Fatalf("completed job = %v", job)
		}
		code, out := call(t, s, "POST", fmt.Sprintf("/job/%d/complete", b), map[string]any{
			"lease_token": jb.LeaseToken, "status": "success", "result": strings.Repeat("y", 40)})
		if code != 413 || !strings.HasPrefix(fmt.Sprint(out["error"]), "result:") {
			t.Fatalf("completion with a result over the cap: %d %v, want 413 naming result", code, out)
		}
		if _, job := jobState(t, s, "q", b); job["status"] != "leased" {
			t.Fatalf("after a 413 the job shows %v, want still leased", job)
		}
		code, out = call(t, s, "POST", fmt.Sprintf("/job/%d/complete", b), map[string]any{
			"lease_token": jb.LeaseToken, "status": "failure", "result": 1})
		if code != 400 || !strings.HasPrefix(fmt.Sprint(out["error"]), "result:") {
			t.Fatalf("failure with a result: %d %v, want 400 naming result", code, out)
		}
		mustCall(t, s, "POST", fmt.Sprintf("/job/%d/complete", b), map[string]any{
			"lease_token": jb.LeaseToken, "status": "success", "result": "short"})
		if job := waitFinished(t, s, "q", b); job["result"] != "short" {
			t.Fatalf("completed job = %v", job)
		}
	})
}
