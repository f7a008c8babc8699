package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// keyJob is the payload of the jobs of the per-key tests.
type keyJob struct {
	Queue string `json:"q"`
	Key   string `json:"k"` // "" for an unkeyed job
	N     int    `json:"n"`
}

// keyWorker is a worker that counts its deliveries in flight per queue and
// concurrency key, and records when one exceeds its limit.
type keyWorker struct {
	*httptest.Server
	limit int
	sleep time.Duration

	mu        sync.Mutex
	open      map[string]int // "queue/key" → deliveries in flight
	peak      map[string]int
	done      map[keyJob]int // successful deliveries
	violation []string
}

func newKeyWorker(t *testing.T, limit int, sleep time.Duration) *keyWorker {
	w := &keyWorker{limit: limit, sleep: sleep, open: map[string]int{}, peak: map[string]int{}, done: map[keyJob]int{}}
	w.Server = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var j keyJob
		if err := json.NewDecoder(r.Body).Decode(&j); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		k := j.Queue + "/" + j.Key
		w.mu.Lock()
		w.open[k]++
		if n := w.open[k]; j.Key != "" && n > w.limit {
			w.violation = append(w.violation, fmt.Sprintf("%s: %d deliveries at once (job %s)", k, n, r.Header.Get("Rowq-Job-Id")))
		}
		w.peak[k] = max(w.peak[k], w.open[k])
		w.mu.Unlock()
		time.Sleep(w.sleep)
		w.mu.Lock()
		w.open[k]--
		w.done[j]++
		w.mu.Unlock()
		fmt.Fprint(rw, `{"status":"success"}`)
	}))
	t.Cleanup(w.Close)
	return w
}

func (w *keyWorker) delivered() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.done)
}

// TestServer_KeyLimitHoldsAcrossNodesAndTakeover: four queues' jobs, on
// four keys each with a limit of 2 beside unkeyed ones, are enqueued
// through two nodes while a second node starts (and takes some queues
// over from the first, whose deliveries run on) and then the first stops
// (the second takes the rest). A checking worker counts the deliveries in
// flight per key: no key ever has more than 2, and every job is delivered
// once.
func TestServer_KeyLimitHoldsAcrossNodesAndTakeover(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := newKeyWorker(t, 2, 40*time.Millisecond)
		dbURL := dbtest.URL(t, dialect)
		healthy := func(cfg *config.Config) { cfg.NodeTTL, cfg.GrabLease = 5*time.Second, 15*time.Second }
		a := startNode(t, dbURL, healthy)
		queues := []string{"q0", "q1", "q2", "q3"}
		for _, q := range queues {
			setupQueue(t, a, q, "cat-"+q, map[string]any{"max_workers": 10, "polling_interval": 100})
		}
		const perQueue = 240
		enqueue := func(s *server.Server, from, to int) {
			var jobs []map[string]any
			for _, q := range queues {
				for i := from; i < to; i++ {
					j := keyJob{Queue: q, N: i}
					job := map[string]any{"category": "cat-" + q, "url": w.URL}
					if i%6 != 5 { // one job in six has no key
						j.Key = fmt.Sprintf("k%d", i%4)
						job["concurrency_key"], job["concurrency_limit"] = j.Key, 2
					}
					job["payload"] = j
					jobs = append(jobs, job)
				}
			}
			mustCall(t, s, "POST", "/jobs", map[string]any{"jobs": jobs})
		}
		enqueue(a, 0, perQueue/3)
		// b starts, and takes queues over, while a delivers keyed jobs.
		testworker.WaitFor(t, 30*time.Second, "a's first deliveries", func() bool { return w.delivered() >= 40 })
		b := startNode(t, dbURL, healthy)
		enqueue(b, perQueue/3, 2*perQueue/3)
		testworker.WaitFor(t, 30*time.Second, "a third of the jobs delivered", func() bool { return w.delivered() >= len(queues)*perQueue/3 })
		if err := a.Stop(nil); err != nil {
			t.Fatal(err)
		}
		enqueue(b, 2*perQueue/3, perQueue)
		testworker.WaitFor(t, 60*time.Second, "every job delivered", func() bool { return w.delivered() == len(queues)*perQueue })
		time.Sleep(200 * time.Millisecond)
		w.mu.Lock()
		defer w.mu.Unlock()
		for _, v := range w.violation {
			t.Error(v)
		}
		for j, n := range w.done {
			if n != 1 {
				t.Errorf("job %+v delivered %d times, want 1", j, n)
			}
		}
		if w.peak["q0/k0"] != 2 {
			t.Logf("peak of q0/k0 = %d (the limit, 2, is expected under load)", w.peak["q0/k0"])
		}
	})
}

