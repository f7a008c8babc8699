package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/store/postgres"
)

// flowBundle is a store whose FlowWatch records what ending flow jobs
// did.
type flowBundle struct {
	s   *postgres.Store
	ctx context.Context
	mu  sync.Mutex
	got store.FlowDone
}

func flowSetup(t *testing.T) *flowBundle {
	t.Helper()
	s, ctx := setup(t)
	return watch(t, ctx, s)
}

func watch(t *testing.T, ctx context.Context, s *postgres.Store) *flowBundle {
	b := &flowBundle{s: s, ctx: ctx}
	s.FlowWatch(func(d store.FlowDone) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.got.Add(d)
	})
	for _, q := range []string{"q", "cb"} {
		if _, err := s.QueuePut(ctx, &store.Queue{Name: q, PollingInterval: 200, MaxWorkers: 20, KeepFinished: 3600}); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// done returns what the watcher was told since the last call.
func (b *flowBundle) done() store.FlowDone {
	b.mu.Lock()
	defer b.mu.Unlock()
	d := b.got
	b.got = store.FlowDone{}
	return d
}

func flowJob(category string) *store.JobInsertParams {
	return &store.JobInsertParams{Queue: "q", Category: category, URL: "http://w/" + category, Payload: json.RawMessage(`{"n":1}`), MaxRetries: 2}
}

// callback is a callback job to queue cb, told apart by its category.
func callback(category string) *store.JobInsertParams {
	return &store.JobInsertParams{Queue: "cb", Category: category, URL: "http://cb/" + category, Payload: json.RawMessage(`{"own":true}`)}
}

func (b *flowBundle) insert(t *testing.T, p *store.FlowInsertParams) *store.FlowInserted {
	t.Helper()
	out, err := b.s.JobsInsertFlow(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// grab grabs every due job of queue for node n.
func (b *flowBundle) grab(t *testing.T, queue string) []*store.Job {
	t.Helper()
	jobs, err := b.s.JobsGrab(b.ctx, &store.JobsGrabParams{Queue: queue, Node: "n", Limit: 1000, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

func ids(jobs []*store.Job) []int64 {
	out := make([]int64, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	slices.Sort(out)
	return out
}

func (b *flowBundle) complete(t *testing.T, s *postgres.Store, jobs ...*store.Job) {
	t.Helper()
	p := &store.JobsCompleteParams{Node: "n"}
	for _, j := range jobs {
		p.IDs = append(p.IDs, j.ID)
		note := store.FinishNote{ID: j.ID, Message: "ok", Result: json.RawMessage(`{"r":1}`)}
		if j.Flow {
			p.Flow = append(p.Flow, note)
		} else {
			p.Keep = append(p.Keep, note) // the queues keep their history
		}
	}
	n, err := s.JobsComplete(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(jobs)) {
		t.Fatalf("completed %d of %d jobs", n, len(jobs))
	}
}

// callbackPayload is what a callback's payload says.
type callbackPayload struct {
	Job struct {
		ID       int64           `json:"id"`
		Status   string          `json:"status"`
		Attempts int             `json:"attempts"`
		Message  string          `json:"message"`
		Result   json.RawMessage `json:"result"`
	} `json:"job"`
	Batch struct {
		ID                           int64
		Total                        int
		Succeeded, Failed, Cancelled int
	} `json:"batch"`
	Payload json.RawMessage `json:"payload"`
}

// callbacks grabs the callbacks due in queue cb, by category.
func (b *flowBundle) callbacks(t *testing.T) map[string][]callbackPayload {
	t.Helper()
	out := map[string][]callbackPayload{}
	for _, j := range b.grab(t, "cb") {
		var p callbackPayload
		if err := json.Unmarshal(j.Payload, &p); err != nil {
			t.Fatalf("callback %s payload %s: %v", j.Category, j.Payload, err)
		}
		if string(p.Payload) != `{"own":true}` {
			t.Errorf("callback %s: own payload %s", j.Category, p.Payload)
		}
		out[j.Category] = append(out[j.Category], p)
	}
	return out
}

// rows counts the rows of a table.
func (b *flowBundle) rows(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := postgres.Pool(b.s).QueryRow(b.ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFlow_Chain: A → B → C released step by step, each release told to
// the watcher; blocked jobs are seen by neither the grab nor the probe.
func TestFlow_Chain(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	in := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		{Job: flowJob("a")},
		{Job: flowJob("b"), DependsOn: []store.FlowParent{{Index: 0}}},
		{Job: flowJob("c"), DependsOn: []store.FlowParent{{Index: 1}}},
	}})
	if got, want := in.Blocked, []bool{false, true, true}; !slices.Equal(got, want) {
		t.Fatalf("blocked = %v, want %v", got, want)
	}
	info, err := b.s.FlowGet(b.ctx, in.IDs[1])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(info.WaitsFor, in.IDs[:1]) || !slices.Equal(info.Dependents, in.IDs[2:]) {
		t.Errorf("flow of b = %+v", info)
	}
	blocked, err := b.s.JobsBlocked(b.ctx, &store.JobsBlockedParams{Queue: "q", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(blocked) != 2 || blocked[0].Job.ID != in.IDs[1] || !slices.Equal(blocked[1].WaitsFor, in.IDs[1:2]) {
		t.Errorf("blocked = %+v", blocked)
	}
	for step, want := range []string{"a", "b", "c"} {
		jobs := b.grab(t, "q")
		if len(jobs) != 1 || jobs[0].Category != want || !jobs[0].Flow {
			t.Fatalf("step %d: grabbed %+v, want job %s alone", step, jobs, want)
		}
		b.complete(t, b.s, jobs...)
		d := b.done()
		if step < 2 && (d.Released != 1 || !slices.Equal(d.Queues, []string{"q"})) {
			t.Errorf("step %d: told %+v, want one release in q", step, d)
		}
	}
	if n := b.rows(t, "job_flows") + b.rows(t, "job_deps"); n != 0 {
		t.Errorf("%d flow rows left", n)
	}
}

// TestFlow_BlockedInvisible: a queue whose only job is blocked is not due,
// and its listings of waiting jobs leave the job out.
func TestFlow_BlockedInvisible(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	parent := insert(t, b, flowJob("p"))
	in := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		{Job: &store.JobInsertParams{Queue: "other", Category: "x", URL: "http://w/"}, DependsOn: []store.FlowParent{{ID: parent}}},
	}})
	if !in.Blocked[0] {
		t.Fatal("not blocked")
	}
	due, err := b.s.JobsNextDue(b.ctx, []string{"other"})
	if err != nil {
		t.Fatal(err)
	}
	if len(due) != 0 {
		t.Errorf("next due = %+v, want none", due)
	}
	for _, kind := range []string{store.JobsWaiting, store.JobsDeferred, store.JobsGrabbed} {
		jobs, err := b.s.JobsList(b.ctx, &store.JobsListParams{Queue: "other", Kind: kind, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 0 {
			t.Errorf("%s lists %d jobs", kind, len(jobs))
		}
	}
	if jobs := b.grab(t, "other"); len(jobs) != 0 {
		t.Errorf("grabbed %d blocked jobs", len(jobs))
	}
}

func insert(t *testing.T, b *flowBundle, p *store.JobInsertParams) int64 {
	t.Helper()
	ids, err := b.s.JobsInsert(b.ctx, []*store.JobInsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
}

// TestFlow_StaleFlow: a dependent added by id to a job already grabbed,
// whose Job.Flow in the grabber's hands is false; JobsComplete still ends
// it through FlowEnd, and releases the dependent.
func TestFlow_StaleFlow(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	insert(t, b, flowJob("p"))
	insert(t, b, flowJob("plain"))
	grabbed := b.grab(t, "q")
	if len(grabbed) != 2 || grabbed[0].Flow || grabbed[1].Flow {
		t.Fatalf("grabbed %+v", grabbed)
	}
	in := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		{Job: flowJob("child"), DependsOn: []store.FlowParent{{ID: grabbed[0].ID}}, OnSuccess: callback("s")},
	}})
	if !in.Blocked[0] {
		t.Fatal("child not blocked")
	}
	b.complete(t, b.s, grabbed...) // neither noted as having a flow
	if d := b.done(); d.Released != 1 {
		t.Errorf("told %+v, want one release", d)
	}
	jobs := b.grab(t, "q")
	if len(jobs) != 1 || jobs[0].ID != in.IDs[0] {
		t.Fatalf("grabbed %+v, want the child", jobs)
	}
	if f, err := b.s.FinishedGet(b.ctx, "q", grabbed[0].ID); err != nil || f.Status != store.FinishedSucceeded {
		t.Errorf("history of the parent: %+v, %v", f, err)
	}
}

// TestFlow_ParentByID: a parent given by id that finished is looked up in
// the history; one neither live nor kept is a ParentError.
func TestFlow_ParentByID(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	insert(t, b, flowJob("ok"))
	insert(t, b, flowJob("bad"))
	jobs := b.grab(t, "q")
	b.complete(t, b.s, jobs[0])
	if _, err := b.s.JobFail(b.ctx, &store.JobFailParams{ID: jobs[1].ID, Node: "n", Status: "failure", Message: "boom", Keep: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		parent int64
		policy string
		status string // of the ParentError; "-" for none
	}{
		{"succeeded", jobs[0].ID, "", "-"},
		{"failed", jobs[1].ID, "", store.FinishedFailed},
		{"failed, run", jobs[1].ID, store.ParentFailureRun, "-"},
		{"unknown", 1 << 40, store.ParentFailureRun, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, err := b.s.JobsInsertFlow(b.ctx, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
				{Job: flowJob("x")},
				{Job: flowJob("child"), DependsOn: []store.FlowParent{{Index: 0}, {ID: tc.parent}}, OnParentFailure: tc.policy},
			}})
			var pe *store.ParentError
			switch {
			case tc.status == "-" && err != nil:
				t.Fatal(err)
			case tc.status == "-":
				if info, err := b.s.FlowGet(b.ctx, in.IDs[1]); err != nil || !slices.Equal(info.WaitsFor, in.IDs[:1]) {
					t.Errorf("child waits for %+v (%v), want the first job alone", info, err)
				}
			case !errors.As(err, &pe):
				t.Fatalf("err = %v, want a ParentError", err)
			case pe.Job != 1 || pe.Item != 1 || pe.Parent.ID != tc.parent || pe.Status != tc.status:
				t.Errorf("ParentError = %+v", pe)
			}
		})
	}
}

// TestFlow_DiamondConcurrent: A → (B, C) → D where B and C end at the same
// moment in two transactions of two stores: D is released once.
func TestFlow_DiamondConcurrent(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t, "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b1 := watch(t, ctx, dbtest.OpenURL(t, u).(*postgres.Store))
	b2 := watch(t, ctx, dbtest.OpenURL(t, u).(*postgres.Store))
	for round := range 20 {
		in := b1.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
			{Job: flowJob("a")},
			{Job: flowJob("b"), DependsOn: []store.FlowParent{{Index: 0}}},
			{Job: flowJob("c"), DependsOn: []store.FlowParent{{Index: 0}}},
			{Job: flowJob("d"), DependsOn: []store.FlowParent{{Index: 1}, {Index: 2}}},
		}})
		b1.complete(t, b1.s, b1.grab(t, "q")...)
		mid := b1.grab(t, "q")
		if got, want := ids(mid), in.IDs[1:3]; !slices.Equal(got, want) {
			t.Fatalf("round %d: grabbed %v, want %v", round, got, want)
		}
		start, errs := make(chan struct{}), make(chan error, 2)
		for i, b := range []*flowBundle{b1, b2} {
			go func() {
				<-start
				_, err := b.s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{mid[i].ID},
					Flow: []store.FinishNote{{ID: mid[i].ID}}})
				errs <- err
			}()
		}
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := b1.done().Released + b2.done().Released; got != 3 {
			t.Fatalf("round %d: %d releases, want 3 (B, C, then D)", round, got)
		}
		last := b1.grab(t, "q")
		if got, want := ids(last), in.IDs[3:]; !slices.Equal(got, want) {
			t.Fatalf("round %d: grabbed %v, want %v", round, got, want)
		}
		b1.complete(t, b1.s, last...)
	}
}

