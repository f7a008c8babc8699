package mysql_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/mysql"
)

// The flows' own tests on MariaDB: what the conformance tests check on
// every dialect, plus the concurrency of this dialect's locks.

// flowBundle is what a flow test needs: a store on a fresh database, and
// what its FlowWatch function was told.
type flowBundle struct {
	s   *mysql.Store
	url string // of the store's database, for a second store
	ctx context.Context
	w   *flowWatch
}

// flowWatch sums what FlowWatch functions were told.
type flowWatch struct {
	mu   sync.Mutex
	done store.FlowDone
	n    int
}

func (w *flowWatch) fn(d store.FlowDone) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done.Add(d)
	w.n++
}

func (w *flowWatch) take() store.FlowDone {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.done
	w.done = store.FlowDone{}
	return d
}

func flowSetup(t *testing.T) *flowBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	url := dbtest.URL(t, "mysql")
	s := dbtest.OpenURL(t, url).(*mysql.Store)
	w := &flowWatch{}
	s.FlowWatch(w.fn)
	for _, q := range []*store.Queue{
		{Name: "q", PollingInterval: 200, MaxWorkers: 20},
		{Name: "cb", PollingInterval: 200, MaxWorkers: 20},
		{Name: "keep", PollingInterval: 200, MaxWorkers: 20, KeepFinished: 86400},
	} {
		if _, err := s.QueuePut(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return &flowBundle{s: s, url: url, ctx: ctx, w: w}
}

func flowJob(queue string) *store.JobInsertParams {
	return &store.JobInsertParams{Queue: queue, Category: "c", URL: "http://w/", Payload: json.RawMessage(`{"x":1}`), Timeout: 10, MaxRetries: 2}
}

// after is a job of q that waits for the earlier jobs of the call at
// indexes.
func after(policy string, indexes ...int) *store.FlowJobParams {
	p := &store.FlowJobParams{Job: flowJob("q"), OnParentFailure: policy}
	for _, i := range indexes {
		p.DependsOn = append(p.DependsOn, store.FlowParent{Index: i})
	}
	return p
}

func (b *flowBundle) insert(t *testing.T, p *store.FlowInsertParams) *store.FlowInserted {
	t.Helper()
	out, err := b.s.JobsInsertFlow(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (b *flowBundle) grab(t *testing.T, s *mysql.Store, queue string, limit int, leased bool) []*store.Job {
	t.Helper()
	jobs, err := s.JobsGrab(b.ctx, &store.JobsGrabParams{Queue: queue, Node: "n", Limit: limit, Lease: time.Minute, Leased: leased})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func (b *flowBundle) complete(t *testing.T, s *mysql.Store, p *store.JobsCompleteParams) int64 {
	t.Helper()
	p.Node = "n"
	n, err := s.JobsComplete(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// state returns the state of job id, "" when it is gone.
func (b *flowBundle) state(t *testing.T, id int64) string {
	t.Helper()
	var st string
	err := b.s.DB().QueryRowContext(b.ctx, "SELECT state FROM jobs WHERE id = ?", id).Scan(&st)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return st
}

func (b *flowBundle) count(t *testing.T, q string, args ...any) int {
	t.Helper()
	var n int
	if err := b.s.DB().QueryRowContext(b.ctx, q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func ids(js []*store.Job) []int64 {
	out := make([]int64, len(js))
	for i, j := range js {
		out[i] = j.ID
	}
	return out
}

// TestFlow_Chain releases A → B → C step by step, and keeps the blocked
// jobs out of grabs and of JobsNextDue.
func TestFlow_Chain(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	out := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{after(""), after("", 0), after("", 1)}})
	if want := []bool{false, true, true}; !slices.Equal(out.Blocked, want) {
		t.Fatalf("Blocked = %v, want %v", out.Blocked, want)
	}
	for step := range 3 {
		got := b.grab(t, b.s, "q", 10, false)
		if len(got) != 1 || got[0].ID != out.IDs[step] || !got[0].Flow {
			t.Fatalf("step %d: grabbed %v, want job %d with Flow", step, ids(got), out.IDs[step])
		}
		due, err := b.s.JobsNextDue(b.ctx, []string{"q"})
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 1 || due[0].Job != store.Never {
			t.Fatalf("step %d: JobsNextDue = %+v, want no waiting job (the others are blocked)", step, due)
		}
		if n := b.complete(t, b.s, &store.JobsCompleteParams{IDs: []int64{got[0].ID}, Flow: []store.FinishNote{{ID: got[0].ID}}}); n != 1 {
			t.Fatalf("step %d: completed %d", step, n)
		}
		d := b.w.take()
		if step < 2 && (d.Released != 1 || !slices.Equal(d.Queues, []string{"q"})) {
			t.Fatalf("step %d: watch told %+v, want one job of q released", step, d)
		}
		if step == 2 && d.Released != 0 {
			t.Fatalf("last step: watch told %+v", d)
		}
	}
	if n := b.count(t, "SELECT (SELECT COUNT(*) FROM job_flows) + (SELECT COUNT(*) FROM job_deps) + (SELECT COUNT(*) FROM jobs)"); n != 0 {
		t.Fatalf("%d flow rows, edges or jobs left", n)
	}
}

// TestFlow_DiamondConcurrent ends B and C of A → (B, C) → D in two
// concurrent transactions of two stores: D is released (or, when B
// fails, cancelled) exactly once.
func TestFlow_DiamondConcurrent(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	s1, s2 := b.s, dbtest.OpenURL(t, b.url).(*mysql.Store)
	w := b.w
	s2.FlowWatch(w.fn)
	for round := range 8 {
		fail := round%2 == 1
		out, err := s1.JobsInsertFlow(b.ctx, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{after(""), after("", 0), after("", 0), after("", 1, 2)}})
		if err != nil {
			t.Fatal(err)
		}
		a := b.grab(t, s1, "q", 10, false)
		b.complete(t, s1, &store.JobsCompleteParams{IDs: ids(a)})
		bc := b.grab(t, s1, "q", 10, false)
		if !slices.Equal(ids(bc), out.IDs[1:3]) {
			t.Fatalf("round %d: grabbed %v, want B and C %v", round, ids(bc), out.IDs[1:3])
		}
		w.take()
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			if fail {
				_, errs[0] = s1.JobFail(b.ctx, &store.JobFailParams{ID: out.IDs[1], Node: "n", Status: "permanent-failure", Message: "boom"})
			} else {
				_, errs[0] = s1.JobsComplete(b.ctx, &store.JobsCompleteParams{Node: "n", IDs: out.IDs[1:2]})
			}
		}()
		go func() {
			defer wg.Done()
			<-start
			_, errs[1] = s2.JobsComplete(b.ctx, &store.JobsCompleteParams{Node: "n", IDs: out.IDs[2:3]})
		}()
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatal(err)
		}
		d := w.take()
		st := ""
		if err := s1.DB().QueryRowContext(b.ctx, "SELECT state FROM jobs WHERE id = ?", out.IDs[3]).Scan(&st); err != nil && !fail {
			t.Fatal(err)
		}
		switch {
		case !fail && (d.Released != 1 || d.Ended != 0 || st != store.StateWaiting):
			t.Fatalf("round %d: watch told %+v, D is %q: want D released once", round, d, st)
		case fail && (d.Released != 0 || d.Ended != 1 || st != ""):
			t.Fatalf("round %d: watch told %+v, D is %q: want D cancelled once", round, d, st)
		}
		if !fail {
			dj := b.grab(t, s1, "q", 10, false)
			b.complete(t, s1, &store.JobsCompleteParams{IDs: ids(dj)})
		}
	}
}

// TestFlow_Batch fires a batch's callbacks once, when its last job ends,
// on_success only when all succeeded, with the batch's counts.
func TestFlow_Batch(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	for _, failOne := range []bool{false, true} {
		cbS, cbF := flowJob("cb"), flowJob("cb")
		cbS.Category, cbF.Category = "batch-success", "batch-finish"
		jobs := make([]*store.FlowJobParams, 4)
		for i := range jobs {
			jobs[i] = &store.FlowJobParams{Job: flowJob("q")}
		}
		out := b.insert(t, &store.FlowInsertParams{Jobs: jobs, Batch: &store.BatchParams{OnSuccess: cbS, OnFinish: cbF, Meta: json.RawMessage(`{"m":1}`)}})
		got := b.grab(t, b.s, "q", 10, false)
		if len(got) != 4 || out.BatchID == 0 {
			t.Fatalf("grabbed %d jobs of batch %d", len(got), out.BatchID)
		}
		rest := ids(got)
		if failOne {
			if _, err := b.s.JobFail(b.ctx, &store.JobFailParams{ID: rest[0], Node: "n", Status: "permanent-failure"}); err != nil {
				t.Fatal(err)
			}
			rest = rest[1:]
		}
		b.complete(t, b.s, &store.JobsCompleteParams{IDs: rest[:2], Flow: []store.FinishNote{{ID: rest[0]}, {ID: rest[1]}}})
		if n := b.count(t, "SELECT COUNT(*) FROM jobs WHERE queue_name = 'cb'"); n != 0 {
			t.Fatalf("%d callbacks before the batch's last job ended", n)
		}
		b.complete(t, b.s, &store.JobsCompleteParams{IDs: rest[2:]})
		bt, err := b.s.BatchGet(b.ctx, out.BatchID)
		if err != nil {
			t.Fatal(err)
		}
		wantFailed := 0
		wantCats := []string{"batch-success", "batch-finish"}
		if failOne {
			wantFailed, wantCats = 1, []string{"batch-finish"}
		}
		if bt.Total != 4 || bt.Pending != 0 || bt.Succeeded != 4-wantFailed || bt.Failed != wantFailed || bt.FinishedAt == nil ||
			!bt.HasOnSuccess || !bt.HasOnFinish || string(bt.Meta) != `{"m":1}` {
			t.Fatalf("batch = %+v", bt)
		}
		cbs := b.grab(t, b.s, "cb", 10, false)
		var cats []string
		for _, j := range cbs {
			cats = append(cats, j.Category)
			var p struct {
				Batch struct {
					ID        int64 `json:"id"`
					Succeeded int   `json:"succeeded"`
				} `json:"batch"`
			}
			if err := json.Unmarshal(j.Payload, &p); err != nil || p.Batch.ID != out.BatchID || p.Batch.Succeeded != 4-wantFailed {
				t.Fatalf("callback payload %s (%v)", j.Payload, err)
			}
		}
		if !slices.Equal(cats, wantCats) {
			t.Fatalf("callbacks %v, want %v", cats, wantCats)
		}
		b.complete(t, b.s, &store.JobsCompleteParams{IDs: ids(cbs)})
	}
	list, err := b.s.BatchesList(b.ctx, &store.BatchesListParams{Limit: 10})
	if err != nil || len(list) != 2 || list[0].ID < list[1].ID {
		t.Fatalf("BatchesList = %v, %v", list, err)
	}
}

// TestFlow_StaleFlow adds a dependent by id to a job already grabbed:
// JobsComplete, told nothing of its flow, still ends it through FlowEnd,
// with and without history, and completes plain jobs beside it.
func TestFlow_StaleFlow(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	for _, queue := range []string{"q", "keep"} {
		parents, err := b.s.JobsInsert(b.ctx, []*store.JobInsertParams{flowJob(queue), flowJob(queue)})
		if err != nil {
			t.Fatal(err)
		}
		got := b.grab(t, b.s, queue, 10, false)
		if len(got) != 2 || got[0].Flow {
			t.Fatalf("grabbed %v", got)
		}
		child := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: flowJob("q"), DependsOn: []store.FlowParent{{ID: parents[0]}}}}})
		if !child.Blocked[0] {
			t.Fatal("child of a live parent not blocked")
		}
		p := &store.JobsCompleteParams{IDs: parents}
		if queue == "keep" {
			p.Keep = []store.FinishNote{{ID: parents[0], Message: "m0"}, {ID: parents[1], Message: "m1"}}
		}
		if n := b.complete(t, b.s, p); n != 2 {
			t.Fatalf("%s: completed %d, want 2", queue, n)
		}
		if st := b.state(t, child.IDs[0]); st != store.StateWaiting {
			t.Fatalf("%s: child is %q, want waiting", queue, st)
		}
		if queue == "keep" {
			if n := b.count(t, "SELECT COUNT(*) FROM finished_jobs WHERE id IN (?, ?) AND status = 'succeeded'", parents[0], parents[1]); n != 2 {
				t.Fatalf("%d history rows, want 2", n)
			}
		}
		if d := b.w.take(); d.Released != 1 {
			t.Fatalf("%s: watch told %+v", queue, d)
		}
		b.complete(t, b.s, &store.JobsCompleteParams{IDs: ids(b.grab(t, b.s, "q", 10, false))})
	}
}