// TestServer_OrderedKeyUnderRetries: the jobs of three ordered keys are
// delivered in enqueue order, one at a time; a job whose first try fails
// holds its successors back until its retry succeeds, and one that fails
// for good lets them go once it is in the failure log.
func TestServer_OrderedKeyUnderRetries(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		type delivery struct {
			id int64
			ok bool
		}
		var (
			mu    sync.Mutex
			seen  = map[string][]delivery{} // per key, in order of arrival
			tries = map[int64]int{}
			open  = map[string]int{}
			bad   []string
		)
		const doomed = 7 // this job of each key fails every try
		w := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			var j keyJob
			if err := json.NewDecoder(r.Body).Decode(&j); err != nil {
				http.Error(rw, err.Error(), http.StatusBadRequest)
				return
			}
			id, _ := strconv.ParseInt(r.Header.Get("Rowq-Job-Id"), 10, 64)
			mu.Lock()
			open[j.Key]++
			if open[j.Key] > 1 {
				bad = append(bad, fmt.Sprintf("key %s: %d deliveries at once", j.Key, open[j.Key]))
			}
			tries[id]++
			ok := j.N != doomed && (j.N%3 != 1 || tries[id] > 1) // every third job fails its first try
			mu.Unlock()
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			open[j.Key]--
			seen[j.Key] = append(seen[j.Key], delivery{id, ok})
			mu.Unlock()
			if !ok {
				rw.WriteHeader(http.StatusInternalServerError)
				return
			}
			fmt.Fprint(rw, `{"status":"success"}`)
		}))
		t.Cleanup(w.Close)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 10, "polling_interval": 100})
		keys := []string{"a", "b", "c"}
		const perKey = 12
		var jobs []map[string]any
		for i := range perKey {
			for _, k := range keys {
				retries := 2
				if i == doomed {
					retries = 1
				}
				jobs = append(jobs, map[string]any{"category": "cat", "url": w.URL, "payload": keyJob{Key: k, N: i},
					"concurrency_key": k, "ordered": true, "max_retries": retries, "retry_delay": 1})
			}
		}
		mustCall(t, s, "POST", "/jobs", map[string]any{"jobs": jobs})
		testworker.WaitFor(t, 90*time.Second, "every job done", func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				n := 0
				for _, d := range seen[k] {
					if d.ok {
						n++
					}
				}
				if n < perKey-1 {
					return false
				}
			}
			return true
		})
		mu.Lock()
		defer mu.Unlock()
		for _, b := range bad {
			t.Error(b)
		}
		for _, k := range keys {
			ds := seen[k]
			for i := 1; i < len(ds); i++ {
				prev, cur := ds[i-1], ds[i]
				switch {
				case cur.id < prev.id:
					t.Errorf("key %s: job %d delivered after job %d", k, cur.id, prev.id)
				case cur.id > prev.id && !prev.ok && tries[prev.id] < 2:
					t.Errorf("key %s: job %d delivered before job %d, which failed, was retried", k, cur.id, prev.id)
				}
			}
		}
		if n := len(failedList(t, s, "q")); n != len(keys) {
			t.Errorf("failure log holds %d jobs, want %d (the doomed job of each key)", n, len(keys))
		}
	})
}