// TestFlow_Batch: a batch's callbacks fire once, when its last job ended,
// on_success only when every job succeeded, with the batch's counts.
func TestFlow_Batch(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	const n = 5
	batch := func(n int) *store.FlowInserted {
		jobs := make([]*store.FlowJobParams, n)
		for i := range jobs {
			jobs[i] = &store.FlowJobParams{Job: flowJob("j")}
		}
		return b.insert(t, &store.FlowInsertParams{Jobs: jobs,
			Batch: &store.BatchParams{OnSuccess: callback("bs"), OnFinish: callback("bf"), Meta: json.RawMessage(`{"m":1}`)}})
	}
	in := batch(n)
	for i, j := range b.grab(t, "q") {
		b.complete(t, b.s, j)
		if cbs := b.callbacks(t); i < n-1 && len(cbs) > 0 {
			t.Fatalf("callbacks after %d of %d jobs: %v", i+1, n, cbs)
		} else if i == n-1 && (len(cbs["bs"]) != 1 || len(cbs["bf"]) != 1 || cbs["bf"][0].Batch.Succeeded != n || cbs["bf"][0].Batch.ID != in.BatchID) {
			t.Fatalf("callbacks at the end: %+v", cbs)
		}
	}
	got, err := b.s.BatchGet(b.ctx, in.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Total != n || got.Pending != 0 || got.Succeeded != n || got.FinishedAt == nil || string(got.Meta) != `{"m":1}` || !got.HasOnSuccess || !got.HasOnFinish {
		t.Errorf("batch = %+v", got)
	}
	// One job fails, one is cancelled: on_finish alone.
	in2 := batch(2)
	jobs := b.grab(t, "q")
	if _, err := b.s.JobFail(b.ctx, &store.JobFailParams{ID: jobs[0].ID, Node: "n", Status: "failure", Message: "no"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.JobCancel(b.ctx, "q", jobs[1].ID); err != nil {
		t.Fatal(err)
	}
	cbs := b.callbacks(t)
	if len(cbs["bs"]) != 0 || len(cbs["bf"]) != 1 || cbs["bf"][0].Batch.Failed != 1 || cbs["bf"][0].Batch.Cancelled != 1 {
		t.Errorf("callbacks = %+v", cbs)
	}
	list, err := b.s.BatchesList(b.ctx, &store.BatchesListParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != in2.BatchID || list[1].ID != in.BatchID {
		t.Errorf("batches = %+v", list)
	}
	if list, err := b.s.BatchesList(b.ctx, &store.BatchesListParams{Before: in2.BatchID, Limit: 10}); err != nil || len(list) != 1 {
		t.Errorf("batches before %d = %+v, %v", in2.BatchID, list, err)
	}
}

// TestFlow_EndPaths: a job with the three callbacks, ended by each end
// path, inserts exactly the callbacks its outcome calls for, with the
// outcome in their payload.
// endCase is one way of ending a job with a flow, and what its callbacks
// are then told.
type endCase struct {
	name     string
	end      func(t *testing.T, id int64) error
	status   string
	attempts int
	message  string
}

// held grabs the one due job of queue q, with a flow.
func (b *flowBundle) held(t *testing.T, leased bool, lease time.Duration) *store.Job {
	t.Helper()
	jobs, err := b.s.JobsGrab(b.ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: lease, Leased: leased})
	if err != nil || len(jobs) != 1 || !jobs[0].Flow {
		t.Fatalf("grabbed %+v, %v", jobs, err)
	}
	return jobs[0]
}

func endCases(b *flowBundle) []endCase {
	held := b.held
	note := []store.FinishNote{{Message: "ok", Result: json.RawMessage(`{"r":1}`)}}
	return []endCase{
		{"complete noted", func(t *testing.T, id int64) error {
			j := held(t, false, time.Minute)
			_, err := b.s.JobsComplete(b.ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{j.ID}, Flow: []store.FinishNote{{ID: j.ID, Message: "ok"}}})
			return err
		}, store.FinishedSucceeded, 1, "ok"},
		{"complete kept, with a plain job", func(t *testing.T, id int64) error {
			j := held(t, false, time.Minute)
			plain := insert(t, b, flowJob("plain"))
			jobs := b.grab(t, "q")
			n, err := b.s.JobsComplete(b.ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{j.ID, plain},
				Keep: []store.FinishNote{{ID: plain}}, Flow: []store.FinishNote{{ID: j.ID, Message: "ok"}}})
			if n != 2 || len(jobs) != 1 {
				t.Errorf("completed %d, grabbed %d plain jobs", n, len(jobs))
			}
			return err
		}, store.FinishedSucceeded, 1, "ok"},
		{"succeed", func(t *testing.T, id int64) error {
			j := held(t, true, time.Minute)
			out, err := b.s.JobsSucceed(b.ctx, &store.JobsSucceedParams{Grabs: []store.JobGrab{{ID: j.ID, Grabs: j.Grabs}}, Status: "success", Notes: note})
			if err == nil && (len(out) != 1 || out[0] != "q") {
				t.Errorf("succeed = %q", out)
			}
			return err
		}, store.FinishedSucceeded, 1, "ok"},
		{"finish delete", func(t *testing.T, id int64) error {
			j := held(t, true, time.Minute)
			_, err := b.s.JobFinish(b.ctx, &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishDelete, Status: "success", Message: "ok"})
			return err
		}, store.FinishedSucceeded, 1, "ok"},
		{"finish fail", func(t *testing.T, id int64) error {
			j := held(t, true, time.Minute)
			_, err := b.s.JobFinish(b.ctx, &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishFail, Status: "failure", Message: "bad"})
			return err
		}, store.FinishedFailed, 1, "bad"},
		{"finish expired", func(t *testing.T, id int64) error {
			j := held(t, true, time.Millisecond)
			time.Sleep(20 * time.Millisecond)
			_, err := b.s.JobFinish(b.ctx, &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishFail, Status: "failure", Message: "lost", Expired: true})
			return err
		}, store.FinishedFailed, 1, "lost"},
		{"fail", func(t *testing.T, id int64) error {
			j := held(t, false, time.Minute)
			_, err := b.s.JobFail(b.ctx, &store.JobFailParams{ID: j.ID, Node: "n", Status: "failure", Message: "bad"})
			return err
		}, store.FinishedFailed, 1, "bad"},
		{"cancel", func(t *testing.T, id int64) error {
			_, err := b.s.JobCancel(b.ctx, "q", id)
			return err
		}, store.FinishedCancelled, 0, store.ResultCancelled},
		{"delete", func(t *testing.T, id int64) error {
			_, err := b.s.JobDelete(b.ctx, "q", id)
			return err
		}, store.FinishedCancelled, 0, "deleted"},
	}
}

