package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// leasedJob is a job of a lease answer.
type leasedJob struct {
	ID             int64           `json:"id"`
	Category       string          `json:"category"`
	Payload        json.RawMessage `json:"payload"`
	Attempt        int             `json:"attempt"`
	LeaseToken     string          `json:"lease_token"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
}

// lease sends a lease request to node s and returns the jobs leased.
func lease(t *testing.T, s *server.Server, q string, req map[string]any) []leasedJob {
	t.Helper()
	jobs, err := tryLease(s, q, req)
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// tryLease is lease for a goroutine other than the test's: it returns
// what went wrong.
func tryLease(s *server.Server, q string, req map[string]any) ([]leasedJob, error) {
	body, _ := json.Marshal(req)
	resp, err := http.Post("http://"+s.Addr()+"/queue/"+q+"/lease", "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out struct {
		Jobs []leasedJob `json:"jobs"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != 200 || out.Jobs == nil {
		return nil, fmt.Errorf("lease %v from queue %s: %d %s, want 200 with jobs", req, q, resp.StatusCode, raw)
	}
	return out.Jobs, nil
}

// complete completes a leased job through node s.
func complete(t *testing.T, s *server.Server, j leasedJob, status string) (int, map[string]any) {
	t.Helper()
	return call(t, s, "POST", fmt.Sprintf("/job/%d/complete", j.ID), map[string]any{"lease_token": j.LeaseToken, "status": status})
}

// tryComplete completes a leased job with success through node s, from
// any goroutine.
func tryComplete(s *server.Server, j leasedJob) error {
	body, _ := json.Marshal(map[string]any{"lease_token": j.LeaseToken, "status": "success"})
	resp, err := http.Post(fmt.Sprintf("http://%s/job/%d/complete", s.Addr(), j.ID), "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		raw, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("complete job %d: %d %s", j.ID, resp.StatusCode, raw)
	}
	return nil
}

// pullQueue creates pull queue q with routing category → q.
func pullQueue(t *testing.T, s *server.Server, q, category string, settings map[string]any) {
	t.Helper()
	if settings == nil {
		settings = map[string]any{}
	}
	settings["delivery"] = "pull"
	setupQueue(t, s, q, category, settings)
}