// failedList returns the failure log entries of queue q.
func failedList(t *testing.T, s *server.Server, q string) []any {
	t.Helper()
	out := mustCall(t, s, "GET", "/queue/"+q+"/failed", nil)
	list, _ := out["failed_jobs"].([]any)
	return list
}

// TestServer_FullKeyDoesNotBlockOthers: while a key's one slot is taken by
// a delivery that hangs, its other jobs wait without holding worker slots,
// and the queue's other jobs (other keys, no key) are all delivered.
func TestServer_FullKeyDoesNotBlockOthers(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		release := make(chan struct{})
		var (
			mu  sync.Mutex
			hot int
			got = map[string]int{}
		)
		w := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), "hot") {
				mu.Lock()
				hot++
				mu.Unlock()
				<-release
			}
			mu.Lock()
			got[string(body)]++
			mu.Unlock()
			fmt.Fprint(rw, `{"status":"success"}`)
		}))
		t.Cleanup(w.Close)
		var once sync.Once
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 3, "polling_interval": 100})
		var jobs []map[string]any
		for i := range 20 {
			jobs = append(jobs, map[string]any{"category": "cat", "url": w.URL, "payload": fmt.Sprintf("hot-%d", i), "concurrency_key": "hot"})
		}
		for i := range 30 {
			j := map[string]any{"category": "cat", "url": w.URL, "payload": fmt.Sprintf("cold-%d", i)}
			if i%2 == 0 {
				j["concurrency_key"] = fmt.Sprintf("cold-%d", i)
			}
			jobs = append(jobs, j)
		}
		pushed := mustCall(t, s, "POST", "/jobs", map[string]any{"jobs": jobs})["jobs"].([]any)
		testworker.WaitFor(t, 30*time.Second, "the 30 cold jobs delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == 30
		})
		mu.Lock()
		if hot != 1 {
			t.Errorf("%d deliveries of the hot key at once, want 1", hot)
		}
		mu.Unlock()
		// A held-back job shows its key; it is grabbed by the leader. (The
		// cold jobs' acknowledgements may still be on their way.)
		var list []any
		testworker.WaitFor(t, 10*time.Second, "the 20 hot jobs the only ones grabbed", func() bool {
			out := mustCall(t, s, "GET", "/queue/q/grabbed", nil)
			list, _ = out["jobs"].([]any)
			return len(list) == 20
		})
		if j := list[0].(map[string]any); j["concurrency_key"] != "hot" || j["concurrency_limit"] != float64(1) {
			t.Errorf("grabbed job = %v, want concurrency_key hot and concurrency_limit 1", j)
		}
		// Cancelled, a held-back job is not delivered; paused, the queue
		// gives its held-back jobs back to waiting.
		cancelled := int64(pushed[19].(map[string]any)["id"].(float64)) // the last hot job
		if code, out := cancelJob(t, s, "q", cancelled); code != http.StatusOK {
			t.Fatalf("cancel a held-back job = %d %v", code, out)
		}
		mustCall(t, s, "POST", "/queue/q/pause", nil)
		testworker.WaitFor(t, 10*time.Second, "the held-back jobs waiting", func() bool {
			out := mustCall(t, s, "GET", "/queue/q/waiting", nil)
			list, _ := out["jobs"].([]any)
			return len(list) == 18
		})
		mustCall(t, s, "POST", "/queue/q/resume", nil)
		once.Do(func() { close(release) })
		testworker.WaitFor(t, 30*time.Second, "the hot jobs delivered", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) >= 49
		})
		time.Sleep(200 * time.Millisecond)
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 49 {
			t.Errorf("%d jobs delivered, want 49 (the cancelled one not)", len(got))
		}
	})
}

