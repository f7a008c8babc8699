package server_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// accepting is a worker that accepts every delivery with the given lease
// (seconds) and remembers each delivery's lease token.
func accepting(t *testing.T, lease float64) *testworker.Worker {
	return testworker.New(t, func(string, int) (int, string, time.Duration) {
		return 202, fmt.Sprintf(`{"status":"accepted","lease":%v}`, lease), 0
	})
}

// leaseToken returns the lease token of the n-th delivery of body.
func leaseToken(t *testing.T, w *testworker.Worker, body string, n int) string {
	t.Helper()
	d := w.Of(body)
	if len(d) <= n {
		t.Fatalf("%q delivered %d times, want a delivery %d", body, len(d), n+1)
	}
	tok := d[n].Header.Get("Rowq-Lease-Token")
	if tok == "" {
		t.Fatalf("delivery %d of %q carries no Rowq-Lease-Token", n+1, body)
	}
	return tok
}

// jobState returns the job's inspection answer.
func jobState(t *testing.T, s *server.Server, q string, id int64) (int, map[string]any) {
	t.Helper()
	return call(t, s, "GET", fmt.Sprintf("/queue/%s/job/%d", q, id), nil)
}

func waitLeased(t *testing.T, s *server.Server, q string, id int64) {
	t.Helper()
	testworker.WaitFor(t, 20*time.Second, fmt.Sprintf("job %d leased", id), func() bool {
		_, out := jobState(t, s, q, id)
		return out["status"] == "leased"
	})
}

// TestLeases_AcceptedThenComplete: an accepted job is leased and frees its
// worker slot; heartbeats renew it and show progress; a completion ends
// it, the same completion again answers 200, another result 409.
func TestLeases_AcceptedThenComplete(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := accepting(t, 60)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 1})
		first := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "first"})
		waitLeased(t, s, "q", first)
		// max_workers bounds requests in flight: the accepted job gave its
		// slot back, so the next job is delivered while it is leased.
		second := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "second"})
		waitLeased(t, s, "q", second)
		tok := leaseToken(t, w, "first", 0)
		if tok == leaseToken(t, w, "second", 0) {
			t.Fatal("two deliveries carry the same lease token")
		}
		path := fmt.Sprintf("/job/%d/", first)

		before := time.Now()
		out := mustCall(t, s, "POST", path+"heartbeat", map[string]any{"lease_token": tok, "lease": 3600, "progress": 0.4, "message": "rendering"})
		until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(out["lease_expires_at"]))
		if err != nil || until.Before(before.Add(59*time.Minute)) {
			t.Fatalf("heartbeat answered %v, want a lease an hour ahead", out)
		}
		_, job := jobState(t, s, "q", first)
		if job["status"] != "leased" || job["progress"] != 0.4 || job["message"] != "rendering" {
			t.Fatalf("leased job = %v, want leased with progress 0.4 and its message", job)
		}
		// The jobs out for delivery are listed with their state and
		// the lease's end.
		var page struct {
			Jobs []struct {
				ID           int64  `json:"id"`
				Status       string `json:"status"`
				GrabbedUntil string `json:"grabbed_until"`
			} `json:"jobs"`
		}
		getJSON(t, s, "/queue/q/grabbed", &page)
		listed := map[int64]string{}
		for _, j := range page.Jobs {
			if j.Status == "leased" {
				listed[j.ID] = j.GrabbedUntil
			}
		}
		if len(page.Jobs) != 2 || len(listed) != 2 || listed[first] != fmt.Sprint(out["lease_expires_at"]) || listed[second] == "" {
			t.Fatalf("GET /queue/q/grabbed = %+v, want the leased jobs %d (until %v) and %d", page.Jobs, first, out["lease_expires_at"], second)
		}
		// A token of another job, or a forged one, holds nothing.
		if code, out := call(t, s, "POST", path+"heartbeat", map[string]any{"lease_token": leaseToken(t, w, "second", 0), "lease": 10}); code != 409 || out["reason"] != "lease_lost" {
			t.Fatalf("heartbeat with another job's token: %d %v, want 409 lease_lost", code, out)
		}

		done := map[string]any{"lease_token": tok, "status": "success"}
		mustCall(t, s, "POST", path+"complete", done)
		if code, _ := jobState(t, s, "q", first); code != 404 {
			t.Fatalf("completed job: GET answered %d, want 404", code)
		}
		mustCall(t, s, "POST", path+"complete", done) // the same completion again
		if code, out := call(t, s, "POST", path+"complete", map[string]any{"lease_token": tok, "status": "failure"}); code != 409 || out["reason"] != "completed" {
			t.Fatalf("another result: %d %v, want 409 completed", code, out)
		}
		if code, out := call(t, s, "POST", path+"heartbeat", map[string]any{"lease_token": tok, "lease": 10}); code != 409 || out["reason"] != "completed" {
			t.Fatalf("heartbeat after completion: %d %v, want 409 completed", code, out)
		}
		testworker.WaitFor(t, 10*time.Second, "the completion counted", func() bool {
			_, st := call(t, s, "GET", "/queue/q/stats", nil)
			return st["total_successes"] == 1.0
		})
		if n := w.Count("first"); n != 1 {
			t.Fatalf("accepted job delivered %d times", n)
		}
	})
}

