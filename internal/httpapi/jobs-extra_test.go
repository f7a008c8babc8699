package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// pushedAnswer is an enqueue answer with rowq's fields.
type pushedAnswer struct {
	ID            int64           `json:"id"`
	QueueName     string          `json:"queue_name"`
	Category      string          `json:"category"`
	URL           string          `json:"url"`
	Payload       json.RawMessage `json:"payload"`
	RunAfter      int             `json:"run_after"`
	MaxRetries    int             `json:"max_retries"`
	RetryDelay    int             `json:"retry_delay"`
	Priority      *int            `json:"priority"`
	RetryBackoff  string          `json:"retry_backoff"`
	RetryDelayMax int             `json:"retry_delay_max"`
	RetryJitter   float64         `json:"retry_jitter"`
	UniqueKey     *string         `json:"unique_key"`
	Existing      *bool           `json:"existing"`
}

func TestJobsExtra_BadInput(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.Open(t, "sqlite"), func(o *options) { o.enq.DefaultQueue = "default" })
	b.ok(t, "PUT", "/queue/q", "", nil)

	const u = `"url":"http://worker.example/run"`
	job := func(fields string) string { return "{" + u + "," + fields + "}" }
	jobs := func(elems ...string) string { return `{"jobs":[` + strings.Join(elems, ",") + `]}` }
	many := make([]string, 1001)
	for i := range many {
		many[i] = `{"category":"c",` + u + `}`
	}
	tests := []badInput{
		{name: "PriorityTooHigh", body: job(`"priority":1001`), field: "priority"},
		{name: "PriorityTooLow", body: job(`"priority":-1001`), field: "priority"},
		{name: "PriorityFraction", body: job(`"priority":1.5`), field: "priority"},
		{name: "PriorityString", body: job(`"priority":"high"`), field: "priority"},
		{name: "UniqueKeyEmpty", body: job(`"unique_key":""`), field: "unique_key"},
		{name: "UniqueKeyNumber", body: job(`"unique_key":5`), field: "unique_key"},
		{name: "UniqueKeyTooLong", body: job(`"unique_key":"` + strings.Repeat("é", 256) + `"`), field: "unique_key"},
		{name: "UniqueKeyTrailingSpace", body: job(`"unique_key":"a "`), field: "unique_key"},
		{name: "UniqueKeyControl", body: job(`"unique_key":"a\u0000b"`), field: "unique_key"},
		{name: "BackoffUnknown", body: job(`"retry_backoff":"linear","retry_delay":1`), field: "retry_backoff"},
		{name: "DelayMaxWithFixed", body: job(`"retry_delay":1,"retry_delay_max":10`), field: "retry_delay_max"},
		{name: "ExponentialWithoutBase", body: job(`"retry_backoff":"exponential"`), field: "retry_delay"},
		{name: "DelayMaxBelowBase", body: job(`"retry_backoff":"exponential","retry_delay":10,"retry_delay_max":5`), field: "retry_delay_max"},
		{name: "DelayMaxTooLarge", body: job(`"retry_backoff":"exponential","retry_delay":10,"retry_delay_max":2592001`), field: "retry_delay_max"},
		{name: "JitterAboveOne", body: job(`"retry_jitter":1.5`), field: "retry_jitter"},
		{name: "JitterNegative", body: job(`"retry_jitter":-0.1`), field: "retry_jitter"},
		{name: "JitterString", body: job(`"retry_jitter":"0.1"`), field: "retry_jitter"},

		{name: "JobsMissing", path: "/jobs", body: `{}`, field: "jobs"},
		{name: "JobsEmpty", path: "/jobs", body: jobs(), field: "jobs"},
		{name: "JobsTooMany", path: "/jobs", body: jobs(many...), field: "jobs"},
		{name: "JobsNotArray", path: "/jobs", body: `{"jobs":{}}`, field: "jobs"},
		{name: "JobsElementNoURL", path: "/jobs", body: jobs(`{"category":"c",`+u+`}`, `{"category":"c"}`), field: "jobs[1].url"},
		{name: "JobsElementNoCategory", path: "/jobs", body: jobs(`{` + u + `}`), field: "jobs[0].category"},
		{name: "JobsElementBadCategory", path: "/jobs", body: jobs(`{"category":"a b",` + u + `}`), field: "jobs[0].category"},
		{name: "JobsElementUnknownField", path: "/jobs", body: jobs(`{"category":"c",` + u + `,"colour":1}`), field: "jobs[0].colour"},
		{name: "JobsElementWrongType", path: "/jobs", body: jobs(`{"category":"c",` + u + `,"max_retries":"3"}`), field: "jobs[0].max_retries"},
		{name: "JobsElementNotObject", path: "/jobs", body: jobs(`5`), field: "jobs[0]"},
		{name: "JobsElementNull", path: "/jobs", body: jobs(`null`), field: "jobs[0]"},
		{name: "JobsElementBadPriority", path: "/jobs", body: jobs(`{"category":"c",`+u+`}`, `{"category":"c",`+u+`}`, `{"category":"c",`+u+`,"priority":5000}`), field: "jobs[2].priority"},
		{name: "JobsUnknownField", path: "/jobs", body: `{"jobs":[],"x":1}`, field: "x"},

		{name: "PauseUnknownField", path: "/queue/q/pause", body: `{"now":true}`, field: "now"},
		{name: "PauseBadName", path: "/queue/a%20b/pause", field: "name"},
		{name: "ResumeBadName", path: "/queue/a%20b/resume", field: "name"},
		{name: "RetryBadID", path: "/queue/q/failed/abc/retry", field: "id"},
		{name: "RetryZeroID", path: "/queue/q/failed/0/retry", field: "id"},
		{name: "RetryBadQueue", path: "/queue/a%20b/failed/1/retry", field: "name"},
		{name: "BulkRetryNegativeID", path: "/queue/q/failed/retry", body: `{"ids":[1,-2]}`, field: "ids[1]"},
		{name: "BulkRetryIDsNotArray", path: "/queue/q/failed/retry", body: `{"ids":5}`, field: "ids"},
		{name: "BulkRetryUnknownField", path: "/queue/q/failed/retry", body: `{"id":[1]}`, field: "id"},
		{name: "BulkRetryTooManyIDs", path: "/queue/q/failed/retry", body: `{"ids":[` + strings.Repeat("1,", 10000) + `1]}`, field: "ids"},
		{name: "BulkDeleteBadID", method: "DELETE", path: "/queue/q/failed", body: `{"ids":[0]}`, field: "ids[0]"},
		{name: "BulkDeleteFraction", method: "DELETE", path: "/queue/q/failed", body: `{"ids":[1.5]}`, field: "ids"},
		{name: "PutQueuePausedString", method: "PUT", path: "/queue/q", body: `{"paused":"yes"}`, field: "paused"},
	}
	for i := range tests {
		if tests[i].method == "" {
			tests[i].method = "POST"
		}
		if tests[i].path == "" {
			tests[i].path = "/job/cat"
		}
		tests[i].status = http.StatusBadRequest
	}
	tests = append(tests,
		badInput{name: "JobsElementUnrouted", method: "POST", path: "/jobs", body: `{"jobs":[{"category":"c",` + u + `}]}`, status: http.StatusNotFound, field: "jobs[0].category"},
		badInput{name: "PauseMissingQueue", method: "POST", path: "/queue/none/pause", status: http.StatusNotFound, field: "none"},
		badInput{name: "ResumeMissingQueue", method: "POST", path: "/queue/none/resume", status: http.StatusNotFound, field: "none"},
		badInput{name: "RetryMissingEntry", method: "POST", path: "/queue/q/failed/99/retry", status: http.StatusNotFound, field: "id"},
	)
	// Routed to nowhere: a server without a default queue.
	nb := setup(t, dbtest.Open(t, "sqlite"), nil)
	runBadInputs(t, nb, tests[len(tests)-4:len(tests)-3])
	runBadInputs(t, b, append(tests[:len(tests)-4:len(tests)-4], tests[len(tests)-3:]...))

	// The limits themselves are accepted.
	t.Run("Limits", func(t *testing.T) {
		t.Parallel()
		b.ok(t, "POST", "/job/cat", job(`"priority":1000,"unique_key":"`+strings.Repeat("é", 255)+
			`","retry_backoff":"exponential","retry_delay":2592000,"retry_delay_max":2592000,"retry_jitter":1`), nil)
		b.ok(t, "POST", "/job/cat", job(`"priority":-1000,"retry_jitter":0`), nil)
		b.ok(t, "POST", "/jobs", jobs(many[:1000]...), nil)
	})
}