func TestFlow_EndPaths(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	for _, tc := range endCases(b) {
		t.Run(tc.name, func(t *testing.T) {
			in := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
				{Job: flowJob("x"), OnSuccess: callback("s"), OnFailure: callback("f"), OnFinish: callback("x")},
			}})
			if err := tc.end(t, in.IDs[0]); err != nil {
				t.Fatal(err)
			}
			want := map[string]bool{"x": true, "s": tc.status == store.FinishedSucceeded, "f": tc.status == store.FinishedFailed}
			cbs := b.callbacks(t)
			for cat, w := range want {
				if got := len(cbs[cat]); got != map[bool]int{true: 1}[w] {
					t.Errorf("%d callbacks %s, want %v", got, cat, w)
				}
			}
			for _, c := range cbs["x"] {
				if c.Job.ID != in.IDs[0] || c.Job.Status != tc.status || c.Job.Attempts != tc.attempts || c.Job.Message != tc.message {
					t.Errorf("on_finish payload job = %+v, want status %s, %d attempts, message %q", c.Job, tc.status, tc.attempts, tc.message)
				}
			}
			if d := b.done(); d.Callbacks != len(cbs["x"])+len(cbs["s"])+len(cbs["f"]) || !slices.Equal(d.Queues, []string{"cb"}) {
				t.Errorf("told %+v", d)
			}
			if _, err := b.s.FlowGet(b.ctx, in.IDs[0]); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("flow after the end: %v", err)
			}
		})
	}
	if n := b.rows(t, "job_flows"); n != 0 {
		t.Errorf("%d job_flows rows left", n)
	}
}