// TestLeases_CompleteFailureFollowsThePolicy: a failure with retries left
// is delivered again (after retry_after), with a new lease token; the old
// token holds nothing; a permanent failure goes to the failure log.
func TestLeases_CompleteFailureFollowsThePolicy(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := accepting(t, 60)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "job", "max_retries": 1, "retry_delay": 3600})
		waitLeased(t, s, "q", id)
		path := fmt.Sprintf("/job/%d/complete", id)
		tok := leaseToken(t, w, "job", 0)
		mustCall(t, s, "POST", path, map[string]any{"lease_token": tok, "status": "failure", "message": "busy", "retry_after": 0})
		testworker.WaitFor(t, 20*time.Second, "the retry's delivery", func() bool { return w.Count("job") == 2 })
		if got := w.Of("job")[1].Header.Get("Rowq-Attempt"); got != "2" {
			t.Fatalf("retry's Rowq-Attempt = %q, want 2", got)
		}
		tok2 := leaseToken(t, w, "job", 1)
		if tok2 == tok {
			t.Fatal("the retry carries the first delivery's lease token")
		}
		waitLeased(t, s, "q", id)
		if code, out := call(t, s, "POST", path, map[string]any{"lease_token": tok, "status": "success"}); code != 409 || out["reason"] != "completed" {
			t.Fatalf("the first delivery's token after the retry: %d %v, want 409 completed", code, out)
		}
		mustCall(t, s, "POST", path, map[string]any{"lease_token": tok2, "status": "permanent-failure", "message": "bad input"})
		f := waitFailed(t, s, "q", id)
		if f.Status != "permanent-failure" || f.Message != "bad input" || f.FailCount != 2 {
			t.Fatalf("failure log entry = %+v", f)
		}
	})
}

// TestLeases_ExpiredLeaseIsAFailure: a worker that accepts and goes
// silent loses the job when its lease runs out: it is retried by its
// policy, then, with no retries left, failed with "lease expired".
func TestLeases_ExpiredLeaseIsAFailure(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := accepting(t, 1)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"polling_interval": 50})
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "silent", "max_retries": 1, "retry_delay": 0})
		f := waitFailed(t, s, "q", id)
		if f.Message != "lease expired" || f.Status != "failure" || f.FailCount != 2 {
			t.Fatalf("failure log entry = %+v, want a failure with \"lease expired\" after 2 attempts", f)
		}
		if n := w.Count("silent"); n != 2 {
			t.Fatalf("delivered %d times, want 2 (one retry)", n)
		}
		d := w.Of("silent")
		if gap := d[1].At.Sub(d[0].At); gap < time.Second {
			t.Fatalf("retried %v after the first delivery, before its 1 s lease ran out", gap)
		}
		if code, out := call(t, s, "POST", fmt.Sprintf("/job/%d/complete", id), map[string]any{"lease_token": leaseToken(t, w, "silent", 1), "status": "success"}); code != 409 || out["reason"] != "lease_lost" {
			t.Fatalf("completion after the lease ran out: %d %v, want 409 lease_lost", code, out)
		}
	})
}

