package server_test

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// scrape reads GET /metrics into series ("name{labels}") → value.
func scrape(t *testing.T, s *server.Server) map[string]float64 {
	t.Helper()
	res, err := http.Get("http://" + s.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("GET /metrics: %d %s", res.StatusCode, b)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestServer_MetricsReportQueueStatistics: after a success and a
// permanent failure, /metrics reports the queue's counters and gauges,
// and a second node on the same database reports the same values once
// the first has written its counts.
func TestServer_MetricsReportQueueStatistics(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			if body == "bad" {
				return 422, `{"status":"permanent-failure"}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		url := dbtest.URL(t, dialect)
		a := startNode(t, url, nil)
		setupQueue(t, a, "q", "cat", map[string]any{"max_workers": 7})
		push(t, a, "cat", map[string]any{"url": w.URL, "payload": "good"})
		push(t, a, "cat", map[string]any{"url": w.URL, "payload": "bad"})
		var m map[string]float64
		// A scrape reads the database, then adds this node's counts not yet
		// written: an outcome recorded in between shows in completes_total
		// before its job leaves outstanding_jobs, until the next scrape.
		testworker.WaitFor(t, 10*time.Second, "both outcomes in /metrics", func() bool {
			m = scrape(t, a)
			return m[`rowq_queue_completes_total{queue="q"}`] == 2 && m[`rowq_queue_outstanding_jobs{queue="q"}`] == 0
		})
		want := map[string]float64{
			`rowq_stats_up`:                                  1,
			`rowq_queue_pushes_total{queue="q"}`:             2,
			`rowq_queue_pops_total{queue="q"}`:               2,
			`rowq_queue_successes_total{queue="q"}`:          1,
			`rowq_queue_failures_total{queue="q"}`:           1,
			`rowq_queue_permanent_failures_total{queue="q"}`: 1,
			`rowq_queue_outstanding_jobs{queue="q"}`:         0,
			`rowq_queue_max_workers{queue="q"}`:              7,
			`rowq_queue_dispatching{queue="q"}`:              1,
			`rowq_build_info{version="dev"}`:                 1,
		}
		check := func(node string, m map[string]float64) {
			t.Helper()
			for k, v := range want {
				if got, ok := m[k]; !ok || got != v {
					t.Errorf("%s: %s = %v (present %v), want %v", node, k, got, ok, v)
				}
			}
			if _, ok := m["go_goroutines"]; !ok {
				t.Errorf("%s: no go_goroutines: the Go collector is missing", node)
			}
		}
		check("node a", m)
		// Node a shows its own counts at once; another node shows them
		// once node a has written them (every second).
		b := startNode(t, url, nil)
		testworker.WaitFor(t, 10*time.Second, "node a's counts in node b's /metrics", func() bool {
			m = scrape(t, b)
			return m[`rowq_queue_completes_total{queue="q"}`] == 2
		})
		check("node b", m)
	})
}

// TestServer_MetricsReportWait: a job that waits in a paused queue for
// half a second before its delivery adds that wait to
// rowq_queue_wait_seconds_total (the enqueue→delivery latency the
// dashboard charts), and one delivered at once adds about nothing.
func TestServer_MetricsReportWait(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) { return 200, `{"status":"success"}`, 0 })
		a := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, a, "q", "cat", map[string]any{"paused": true})
		push(t, a, "cat", map[string]any{"url": w.URL, "payload": "waits"})
		time.Sleep(500 * time.Millisecond)
		mustCall(t, a, "POST", "/queue/q/resume", nil)
		var m map[string]float64
		testworker.WaitFor(t, 10*time.Second, "the delivery in /metrics", func() bool {
			m = scrape(t, a)
			return m[`rowq_queue_completes_total{queue="q"}`] == 1
		})
		waited := m[`rowq_queue_wait_seconds_total{queue="q"}`]
		if waited < 0.45 || waited > 10 {
			t.Errorf("rowq_queue_wait_seconds_total = %v after a job waited 0.5 s in a paused queue", waited)
		}
		push(t, a, "cat", map[string]any{"url": w.URL, "payload": "at once"})
		testworker.WaitFor(t, 10*time.Second, "the second delivery in /metrics", func() bool {
			m = scrape(t, a)
			return m[`rowq_queue_completes_total{queue="q"}`] == 2
		})
		if d := m[`rowq_queue_wait_seconds_total{queue="q"}`] - waited; d > 2 {
			t.Errorf("a job delivered at once added %v s of wait", d)
		}
	})
}