func TestPushJobs_OrderUniqueAndAllOrNothing(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q", "", nil)
		b.ok(t, "PUT", "/queue/r", "", nil)
		b.ok(t, "PUT", "/routing/a", `{"queue_name":"q"}`, nil)
		b.ok(t, "PUT", "/routing/b", `{"queue_name":"r"}`, nil)

		var out struct{ Jobs []pushedAnswer }
		b.ok(t, "POST", "/jobs", `{"jobs":[
			{"category":"a","url":"http://w/1","payload":{"n":1},"priority":5,"unique_key":"k"},
			{"category":"b","url":"http://w/2","retry_backoff":"exponential","retry_delay":2,"retry_delay_max":30,"retry_jitter":0.1},
			{"category":"a","url":"http://w/3","unique_key":"k"},
			{"category":"a","url":"http://w/4"}]}`, &out)
		if len(out.Jobs) != 4 {
			t.Fatalf("POST /jobs answered %d jobs, want 4", len(out.Jobs))
		}
		j := out.Jobs
		if j[0].QueueName != "q" || j[1].QueueName != "r" || j[0].URL != "http://w/1" || j[1].URL != "http://w/2" || j[3].URL != "http://w/4" {
			t.Fatalf("answers out of request order: %+v", j)
		}
		if j[0].Existing == nil || *j[0].Existing || j[0].UniqueKey == nil || *j[0].UniqueKey != "k" || *j[0].Priority != 5 {
			t.Fatalf("first keyed job = %+v, want existing false, key k, priority 5", j[0])
		}
		if j[2].Existing == nil || !*j[2].Existing || j[2].ID != j[0].ID || j[2].URL != "http://w/1" || string(j[2].Payload) != `{"n":1}` {
			t.Fatalf("second keyed job = %+v, want job %d (existing)", j[2], j[0].ID)
		}
		if j[1].Existing != nil || j[1].UniqueKey != nil || j[1].RetryBackoff != "exponential" || j[1].RetryDelayMax != 30 || j[1].RetryJitter != 0.1 || *j[1].Priority != 0 {
			t.Fatalf("unkeyed job = %+v", j[1])
		}
		st, err := b.st.JobGet(t.Context(), "r", j[1].ID)
		if err != nil || st.RetryBackoff != store.BackoffExponential || st.RetryDelay != 2 || st.RetryDelayMax != 30 || st.RetryJitter != 0.1 {
			t.Fatalf("stored job = %+v, %v", st, err)
		}

		// The same key through POST /job answers the pending job too.
		var one pushedAnswer
		b.ok(t, "POST", "/job/a", `{"url":"http://w/5","unique_key":"k"}`, &one)
		if one.ID != j[0].ID || one.Existing == nil || !*one.Existing || one.URL != "http://w/1" {
			t.Fatalf("POST /job with a pending key = %+v, want job %d", one, j[0].ID)
		}

		// One bad element refuses the whole request; nothing is stored.
		before := countJobs(t, b.st, "q")
		res := b.do(t, "POST", "/jobs", `{"jobs":[{"category":"a","url":"http://w/6"},{"category":"nowhere","url":"http://w/7"}]}`)
		if msg := errorMessage(t, res, http.StatusNotFound); !strings.Contains(msg, "jobs[1].category") {
			t.Fatalf("error %q does not name jobs[1].category", msg)
		}
		if after := countJobs(t, b.st, "q"); after != before {
			t.Fatalf("a refused POST /jobs stored %d jobs", after-before)
		}
	})
}

