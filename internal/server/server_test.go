package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
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

func testConfig(dbURL string) config.Config {
	cfg := config.Default()
	cfg.Bind = "127.0.0.1:0"
	cfg.DatabaseURL = dbURL
	cfg.QueueDefault = ""
	cfg.ConfigRefreshInterval = 100 * time.Millisecond
	cfg.NodeTTL = time.Second
	cfg.GrabLease = 2 * time.Second
	cfg.RescueInterval = 200 * time.Millisecond
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("ROWQ_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// waitLeads waits until asked names leader as the node dispatching q, or
// any node when leader is nil.
func waitLeads(t *testing.T, timeout time.Duration, asked *server.Server, q string, leader *server.Server) {
	t.Helper()
	what := "a leader for " + q
	if leader != nil {
		what = leader.NodeID() + " leads " + q
	}
	testworker.WaitFor(t, timeout, what, func() bool {
		code, out := call(t, asked, "GET", "/queue/"+q+"/node", nil)
		return code == 200 && (leader == nil || out["id"] == leader.NodeID())
	})
}

// startNode starts a rowq node on dbURL and stops it when the test ends.
func startNode(t *testing.T, dbURL string, tweak func(*config.Config)) *server.Server {
	t.Helper()
	s, err := tryNode(t, dbURL, tweak)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A connection the client dialed but never used counts as active
		// for the server's first 5 s, so Shutdown would wait for it as
		// long as the shutdown timeout: close them first.
		http.DefaultClient.CloseIdleConnections()
		if err := s.Stop(nil); err != nil {
			t.Errorf("stop node: %v", err)
		}
	})
	return s
}

// tryNode builds and starts a node on dbURL, or returns why it did not
// start; the caller stops a node that started.
func tryNode(t *testing.T, dbURL string, tweak func(*config.Config)) (*server.Server, error) {
	t.Helper()
	cfg := testConfig(dbURL)
	if tweak != nil {
		tweak(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := server.New(ctx, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx); err != nil {
		s.Stop(nil) // closes the store
		return nil, err
	}
	return s, nil
}

// call sends a JSON request to a node and decodes the JSON answer.
func call(t *testing.T, s *server.Server, method, path string, body any) (int, map[string]any) {
	t.Helper()
	return callAs(t, s, "", method, path, body)
}

// callAs is call with a bearer token ("" for none).
func callAs(t *testing.T, s *server.Server, token, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	_, resp, raw := request(t, s, token, method, path, rd)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: answer is not a JSON object: %q", method, path, raw)
	}
	return resp.StatusCode, out
}

// request sends a request to a node with a bearer token ("" for none) and
// returns it, the answer and the answer's body.
// noRedirects is a client that answers a redirect itself (the dashboard's
// to its login page), instead of following it.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func request(t *testing.T, s *server.Server, token, method, path string, body io.Reader) (*http.Request, *http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+s.Addr()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	return req, resp, raw
}

func mustCall(t *testing.T, s *server.Server, method, path string, body any) map[string]any {
	t.Helper()
	code, out := call(t, s, method, path, body)
	if code != http.StatusOK {
		t.Fatalf("%s %s = %d %v, want 200", method, path, code, out)
	}
	return out
}

// setupQueue creates queue q with routing category → q.
func setupQueue(t *testing.T, s *server.Server, q, category string, settings map[string]any) {
	t.Helper()
	mustCall(t, s, "PUT", "/queue/"+q, settings)
	mustCall(t, s, "PUT", "/routing/"+category, map[string]any{"queue_name": q})
}

func push(t *testing.T, s *server.Server, category string, job map[string]any) int64 {
	t.Helper()
	out := mustCall(t, s, "POST", "/job/"+category, job)
	id, ok := out["id"].(float64)
	if !ok || id <= 0 {
		t.Fatalf("POST /job/%s answered %v without an id", category, out)
	}
	return int64(id)
}

// failedEntry finds the failure log entry of a job. Each test has a fresh
// database, so the log's ids start at 1.
func failedEntry(t *testing.T, s *server.Server, queue string, jobID int64) *store.FailedJob {
	t.Helper()
	for id := int64(1); id <= 50; id++ {
		f, err := s.Store().FailedJobGet(context.Background(), queue, id)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.JobID == jobID {
			return f
		}
	}
	return nil
}

