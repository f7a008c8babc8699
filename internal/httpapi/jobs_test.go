package httpapi_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// jobAnswer is the answer to POST /job/{category} as a client decodes it.
type jobAnswer struct {
	ID         int64           `json:"id"`
	QueueName  string          `json:"queue_name"`
	Category   string          `json:"category"`
	URL        string          `json:"url"`
	Payload    json.RawMessage `json:"payload"`
	RunAfter   int64           `json:"run_after"`
	MaxRetries int64           `json:"max_retries"`
	RetryDelay int64           `json:"retry_delay"`
	Timeout    int64           `json:"timeout"`
}

// jsonEqual reports whether a and b hold the same JSON value.
func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(va, vb)
}

func TestPushJob_Answer(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		b.ok(t, "PUT", "/queue/q", "", nil)
		b.ok(t, "PUT", "/routing/cat", `{"queue_name":"q"}`, nil)

		tests := []struct {
			name, body, payload                       string // payload "" = none sent
			runAfter, maxRetries, retryDelay, timeout int64
		}{
			{name: "OnlyURL", body: `{"url":"http://worker.example/run"}`},
			{
				name:     "AllFields",
				body:     `{"url":"https://worker.example:8443/run?x=1&y=<2>","payload":{"b": [1, 2.5, {"c": null}], "a": "é<>&"},"run_after":60,"max_retries":3,"retry_delay":10,"timeout":30}`,
				payload:  `{"b": [1, 2.5, {"c": null}], "a": "é<>&"}`,
				runAfter: 60, maxRetries: 3, retryDelay: 10, timeout: 30,
			},
			{name: "StringPayload", body: `{"url":"http://worker.example/run","payload":"raw body"}`, payload: `"raw body"`},
			{name: "NumberPayload", body: `{"url":"http://worker.example/run","payload":42}`, payload: `42`},
			{name: "ArrayPayload", body: `{"url":"http://worker.example/run","payload":[true,false]}`, payload: `[true,false]`},
			{name: "ZeroValues", body: `{"url":"http://worker.example/run","run_after":0,"max_retries":0,"retry_delay":0,"timeout":0}`},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				var req struct {
					URL string `json:"url"`
				}
				if err := json.Unmarshal([]byte(tc.body), &req); err != nil {
					t.Fatal(err)
				}
				var got jobAnswer
				b.ok(t, "POST", "/job/cat", tc.body, &got)
				if got.ID <= 0 {
					t.Errorf("id = %d, want > 0", got.ID)
				}
				if got, want := got.QueueName, "q"; got != want {
					t.Errorf("queue_name = %q, want %q", got, want)
				}
				if got, want := got.Category, "cat"; got != want {
					t.Errorf("category = %q, want %q", got, want)
				}
				if got, want := got.URL, req.URL; got != want {
					t.Errorf("url = %q, want %q", got, want)
				}
				if tc.payload == "" {
					if len(got.Payload) != 0 && string(got.Payload) != "null" {
						t.Errorf("payload = %s, want none", got.Payload)
					}
				} else if !jsonEqual(t, got.Payload, []byte(tc.payload)) {
					t.Errorf("payload = %s, want %s", got.Payload, tc.payload)
				}
				if got.RunAfter != tc.runAfter || got.MaxRetries != tc.maxRetries || got.RetryDelay != tc.retryDelay || got.Timeout != tc.timeout {
					t.Errorf("run_after, max_retries, retry_delay, timeout = %d, %d, %d, %d; want %d, %d, %d, %d",
						got.RunAfter, got.MaxRetries, got.RetryDelay, got.Timeout, tc.runAfter, tc.maxRetries, tc.retryDelay, tc.timeout)
				}

				// The answer describes what was stored.
				job, err := b.st.JobGet(t.Context(), "q", got.ID)
				if err != nil {
					t.Fatalf("JobGet(q, %d): %v", got.ID, err)
				}
				if job.Category != "cat" || job.URL != req.URL {
					t.Errorf("stored category, url = %q, %q; want %q, %q", job.Category, job.URL, "cat", req.URL)
				}
				if tc.payload == "" {
					if job.Payload != nil {
						t.Errorf("stored payload = %s, want none", job.Payload)
					}
				} else if !jsonEqual(t, job.Payload, []byte(tc.payload)) {
					t.Errorf("stored payload = %s, want %s", job.Payload, tc.payload)
				}
				if job.MaxRetries != int(tc.maxRetries) || job.RetryDelay != int(tc.retryDelay) || job.Timeout != int(tc.timeout) {
					t.Errorf("stored max_retries, retry_delay, timeout = %d, %d, %d; want %d, %d, %d",
						job.MaxRetries, job.RetryDelay, job.Timeout, tc.maxRetries, tc.retryDelay, tc.timeout)
				}
				if d, want := job.NextTry.Sub(job.CreatedAt), time.Duration(tc.runAfter)*time.Second; d < want-time.Second || d > want+time.Second {
					t.Errorf("stored next_try - created_at = %v, want %v", d, want)
				}
			})
		}
	})
}

