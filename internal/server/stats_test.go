package server_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestServer_StatsAcrossNodesAndRestarts pushes jobs through two nodes of
// one database and checks that either node reports the same counters, and
// that they survive a restart of every node.
func TestServer_StatsAcrossNodesAndRestarts(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			switch {
			case body == "perm":
				return 200, `{"status":"permanent-failure"}`, 0
			case body == "retry" && attempt == 1:
				return 500, `{"status":"failure"}`, 0
			}
			return 200, `{"status":"success"}`, 10 * time.Millisecond
		})
		db := dbtest.URL(t, dialect)
		a := startNode(t, db, nil)
		b := startNode(t, db, nil)
		setupQueue(t, a, "q", "cat", map[string]any{"max_workers": 7})
		if code, out := call(t, b, "GET", "/queue/nope/stats", nil); code != http.StatusNotFound {
			t.Errorf("stats of a missing queue: %d %v", code, out)
		}
		for i := range 10 {
			push(t, a, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("a%d", i)})
			push(t, b, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("b%d", i)})
		}
		push(t, b, "cat", map[string]any{"url": w.URL, "payload": "perm", "max_retries": 3})
		push(t, a, "cat", map[string]any{"url": w.URL, "payload": "retry", "max_retries": 1})
		push(t, a, "cat", map[string]any{"url": w.URL, "payload": "later", "run_after": 3600})
		push(t, b, "cat", map[string]any{"url": w.URL, "payload": "later", "run_after": 3600})

		want := map[string]float64{
			"total_pushes": 24, "total_pops": 23, "total_successes": 21, "total_failures": 2,
			"total_permanent_failures": 1, "total_completes": 22, "outstanding_jobs": 2,
			"active_nodes": 1, "total_workers": 7, "idle_workers": 7,
		}
		matches := func(got map[string]any) error {
			for k, v := range want {
				if got[k] != v {
					return fmt.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
				}
			}
			return nil
		}
		var last error
		// The rates cover the last 5 s: look for them while the counts
		// settle, right after the pushes.
		sawPushRate, sawPopRate := false, false
		testworker.WaitFor(t, 30*time.Second, "stats on both nodes", func() bool {
			got := mustCall(t, a, "GET", "/queue/q/stats", nil)
			sawPushRate = sawPushRate || got["pushes_per_second"].(float64) > 0
			sawPopRate = sawPopRate || got["pops_per_second"].(float64) > 0
			last = matches(got)
			if last == nil {
				all := mustCall(t, b, "GET", "/queues/stats", nil)
				q, _ := all["q"].(map[string]any)
				last = matches(q)
			}
			return last == nil
		})
		got := mustCall(t, b, "GET", "/queue/q/stats", nil)
		if got["total_elapsed"].(float64) < 200 { // 21 deliveries of >= 10 ms
			t.Errorf("total_elapsed = %v ms, want at least 200", got["total_elapsed"])
		}
		if !sawPushRate || !sawPopRate {
			t.Errorf("no pushes_per_second (%v) or pops_per_second (%v) seen right after the pushes", sawPushRate, sawPopRate)
		}

		// Every node stops; a new one reports the same counters.
		for _, s := range []interface{ Stop(<-chan struct{}) error }{a, b} {
			if err := s.Stop(nil); err != nil {
				t.Fatal(err)
			}
		}
		c := startNode(t, db, nil)
		want["active_nodes"], want["idle_workers"] = 1, 7
		testworker.WaitFor(t, 30*time.Second, "stats after a restart", func() bool {
			last = matches(mustCall(t, c, "GET", "/queue/q/stats", nil))
			return last == nil
		})
		if last != nil {
			t.Error(last)
		}
	})
}

// TestServer_StatsReadOwnWrites checks that the node a job was pushed
// through counts it at once in its statistics, exactly once, across the
// node's writes of its counts to the database (every second).
func TestServer_StatsReadOwnWrites(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		a := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, a, "q", "cat", nil)
		began := time.Now()
		for n := 1; n <= 10 || time.Since(began) < 2500*time.Millisecond; n++ {
			push(t, a, "cat", map[string]any{"url": "http://127.0.0.1:9/", "payload": n, "run_after": 3600})
			if got := mustCall(t, a, "GET", "/queue/q/stats", nil)["total_pushes"]; got != float64(n) {
				t.Fatalf("after push %d, %.1fs in: total_pushes = %v", n, time.Since(began).Seconds(), got)
			}
			all := mustCall(t, a, "GET", "/queues/stats", nil)["q"].(map[string]any)
			if got := all["total_pushes"]; got != float64(n) {
				t.Fatalf("after push %d: /queues/stats total_pushes = %v", n, got)
			}
		}
	})
}