// TestFlow_ParentByID checks the parents given by id that are no longer
// live: kept as succeeded (done), failed (refused, unless run), unknown.
func TestFlow_ParentByID(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	pids, err := b.s.JobsInsert(b.ctx, []*store.JobInsertParams{flowJob("keep"), flowJob("keep")})
	if err != nil {
		t.Fatal(err)
	}
	b.grab(t, b.s, "keep", 10, false)
	b.complete(t, b.s, &store.JobsCompleteParams{IDs: pids[:1], Keep: []store.FinishNote{{ID: pids[0]}}})
	if _, err := b.s.JobFail(b.ctx, &store.JobFailParams{ID: pids[1], Node: "n", Status: "permanent-failure", Keep: true}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		parent  int64
		policy  string
		blocked bool
		status  string // of the ParentError; "-" for none
	}{
		{"succeeded", pids[0], "", false, "-"},
		{"failed", pids[1], "", false, store.FinishedFailed},
		{"failed, run", pids[1], store.ParentFailureRun, false, "-"},
		{"unknown", 1 << 40, store.ParentFailureRun, false, ""},
	} {
		_, err := b.s.JobsInsertFlow(b.ctx, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
			{Job: flowJob("q")},
			{Job: flowJob("q"), DependsOn: []store.FlowParent{{Index: 0}, {ID: c.parent}}, OnParentFailure: c.policy},
		}})
		var pe *store.ParentError
		switch {
		case c.status == "-" && err != nil:
			t.Fatalf("%s: %v", c.name, err)
		case c.status != "-" && !errors.As(err, &pe):
			t.Fatalf("%s: err = %v, want a ParentError", c.name, err)
		case c.status != "-" && (pe.Job != 1 || pe.Item != 1 || pe.Status != c.status || pe.Parent.ID != c.parent):
			t.Fatalf("%s: ParentError %+v", c.name, pe)
		}
	}
	// The two calls that stored their jobs: each child waits for its
	// first job only.
	if n := b.count(t, "SELECT COUNT(*) FROM job_deps"); n != 2 {
		t.Fatalf("%d edges, want 2", n)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM job_flows WHERE pending = 1"); n != 2 {
		t.Fatalf("%d children waiting for one parent, want 2", n)
	}
}