func TestPushJob_Routing(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		st := setupDialect(t, dialect, nil).st
		// Two APIs on one database: with and without a default queue.
		withDefault := setup(t, st, func(o *options) { o.enq.DefaultQueue = "default" })
		noDefault := setup(t, st, nil)
		withDefault.ok(t, "PUT", "/queue/default", "", nil)
		withDefault.ok(t, "PUT", "/queue/q", "", nil)
		withDefault.ok(t, "PUT", "/queue/gone", "", nil)
		withDefault.ok(t, "PUT", "/routing/routed", `{"queue_name":"q"}`, nil)
		withDefault.ok(t, "PUT", "/routing/orphan", `{"queue_name":"gone"}`, nil)
		withDefault.ok(t, "DELETE", "/queue/gone", "", nil)

		const job = `{"url":"http://worker.example/run"}`
		for _, tc := range []struct {
			name     string
			api      *bundle
			category string
			queue    string // "" = refused with 404
			mention  []string
		}{
			{name: "RoutedWithDefault", api: withDefault, category: "routed", queue: "q"},
			{name: "RoutedNoDefault", api: noDefault, category: "routed", queue: "q"},
			{name: "UnroutedToDefault", api: withDefault, category: "stray", queue: "default"},
			{name: "UnroutedNoDefault", api: noDefault, category: "stray", mention: []string{"category", "stray"}},
			// A routing wins over the default queue even when its queue is gone.
			{name: "DeletedQueueWithDefault", api: withDefault, category: "orphan", mention: []string{"orphan", "gone"}},
			{name: "DeletedQueueNoDefault", api: noDefault, category: "orphan", mention: []string{"orphan", "gone"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if tc.queue == "" {
					msg := errorMessage(t, tc.api.do(t, "POST", "/job/"+tc.category, job), http.StatusNotFound)
					for _, want := range tc.mention {
						if !strings.Contains(msg, want) {
							t.Errorf("error %q does not name %q", msg, want)
						}
					}
					return
				}
				var got jobAnswer
				tc.api.ok(t, "POST", "/job/"+tc.category, job, &got)
				if got.QueueName != tc.queue {
					t.Errorf("queue_name = %q, want %q", got.QueueName, tc.queue)
				}
				if _, err := st.JobGet(t.Context(), tc.queue, got.ID); err != nil {
					t.Errorf("JobGet(%s, %d): %v", tc.queue, got.ID, err)
				}
			})
		}
	})
}

// TestPushJob_Concurrent checks the group commit: concurrent enqueues share
// transactions, yet each gets its own id and each job is stored.
func TestPushJob_Concurrent(t *testing.T) {
	t.Parallel()
	const n = 200
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, func(o *options) { o.enq.DefaultQueue = "q" })
		b.ok(t, "PUT", "/queue/q", "", nil)

		ids := make([]int64, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				id, err := push(b, fmt.Sprintf(`{"url":"http://worker.example/run","payload":{"i":%d}}`, i))
				if err != nil {
					t.Errorf("push %d: %v", i, err)
					return
				}
				ids[i] = id
			})
		}
		close(start)
		wg.Wait()
		if t.Failed() {
			return
		}

		seen := make(map[int64]int, n)
		for i, id := range ids {
			if j, dup := seen[id]; dup {
				t.Errorf("jobs %d and %d both got id %d", j, i, id)
			}
			seen[id] = i
			job, err := b.st.JobGet(t.Context(), "q", id)
			if err != nil {
				t.Errorf("JobGet(q, %d) for push %d: %v", id, i, err)
				continue
			}
			if want := fmt.Sprintf(`{"i":%d}`, i); !jsonEqual(t, job.Payload, []byte(want)) {
				t.Errorf("job %d payload = %s, want %s", id, job.Payload, want)
			}
		}
	})
}

// push posts a job to /job/cat and returns its id; it may run outside the
// test goroutine, so it returns errors instead of failing the test.
func push(b *bundle, body string) (int64, error) {
	res, err := b.server.Client().Post(b.server.URL+"/job/cat", "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return 0, err
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("status %d: %s", res.StatusCode, bytes.TrimSpace(raw))
	}
	var a jobAnswer
	if err := json.Unmarshal(raw, &a); err != nil {
		return 0, err
	}
	return a.ID, nil
}

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
