package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
	"github.com/rowq/rowq/rowqtype"
)

// nodesOf answers GET /nodes of s.
func nodesOf(t *testing.T, s *server.Server) *rowqtype.Nodes {
	t.Helper()
	_, resp, raw := request(t, s, "", "GET", "/nodes", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /nodes = %d %s", resp.StatusCode, raw)
	}
	var out rowqtype.Nodes
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("GET /nodes: %v: %s", err, raw)
	}
	return &out
}

// waitSpread waits until GET /nodes on s shows the nodes want, each
// leading lo..hi queues and every queue led.
func waitSpread(t *testing.T, s *server.Server, want []*server.Server, lo, hi int) time.Duration {
	t.Helper()
	var ids []string
	for _, n := range want {
		ids = append(ids, n.NodeID())
	}
	slices.Sort(ids)
	begin := time.Now()
	for {
		ns := nodesOf(t, s)
		var got, counts []string
		led, spread := 0, true
		for _, n := range ns.Nodes {
			got = append(got, n.ID)
			counts = append(counts, fmt.Sprint(n.Queues))
			led += n.Queues
			spread = spread && n.Queues >= lo && n.Queues <= hi
		}
		if slices.Equal(got, ids) && spread && led == ns.Queues {
			break
		}
		if time.Since(begin) > 30*time.Second {
			t.Fatalf("after 30 s, %d nodes lead %s of %d queues; want %d nodes leading %d..%d each",
				len(got), strings.Join(counts, "/"), ns.Queues, len(ids), lo, hi)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(begin)
}

// TestServer_QueuesSpreadOverNodes starts one node with 30 queues, then two
// more (10 queues each), a fourth (7 or 8 each), and stops one of the first
// (10 each again), while jobs of every queue are enqueued through the
// first node all along: each job is delivered exactly once, moves or not.
func TestServer_QueuesSpreadOverNodes(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 20 * time.Millisecond // deliveries are in flight when their queue moves
		})
		dbURL := dbtest.URL(t, dialect)
		// Healthy nodes: leases long enough that a loaded test machine does
		// not let a grab expire while its delivery runs (the one case where
		// a job may go out twice, moves or not).
		healthy := func(cfg *config.Config) { cfg.NodeTTL, cfg.GrabLease = 5*time.Second, 15*time.Second }
		a := startNode(t, dbURL, healthy)
		const queues = 30
		for i := range queues {
			setupQueue(t, a, fmt.Sprintf("q%02d", i), fmt.Sprintf("c%02d", i), map[string]any{"max_workers": 4})
		}
		waitSpread(t, a, []*server.Server{a}, queues, queues)

		stop := make(chan struct{})
		var (
			mu     sync.Mutex
			pushed []int
		)
		var wg sync.WaitGroup
		for c := range 4 {
			wg.Go(func() {
				for i := c; ; i += 4 {
					select {
					case <-stop:
						return
					default:
					}
					body, _ := json.Marshal(map[string]any{"url": w.URL, "payload": map[string]int{"n": i}})
					resp, err := http.Post("http://"+a.Addr()+fmt.Sprintf("/job/c%02d", i%queues), "application/json", bytes.NewReader(body))
					if err != nil {
						t.Errorf("push %d: %v", i, err)
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("push %d: %d", i, resp.StatusCode)
						return
					}
					mu.Lock()
					pushed = append(pushed, i)
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				}
			})
		}
		t.Cleanup(func() {
			select {
			case <-stop:
			default:
				close(stop)
			}
		})

		b := startNode(t, dbURL, healthy)
		c := startNode(t, dbURL, healthy)
		took := waitSpread(t, a, []*server.Server{a, b, c}, 10, 10)
		t.Logf("3 nodes: 10 queues each after %v", took)
		d := startNode(t, dbURL, healthy)
		took = waitSpread(t, a, []*server.Server{a, b, c, d}, 7, 8)
		t.Logf("4 nodes: 7 or 8 queues each after %v", took)
		if err := b.Stop(nil); err != nil {
			t.Fatal(err)
		}
		took = waitSpread(t, a, []*server.Server{a, c, d}, 10, 10)
		t.Logf("b stopped: 10 queues each after %v", took)

		close(stop)
		wg.Wait()
		n := len(pushed)
		if n < 100 {
			t.Fatalf("only %d jobs pushed during the moves", n)
		}
		testworker.WaitFor(t, 60*time.Second, fmt.Sprintf("%d deliveries", n), func() bool { return w.Distinct() == n })
		time.Sleep(500 * time.Millisecond)
		twice := 0
		for _, i := range pushed {
			if got := w.Count(fmt.Sprintf(`{"n":%d}`, i)); got != 1 {
				twice++
				if twice <= 5 {
					t.Errorf("job %d delivered %d times", i, got)
				}
			}
		}
		t.Logf("%d jobs, each delivered once (%d not)", n, twice)
	})
}