// TestPull_LeaseHeartbeatComplete: a pull queue's jobs need no url; a
// lease request gets them in priority order with a lease token, the job
// shows leased, a heartbeat renews it, a completion ends it and is
// counted; a push queue answers 409 naming delivery, an unknown queue
// 404, and a push queue's job without a url 400.
func TestPull_LeaseHeartbeatComplete(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		pullQueue(t, s, "q", "cat", map[string]any{"max_workers": 10})
		if out := mustCall(t, s, "GET", "/queue/q", nil); out["delivery"] != "pull" {
			t.Fatalf("GET /queue/q = %v, want delivery pull", out)
		}
		low := push(t, s, "cat", map[string]any{"payload": map[string]any{"n": 1}})
		high := push(t, s, "cat", map[string]any{"payload": "urgent", "priority": 5})
		jobs := lease(t, s, "q", map[string]any{"max": 10, "wait": 5, "lease": 60})
		if len(jobs) != 2 || jobs[0].ID != high || jobs[1].ID != low {
			t.Fatalf("leased %+v, want jobs %d then %d (priority first)", jobs, high, low)
		}
		j := jobs[1]
		if j.Attempt != 1 || j.Category != "cat" || string(j.Payload) != `{"n":1}` || j.LeaseToken == "" ||
			time.Until(j.LeaseExpiresAt) < 30*time.Second {
			t.Fatalf("leased job = %+v", j)
		}
		if _, job := jobState(t, s, "q", j.ID); job["status"] != "leased" {
			t.Fatalf("leased job shows %v", job)
		}
		out := mustCall(t, s, "POST", fmt.Sprintf("/job/%d/heartbeat", j.ID), map[string]any{"lease_token": j.LeaseToken, "lease": 3600, "progress": 0.5})
		if until, err := time.Parse(time.RFC3339Nano, fmt.Sprint(out["lease_expires_at"])); err != nil || time.Until(until) < 59*time.Minute {
			t.Fatalf("heartbeat answered %v", out)
		}
		for _, j := range jobs {
			if code, out := complete(t, s, j, "success"); code != 200 {
				t.Fatalf("complete %d: %d %v", j.ID, code, out)
			}
		}
		if code, _ := jobState(t, s, "q", j.ID); code != 404 {
			t.Fatalf("completed job: GET answered %d, want 404", code)
		}
		testworker.WaitFor(t, 10*time.Second, "the completions counted", func() bool {
			_, st := call(t, s, "GET", "/queue/q/stats", nil)
			return st["total_successes"] == 2.0
		})
		if jobs := lease(t, s, "q", map[string]any{"max": 1}); len(jobs) != 0 {
			t.Fatalf("an empty queue leased %+v", jobs)
		}

		setupQueue(t, s, "p", "pushed", nil)
		if code, out := call(t, s, "POST", "/queue/p/lease", nil); code != 409 || !strings.HasPrefix(fmt.Sprint(out["error"]), "delivery:") {
			t.Fatalf("lease from a push queue: %d %v, want 409 naming delivery", code, out)
		}
		if code, out := call(t, s, "POST", "/queue/nope/lease", nil); code != 404 {
			t.Fatalf("lease from an unknown queue: %d %v, want 404", code, out)
		}
		if code, out := call(t, s, "POST", "/job/pushed", map[string]any{"payload": 1}); code != 400 || !strings.HasPrefix(fmt.Sprint(out["error"]), "url:") {
			t.Fatalf("a push queue's job without url: %d %v, want 400 naming url", code, out)
		}
		if code, out := call(t, s, "POST", "/jobs", map[string]any{"jobs": []any{
			map[string]any{"category": "cat"}, map[string]any{"category": "pushed"},
		}}); code != 400 || !strings.Contains(fmt.Sprint(out["error"]), "url:") {
			t.Fatalf("POST /jobs with a push queue's job without url: %d %v, want 400 naming url", code, out)
		}
		code, out := call(t, s, "PUT", "/schedule/nightly", map[string]any{"cron": "0 3 * * *", "category": "pushed"})
		if code != 400 || !strings.HasPrefix(fmt.Sprint(out["error"]), "url:") {
			t.Fatalf("a schedule of a push queue without url: %d %v, want 400 naming url", code, out)
		}
		mustCall(t, s, "PUT", "/schedule/nightly", map[string]any{"cron": "0 3 * * *", "category": "cat"})
		if code, out := call(t, s, "PUT", "/queue/x", map[string]any{"delivery": "poll"}); code != 400 || !strings.HasPrefix(fmt.Sprint(out["error"]), "delivery:") {
			t.Fatalf("PUT a queue with delivery poll: %d %v, want 400 naming delivery", code, out)
		}
	})
}

// TestPull_BadInput: every field of a lease request is checked, and the
// error names it.
func TestPull_BadInput(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		pullQueue(t, s, "q", "cat", nil)
		for _, tc := range []struct {
			body  any
			field string
		}{
			{map[string]any{"max": 0}, "max:"},
			{map[string]any{"max": 101}, "max:"},
			{map[string]any{"max": "ten"}, "max:"},
			{map[string]any{"wait": 31}, "wait:"},
			{map[string]any{"wait": -1}, "wait:"},
			{map[string]any{"lease": -1}, "lease:"},
			{map[string]any{"lease": 0.5}, "lease:"},
			{map[string]any{"lease": 86401}, "lease:"},
			{map[string]any{"leases": 10}, "leases:"},
			{[]any{1}, "body:"},
		} {
			code, out := call(t, s, "POST", "/queue/q/lease", tc.body)
			if code != 400 || !strings.HasPrefix(fmt.Sprint(out["error"]), tc.field) {
				t.Errorf("lease %v: %d %v, want 400 naming %s", tc.body, code, out, tc.field)
			}
		}
	})
}