// countJobs counts the jobs of a queue by grabbing them all (and putting
// them back: the rescue frees grabs whose lease has passed).
func countJobs(t *testing.T, st store.Store, queue string) int {
	t.Helper()
	jobs, err := st.JobsGrab(t.Context(), &store.JobsGrabParams{Queue: queue, Node: "count", Limit: 100000, Lease: -time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.JobsRescue(t.Context(), queue); err != nil {
		t.Fatal(err)
	}
	return len(jobs)
}

// TestPushJob_UniqueKeyConcurrent enqueues one key from many clients at
// once, among plain enqueues that share the group commit: one keyed job is
// stored, every answer names it, and the plain jobs get their own ids.
func TestPushJob_UniqueKeyConcurrent(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q", "", nil)
		b.ok(t, "PUT", "/routing/cat", `{"queue_name":"q"}`, nil)
		const n = 32
		var (
			wg           sync.WaitGroup
			mu           sync.Mutex
			keyed, plain = map[int64]int{}, map[int64]int{}
			fresh        int
			failures     []string
			pushOne      = func(body string) (*pushedAnswer, string) {
				res := b.do(t, "POST", "/job/cat", body)
				if res.status != http.StatusOK {
					return nil, fmt.Sprintf("%d %s", res.status, res.body)
				}
				var a pushedAnswer
				if err := json.Unmarshal(res.body, &a); err != nil {
					return nil, err.Error()
				}
				return &a, ""
			}
		)
		for i := range n {
			wg.Go(func() {
				a, fail := pushOne(fmt.Sprintf(`{"url":"http://w/%d","unique_key":"order-42"}`, i))
				p, pfail := pushOne(fmt.Sprintf(`{"url":"http://w/plain/%d"}`, i))
				mu.Lock()
				defer mu.Unlock()
				if fail != "" || pfail != "" {
					failures = append(failures, fail+pfail)
					return
				}
				keyed[a.ID]++
				plain[p.ID]++
				if a.Existing != nil && !*a.Existing {
					fresh++
				}
			})
		}
		wg.Wait()
		if len(failures) > 0 {
			t.Fatalf("%d enqueues failed, first: %s", len(failures), failures[0])
		}
		if len(keyed) != 1 || fresh != 1 {
			t.Fatalf("keyed enqueues gave ids %v with %d new, want one id, one new", keyed, fresh)
		}
		if len(plain) != n {
			t.Fatalf("plain enqueues gave %d distinct ids, want %d", len(plain), n)
		}
		for id := range keyed {
			if plain[id] > 0 {
				t.Fatalf("id %d given to a keyed and a plain job", id)
			}
		}
		if got := countJobs(t, b.st, "q"); got != n+1 {
			t.Fatalf("queue holds %d jobs, want %d", got, n+1)
		}
	})
}