// TestServer_KeyFieldsChecked: the concurrency fields are checked, naming
// the field, shown in the enqueue's answer and the job's, and refused on a
// pull queue.
func TestServer_KeyFieldsChecked(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 1})
		mustCall(t, s, "POST", "/queue/q/pause", nil)
		setupQueue(t, s, "p", "pulled", map[string]any{"delivery": "pull"})
		url := "http://127.0.0.1:1/"
		for _, tc := range []struct {
			name string
			job  map[string]any
			want string
		}{
			{"limit without key", map[string]any{"concurrency_limit": 2}, "concurrency_limit: only with concurrency_key"},
			{"ordered without key", map[string]any{"ordered": true}, "ordered: only with concurrency_key"},
			{"ordered with limit 2", map[string]any{"concurrency_key": "k", "ordered": true, "concurrency_limit": 2}, "ordered: only with concurrency_limit 1"},
			{"limit 0", map[string]any{"concurrency_key": "k", "concurrency_limit": 0}, "concurrency_limit: must be 1..10000"},
			{"empty key", map[string]any{"concurrency_key": ""}, "concurrency_key: must not be empty"},
			{"long key", map[string]any{"concurrency_key": strings.Repeat("é", 192)}, "concurrency_key: at most 191 characters"},
			{"key with a trailing space", map[string]any{"concurrency_key": "k "}, "concurrency_key: must not end with a space"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				tc.job["url"] = url
				code, out := call(t, s, "POST", "/job/cat", tc.job)
				if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, tc.want) {
					t.Errorf("POST /job = %d %v, want 400 %q…", code, out, tc.want)
				}
				tc.job["category"] = "cat"
				code, out = call(t, s, "POST", "/jobs", map[string]any{"jobs": []any{tc.job}})
				if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, "jobs[0]."+tc.want) {
					t.Errorf("POST /jobs = %d %v, want 400 jobs[0].%q…", code, out, tc.want)
				}
			})
		}
		code, out := call(t, s, "POST", "/job/pulled", map[string]any{"concurrency_key": "k"})
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, "concurrency_key: not on queue \"p\"") {
			t.Errorf("keyed job on a pull queue = %d %v, want 400 naming concurrency_key", code, out)
		}
		// The answers show the fields, with the limit's default.
		out = mustCall(t, s, "POST", "/job/cat", map[string]any{"url": url, "concurrency_key": "tenant-1", "ordered": true})
		if out["concurrency_key"] != "tenant-1" || out["concurrency_limit"] != float64(1) || out["ordered"] != true {
			t.Errorf("enqueue answer = %v, want the key, limit 1 and ordered", out)
		}
		got := mustCall(t, s, "GET", fmt.Sprintf("/queue/q/job/%d", int64(out["id"].(float64))), nil)
		if got["concurrency_key"] != "tenant-1" || got["concurrency_limit"] != float64(1) || got["ordered"] != true {
			t.Errorf("GET job = %v, want the key, limit 1 and ordered", got)
		}
		out = mustCall(t, s, "POST", "/job/cat", map[string]any{"url": url})
		if _, ok := out["concurrency_key"]; ok {
			t.Errorf("unkeyed job's answer = %v, want no concurrency fields", out)
		}
	})
}

// TestServer_ScheduleJobsKeepTheirKey: a schedule's concurrency settings
// are checked and shown, and every job it enqueues gets them.
func TestServer_ScheduleJobsKeepTheirKey(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 1})
		mustCall(t, s, "POST", "/queue/q/pause", nil)
		sched := map[string]any{"cron": "* * * * * *", "category": "cat", "url": "http://127.0.0.1:1/",
			"concurrency_key": "nightly", "ordered": true, "concurrency_limit": 3}
		code, out := call(t, s, "PUT", "/schedule/s", sched)
		if msg, _ := out["error"].(string); code != http.StatusBadRequest || !strings.HasPrefix(msg, "ordered: only with concurrency_limit 1") {
			t.Errorf("PUT schedule with ordered and limit 3 = %d %v, want 400 naming ordered", code, out)
		}
		delete(sched, "concurrency_limit")
		out = mustCall(t, s, "PUT", "/schedule/s", sched)
		if out["concurrency_key"] != "nightly" || out["concurrency_limit"] != float64(1) || out["ordered"] != true {
			t.Errorf("schedule = %v, want its concurrency settings", out)
		}
		var jobs []any
		testworker.WaitFor(t, 10*time.Second, "a job of the schedule", func() bool {
			out := mustCall(t, s, "GET", "/queue/q/waiting", nil)
			jobs, _ = out["jobs"].([]any)
			return len(jobs) > 0
		})
		if j := jobs[0].(map[string]any); j["concurrency_key"] != "nightly" || j["concurrency_limit"] != float64(1) || j["ordered"] != true {
			t.Errorf("scheduled job = %v, want the schedule's concurrency settings", j)
		}
	})
}