func TestServer_DeliversThousandJobsExactlyOnce(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 50})
		const n = 1000
		var wg sync.WaitGroup
		ids := make(chan int64, n)
		for c := range 16 {
			wg.Go(func() {
				for i := c; i < n; i += 16 {
					ids <- push(t, s, "cat", map[string]any{"url": w.URL, "payload": map[string]int{"n": i}})
				}
			})
		}
		wg.Wait()
		close(ids)
		testworker.WaitFor(t, 60*time.Second, "1000 deliveries", func() bool { return w.Distinct() == n })
		time.Sleep(500 * time.Millisecond) // room for a duplicate to show
		for i := range n {
			if got := w.Count(fmt.Sprintf(`{"n":%d}`, i)); got != 1 {
				t.Errorf("job %d delivered %d times", i, got)
			}
		}
		seen := map[int64]bool{}
		for id := range ids {
			if seen[id] {
				t.Errorf("id %d returned twice", id)
			}
			seen[id] = true
			if _, err := s.Store().JobGet(context.Background(), "q", id); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("delivered job %d still stored: %v", id, err)
			}
		}
	})
}

func TestServer_FailureThenSuccessOnRetry(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			if attempt == 1 {
				return 500, `{"status":"failure","message":"try again"}`, 0
			}
			return 200, `{"status":"success"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "retry-me", "max_retries": 2, "retry_delay": 1})
		testworker.WaitFor(t, 10*time.Second, "second delivery", func() bool { return w.Count("retry-me") == 2 })
		ds := w.Of("retry-me")
		gap := ds[1].At.Sub(ds[0].At)
		if gap < 900*time.Millisecond {
			t.Errorf("retry came %v after the failure, want retry_delay 1s", gap)
		}
		testworker.WaitFor(t, 5*time.Second, "job removed", func() bool {
			_, err := s.Store().JobGet(context.Background(), "q", id)
			return errors.Is(err, store.ErrNotFound)
		})
		time.Sleep(300 * time.Millisecond)
		if got := w.Count("retry-me"); got != 2 {
			t.Errorf("delivered %d times, want 2", got)
		}
		if f := failedEntry(t, s, "q", id); f != nil {
			t.Errorf("succeeded job is in the failure log: %+v", f)
		}
	})
}

func TestServer_PermanentFailureGoesToFailureLog(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 422, `{"status":"permanent-failure","message":"bad input: no such user"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": map[string]any{"user": 7}, "max_retries": 5})
		var f *store.FailedJob
		testworker.WaitFor(t, 10*time.Second, "failure log entry", func() bool { f = failedEntry(t, s, "q", id); return f != nil })
		if f.Status != "permanent-failure" || f.Code != 422 || f.Message != "bad input: no such user" || f.FailCount != 1 ||
			f.Category != "cat" || f.URL != w.URL || string(f.Payload) != `{"user":7}` {
			t.Errorf("failure log entry = %+v", f)
		}
		if got := w.Count(`{"user":7}`); got != 1 {
			t.Errorf("permanently failed job delivered %d times, want 1 (no retry)", got)
		}
	})
}

func TestServer_RetriesExhaustedGoToFailureLog(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) { return 200, `not json at all`, 0 })
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "garbage", "max_retries": 2})
		var f *store.FailedJob
		testworker.WaitFor(t, 10*time.Second, "failure log entry", func() bool { f = failedEntry(t, s, "q", id); return f != nil })
		if f.Status != "failure" || f.Code != 200 || f.FailCount != 3 || !strings.Contains(f.Message, "not json at all") {
			t.Errorf("failure log entry = %+v", f)
		}
		if got := w.Count("garbage"); got != 3 {
			t.Errorf("delivered %d times, want 3 (1 + 2 retries)", got)
		}
	})
}

func TestServer_HangingWorkerTimesOut(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) { return 200, `{"status":"success"}`, 30 * time.Second })
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		start := time.Now()
		id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": "hang", "timeout": 1})
		var f *store.FailedJob
		testworker.WaitFor(t, 10*time.Second, "failure log entry", func() bool { f = failedEntry(t, s, "q", id); return f != nil })
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("timeout 1s took %v to fail", took)
		}
		if f.Status != "failure" || f.Code != 0 || !strings.Contains(f.Message, "timeout") {
			t.Errorf("failure log entry = %+v", f)
		}
	})
}

