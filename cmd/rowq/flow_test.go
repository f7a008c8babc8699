package main_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// Flows across node kills (issue 31): a callback, a batch's callback and a
// dependent are inserted in the transaction that records their parent's
// outcome, so a kill -9 before, inside or after that transaction neither
// loses nor doubles them.

// flowBody is what a callback's worker receives.
type flowBody struct {
	Job *struct {
		ID     int64  `json:"id"`
		Status string `json:"status"`
	} `json:"job"`
	Batch *struct {
		ID        int64 `json:"id"`
		Total     int   `json:"total"`
		Succeeded int   `json:"succeeded"`
	} `json:"batch"`
	Payload json.RawMessage `json:"payload"`
}

func parseFlowBody(t *testing.T, body string) flowBody {
	t.Helper()
	var b flowBody
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("callback body %q: %v", body, err)
	}
	return b
}

// pushJobs posts POST /jobs and returns the answer's job ids and batch id.
func (p *proc) pushJobs(t *testing.T, req map[string]any) ([]int64, int64) {
	t.Helper()
	out := p.mustCall(t, "POST", "/jobs", req)
	var ids []int64
	jobs, _ := out["jobs"].([]any)
	for _, j := range jobs {
		m, _ := j.(map[string]any)
		id, _ := m["id"].(float64)
		ids = append(ids, int64(id))
	}
	batch, _ := out["batch_id"].(float64)
	return ids, int64(batch)
}

// callbackJobs returns, per callback body, the distinct Rowq-Job-Id of its
// deliveries.
func callbackJobs(w *testworker.Worker, match func(string) bool) map[string][]string {
	out := map[string][]string{}
	for _, body := range w.Arrivals() {
		if !match(body) {
			continue
		}
		for _, d := range w.Of(body) {
			if id := d.Header.Get("Rowq-Job-Id"); !slices.Contains(out[body], id) {
				out[body] = append(out[body], id)
			}
		}
	}
	return out
}

// TestServe_FlowCallbackSurvivesKillNine kills the node that recorded
// parents' successes while it delivers their callbacks: each callback job
// was stored once, with its parent's outcome, and the survivor delivers
// that same job again (at least once), never a second copy.
func TestServe_FlowCallbackSurvivesKillNine(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			n         = 20
			nodeTTL   = 3 * time.Second
			grabLease = 4 * time.Second
		)
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			if strings.Contains(body, `"job":`) && attempt == 1 {
				return 200, `{"status":"success"}`, time.Minute // the victim dies with it
			}
			return 200, `{"status":"success","result":{"ok":true}}`, 0
		})
		dbURL := dbtest.URL(t, dialect)
		dir := t.TempDir()
		node := func(id string) *proc {
			return serve(t, dir, testEnv(dbURL, "ROWQ_NODE_ID="+id, "ROWQ_DISPATCH_USER_AGENT="+id,
				"ROWQ_NODE_TTL="+nodeTTL.String(), "ROWQ_GRAB_LEASE="+grabLease.String())...)
		}
		victim := node("victim")
		for _, q := range []string{"q", "cbq"} {
			victim.mustCall(t, "PUT", "/queue/"+q, map[string]any{"max_workers": n})
		}
		victim.mustCall(t, "PUT", "/routing/cat", map[string]any{"queue_name": "q"})
		victim.mustCall(t, "PUT", "/routing/cb", map[string]any{"queue_name": "cbq"})
		var jobs []map[string]any
		for i := range n {
			jobs = append(jobs, map[string]any{"category": "cat", "url": w.URL, "payload": fmt.Sprintf("parent-%d", i),
				"on_success": map[string]any{"category": "cb", "url": w.URL, "payload": fmt.Sprintf("cb-%d", i)}})
		}
		parents, _ := victim.pushJobs(t, map[string]any{"jobs": jobs})
		isCallback := func(body string) bool { return strings.Contains(body, `"job":`) }
		testworker.WaitFor(t, 30*time.Second, "every callback in delivery on the victim", func() bool {
			return len(callbackJobs(w, isCallback)) == n
		})
		if err := victim.cmd.Process.Kill(); err != nil {
			t.Fatalf("kill -9 the victim: %v", err)
		}
		victim.wait(t, 5*time.Second)

		node("survivor")
		testworker.WaitFor(t, nodeTTL+grabLease+30*time.Second, "every callback delivered again", func() bool {
			for _, body := range w.Arrivals() {
				if isCallback(body) && w.Count(body) < 2 {
					return false
				}
			}
			return true
		})
		seen := map[int64]bool{}
		for body, ids := range callbackJobs(w, isCallback) {
			b := parseFlowBody(t, body)
			if len(ids) != 1 {
				t.Errorf("callback %s delivered as jobs %v, want one job", b.Payload, ids)
			}
			if b.Job.Status != "succeeded" || seen[b.Job.ID] {
				t.Errorf("callback of job %d: status %q, seen before %v", b.Job.ID, b.Job.Status, seen[b.Job.ID])
			}
			seen[b.Job.ID] = true
		}
		for _, id := range parents {
			if !seen[id] {
				t.Errorf("parent %d: no callback", id)
			}
		}
	})
}