// TestPull_LongPollWokenFromAnotherNode: two nodes on one database; a
// lease request waits on each (one on the leader, one forwarded to it);
// jobs enqueued through the other node wake them well before their wait
// ends, though the queue's polling_interval is a minute.
func TestPull_LongPollWokenFromAnotherNode(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		a := startNode(t, url, steadyLeader)
		pullQueue(t, a, "q", "cat", map[string]any{"polling_interval": 60000})
		waitLeads(t, 10*time.Second, a, "q", a)
		b := startNode(t, url, steadyLeader)
		for _, tc := range []struct {
			name        string
			asked, sent *server.Server
		}{
			{"waiting on the leader, enqueued on the other node", a, b},
			{"waiting on the other node, enqueued on it", b, b},
		} {
			got := make(chan []leasedJob, 1)
			began := time.Now()
			go func() {
				jobs, err := tryLease(tc.asked, "q", map[string]any{"max": 5, "wait": 30})
				if err != nil {
					t.Error(err)
				}
				got <- jobs
			}()
			time.Sleep(500 * time.Millisecond) // the request waits
			id := push(t, tc.sent, "cat", map[string]any{"payload": tc.name})
			select {
			case jobs := <-got:
				if len(jobs) != 1 || jobs[0].ID != id {
					t.Fatalf("%s: leased %+v, want job %d", tc.name, jobs, id)
				}
				if d := time.Since(began); d > 15*time.Second {
					t.Fatalf("%s: answered after %v, want well before the 30 s wait", tc.name, d)
				}
				if code, out := complete(t, tc.sent, jobs[0], "success"); code != 200 {
					t.Fatalf("%s: complete: %d %v", tc.name, code, out)
				}
			case <-time.After(25 * time.Second):
				t.Fatalf("%s: the waiting lease request was not woken", tc.name)
			}
		}
	})
}