func TestServer_RunAfterIsRespected(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", nil)
		start := time.Now()
		out := mustCall(t, s, "POST", "/job/cat", map[string]any{"url": w.URL, "payload": "later", "run_after": 2})
		if out["run_after"] != 2.0 || out["queue_name"] != "q" || out["category"] != "cat" || out["payload"] != "later" {
			t.Errorf("push answer = %v", out)
		}
		testworker.WaitFor(t, 10*time.Second, "deferred delivery", func() bool { return w.Count("later") == 1 })
		at := w.Of("later")[0].At
		if d := at.Sub(start); d < 1900*time.Millisecond || d > 4*time.Second {
			t.Errorf("run_after 2 delivered after %v", d)
		}
	})
}

func TestServer_NewJobIsDispatchedAtOnce(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		setupQueue(t, s, "q", "cat", map[string]any{"polling_interval": 60000})
		waitLeads(t, 5*time.Second, s, "q", nil)
		time.Sleep(200 * time.Millisecond) // the runner's first, empty poll
		start := time.Now()
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": "now"})
		testworker.WaitFor(t, 20*time.Second, "delivery", func() bool { return w.Count("now") == 1 })
		// The bound only has to tell a wake-up from the 60 s poll; it is
		// loose so that a loaded test machine cannot fail it.
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("with a 60s polling interval, delivery took %v: the wake-up did not work", d)
		}
	})
}

func TestServer_RedeliversJobOfVanishedNode(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		dbURL := dbtest.URL(t, dialect)
		st := dbtest.OpenURL(t, dbURL)
		ctx := context.Background()
		if _, err := st.QueuePut(ctx, &store.Queue{Name: "q", PollingInterval: 100, MaxWorkers: 5}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "cat", URL: w.URL, Payload: json.RawMessage(`"orphan"`)}}); err != nil {
			t.Fatal(err)
		}
		// A node grabs the job and dies: nobody extends or acknowledges it.
		// It is registered, without a session, so its grab waits for its
		// lease (a grab of an unregistered node would be rescued at once).
		if err := st.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "crashed-node", Host: "gone:1", TTL: time.Minute}); err != nil {
			t.Fatal(err)
		}
		got, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "crashed-node", Limit: 1, Lease: 1500 * time.Millisecond})
		if err != nil || len(got) != 1 {
			t.Fatalf("grab = %v, %v", got, err)
		}
		start := time.Now()
		startNode(t, dbURL, nil)
		testworker.WaitFor(t, 15*time.Second, "redelivery", func() bool { return w.Count(`orphan`) == 1 })
		if d := time.Since(start); d < time.Second {
			t.Errorf("job redelivered after %v, before the dead node's grab expired", d)
		}
		time.Sleep(300 * time.Millisecond)
		if n := w.Count("orphan"); n != 1 {
			t.Errorf("delivered %d times, want 1", n)
		}
	})
}

func TestServer_TwoNodesDeliverNoJobTwice(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 2 * time.Millisecond
		})
		dbURL := dbtest.URL(t, dialect)
		// Healthy nodes: leases long enough that a loaded test machine
		// (heartbeats late by seconds) does not let a grab expire while its
		// delivery runs, which is the one case where a job may go out twice.
		healthy := func(cfg *config.Config) { cfg.NodeTTL, cfg.GrabLease = 5*time.Second, 15*time.Second }
		a := startNode(t, dbURL, healthy)
		b := startNode(t, dbURL, healthy)
		setupQueue(t, a, "q", "cat", map[string]any{"max_workers": 30})
		setupQueue(t, a, "r", "cat2", map[string]any{"max_workers": 30})
		const n = 600
		var wg sync.WaitGroup
		for c := range 8 {
			node := []*server.Server{a, b}[c%2]
			wg.Go(func() {
				for i := c; i < n; i += 8 {
					cat := []string{"cat", "cat2"}[i%2]
					push(t, node, cat, map[string]any{"url": w.URL, "payload": map[string]int{"n": i}})
				}
			})
		}
		wg.Wait()
		testworker.WaitFor(t, 60*time.Second, "all deliveries", func() bool { return w.Distinct() == n })
		time.Sleep(500 * time.Millisecond)
		for i := range n {
			if got := w.Count(fmt.Sprintf(`{"n":%d}`, i)); got != 1 {
				t.Errorf("job %d delivered %d times", i, got)
			}
		}
		// Both nodes agree on who dispatches each queue.
		for _, q := range []string{"q", "r"} {
			na, nb := mustCall(t, a, "GET", "/queue/"+q+"/node", nil), mustCall(t, b, "GET", "/queue/"+q+"/node", nil)
			if na["id"] != nb["id"] || (na["id"] != a.NodeID() && na["id"] != b.NodeID()) {
				t.Errorf("queue %s node: a says %v, b says %v", q, na, nb)
			}
		}
	})
}