// TestServe_FlowKilledInsideTheOutcome kills a node while its transaction
// recording a batch's outcomes waits for the batch's row (the test holds
// it): the transaction dies uncommitted, the jobs are delivered again by
// the survivor, and the batch's on_finish fires once, counting each job
// once. SQLite's one writer has no row to wait for inside a transaction,
// so this runs on MariaDB and PostgreSQL.
func TestServe_FlowKilledInsideTheOutcome(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"mysql", "postgres"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			const (
				n         = 30
				nodeTTL   = 3 * time.Second
				grabLease = 4 * time.Second
			)
			w := testworker.New(t, nil)
			dbURL := dbtest.URL(t, dialect)
			dir := t.TempDir()
			node := func(id string) *proc {
				return serve(t, dir, testEnv(dbURL, "ROWQ_NODE_ID="+id, "ROWQ_DISPATCH_USER_AGENT="+id,
					"ROWQ_NODE_TTL="+nodeTTL.String(), "ROWQ_GRAB_LEASE="+grabLease.String())...)
			}
			victim := node("victim")
			victim.mustCall(t, "PUT", "/queue/q", map[string]any{"max_workers": n})
			victim.mustCall(t, "PUT", "/queue/cbq", map[string]any{"max_workers": 1})
			victim.mustCall(t, "PUT", "/routing/cat", map[string]any{"queue_name": "q"})
			victim.mustCall(t, "PUT", "/routing/cb", map[string]any{"queue_name": "cbq"})
			victim.mustCall(t, "POST", "/queue/q/pause", nil)
			var jobs []map[string]any
			for i := range n {
				jobs = append(jobs, map[string]any{"category": "cat", "url": w.URL, "payload": fmt.Sprintf("job-%d", i)})
			}
			_, batch := victim.pushJobs(t, map[string]any{"jobs": jobs,
				"batch": map[string]any{"on_finish": map[string]any{"category": "cb", "url": w.URL, "payload": "finished"}, "meta": map[string]any{"k": "v"}}})
			if batch == 0 {
				t.Fatal("POST /jobs with a batch answered no batch_id")
			}
			release := holdBatchRow(t, dialect, dbURL, batch)
			victim.mustCall(t, "POST", "/queue/q/resume", nil)
			testworker.WaitFor(t, 30*time.Second, "every job answered by the worker", func() bool { return w.Answered() == n })
			// The victim's outcome transaction now waits for the batch's
			// row (for at most store.LockWait): kill it there.
			if err := victim.cmd.Process.Kill(); err != nil {
				t.Fatalf("kill -9 the victim: %v", err)
			}
			victim.wait(t, 5*time.Second)
			release()

			survivor := node("survivor")
			testworker.WaitFor(t, nodeTTL+grabLease+60*time.Second, "the batch finished", func() bool {
				code, out, err := survivor.do("GET", "/batch/"+strconv.FormatInt(batch, 10), nil)
				return err == nil && code == http.StatusOK && out["finished_at"] != nil
			})
			out := survivor.mustCall(t, "GET", "/batch/"+strconv.FormatInt(batch, 10), nil)
			if out["succeeded"] != float64(n) || out["pending"] != float64(0) || out["total"] != float64(n) {
				t.Errorf("batch: %v, want %d succeeded of %d", out, n, n)
			}
			finished := func(body string) bool { return strings.Contains(body, `"batch":`) }
			testworker.WaitFor(t, 30*time.Second, "the batch's on_finish delivered", func() bool { return len(callbackJobs(w, finished)) == 1 })
			for body, ids := range callbackJobs(w, finished) {
				if b := parseFlowBody(t, body); len(ids) != 1 || b.Batch.ID != batch || b.Batch.Succeeded != n {
					t.Errorf("on_finish %s delivered as jobs %v", body, ids)
				}
			}
		})
	}
}