// TestLeases_OutliveTheDeliveringNode: the lease belongs to the job, not
// to the node that delivered it: that node stops, another takes the
// queue, rescues and extends, and the job is neither delivered again nor
// failed; the worker completes it through the other node.
func TestLeases_OutliveTheDeliveringNode(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := accepting(t, 60)
		url := dbtest.URL(t, dialect)
		a, err := tryNode(t, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		var stopA sync.Once
		t.Cleanup(func() { stopA.Do(func() { a.Stop(nil) }) })
		setupQueue(t, a, "q", "cat", nil)
		waitLeads(t, 10*time.Second, a, "q", a)
		b := startNode(t, url, nil)
		id := push(t, a, "cat", map[string]any{"url": w.URL, "payload": "long"})
		waitLeased(t, a, "q", id)
		stopA.Do(func() {
			if err := a.Stop(nil); err != nil {
				t.Errorf("stop node a: %v", err)
			}
		})
		waitLeads(t, 10*time.Second, b, "q", b)
		time.Sleep(3 * time.Second) // longer than the grab lease (2 s), many rescues
		if n := w.Count("long"); n != 1 {
			t.Fatalf("accepted job delivered %d times after its node stopped", n)
		}
		if _, job := jobState(t, b, "q", id); job["status"] != "leased" {
			t.Fatalf("job after its node stopped = %v, want still leased", job)
		}
		mustCall(t, b, "POST", fmt.Sprintf("/job/%d/complete", id), map[string]any{"lease_token": leaseToken(t, w, "long", 0), "status": "success"})
		if code, _ := jobState(t, b, "q", id); code != 404 {
			t.Fatalf("completed job: GET answered %d, want 404", code)
		}
	})
}

// TestLeases_BadAcceptedAnswerIsAFailure: an accepted answer without a
// valid lease, or not 2xx, is a failure saying why.
func TestLeases_BadAcceptedAnswerIsAFailure(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			switch body {
			case "no-lease":
				return 202, `{"status":"accepted"}`, 0
			case "long-lease":
				return 200, `{"status":"accepted","lease":86401}`, 0
			}
			return 500, `{"status":"accepted","lease":10}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		for body, want := range map[string]string{
			"no-lease":   "without a lease",
			"long-lease": "lease must be 1..86400",
			"http-500":   "must be 2xx",
		} {
			id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": body})
			if f := waitFailed(t, s, "q", id); !strings.Contains(f.Message, want) {
				t.Errorf("%s: failure message %q, want it to say %q", body, f.Message, want)
			}
		}
	})
}

// TestLeases_WorkScopeConfinedToQueues: heartbeats and completions need
// the work scope, and a token confined to queues may send them only for
// its queues' jobs.
func TestLeases_WorkScopeConfinedToQueues(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := accepting(t, 60)
		url := dbtest.URL(t, dialect)
		st := dbtest.OpenURL(t, url)
		admin := makeToken(t, st, "admin", []string{"admin"})
		mine := makeToken(t, st, "mine", []string{"work"}, "q*")
		theirs := makeToken(t, st, "theirs", []string{"work"}, "other*")
		reader := makeToken(t, st, "reader", []string{"read", "enqueue"})
		s := startNode(t, url, func(c *config.Config) { c.Auth = "on" })
		if code, out := callAs(t, s, admin, "PUT", "/queue/q", nil); code != 200 {
			t.Fatalf("PUT /queue/q: %d %v", code, out)
		}
		callAs(t, s, admin, "PUT", "/routing/cat", map[string]any{"queue_name": "q"})
		code, out := callAs(t, s, admin, "POST", "/job/cat", map[string]any{"url": w.URL, "payload": "job"})
		if code != 200 {
			t.Fatalf("push: %d %v", code, out)
		}
		id := int64(out["id"].(float64))
		testworker.WaitFor(t, 20*time.Second, "job leased", func() bool {
			_, out := callAs(t, s, admin, "GET", fmt.Sprintf("/queue/q/job/%d", id), nil)
			return out["status"] == "leased"
		})
		beat := map[string]any{"lease_token": leaseToken(t, w, "job", 0), "lease": 60}
		path := fmt.Sprintf("/job/%d/heartbeat", id)
		if code, out := callAs(t, s, reader, "POST", path, beat); code != 403 || !strings.Contains(fmt.Sprint(out["error"]), "work") {
			t.Fatalf("heartbeat without the work scope: %d %v, want 403 naming it", code, out)
		}
		if code, out := callAs(t, s, theirs, "POST", path, beat); code != 403 {
			t.Fatalf("heartbeat with a token confined to other queues: %d %v, want 403", code, out)
		}
		if code, out := callAs(t, s, mine, "POST", path, beat); code != 200 {
			t.Fatalf("heartbeat with a token confined to q*: %d %v, want 200", code, out)
		}
	})
}