// TestPull_MaxWorkersBoundsLeases: max_workers bounds the jobs leased and
// not finished, whichever node the pullers and completions go through:
// pullers on two nodes never hold more than max_workers jobs at once, and
// every job is completed exactly once.
func TestPull_MaxWorkersBoundsLeases(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		url := dbtest.URL(t, dialect)
		a := startNode(t, url, steadyLeader)
		const maxWorkers, total = 3, 30
		pullQueue(t, a, "q", "cat", map[string]any{"max_workers": maxWorkers})
		waitLeads(t, 10*time.Second, a, "q", a)
		b := startNode(t, url, steadyLeader)

		// One puller takes all the slots; the next gets nothing until a
		// completion frees one.
		for i := range 5 {
			push(t, a, "cat", map[string]any{"payload": i})
		}
		first := lease(t, a, "q", map[string]any{"max": 10})
		if len(first) != maxWorkers {
			t.Fatalf("leased %d, want max_workers %d", len(first), maxWorkers)
		}
		if more := lease(t, b, "q", map[string]any{"max": 10, "wait": 1}); len(more) != 0 {
			t.Fatalf("with every slot leased, another puller got %d jobs", len(more))
		}
		if code, out := complete(t, b, first[0], "success"); code != 200 { // through the other node
			t.Fatalf("complete: %d %v", code, out)
		}
		if more := lease(t, b, "q", map[string]any{"max": 10, "wait": 10}); len(more) != 1 {
			t.Fatalf("after a completion through the other node, a puller got %d jobs, want 1", len(more))
		} else {
			first = append(first[1:], more[0])
		}
		for _, j := range first {
			if code, out := complete(t, a, j, "success"); code != 200 {
				t.Fatalf("complete: %d %v", code, out)
			}
		}

		// 4 of the first 5 are done: the second round works the rest.
		const rest = total - 4
		for i := range total - 5 {
			push(t, b, "cat", map[string]any{"payload": 100 + i})
		}
		var (
			held, most atomic.Int64
			mu         sync.Mutex
			done       = map[int64]int{}
			wg         sync.WaitGroup
		)
		deadline := time.Now().Add(2 * time.Minute)
		for p := range 6 {
			node := []*server.Server{a, b}[p%2]
			wg.Go(func() {
				for time.Now().Before(deadline) {
					mu.Lock()
					n := len(done)
					mu.Unlock()
					if n >= rest {
						return
					}
					jobs, err := tryLease(node, "q", map[string]any{"max": 2, "wait": 1})
					if err != nil {
						t.Error(err)
						return
					}
					for h := held.Add(int64(len(jobs))); ; {
						m := most.Load()
						if h <= m || most.CompareAndSwap(m, h) {
							break
						}
					}
					time.Sleep(20 * time.Millisecond)
					for _, j := range jobs {
						held.Add(-1) // before the completion: the server frees the slot after it
						if err := tryComplete(node, j); err != nil {
							t.Error(err)
						}
						mu.Lock()
						done[j.ID]++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		if m := most.Load(); m > maxWorkers {
			t.Fatalf("pullers held %d jobs at once, max_workers %d", m, maxWorkers)
		}
		for id, n := range done {
			if n != 1 {
				t.Errorf("job %d completed %d times", id, n)
			}
		}
		if len(done) != rest {
			t.Fatalf("%d jobs completed in the second round, want %d", len(done), rest)
		}
	})
}

// TestPull_DeadPullerLeasesComeBack: a puller that dies holding leases
// loses them when they run out: each is a failure ("lease expired"),
// counted, retried by its policy and leased again, with a new token; the
// dead puller's token holds nothing. Nothing is lost.
func TestPull_DeadPullerLeasesComeBack(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		pullQueue(t, s, "q", "cat", map[string]any{"max_workers": 3, "polling_interval": 50})
		ids := map[int64]bool{}
		for i := range 3 {
			ids[push(t, s, "cat", map[string]any{"payload": i, "max_retries": 2, "retry_delay": 0})] = true
		}
		dead := lease(t, s, "q", map[string]any{"max": 3, "wait": 10, "lease": 1})
		if len(dead) != 3 {
			t.Fatalf("leased %d, want 3", len(dead))
		}
		var again []leasedJob
		testworker.WaitFor(t, 30*time.Second, "the dead puller's jobs leased again", func() bool {
			again = append(again, lease(t, s, "q", map[string]any{"max": 3, "wait": 2, "lease": 60})...)
			return len(again) == 3
		})
		for _, j := range again {
			if !ids[j.ID] || j.Attempt != 2 {
				t.Fatalf("leased again: %+v, want one of the dead puller's jobs, attempt 2", j)
			}
			delete(ids, j.ID)
		}
		for _, j := range dead {
			if code, out := complete(t, s, j, "success"); code != 409 || out["reason"] != "lease_lost" {
				t.Fatalf("the dead puller's token: %d %v, want 409 lease_lost", code, out)
			}
		}
		for _, j := range again {
			if code, out := complete(t, s, j, "success"); code != 200 {
				t.Fatalf("complete %d: %d %v", j.ID, code, out)
			}
		}
		testworker.WaitFor(t, 10*time.Second, "3 failures and 3 successes counted", func() bool {
			_, st := call(t, s, "GET", "/queue/q/stats", nil)
			return st["total_failures"] == 3.0 && st["total_successes"] == 3.0
		})
	})
}

// TestPull_CancelRacesCompletion: a cancel and a completion of a leased
// job race; exactly one wins: the completion (the cancel then finds no
// job) or the cancel (the completion then answers 409 cancelled). Either
// way the job's worker slot comes free.
func TestPull_CancelRacesCompletion(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		pullQueue(t, s, "q", "cat", map[string]any{"max_workers": 1})
		for i := range 8 {
			id := push(t, s, "cat", map[string]any{"payload": i})
			jobs := lease(t, s, "q", map[string]any{"max": 1, "wait": 10})
			if len(jobs) != 1 || jobs[0].ID != id {
				t.Fatalf("round %d: leased %+v, want job %d (the last one's slot free)", i, jobs, id)
			}
			var (
				wg                 sync.WaitGroup
				cancelled, done    int
				cancelOut, doneOut map[string]any
			)
			wg.Go(func() { cancelled, cancelOut = cancelJob(t, s, "q", id) })
			wg.Go(func() { done, doneOut = complete(t, s, jobs[0], "success") })
			wg.Wait()
			switch {
			case cancelled == 200 && done == 409 && doneOut["reason"] == "cancelled":
			case done == 200 && cancelled == 404:
			default:
				t.Fatalf("round %d: cancel %d %v, complete %d %v; want one winner", i, cancelled, cancelOut, done, doneOut)
			}
			if code, _ := jobState(t, s, "q", id); code != 404 {
				t.Fatalf("round %d: job still there", i)
			}
		}
	})
}