// TestServer_KeyCountsOtherNodesAndLeases: a keyed job that another node
// still delivers (the leader before a takeover) and one its worker
// accepted (leased) count against their keys: the next job of each key
// waits until they end, while other jobs go.
func TestServer_KeyCountsOtherNodesAndLeases(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			if body == `{"n":4}` {
				return 200, `{"status":"accepted","lease":60}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		dbURL := dbtest.URL(t, dialect)
		st := dbtest.OpenURL(t, dbURL)
		ctx := context.Background()
		if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 100, MaxWorkers: 5}); err != nil {
			t.Fatal(err)
		}
		// The old leader, alive (no session: never reaped), delivers job 1.
		if err := st.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "old-leader", Host: "old:1", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		ids, err := st.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "cat", URL: w.URL, Payload: json.RawMessage(`{"n":1}`),
			JobOptions: store.JobOptions{ConcurrencyKey: "k", ConcurrencyLimit: 1}}})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "old-leader", Limit: 1, Lease: time.Minute}); err != nil || len(got) != 1 {
			t.Fatalf("grab = %v, %v", got, err)
		}
		// A grab lease of 1 s: job 2, held back with no delivery of this
		// node in flight, outlives it, extended.
		s := startNode(t, dbURL, func(cfg *config.Config) { cfg.GrabLease = time.Second })
		mustCall(t, s, "PUT", "/routing/cat", map[string]any{"queue_name": "q"})
		id2 := push(t, s, "cat", map[string]any{"url": w.URL, "payload": map[string]int{"n": 2}, "concurrency_key": "k"})
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": map[string]int{"n": 3}})
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": map[string]int{"n": 4}, "concurrency_key": "a"})
		testworker.WaitFor(t, 10*time.Second, "the unkeyed job and the accepted one delivered", func() bool {
			return w.Count(`{"n":3}`) == 1 && w.Count(`{"n":4}`) == 1
		})
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": map[string]int{"n": 5}, "concurrency_key": "a"})
		time.Sleep(3 * time.Second)
		if j, err := s.Store().JobGet(ctx, "q", id2); err != nil || j.Grabs != 1 || j.State != store.StateGrabbed {
			t.Fatalf("job 2 after 3 grab leases held back = %+v, %v; want grabbed once, still (extended, not rescued)", j, err)
		}
		if n := w.Count(`{"n":2}`); n != 0 {
			t.Fatalf("job 2 delivered %d times while job 1 of its key was in delivery on another node", n)
		}
		if n := w.Count(`{"n":5}`); n != 0 {
			t.Fatalf("job 5 delivered %d times while job 4 of its key was leased", n)
		}
		// The old leader's delivery ends, and the worker completes job 4.
		if n, err := st.JobsComplete(ctx, &store.JobsCompleteParams{Node: "old-leader", IDs: ids}); err != nil || n != 1 {
			t.Fatalf("complete the old leader's job = %d, %v", n, err)
		}
		id4 := w.Of(`{"n":4}`)[0].Header.Get("Rowq-Job-Id")
		mustCall(t, s, "POST", "/job/"+id4+"/complete", map[string]any{"lease_token": leaseToken(t, w, `{"n":4}`, 0), "status": "success"})
		testworker.WaitFor(t, 10*time.Second, "jobs 2 and 5 delivered once their keys are free", func() bool {
			return w.Count(`{"n":2}`) == 1 && w.Count(`{"n":5}`) == 1
		})
	})
}