// holdBatchRow locks batch id's row in a transaction of its own until the
// returned function is called.
func holdBatchRow(t *testing.T, dialect, dbURL string, id int64) (release func()) {
	t.Helper()
	tx, err := dbtest.AppDB(t, dbURL, 1).BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var got int64
	if err := tx.QueryRow(dbtest.Rebind(dialect, "SELECT id FROM batches WHERE id = ? FOR UPDATE"), id).Scan(&got); err != nil {
		t.Fatalf("lock batch %d: %v", id, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { _ = tx.Rollback() }) }
	t.Cleanup(release)
	return release
}

// TestServe_FlowDiamondAcrossNodes runs diamonds A → (B, C) → D whose B and
// C are led by different nodes and answered by their worker at the same
// moment: each D runs once, after both.
func TestServe_FlowDiamondAcrossNodes(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const rounds = 5
		var (
			mu      sync.Mutex
			arrived = map[string]chan struct{}{} // round → closed when B and C of it both arrived
			count   = map[string]int{}
		)
		middle := func(round string) chan struct{} {
			mu.Lock()
			defer mu.Unlock()
			if arrived[round] == nil {
				arrived[round] = make(chan struct{})
			}
			if count[round]++; count[round] == 2 {
				close(arrived[round])
			}
			return arrived[round]
		}
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			if r, ok := strings.CutPrefix(body, "mid-"); ok {
				select { // answer B and C together
				case <-middle(r[:strings.Index(r, "-")]):
				case <-time.After(30 * time.Second):
				}
			}
			return 200, `{"status":"success"}`, 0
		})
		dbURL := dbtest.URL(t, dialect)
		dir := t.TempDir()
		a := serve(t, dir, testEnv(dbURL, "ROWQ_NODE_ID=node-a", "ROWQ_DISPATCH_USER_AGENT=node-a")...)
		b := serve(t, dir, testEnv(dbURL, "ROWQ_NODE_ID=node-b", "ROWQ_DISPATCH_USER_AGENT=node-b")...)
		queues := []string{"q1", "q2", "q3", "q4"}
		for _, q := range queues {
			a.mustCall(t, "PUT", "/queue/"+q, map[string]any{"max_workers": 4})
			a.mustCall(t, "PUT", "/routing/c-"+q, map[string]any{"queue_name": q})
		}
		led := map[string]string{} // node → a queue it leads
		testworker.WaitFor(t, 30*time.Second, "queues led by both nodes", func() bool {
			for _, q := range queues {
				if l := b.leader(t, q); l != "" {
					led[l] = q
				}
			}
			return led["node-a"] != "" && led["node-b"] != ""
		})
		qb, qc := led["node-a"], led["node-b"]
		var ends []int64
		for r := range rounds {
			job := func(q, payload string, deps ...int) map[string]any {
				j := map[string]any{"category": "c-" + q, "url": w.URL, "payload": payload}
				var on []map[string]any
				for _, d := range deps {
					on = append(on, map[string]any{"index": d})
				}
				if len(on) > 0 {
					j["depends_on"] = on
				}
				return j
			}
			ids, _ := a.pushJobs(t, map[string]any{"jobs": []map[string]any{
				job(qb, fmt.Sprintf("top-%d", r)),
				job(qb, fmt.Sprintf("mid-%d-b", r), 0),
				job(qc, fmt.Sprintf("mid-%d-c", r), 0),
				job(qc, fmt.Sprintf("end-%d", r), 1, 2),
			}})
			ends = append(ends, ids[3])
		}
		for r := range rounds {
			end := fmt.Sprintf("end-%d", r) // a string payload is delivered as it is
			testworker.WaitFor(t, 60*time.Second, "D of round "+strconv.Itoa(r), func() bool {
				if w.Count(end) == 0 && time.Now().Second()%10 == 0 {
					t.Logf("arrivals %v", w.Arrivals())
				}
				return w.Count(end) > 0
			})
		}
		// Every D acknowledged: a second release would have stored a
		// second delivery by now.
		st := dbtest.OpenURL(t, dbURL)
		testworker.WaitFor(t, 30*time.Second, "every D acknowledged", func() bool {
			for _, id := range ends {
				if !jobGone(t, st, qc, id) {
					return false
				}
			}
			return true
		})
		for r := range rounds {
			ds := w.Of(fmt.Sprintf("end-%d", r))
			bs, cs := w.Of(fmt.Sprintf("mid-%d-b", r)), w.Of(fmt.Sprintf("mid-%d-c", r))
			if len(ds) != 1 || len(bs) != 1 || len(cs) != 1 {
				t.Fatalf("round %d: D delivered %d times, B %d, C %d; want once each", r, len(ds), len(bs), len(cs))
			}
			if ds[0].At.Before(bs[0].AnsweredAt) || ds[0].At.Before(cs[0].AnsweredAt) {
				t.Errorf("round %d: D delivered at %v, before B (%v) or C (%v) were answered", r, ds[0].At, bs[0].AnsweredAt, cs[0].AnsweredAt)
			}
			if bs[0].By == cs[0].By {
				t.Errorf("round %d: B and C both delivered by %s", r, bs[0].By)
			}
		}
	})
}