// TestPull_PausedQueueLeasesNothing: a paused pull queue leases nothing;
// a waiting puller gets the job once it is resumed.
func TestPull_PausedQueueLeasesNothing(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		pullQueue(t, s, "q", "cat", nil)
		waitLeads(t, 10*time.Second, s, "q", s) // so that an empty answer is the pause's
		mustCall(t, s, "POST", "/queue/q/pause", nil)
		id := push(t, s, "cat", map[string]any{"payload": "x"})
		if jobs := lease(t, s, "q", map[string]any{"max": 1, "wait": 1}); len(jobs) != 0 {
			t.Fatalf("a paused queue leased %+v", jobs)
		}
		got := make(chan []leasedJob, 1)
		go func() {
			jobs, err := tryLease(s, "q", map[string]any{"max": 1, "wait": 20})
			if err != nil {
				t.Error(err)
			}
			got <- jobs
		}()
		time.Sleep(300 * time.Millisecond)
		mustCall(t, s, "POST", "/queue/q/resume", nil)
		select {
		case jobs := <-got:
			if len(jobs) != 1 || jobs[0].ID != id {
				t.Fatalf("after the resume: leased %+v, want job %d", jobs, id)
			}
		case <-time.After(25 * time.Second):
			t.Fatal("the waiting puller got nothing after the resume")
		}
	})
}

// TestPull_StopEndsLongPolls: a node that stops answers its waiting lease
// requests (no job) instead of letting its HTTP server wait out their
// long polls.
func TestPull_StopEndsLongPolls(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s, err := tryNode(t, dbtest.URL(t, dialect), nil)
		if err != nil {
			t.Fatal(err)
		}
		pullQueue(t, s, "q", "cat", nil)
		waitLeads(t, 10*time.Second, s, "q", s)
		got := make(chan error, 1)
		go func() {
			jobs, err := tryLease(s, "q", map[string]any{"max": 1, "wait": 30})
			if err == nil && len(jobs) != 0 {
				err = fmt.Errorf("leased %d jobs of an empty queue", len(jobs))
			}
			got <- err
		}()
		time.Sleep(500 * time.Millisecond) // the request waits
		began := time.Now()
		http.DefaultClient.CloseIdleConnections()
		if err := s.Stop(nil); err != nil {
			t.Fatalf("stop: %v", err)
		}
		if d := time.Since(began); d > 15*time.Second {
			t.Fatalf("the stop took %v with a lease request waiting 30 s", d)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the waiting lease request got no answer")
		}
	})
}

// TestPull_Throttled: max_dispatches_per_second bounds the jobs leased as
// it bounds push deliveries.
func TestPull_Throttled(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		pullQueue(t, s, "q", "cat", map[string]any{"max_workers": 100, "max_dispatches_per_second": 5, "max_burst_size": 1})
		waitLeads(t, 10*time.Second, s, "q", s)
		for i := range 40 {
			push(t, s, "cat", map[string]any{"payload": i})
		}
		began := time.Now()
		leased := 0
		for time.Since(began) < 2*time.Second {
			leased += len(lease(t, s, "q", map[string]any{"max": 100, "wait": 1}))
		}
		elapsed := time.Since(began)
		// A burst of 1, then 5 a second.
		if most := 1 + int(5*elapsed.Seconds()) + 1; leased > most || leased < 3 {
			t.Fatalf("leased %d jobs in %v at 5 a second (burst 1), want 3..%d", leased, elapsed, most)
		}
	})
}
