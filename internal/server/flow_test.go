package server_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// workerHosts returns GET /queue/{q}'s worker_hosts by host.
func workerHosts(t *testing.T, s *server.Server, q string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	hs, _ := mustCall(t, s, "GET", "/queue/"+q, nil)["worker_hosts"].([]any)
	for _, h := range hs {
		m := h.(map[string]any)
		out[m["host"].(string)] = m
	}
	return out
}

// TestServer_RetryAfterDefersWithoutSpendingRetries: a worker answers the
// first two deliveries of each job 429 with Retry-After: 1. The jobs have
// no retry, yet all succeed on their third delivery, each at least about
// a second after the one before; the queue shows the host slowed down.
func TestServer_RetryAfterDefersWithoutSpendingRetries(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		var mu sync.Mutex
		seen := map[string]int{}
		w := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("Rowq-Job-Id")
			mu.Lock()
			seen[id]++
			n := seen[id]
			mu.Unlock()
			if n <= 2 {
				// Slow to answer: the queue has parked and been looked at
				// before the deferral is recorded.
				time.Sleep(300 * time.Millisecond)
				rw.Header().Set("Retry-After", "1")
				rw.WriteHeader(http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(rw, `{"status":"success"}`)
		}))
		t.Cleanup(w.Close)
		// A grab lease of the default 30 s: no expiry of the deliveries'
		// grabs brings a look at the queue either.
		s := startNode(t, dbtest.URL(t, dialect), func(cfg *config.Config) { cfg.GrabLease = 30 * time.Second })
		// A minute's polling_interval: the deferred jobs are found by
		// their due times, not by a poll.
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 4, "polling_interval": 60000})
		var ids []int64
		for i := range 3 {
			ids = append(ids, push(t, s, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprint(i), "max_retries": 0}))
		}
		start := time.Now()
		testworker.WaitFor(t, 60*time.Second, "the 3 jobs done", func() bool {
			for _, id := range ids {
				if code, _ := call(t, s, "GET", fmt.Sprintf("/queue/q/job/%d", id), nil); code != http.StatusNotFound {
					return false
				}
			}
			return true
		})
		if took := time.Since(start); took < 1800*time.Millisecond || took > 30*time.Second {
			t.Errorf("jobs deferred twice by 1 s each were done in %v, want about 2 s (well under the polling_interval)", took)
		}
		mu.Lock()
		for id, n := range seen {
			if n != 3 {
				t.Errorf("job %s delivered %d times, want 3", id, n)
			}
		}
		mu.Unlock()
		for _, id := range ids {
			if f := failedEntry(t, s, "q", id); f != nil {
				t.Errorf("job %d is in the failure log: %+v", id, f)
			}
		}
		host := strings.TrimPrefix(w.URL, "http://")
		testworker.WaitFor(t, 10*time.Second, "the slowed host shown", func() bool {
			h := workerHosts(t, s, "q")[host]
			return h != nil && h["rate"] != nil && h["breaker"] == "closed"
		})
	})
}

// TestServer_BreakerHoldsADeadHostsJobs: a queue's jobs go to a host that
// refuses connections and to one that works. The working host's jobs are
// all delivered; the dead host's breaker opens after 5 failures, shows in
// GET /queue/{name} and /metrics, and holds its jobs without spending
// their retries; once the host is back, a probe closes the breaker and
// every job is delivered.
func TestServer_BreakerHoldsADeadHostsJobs(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := l.Addr().String()
		l.Close()
		good := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), func(c *config.Config) { c.BreakerOpen = time.Second })
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 2})
		var deadIDs []int64
		for i := range 8 {
			deadIDs = append(deadIDs, push(t, s, "cat", map[string]any{"url": "http://" + dead + "/work", "payload": fmt.Sprint("d", i), "max_retries": 1000, "retry_delay": 1}))
			push(t, s, "cat", map[string]any{"url": good.URL, "payload": fmt.Sprint("g", i)})
		}
		testworker.WaitFor(t, 30*time.Second, "the working host's 8 jobs", func() bool { return good.Distinct() == 8 })
		testworker.WaitFor(t, 30*time.Second, "the dead host's breaker shown", func() bool {
			h := workerHosts(t, s, "q")[dead]
			return h != nil && h["breaker"] != "closed"
		})
		m := scrape(t, s)
		if _, ok := m[fmt.Sprintf(`rowq_worker_host_breaker_state{host=%q,queue="q"}`, dead)]; !ok {
			t.Errorf("/metrics has no breaker state of %s", dead)
		}
		// 5 failures opened it; then only probes (1 s, 2 s, 4 s apart) and
		// deliveries that were in flight fail. Without the breaker the 8
		// jobs would fail about every second each.
		time.Sleep(3 * time.Second)
		fails := 0
		for _, id := range deadIDs {
			j := mustCall(t, s, "GET", fmt.Sprintf("/queue/q/job/%d", id), nil)
			fails += int(j["fail_count"].(float64))
		}
		if fails > 12 {
			t.Errorf("the dead host's jobs failed %d times in all, want the breaker to hold them (at most 12)", fails)
		}

		// The host comes back.
		var mu sync.Mutex
		delivered := map[string]bool{}
		l, err = net.Listen("tcp", dead)
		if err != nil {
			t.Fatal(err)
		}
		back := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			delivered[string(b)] = true
			mu.Unlock()
			fmt.Fprint(rw, `{"status":"success"}`)
		}))
		back.Listener.Close()
		back.Listener = l
		back.Start()
		t.Cleanup(back.Close)
		testworker.WaitFor(t, 90*time.Second, "the dead host's 8 jobs delivered once it is back", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(delivered) == 8
		})
		testworker.WaitFor(t, 10*time.Second, "the host no longer shown", func() bool { return workerHosts(t, s, "q")[dead] == nil })
	})
}

// TestServer_BusyHostIsSlowedDown: a queue throttled to 4 dispatches a
// second (burst 4) sends 10 jobs in about 1.5 s. After its worker answered
// one 429, the host gets half that rate, so the same 10 jobs take about
// 4.5 s. Only a lower bound on time is checked, so a slow machine cannot
// fail the test.
func TestServer_BusyHostIsSlowedDown(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			if body == "first" {
				return http.StatusTooManyRequests, "busy", 0
			}
			return http.StatusOK, `{"status":"success"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 10, "max_dispatches_per_second": 4})
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": "first", "max_retries": 0})
		host := strings.TrimPrefix(w.URL, "http://")
		testworker.WaitFor(t, 30*time.Second, "the busy host shown slowed down", func() bool {
			h := workerHosts(t, s, "q")[host]
			return h != nil && h["rate"] != nil
		})
		const n = 10
		for i := range n {
			push(t, s, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprint(i)})
		}
		testworker.WaitFor(t, 60*time.Second, "10 deliveries", func() bool { return w.Distinct() == n+1 })
		first, last := time.Time{}, time.Time{}
		for i := range n {
			for _, d := range w.Of(fmt.Sprint(i)) {
				if first.IsZero() || d.At.Before(first) {
					first = d.At
				}
				if d.At.After(last) {
					last = d.At
				}
			}
		}
		if span := last.Sub(first); span < 3*time.Second {
			t.Errorf("10 jobs to a host slowed to 2/s went out in %v, want about 4.5s (the queue alone allows 1.5s)", span)
		}
	})
}