// TestFlow_ParentFailure: a failed parent cancels its dependents down
// three levels, fails one whose policy is fail (failure log status
// parent-failed), and releases one whose policy is run.
func TestFlow_ParentFailure(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	dep := func(category string, parent int, policy string) *store.FlowJobParams {
		return &store.FlowJobParams{Job: flowJob(category), DependsOn: []store.FlowParent{{Index: parent}},
			OnParentFailure: policy, OnFinish: callback(category)}
	}
	in := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		{Job: flowJob("a")},
		dep("b", 0, ""), dep("c", 1, store.ParentFailureCancel), dep("d", 2, ""),
		dep("e", 0, store.ParentFailureFail), dep("f", 4, ""),
		dep("g", 0, store.ParentFailureRun),
	}, Batch: &store.BatchParams{OnFinish: callback("batch")}})
	a := b.grab(t, "q")
	if _, err := b.s.JobFail(b.ctx, &store.JobFailParams{ID: a[0].ID, Node: "n", Status: "failure", Message: "bad"}); err != nil {
		t.Fatal(err)
	}
	if d := b.done(); d.Ended != 5 || d.Released != 1 {
		t.Errorf("told %+v, want 5 ended, 1 released", d)
	}
	cbs := b.callbacks(t)
	for cat, status := range map[string]string{"b": store.FinishedCancelled, "c": store.FinishedCancelled, "d": store.FinishedCancelled,
		"e": store.FinishedFailed, "f": store.FinishedCancelled} {
		if len(cbs[cat]) != 1 || cbs[cat][0].Job.Status != status {
			t.Errorf("on_finish of %s: %+v, want one, %s", cat, cbs[cat], status)
		}
	}
	if len(cbs["batch"]) != 0 {
		t.Errorf("the batch finished with g pending")
	}
	failed, err := b.s.FailedJobsList(b.ctx, &store.FailedJobsListParams{Queue: "q", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(failed) != 2 || failed[1].JobID != in.IDs[4] || failed[1].Status != store.FailedParent || failed[1].Code != 0 {
		t.Errorf("failure log = %+v", failed)
	}
	if f, err := b.s.FinishedGet(b.ctx, "q", in.IDs[3]); err != nil || f.Status != store.FinishedCancelled || f.StartedAt != nil || f.Attempts != 0 {
		t.Errorf("history of d = %+v, %v", f, err)
	}
	g := b.grab(t, "q")
	if len(g) != 1 || g[0].ID != in.IDs[6] {
		t.Fatalf("grabbed %+v, want g", g)
	}
	b.complete(t, b.s, g...)
	cbs = b.callbacks(t)
	if len(cbs["batch"]) != 1 || cbs["batch"][0].Batch.Failed != 2 || cbs["batch"][0].Batch.Cancelled != 4 || cbs["batch"][0].Batch.Succeeded != 1 {
		t.Errorf("batch callbacks = %+v", cbs)
	}
}

// TestFlow_DeleteBlocked: deleting a blocked job counts as its cancel,
// and unblocks nothing: its dependents are cancelled in turn.
func TestFlow_DeleteBlocked(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	in := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		{Job: flowJob("a")},
		{Job: flowJob("b"), DependsOn: []store.FlowParent{{Index: 0}}},
		{Job: flowJob("c"), DependsOn: []store.FlowParent{{Index: 1}}, OnFinish: callback("c")},
	}})
	if j, err := b.s.JobDelete(b.ctx, "q", in.IDs[1]); err != nil || j.State != store.StateBlocked {
		t.Fatalf("delete = %+v, %v", j, err)
	}
	if cbs := b.callbacks(t); len(cbs["c"]) != 1 || cbs["c"][0].Job.Status != store.FinishedCancelled {
		t.Errorf("callbacks = %+v", cbs)
	}
	if _, err := b.s.JobGet(b.ctx, "q", in.IDs[2]); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("c: %v, want it cancelled", err)
	}
	info, err := b.s.FlowGet(b.ctx, in.IDs[0])
	if err != nil || len(info.Dependents) != 0 {
		t.Errorf("flow of a = %+v, %v", info, err)
	}
}