func TestServer_TakeoverAfterLeaderStops(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		dbURL := dbtest.URL(t, dialect)
		a := startNode(t, dbURL, nil)
		setupQueue(t, a, "q", "cat", nil)
		waitLeads(t, 5*time.Second, a, "q", a)
		b := startNode(t, dbURL, nil)
		if err := a.Stop(nil); err != nil {
			t.Fatal(err)
		}
		waitLeads(t, 5*time.Second, b, "q", b)
		push(t, b, "cat", map[string]any{"url": w.URL, "payload": "after-takeover"})
		testworker.WaitFor(t, 5*time.Second, "delivery by b", func() bool { return w.Count("after-takeover") == 1 })
	})
}

func TestServer_NewQueueIsClaimedAtOnce(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), func(c *config.Config) {
			c.ConfigRefreshInterval = 10 * time.Second
			c.NodeTTL = 30 * time.Second
		})
		start := time.Now()
		setupQueue(t, s, "q", "cat", nil)
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": "first"})
		testworker.WaitFor(t, 5*time.Second, "delivery", func() bool { return w.Count("first") == 1 })
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("first job of a new queue delivered after %v; the queue waited for the 10s refresh", d)
		}
	})
}

// TestServer_JobEnqueuedOnOtherNodeIsDispatchedAtOnce enqueues on the node
// that does not lead the queue: it nudges the leader, so the job is
// delivered long before the leader's next look (polling_interval 60 s).
func TestServer_JobEnqueuedOnOtherNodeIsDispatchedAtOnce(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		url := dbtest.URL(t, dialect)
		a := startNode(t, url, nil)
		setupQueue(t, a, "q", "cat", map[string]any{"polling_interval": 60_000})
		waitLeads(t, 10*time.Second, a, "q", nil)
		b := startNode(t, url, nil)
		// The first grab of a new runner finds nothing: wait until it parked.
		time.Sleep(500 * time.Millisecond)
		for i := range 3 {
			begin := time.Now()
			push(t, b, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("j%d", i)})
			testworker.WaitFor(t, 10*time.Second, "the job enqueued on the other node", func() bool { return w.Distinct() == i+1 })
			if took := time.Since(begin); took > 3*time.Second {
				t.Fatalf("job %d took %v to arrive, want well under the 60 s polling interval", i, took)
			}
		}
	})
}

// TestServer_ResumeOnOtherNodeReachesLeaderAtOnce: with leadership cycles
// 10 s apart, a queue paused on its leader and resumed through another
// node dispatches its waiting job at once: the other node nudges the
// leader to re-read the queue instead of leaving it to the next cycle.
func TestServer_ResumeOnOtherNodeReachesLeaderAtOnce(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		url := dbtest.URL(t, dialect)
		slow := func(c *config.Config) { c.ConfigRefreshInterval, c.NodeTTL = 10*time.Second, 30*time.Second }
		a := startNode(t, url, slow)
		setupQueue(t, a, "q", "cat", nil)
		waitLeads(t, 10*time.Second, a, "q", a)
		b := startNode(t, url, slow)
		mustCall(t, a, "POST", "/queue/q/pause", nil)
		push(t, a, "cat", map[string]any{"url": w.URL, "payload": "held"})
		time.Sleep(300 * time.Millisecond) // room for a wrong delivery to show
		if n := w.Distinct(); n != 0 {
			t.Fatalf("%d jobs delivered while paused", n)
		}
		begin := time.Now()
		mustCall(t, b, "POST", "/queue/q/resume", nil)
		testworker.WaitFor(t, 9*time.Second, "the job after the resume through b", func() bool { return w.Count("held") == 1 })
		if took := time.Since(begin); took > 3*time.Second {
			t.Fatalf("the resume took %v to reach the leader, want well under the 10 s refresh", took)
		}
		if code, out := call(t, a, "GET", "/queue/q/node", nil); code != 200 || out["id"] != a.NodeID() {
			t.Fatalf("q is led by %v now, want a: the test must resume through a node that does not lead", out)
		}
	})
}
