package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// Flows end to end (docs/lifecycle.md): dependencies, callbacks and
// batches through the HTTP API, delivered by a node to a worker.

// pushedIDs returns the ids of a POST /jobs answer, and which are blocked.
func pushedIDs(t *testing.T, out map[string]any) ([]int64, []bool) {
	t.Helper()
	var ids []int64
	var blocked []bool
	for _, j := range out["jobs"].([]any) {
		m := j.(map[string]any)
		ids = append(ids, int64(m["id"].(float64)))
		blocked = append(blocked, m["blocked"] == true)
	}
	return ids, blocked
}

// flowOf returns the flow GET /queue/{q}/job/{id} shows.
func flowOf(t *testing.T, s *server.Server, q string, id int64) (string, map[string]any) {
	t.Helper()
	code, job := jobState(t, s, q, id)
	if code != 200 {
		t.Fatalf("GET job %d = %d %v", id, code, job)
	}
	f, _ := job["flow"].(map[string]any)
	return fmt.Sprint(job["status"]), f
}

func numbers(v any) []int64 {
	var out []int64
	for _, x := range v.([]any) {
		out = append(out, int64(x.(float64)))
	}
	return out
}

// TestJobFlow_Chain: A → B → C runs in that order, B and C blocked until
// their parent succeeded, shown blocked with what they wait for; a job
// enqueued alone may wait for an existing job by id; cancelling a parent
// cancels its dependents.
func TestJobFlow_Chain(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		gate := make(chan struct{})
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			if body == "A" {
				<-gate
			}
			return 200, `{"status":"success"}`, 0
		})
		setupQueue(t, s, "q", "cat", nil)
		job := func(payload string, deps ...map[string]any) map[string]any {
			j := map[string]any{"category": "cat", "url": w.URL, "payload": payload}
			if deps != nil {
				j["depends_on"] = deps
			}
			return j
		}
		out := mustCall(t, s, "POST", "/jobs", map[string]any{"jobs": []any{
			job("A"), job("B", map[string]any{"index": 0}), job("C", map[string]any{"index": 1}),
		}})
		ids, blocked := pushedIDs(t, out)
		if !slices.Equal(blocked, []bool{false, true, true}) || out["batch_id"] != nil {
			t.Fatalf("POST /jobs = %v, want B and C blocked, no batch", out)
		}
		a, b, c := ids[0], ids[1], ids[2]
		testworker.WaitFor(t, 30*time.Second, "A in delivery", func() bool { return w.Count("A") == 1 })

		d := mustCall(t, s, "POST", "/job/cat", map[string]any{"url": w.URL, "payload": "D", "depends_on": []any{map[string]any{"id": a}}})
		if d["blocked"] != true {
			t.Fatalf("POST /job/cat depending on live job %d = %v, want blocked", a, d)
		}
		st, f := flowOf(t, s, "q", b)
		if st != "blocked" || !slices.Equal(numbers(f["waits_for"]), []int64{a}) || !slices.Equal(numbers(f["dependents"]), []int64{c}) ||
			f["on_parent_failure"] != "cancel" {
			t.Fatalf("job B = %s %v, want blocked waiting for %d with dependent %d", st, f, a, c)
		}
		if _, f := flowOf(t, s, "q", a); !slices.Equal(numbers(f["dependents"]), []int64{b, int64(d["id"].(float64))}) {
			t.Fatalf("job A's flow = %v, want dependents B and D", f)
		}
		page := mustCall(t, s, "GET", "/queue/q/blocked?limit=2", nil)
		jobs := page["jobs"].([]any)
		if len(jobs) != 2 || page["next_cursor"] == nil || jobs[0].(map[string]any)["status"] != "blocked" {
			t.Fatalf("GET /queue/q/blocked?limit=2 = %v, want B and C, and a next page", page)
		}
		page = mustCall(t, s, "GET", "/queue/q/blocked?cursor="+page["next_cursor"].(string), nil)
		if jobs := page["jobs"].([]any); len(jobs) != 1 || page["next_cursor"] != nil {
			t.Fatalf("blocked, second page = %v, want D alone", page)
		}
		if waiting := mustCall(t, s, "GET", "/queue/q/waiting", nil)["jobs"].([]any); len(waiting) != 0 {
			t.Fatalf("GET /queue/q/waiting = %v, want no blocked job there", waiting)
		}
		close(gate)
		testworker.WaitFor(t, 30*time.Second, "C delivered", func() bool { return w.Count("C") == 1 })
		arrivals := slices.DeleteFunc(w.Arrivals(), func(s string) bool { return s == "D" })
		if !slices.Equal(arrivals, []string{"A", "B", "C"}) {
			t.Fatalf("arrivals %v, want A, B, C", arrivals)
		}
		testworker.WaitFor(t, 30*time.Second, "D delivered", func() bool { return w.Count("D") == 1 })

		// Cancelling a parent cancels its blocked dependent.
		out = mustCall(t, s, "POST", "/jobs", map[string]any{"jobs": []any{
			map[string]any{"category": "cat", "url": w.URL, "payload": "X", "run_after": 3600}, job("Y", map[string]any{"index": 0}),
		}})
		ids, _ = pushedIDs(t, out)
		mustCall(t, s, "POST", fmt.Sprintf("/queue/q/job/%d/cancel", ids[0]), nil)
		if code, out := jobState(t, s, "q", ids[1]); code != 404 {
			t.Fatalf("the dependent of a cancelled job: %d %v, want it gone (cancelled)", code, out)
		}
	})
}