// TestFlow_ParentFailure cascades a failure through three levels of
// cancel, moves a dependent with policy fail to the failure log, and runs
// one with policy run.
func TestFlow_ParentFailure(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	out := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		after(""), after("", 0), after("", 1), after("", 2), // A → B → C → D
		after(store.ParentFailureFail, 0), after(store.ParentFailureRun, 0), after("", 4), // A → E (fail) → G; A → F (run)
	}})
	a := b.grab(t, b.s, "q", 10, false)
	if len(a) != 1 {
		t.Fatalf("grabbed %d", len(a))
	}
	if _, err := b.s.JobFail(b.ctx, &store.JobFailParams{ID: a[0].ID, Node: "n", Status: "permanent-failure", Message: "boom"}); err != nil {
		t.Fatal(err)
	}
	d := b.w.take()
	if d.Ended != 5 || d.Released != 1 {
		t.Fatalf("watch told %+v, want 5 ended (B, C, D, E, G), 1 released (F)", d)
	}
	for i, want := range []string{"", "", "", "", "", store.StateWaiting, ""} {
		if st := b.state(t, out.IDs[i]); st != want {
			t.Errorf("job %d is %q, want %q", i, st, want)
		}
	}
	var status, msg string
	if err := b.s.DB().QueryRowContext(b.ctx, "SELECT status, message FROM failed_jobs WHERE job_id = ?", out.IDs[4]).Scan(&status, &msg); err != nil {
		t.Fatal(err)
	}
	if status != store.FailedParent || msg == "" {
		t.Fatalf("E in the failure log as %q %q", status, msg)
	}
	if n := b.count(t, "SELECT (SELECT COUNT(*) FROM job_flows) + (SELECT COUNT(*) FROM job_deps)"); n != 1 {
		t.Fatalf("%d flow rows and edges left, want F's flow row", n)
	}
}