// TestFlow_FanIn: a child of 10,000 parents, which end in batches of 100,
// is released once, by the last.
func TestFlow_FanIn(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	const n = 10000
	jobs := make([]*store.FlowJobParams, n+1)
	deps := make([]store.FlowParent, n)
	for i := range n {
		jobs[i], deps[i] = &store.FlowJobParams{Job: flowJob("p")}, store.FlowParent{Index: i}
	}
	jobs[n] = &store.FlowJobParams{Job: flowJob("child"), DependsOn: deps}
	start := time.Now()
	in := b.insert(t, &store.FlowInsertParams{Jobs: jobs})
	t.Logf("inserted in %v", time.Since(start))
	if !in.Blocked[n] {
		t.Fatal("child not blocked")
	}
	start = time.Now()
	for ended := 0; ended < n; {
		grabbed, err := b.s.JobsGrab(b.ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 100, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(grabbed) == 0 || grabbed[0].Category != "p" {
			t.Fatalf("after %d parents: grabbed %d jobs, the first %+v", ended, len(grabbed), grabbed[0])
		}
		b.complete(t, b.s, grabbed...)
		ended += len(grabbed)
		if d := b.done(); (d.Released != 0) != (ended == n) {
			t.Fatalf("after %d parents: told %+v", ended, d)
		}
	}
	t.Logf("ended in %v", time.Since(start))
	if got := b.grab(t, "q"); len(got) != 1 || got[0].ID != in.IDs[n] {
		t.Fatalf("grabbed %+v, want the child", got)
	}
}

// TestFlow_PlansUseTheirIndexes: the statements that every end of a flow
// job runs probe job_deps and jobs by their indexes, in custom and generic
// plans, however many edges there are.
func TestFlow_PlansUseTheirIndexes(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	const n = 5000
	jobs := make([]*store.FlowJobParams, n)
	for i := range jobs {
		jobs[i] = &store.FlowJobParams{Job: flowJob("j")}
		if i%2 == 1 {
			jobs[i].DependsOn = []store.FlowParent{{Index: i - 1}}
		}
	}
	in := b.insert(t, &store.FlowInsertParams{Jobs: jobs})
	conn, err := postgres.Pool(b.s).Acquire(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(b.ctx, "ANALYZE jobs, job_flows, job_deps"); err != nil {
		t.Fatal(err)
	}
	some := []int64{in.IDs[10], in.IDs[11]}
	for _, tc := range []struct {
		name, sql string
		args      []any
		want      []string
	}{
		{"children", postgres.FlowChildrenSQL, []any{some}, []string{"job_deps_pkey", "jobs_pkey", "job_flows_pkey"}},
		{"forget", postgres.FlowForgetSQL, []any{some}, []string{"job_deps_pkey", "job_deps_child", "job_flows_pkey"}},
		{"complete", postgres.CompleteFlowSQL, []any{some, "n", []int64{}, []string{}, []string{}}, []string{"jobs_pkey"}},
	} {
		for mode, p := range plans(b.ctx, t, conn, tc.sql, tc.args...) {
			for _, w := range tc.want {
				if !strings.Contains(p, w) || strings.Contains(p, "Seq Scan on job") {
					t.Errorf("%s, %s: plan does not use %s, or scans a table:\n%s", tc.name, mode, w, p)
				}
			}
		}
	}
}

// TestFlow_DependentRacesParentEnd: a dependent added by id to a grabbed
// job while the job completes (its grabber unaware of any flow) is never
// left blocked: either the completion sees the edge and releases it, or
// the insert finds the parent in the history, succeeded.
func TestFlow_DependentRacesParentEnd(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	for round := range 30 {
		insert(t, b, flowJob("p"))
		parent := b.grab(t, "q")[0]
		start, errs := make(chan struct{}), make(chan error, 2)
		var in *store.FlowInserted
		go func() {
			<-start
			var err error
			in, err = b.s.JobsInsertFlow(b.ctx, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
				{Job: flowJob("child"), DependsOn: []store.FlowParent{{ID: parent.ID}}}}})
			errs <- err
		}()
		go func() {
			<-start
			_, err := b.s.JobsComplete(b.ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{parent.ID}, Keep: []store.FinishNote{{ID: parent.ID}}})
			errs <- err
		}()
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		child := b.grab(t, "q")
		if len(child) != 1 || child[0].ID != in.IDs[0] {
			t.Fatalf("round %d: grabbed %+v, want the child (stored blocked: %v)", round, child, in.Blocked[0])
		}
		b.complete(t, b.s, child...)
	}
}