// callbackBodies collects the callbacks a worker got, by their own
// payload's "note".
func callbackBodies(t *testing.T, w *testworker.Worker) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, body := range w.Arrivals() {
		var m map[string]any
		if json.Unmarshal([]byte(body), &m) != nil {
			continue
		}
		if p, ok := m["payload"].(map[string]any); ok {
			out[fmt.Sprint(p["note"])] = m
		}
	}
	return out
}

// TestJobFlow_CallbackPayload: a callback gets, as its worker's body, the
// job as it ended (id, queue, category, status, attempts, the worker's
// result and message) and its own payload: on_success and on_finish of a
// pushed job that succeeded, on_failure of one that failed for good,
// on_success of a pulled job completed with a result. /metrics counts
// them.
func TestJobFlow_CallbackPayload(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			switch body {
			case "S":
				return 200, `{"status":"success","message":"done","result":{"rows":3}}`, 0
			case "F":
				return 500, `{"status":"permanent-failure","message":"bad"}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		setupQueue(t, s, "q", "cat", nil)
		setupQueue(t, s, "cbq", "cb", nil)
		pullQueue(t, s, "pq", "pc", nil)
		cb := func(note string) map[string]any {
			return map[string]any{"category": "cb", "url": w.URL, "payload": map[string]any{"note": note}}
		}
		sID := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "S", "on_success": cb("s"), "on_failure": cb("never"), "on_finish": cb("fin")})
		fID := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "F", "on_success": cb("never"), "on_failure": cb("f")})
		pID := push(t, s, "pc", map[string]any{"payload": "P", "on_success": cb("p")})
		jobs := lease(t, s, "pq", map[string]any{"max": 1, "wait": 10})
		if len(jobs) != 1 || jobs[0].ID != pID {
			t.Fatalf("leased %v, want job %d", jobs, pID)
		}
		mustCall(t, s, "POST", fmt.Sprintf("/job/%d/complete", pID), map[string]any{"lease_token": jobs[0].LeaseToken, "status": "success",
			"message": "pulled", "result": map[string]any{"n": 1}})

		var got map[string]map[string]any
		testworker.WaitFor(t, 30*time.Second, "four callbacks delivered", func() bool {
			got = callbackBodies(t, w)
			return len(got) >= 4
		})
		jobOf := func(id int64, queue, category, status, message string, result any) map[string]any {
			j := map[string]any{"id": float64(id), "queue_name": queue, "category": category, "status": status, "attempts": 1.0, "message": message}
			if result != nil {
				j["result"] = result
			}
			return j
		}
		want := map[string]map[string]any{
			"s":   {"job": jobOf(sID, "q", "cat", "succeeded", "done", map[string]any{"rows": 3.0}), "payload": map[string]any{"note": "s"}},
			"fin": {"job": jobOf(sID, "q", "cat", "succeeded", "done", map[string]any{"rows": 3.0}), "payload": map[string]any{"note": "fin"}},
			"f":   {"job": jobOf(fID, "q", "cat", "failed", "bad", nil), "payload": map[string]any{"note": "f"}},
			"p":   {"job": jobOf(pID, "pq", "pc", "succeeded", "pulled", map[string]any{"n": 1.0}), "payload": map[string]any{"note": "p"}},
		}
		time.Sleep(300 * time.Millisecond) // a callback too many would show by now
		if got = callbackBodies(t, w); !reflect.DeepEqual(got, want) {
			t.Fatalf("callbacks delivered:\n%v\nwant\n%v", got, want)
		}
		if m := metricsText(t, s); !strings.Contains(m, "\nrowq_flow_callbacks_total 4\n") {
			t.Fatalf("/metrics has no rowq_flow_callbacks_total 4:\n%s", m)
		}
	})
}

// metricsText returns GET /metrics.
func metricsText(t *testing.T, s *server.Server) string {
	t.Helper()
	resp, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestJobFlow_BatchOnFinish: a batch of three jobs, one failing for good,
// calls its on_finish once with its counts and meta, and not its
// on_success; GET /batch/{id} and GET /batches show it finished.
func TestJobFlow_BatchOnFinish(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			if body == "b3" {
				return 500, `{"status":"permanent-failure","message":"bad"}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		setupQueue(t, s, "q", "cat", nil)
		setupQueue(t, s, "cbq", "cb", nil)
		cb := func(note string) map[string]any {
			return map[string]any{"category": "cb", "url": w.URL, "payload": map[string]any{"note": note}}
		}
		var jobs []any
		for _, p := range []string{"b1", "b2", "b3"} {
			jobs = append(jobs, map[string]any{"category": "cat", "url": w.URL, "payload": p})
		}
		out := mustCall(t, s, "POST", "/jobs", map[string]any{"jobs": jobs,
			"batch": map[string]any{"on_success": cb("bs"), "on_finish": cb("bf"), "meta": map[string]any{"name": "nightly"}}})
		id, ok := out["batch_id"].(float64)
		if !ok || id < 1 {
			t.Fatalf("POST /jobs with a batch = %v, want a batch_id", out)
		}
		var got map[string]map[string]any
		testworker.WaitFor(t, 30*time.Second, "the batch's on_finish delivered", func() bool {
			got = callbackBodies(t, w)
			return got["bf"] != nil
		})
		time.Sleep(300 * time.Millisecond)
		got = callbackBodies(t, w)
		b, _ := got["bf"]["batch"].(map[string]any)
		if got["bs"] != nil || w.Count(mustJSON(t, got["bf"])) > 1 || b["id"] != id || b["total"] != 3.0 || b["succeeded"] != 2.0 ||
			b["failed"] != 1.0 || b["cancelled"] != 0.0 || !reflect.DeepEqual(b["meta"], map[string]any{"name": "nightly"}) || b["finished_at"] == nil {
			t.Fatalf("callbacks %v, want on_finish once with the batch's counts and meta, no on_success", got)
		}
		batch := mustCall(t, s, "GET", fmt.Sprintf("/batch/%d", int64(id)), nil)
		if batch["pending"] != 0.0 || batch["failed"] != 1.0 || batch["finished_at"] == nil || batch["total"] != 3.0 {
			t.Fatalf("GET /batch/%d = %v, want it finished", int64(id), batch)
		}
		list := mustCall(t, s, "GET", "/batches", nil)
		if bs := list["batches"].([]any); len(bs) != 1 || bs[0].(map[string]any)["id"] != id {
			t.Fatalf("GET /batches = %v, want the batch", list)
		}
		if code, out := call(t, s, "GET", "/batch/999999", nil); code != 404 {
			t.Fatalf("GET /batch/999999 = %d %v, want 404", code, out)
		}
	})
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJobFlow_UnknownParent: a parent id that is not a job answers 422
// naming the job, its parent and the id, and nothing is stored; so does a
// single enqueue.
func TestJobFlow_UnknownParent(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		job := map[string]any{"category": "cat", "url": "http://127.0.0.1:1/", "run_after": 3600}
		code, out := call(t, s, "POST", "/jobs", map[string]any{"jobs": []any{job,
			map[string]any{"category": "cat", "url": "http://127.0.0.1:1/", "depends_on": []any{map[string]any{"index": 0}, map[string]any{"id": 999999}}}}})
		if want := "jobs[1].depends_on[1]: job 999999 does not exist, or finished and was forgotten"; code != 422 || out["error"] != want {
			t.Fatalf("POST /jobs with an unknown parent = %d %v, want 422 %q", code, out, want)
		}
		if deferred := mustCall(t, s, "GET", "/queue/q/deferred", nil)["jobs"].([]any); len(deferred) != 0 {
			t.Fatalf("after a 422, the queue holds %v, want nothing stored", deferred)
		}
		code, out = call(t, s, "POST", "/job/cat", map[string]any{"url": "http://127.0.0.1:1/", "depends_on": []any{map[string]any{"id": 999999}}})
		if want := "depends_on[0]: job 999999 does not exist, or finished and was forgotten"; code != 422 || out["error"] != want {
			t.Fatalf("POST /job/cat with an unknown parent = %d %v, want 422 %q", code, out, want)
		}
		code, out = call(t, s, "POST", "/job/cat", map[string]any{"url": "http://127.0.0.1:1/", "depends_on": []any{map[string]any{"index": 0}}})
		if code != 400 || !strings.HasPrefix(fmt.Sprint(out["error"]), "depends_on[0].index: ") {
			t.Fatalf("POST /job/cat with a parent by index = %d %v, want 400 naming depends_on[0].index", code, out)
		}
	})
}

