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