// TestFlow_DiamondFailAndSucceed: A → (B, C) → D where B fails while C
// succeeds, in two transactions of two stores: D is cancelled once, and
// its on_finish fires once.
func TestFlow_DiamondFailAndSucceed(t *testing.T) {
	t.Parallel()
	u := dbtest.URL(t, "postgres")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	b1 := watch(t, ctx, dbtest.OpenURL(t, u).(*postgres.Store))
	b2 := watch(t, ctx, dbtest.OpenURL(t, u).(*postgres.Store))
	for round := range 20 {
		in := b1.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
			{Job: flowJob("a")},
			{Job: flowJob("b"), DependsOn: []store.FlowParent{{Index: 0}}},
			{Job: flowJob("c"), DependsOn: []store.FlowParent{{Index: 0}}},
			{Job: flowJob("d"), DependsOn: []store.FlowParent{{Index: 1}, {Index: 2}}, OnFinish: callback("d")},
		}})
		b1.complete(t, b1.s, b1.grab(t, "q")...)
		mid := b1.grab(t, "q")
		start, errs := make(chan struct{}), make(chan error, 2)
		go func() {
			<-start
			_, err := b1.s.JobFail(ctx, &store.JobFailParams{ID: mid[0].ID, Node: "n", Status: "failure", Message: "no"})
			errs <- err
		}()
		go func() {
			<-start
			_, err := b2.s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{mid[1].ID}})
			errs <- err
		}()
		close(start)
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if got := b1.done().Ended + b2.done().Ended; got != 1 {
			t.Errorf("round %d: %d dependents ended, want 1", round, got)
		}
		cbs := b1.callbacks(t)
		if len(cbs["d"]) != 1 || cbs["d"][0].Job.ID != in.IDs[3] || cbs["d"][0].Job.Status != store.FinishedCancelled {
			t.Fatalf("round %d: callbacks %+v", round, cbs)
		}
		if jobs := b1.grab(t, "q"); len(jobs) != 0 {
			t.Fatalf("round %d: grabbed %+v", round, jobs)
		}
	}
}