// flows sends the flow routes good and bad input, for
// TestOpenAPI_RealAnswersMatch: a chain as a batch, its blocked jobs and
// flows, the batch, a parent it cannot wait for.
func (c *realRun) flows() {
	w := c.w
	var out struct {
		Jobs    []struct{ ID int64 }
		BatchID int64 `json:"batch_id"`
	}
	cb := `{"category":"c","url":"` + w.URL + `","payload":{"n":1}}`
	body := c.call("POST", "/jobs", `{"jobs":[{"category":"c","url":"`+w.URL+`","payload":"later","run_after":3600,"on_success":`+cb+`},`+
		`{"category":"c","url":"`+w.URL+`","depends_on":[{"index":0}],"on_failure":`+cb+`},{"category":"c","url":"`+w.URL+`","depends_on":[{"index":1}],"on_parent_failure":"fail"}],`+
		`"batch":{"on_success":`+cb+`,"on_finish":`+cb+`,"meta":{"k":"v"}}}`, 200)
	if err := json.Unmarshal(body, &out); err != nil || len(out.Jobs) != 3 || out.BatchID == 0 {
		c.t.Fatalf("POST /jobs with a batch: %s", body)
	}
	c.call("POST", "/job/c", fmt.Sprintf(`{"url":%q,"depends_on":[{"id":%d}],"on_finish":%s}`, w.URL, out.Jobs[0].ID, cb), 200)
	c.call("GET", "/queue/q/blocked?limit=1&cursor="+c.nextCursor(c.call("GET", "/queue/q/blocked?limit=1", "", 200)), "", 200)
	c.call("GET", "/queue/q/blocked?cursor=nope", "", 400)
	c.call("GET", "/queue/nope/blocked", "", 404)
	for _, j := range out.Jobs {
		c.call("GET", fmt.Sprintf("/queue/q/job/%d", j.ID), "", 200)
	}
	c.call("GET", fmt.Sprintf("/batch/%d", out.BatchID), "", 200)
	c.call("GET", "/batch/999999", "", 404)
	c.call("GET", "/batch/0", "", 400)
	c.call("POST", "/jobs", `{"jobs":[{"category":"c","url":"`+w.URL+`","run_after":3600}],"batch":{}}`, 200)
	c.call("GET", "/batches?limit=1&cursor="+c.nextCursor(c.call("GET", "/batches?limit=1", "", 200)), "", 200)
	c.call("GET", "/batches?cursor=nope", "", 400)
	c.call("POST", "/jobs", `{"jobs":[{"category":"c","url":"`+w.URL+`","depends_on":[{"index":0}]}]}`, 400)
	c.call("POST", "/jobs", `{"jobs":[{"category":"c","url":"`+w.URL+`","depends_on":[{"id":999999}]}]}`, 422)
	c.call("POST", "/job/c", `{"url":"`+w.URL+`","depends_on":[{"id":999999}]}`, 422)
	c.call("POST", fmt.Sprintf("/queue/q/job/%d/cancel", out.Jobs[0].ID), "", 200)
}