func TestQueues_PauseResume(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		var q struct {
			Name       string `json:"name"`
			MaxWorkers int    `json:"max_workers"`
			Paused     *bool  `json:"paused"`
		}
		paused := func(want bool) {
			t.Helper()
			if q.Paused == nil || *q.Paused != want {
				t.Fatalf("queue %+v, want paused %v", q, want)
			}
		}
		b.ok(t, "PUT", "/queue/q", `{"max_workers":3}`, &q)
		paused(false)
		b.ok(t, "POST", "/queue/q/pause", "", &q)
		paused(true)
		b.ok(t, "GET", "/queue/q", "", &q)
		paused(true)
		// PUT without "paused" keeps the pause.
		b.ok(t, "PUT", "/queue/q", `{"max_workers":4}`, &q)
		paused(true)
		if q.MaxWorkers != 4 {
			t.Fatalf("PUT did not apply max_workers: %+v", q)
		}
		var list []map[string]any
		b.ok(t, "GET", "/queues", "", &list)
		if len(list) != 1 || list[0]["paused"] != true {
			t.Fatalf("GET /queues = %v, want q paused", list)
		}
		b.ok(t, "POST", "/queue/q/resume", "{}", &q)
		paused(false)
		b.ok(t, "PUT", "/queue/q", `{"paused":true}`, &q)
		paused(true)
		b.ok(t, "PUT", "/queue/q", `{"paused":false}`, &q)
		paused(false)
		// Pausing twice is fine.
		b.ok(t, "POST", "/queue/q/pause", "", &q)
		b.ok(t, "POST", "/queue/q/pause", "", &q)
		paused(true)
	})
}