// TestServe_FlowBatchOf10000AcrossKillNine delivers a batch of 10,000 jobs
// on two nodes and kills the one delivering them part-way: its on_finish
// fires once, with every job counted once as succeeded.
func TestServe_FlowBatchOf10000AcrossKillNine(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			n         = 10000
			killAfter = 2000
			nodeTTL   = 3 * time.Second
			grabLease = 4 * time.Second
		)
		w := testworker.New(t, nil)
		dbURL := dbtest.URL(t, dialect)
		victim, survivor, _, _ := twoNodes(t, dbURL, nodeTTL, grabLease, 50)
		survivor.mustCall(t, "PUT", "/routing/cb", map[string]any{"queue_name": "q"})
		jobs := make([]map[string]any, n)
		for i := range jobs {
			jobs[i] = map[string]any{"category": "cat", "url": w.URL, "payload": i}
		}
		var killOnce sync.Once
		killed := make(chan error, 1)
		w.SetOnDelivery(func(distinct, _ int) {
			if distinct >= killAfter {
				killOnce.Do(func() { killed <- victim.cmd.Process.Kill() })
			}
		})
		_, batch := survivor.pushJobs(t, map[string]any{"jobs": jobs,
			"batch": map[string]any{"on_finish": map[string]any{"category": "cb", "url": w.URL, "payload": "finished"}}})
		if err := <-killed; err != nil {
			t.Fatalf("kill -9 the leader: %v", err)
		}
		victim.wait(t, 5*time.Second)
		path := "/batch/" + strconv.FormatInt(batch, 10)
		testworker.WaitFor(t, nodeTTL+grabLease+120*time.Second, "the batch finished", func() bool {
			code, out, err := survivor.do("GET", path, nil)
			return err == nil && code == http.StatusOK && out["finished_at"] != nil
		})
		out := survivor.mustCall(t, "GET", path, nil)
		if out["succeeded"] != float64(n) || out["failed"] != float64(0) || out["cancelled"] != float64(0) {
			t.Errorf("batch: %v, want %d succeeded", out, n)
		}
		finished := func(body string) bool { return strings.Contains(body, `"batch":`) }
		testworker.WaitFor(t, 30*time.Second, "on_finish delivered", func() bool { return len(callbackJobs(w, finished)) == 1 })
		if got := callbackJobs(w, finished); len(got) != 1 {
			t.Errorf("on_finish: %v, want one body delivered as one job", got)
		}
		for body, ids := range callbackJobs(w, finished) {
			if b := parseFlowBody(t, body); len(ids) != 1 || b.Batch.ID != batch || b.Batch.Succeeded != n {
				t.Errorf("on_finish %s delivered as jobs %v", body, ids)
			}
		}
	})
}