// TestFlow_KeyHeadsPassBlocked: a blocked ordered job holds back none of
// its key's jobs; released, it takes its place (its id) in the order.
func TestFlow_KeyHeadsPassBlocked(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	ordered := func(category string) *store.JobInsertParams {
		j := flowJob(category)
		j.ConcurrencyKey, j.ConcurrencyLimit, j.Ordered = "k", 1, true
		return j
	}
	parent := insert(t, b, flowJob("p"))
	in := b.insert(t, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: ordered("c"), DependsOn: []store.FlowParent{{ID: parent}}}}})
	later := insert(t, b, ordered("w"))
	heads := func() int64 {
		t.Helper()
		h, err := b.s.JobsKeyHeads(b.ctx, &store.JobsKeyHeadsParams{Queue: "q", Keys: []string{"k"}})
		if err != nil {
			t.Fatal(err)
		}
		return h["k"]
	}
	if got := heads(); got != later {
		t.Errorf("head while blocked = %d, want %d", got, later)
	}
	jobs, err := b.s.JobsGrab(b.ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 1, Lease: time.Minute, NoKeys: true})
	if err != nil || len(jobs) != 1 || jobs[0].ID != parent {
		t.Fatalf("grabbed %+v, %v", jobs, err)
	}
	b.complete(t, b.s, jobs...)
	if got := heads(); got != in.IDs[0] {
		t.Errorf("head once released = %d, want %d", got, in.IDs[0])
	}
}