// failEntries stores n failed jobs of queue through the store and returns
// their log entries, oldest first.
func failEntries(t *testing.T, st store.Store, queue string, n int) []*store.FailedJob {
	t.Helper()
	ctx := context.Background()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Queue: queue, Category: "cat", URL: "http://w/", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			MaxRetries: 2, RetryDelay: 5, Timeout: 7, JobOptions: store.JobOptions{Priority: 9}}
	}
	ids, err := st.JobsInsert(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: queue, Node: "n", Limit: n, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	out := make([]*store.FailedJob, n)
	for i, id := range ids {
		if out[i], err = st.JobFail(ctx, &store.JobFailParams{ID: id, Node: "n", Status: "permanent-failure", Code: 500}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestFailedJobs_RetryAndDelete(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		fs := failEntries(t, b.st, "q", 6)

		var j pushedAnswer
		b.ok(t, "POST", fmt.Sprintf("/queue/q/failed/%d/retry", fs[0].ID), "", &j)
		if j.ID != fs[0].JobID || j.QueueName != "q" || string(j.Payload) != `{"i":0}` || j.MaxRetries != 2 || j.RetryDelay != 5 || *j.Priority != 9 || j.RunAfter != 0 {
			t.Fatalf("retry answer = %+v, want job %d with its settings", j, fs[0].JobID)
		}
		msg := errorMessage(t, b.do(t, "POST", fmt.Sprintf("/queue/q/failed/%d/retry", fs[0].ID), ""), http.StatusNotFound)
		if !strings.Contains(msg, "id") {
			t.Fatalf("second retry error %q does not name id", msg)
		}

		var n map[string]int
		b.ok(t, "POST", "/queue/q/failed/retry", fmt.Sprintf(`{"ids":[%d,%d,999999]}`, fs[1].ID, fs[2].ID), &n)
		if n["retried"] != 2 {
			t.Fatalf("bulk retry of 2 ids = %v", n)
		}
		b.ok(t, "POST", "/queue/q/failed/retry", `{"ids":[]}`, &n)
		if n["retried"] != 0 {
			t.Fatalf("bulk retry of no ids = %v", n)
		}
		if got := countJobs(t, b.st, "q"); got != 3 {
			t.Fatalf("queue holds %d jobs after 3 retries", got)
		}
		b.ok(t, "DELETE", "/queue/q/failed", fmt.Sprintf(`{"ids":[%d]}`, fs[3].ID), &n)
		if n["deleted"] != 1 {
			t.Fatalf("bulk delete of 1 id = %v", n)
		}
		b.ok(t, "DELETE", "/queue/q/failed", "", &n)
		if n["deleted"] != 2 {
			t.Fatalf("bulk delete of all = %v, want 2", n)
		}
		for _, f := range fs {
			if _, err := b.st.FailedJobGet(t.Context(), "q", f.ID); err == nil {
				t.Fatalf("entry %d still in the log", f.ID)
			}
		}
		b.ok(t, "POST", "/queue/q/failed/retry", "", &n)
		if n["retried"] != 0 {
			t.Fatalf("bulk retry of an empty log = %v", n)
		}
	})
}

// TestFailedJobs_BulkRetryManyChunks retries more entries than one
// transaction takes.
func TestFailedJobs_BulkRetryManyChunks(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		failEntries(t, b.st, "q", 1100)
		var n map[string]int
		b.ok(t, "POST", "/queue/q/failed/retry", "", &n)
		if n["retried"] != 1100 {
			t.Fatalf("bulk retry = %v, want 1100", n)
		}
		if got := countJobs(t, b.st, "q"); got != 1100 {
			t.Fatalf("queue holds %d jobs, want 1100", got)
		}
	})
}