// TestFlow_EndPaths ends a job with three callbacks by every end path and
// checks which callbacks each inserts, with what status and message.
func TestFlow_EndPaths(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	for _, c := range []struct {
		name   string
		leased bool
		lease  time.Duration
		end    func(j *store.Job) error
		status string
		msg    string
		cats   []string
	}{
		{"complete", false, time.Minute, func(j *store.Job) error {
			_, err := b.s.JobsComplete(b.ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{j.ID}, Flow: []store.FinishNote{{ID: j.ID, Message: "ok"}}})
			return err
		}, store.FinishedSucceeded, "ok", []string{"success", "finish"}},
		{"succeed", true, time.Minute, func(j *store.Job) error {
			_, err := b.s.JobsSucceed(b.ctx, &store.JobsSucceedParams{Grabs: []store.JobGrab{{ID: j.ID, Grabs: j.Grabs}}, Status: "success",
				Notes: []store.FinishNote{{ID: j.ID, Message: "fine"}}})
			return err
		}, store.FinishedSucceeded, "fine", []string{"success", "finish"}},
		{"finish delete", true, time.Minute, func(j *store.Job) error {
			_, err := b.s.JobFinish(b.ctx, &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishDelete, Status: "success", Message: "del"})
			return err
		}, store.FinishedSucceeded, "del", []string{"success", "finish"}},
		{"finish fail", true, time.Minute, func(j *store.Job) error {
			_, err := b.s.JobFinish(b.ctx, &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishFail, Status: "failure", Message: "bad"})
			return err
		}, store.FinishedFailed, "bad", []string{"failure", "finish"}},
		{"finish expired", true, time.Millisecond, func(j *store.Job) error {
			time.Sleep(20 * time.Millisecond)
			_, err := b.s.JobFinish(b.ctx, &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishFail, Status: "failure", Message: "lost", Expired: true})
			return err
		}, store.FinishedFailed, "lost", []string{"failure", "finish"}},
		{"fail", false, time.Minute, func(j *store.Job) error {
			_, err := b.s.JobFail(b.ctx, &store.JobFailParams{ID: j.ID, Node: "n", Status: "permanent-failure", Message: "no"})
			return err
		}, store.FinishedFailed, "no", []string{"failure", "finish"}},
		{"cancel", false, time.Minute, func(j *store.Job) error {
			_, err := b.s.JobCancel(b.ctx, "q", j.ID)
			return err
		}, store.FinishedCancelled, store.ResultCancelled, []string{"finish"}},
		{"delete", false, time.Minute, func(j *store.Job) error {
			_, err := b.s.JobDelete(b.ctx, "q", j.ID)
			return err
		}, store.FinishedCancelled, "deleted", []string{"finish"}},
	} {
		success, failure, finish := flowJob("cb"), flowJob("cb"), flowJob("cb")
		success.Category, failure.Category, finish.Category = "success", "failure", "finish"
		finish.Payload = json.RawMessage(`{"own":true}`)
		out := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: flowJob("q"), OnSuccess: success, OnFailure: failure, OnFinish: finish}}})
		got, err := b.s.JobsGrab(b.ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: c.lease, Leased: c.leased})
		if err != nil || len(got) != 1 || got[0].ID != out.IDs[0] {
			t.Fatalf("%s: grabbed %v, %v", c.name, got, err)
		}
		if err := c.end(got[0]); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		cbs := b.grab(t, b.s, "cb", 10, false)
		var cats []string
		for _, j := range cbs {
			cats = append(cats, j.Category)
			var p struct {
				Job struct {
					ID      int64  `json:"id"`
					Status  string `json:"status"`
					Message string `json:"message"`
				} `json:"job"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(j.Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Job.ID != out.IDs[0] || p.Job.Status != c.status || p.Job.Message != c.msg {
				t.Errorf("%s: %s callback payload %s", c.name, j.Category, j.Payload)
			}
			if j.Category == "finish" && string(p.Payload) != `{"own":true}` {
				t.Errorf("%s: on_finish payload %s", c.name, j.Payload)
			}
		}
		if !slices.Equal(cats, c.cats) {
			t.Errorf("%s: callbacks %v, want %v", c.name, cats, c.cats)
		}
		if d := b.w.take(); d.Callbacks != len(c.cats) || !slices.Equal(d.Queues, []string{"cb"}) {
			t.Errorf("%s: watch told %+v", c.name, d)
		}
		b.complete(t, b.s, &store.JobsCompleteParams{IDs: ids(cbs)})
		if n := b.count(t, "SELECT (SELECT COUNT(*) FROM job_flows) + (SELECT COUNT(*) FROM jobs)"); n != 0 {
			t.Fatalf("%s: %d flow rows or jobs left", c.name, n)
		}
	}
}

// TestFlow_FanIn releases one child of 10,000 parents once, the parents
// ending in calls of 100.
func TestFlow_FanIn(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	const n = 10_000
	jobs := make([]*store.FlowJobParams, n+1)
	child := &store.FlowJobParams{Job: flowJob("cb")}
	for i := range n {
		jobs[i] = &store.FlowJobParams{Job: flowJob("q")}
		child.DependsOn = append(child.DependsOn, store.FlowParent{Index: i})
	}
	jobs[n] = child
	start := time.Now()
	out := b.insert(t, &store.FlowInsertParams{Jobs: jobs})
	if !out.Blocked[n] {
		t.Fatal("child not blocked")
	}
	t.Logf("inserted %d parents and their child in %v", n, time.Since(start))
	for done := 0; done < n; {
		got := b.grab(t, b.s, "q", 100, false)
		if len(got) == 0 {
			t.Fatalf("nothing to grab after %d", done)
		}
		b.complete(t, b.s, &store.JobsCompleteParams{IDs: ids(got), Flow: make([]store.FinishNote, 0)})
		done += len(got)
		if st := b.state(t, out.IDs[n]); (done < n) != (st == store.StateBlocked) {
			t.Fatalf("child is %q after %d parents ended", st, done)
		}
	}
	if d := b.w.take(); d.Released != 1 {
		t.Fatalf("watch told %+v, want one release", d)
	}
	t.Logf("fan-in of %d in %v", n, time.Since(start))
}

// TestFlow_Plans checks that the lock of a parent's dependents reads jobs
// first, by primary key in id order (the lock order), then each job's
// flow row by its key, and that FlowForget's deletes find their rows by
// key, not by a scan that would wait for every locked row.
func TestFlow_Plans(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	jobs := []*store.FlowJobParams{after(""), after("")}
	for range 50 {
		jobs = append(jobs, after("", 0, 1))
	}
	b.insert(t, &store.FlowInsertParams{Jobs: jobs})
	if _, err := b.s.DB().ExecContext(b.ctx, "ANALYZE TABLE jobs, job_flows, job_deps"); err != nil {
		t.Fatal(err)
	}
	args := []any{}
	for i := 3; i <= 32; i++ {
		args = append(args, i)
	}
	plan := queryMaps(t, b.s.DB(), "EXPLAIN "+mysql.LockChildrenSQL(len(args)), args...)
	if len(plan) != 2 || plan[0]["table"] != "j" || plan[0]["key"] != "PRIMARY" || plan[0]["type"] != "range" ||
		plan[1]["table"] != "f" || plan[1]["type"] != "eq_ref" || strings.Contains(plan[0]["Extra"], "filesort") {
		t.Fatalf("lock children: plan %v", plan)
	}
	for _, c := range []struct {
		name, query, key string
		args             []any
	}{
		{"forget flows", mysql.ForgetFlowsSQL(2), "PRIMARY", []any{3, 4}},
		{"forget edges to children", mysql.ForgetChildEdgesSQL(2), "PRIMARY", []any{1, 2}},
		{"forget edges to parents", mysql.ForgetParentEdgesSQL(2), "job_deps_child", []any{3, 4}},
	} {
		plan := queryMaps(t, b.s.DB(), "EXPLAIN "+c.query, c.args...)
		if len(plan) != 1 || plan[0]["key"] != c.key || plan[0]["type"] != "range" {
			t.Errorf("%s: plan %v, want a range on %s", c.name, plan, c.key)
		}
	}
}

// TestFlow_WithoutReturning stores a flow the way a MySQL server takes
// it (ids from LAST_INSERT_ID()): each id names its own job, and the
// edges and the callbacks follow them.
func TestFlow_WithoutReturning(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	b.s.WithoutReturning()
	cb := flowJob("cb")
	jobs := []*store.FlowJobParams{after(""), after("", 0), {Job: flowJob("q"), OnFinish: cb, DependsOn: []store.FlowParent{{Index: 1}}}}
	for i, j := range jobs {
		j.Job.Payload = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
	}
	out := b.insert(t, &store.FlowInsertParams{Jobs: jobs})
	for i, id := range out.IDs {
		j, err := b.s.JobGet(b.ctx, "q", id)
		if err != nil {
			t.Fatal(err)
		}
		if string(j.Payload) != string(jobs[i].Job.Payload) || j.State != map[bool]string{false: "waiting", true: "blocked"}[out.Blocked[i]] {
			t.Fatalf("job %d: %s %s, want %s", i, j.Payload, j.State, jobs[i].Job.Payload)
		}
	}
	for range 3 {
		got := b.grab(t, b.s, "q", 10, false)
		if len(got) != 1 {
			t.Fatalf("grabbed %d", len(got))
		}
		b.complete(t, b.s, &store.JobsCompleteParams{IDs: ids(got)})
	}
	if got := b.grab(t, b.s, "cb", 10, false); len(got) != 1 {
		t.Fatalf("%d callbacks, want 1", len(got))
	}
}

// TestFlow_StaleFlowSucceed adds a dependent by id to a job a worker
// leased: JobsSucceed, whose DELETE leaves jobs with a flow, ends it
// through FlowEnd beside a plain job.
func TestFlow_StaleFlowSucceed(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	if _, err := b.s.JobsInsert(b.ctx, []*store.JobInsertParams{flowJob("q"), flowJob("q")}); err != nil {
		t.Fatal(err)
	}
	got := b.grab(t, b.s, "q", 10, true)
	child := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: flowJob("cb"), DependsOn: []store.FlowParent{{ID: got[1].ID}}}}})
	queues, err := b.s.JobsSucceed(b.ctx, &store.JobsSucceedParams{Status: "success",
		Grabs: []store.JobGrab{{ID: got[0].ID, Grabs: got[0].Grabs}, {ID: got[1].ID, Grabs: got[1].Grabs}}})
	if err != nil || !slices.Equal(queues, []string{"q", "q"}) {
		t.Fatalf("JobsSucceed = %v, %v", queues, err)
	}
	if st := b.state(t, child.IDs[0]); st != store.StateWaiting {
		t.Fatalf("child is %q, want waiting", st)
	}
	if n := b.count(t, "SELECT COUNT(*) FROM jobs WHERE queue_name = 'q'"); n != 0 {
		t.Fatalf("%d jobs left", n)
	}
}

// TestFlow_StaleFlowRace adds a dependent by id to a grabbed job while
// another store completes it, told nothing of a flow: whichever commits
// first, the dependent is never left blocked by a parent that is gone.
func TestFlow_StaleFlowRace(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	s2 := dbtest.OpenURL(t, b.url).(*mysql.Store)
	for round := range 20 {
		pid, err := b.s.JobsInsert(b.ctx, []*store.JobInsertParams{flowJob("keep")})
		if err != nil {
			t.Fatal(err)
		}
		b.grab(t, b.s, "keep", 10, false)
		var (
			wg    sync.WaitGroup
			child *store.FlowInserted
			errs  = make([]error, 2)
			start = make(chan struct{})
		)
		wg.Add(2)
		go func() {
			defer wg.Done()
			<-start
			_, errs[0] = b.s.JobsComplete(b.ctx, &store.JobsCompleteParams{Node: "n", IDs: pid, Keep: []store.FinishNote{{ID: pid[0]}}})
		}()
		go func() {
			defer wg.Done()
			<-start
			child, errs[1] = s2.JobsInsertFlow(b.ctx, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: flowJob("q"), DependsOn: []store.FlowParent{{ID: pid[0]}}}}})
		}()
		close(start)
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if st := b.state(t, child.IDs[0]); st != store.StateWaiting {
			t.Fatalf("round %d: child is %q (blocked first: %v), want waiting", round, st, child.Blocked[0])
		}
		b.complete(t, b.s, &store.JobsCompleteParams{IDs: ids(b.grab(t, b.s, "q", 10, false))})
	}
}