// TestFlow_FanOut: the end of a parent of 10,000 dependents releases them
// all, in its own transaction.
func TestFlow_FanOut(t *testing.T) {
	t.Parallel()
	b := flowSetup(t)
	const n = 10000
	jobs := make([]*store.FlowJobParams, n+1)
	jobs[0] = &store.FlowJobParams{Job: flowJob("p")}
	for i := 1; i <= n; i++ {
		jobs[i] = &store.FlowJobParams{Job: flowJob("c"), DependsOn: []store.FlowParent{{Index: 0}}}
	}
	b.insert(t, &store.FlowInsertParams{Jobs: jobs})
	start := time.Now()
	b.complete(t, b.s, b.grab(t, "q")...)
	t.Logf("released in %v", time.Since(start))
	if d := b.done(); d.Released != n || !slices.Equal(d.Queues, []string{"q"}) {
		t.Errorf("told %+v, want %d releases in q", d, n)
	}
	due, err := b.s.JobsNextDue(b.ctx, []string{"q"})
	if err != nil || len(due) != 1 || due[0].Job > 0 {
		t.Errorf("next due = %+v, %v; want due now", due, err)
	}
	if info, err := b.s.FlowGet(b.ctx, b.grab(t, "q")[0].ID); err != nil || len(info.WaitsFor) != 0 {
		t.Errorf("flow of a released job = %+v, %v", info, err)
	}
}
