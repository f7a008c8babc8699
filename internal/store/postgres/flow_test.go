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

func insert(t *testing.T, b *flowBundle, p *store.JobInsertParams) int64 {
	t.Helper()
	ids, err := b.s.JobsInsert(b.ctx, []*store.JobInsertParams{p})
	if err != nil {
		t.Fatal(err)
	}
	return ids[0]
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

// held grabs the one due job of queue q, with a flow.
func (b *flowBundle) held(t *testing.T, leased bool, lease time.Duration) *store.Job {
	t.Helper()
	jobs, err := b.s.JobsGrab(b.ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: lease, Leased: leased})
	if err != nil || len(jobs) != 1 || !jobs[0].Flow {
		t.Fatalf("grabbed %+v, %v", jobs, err)
	}
	return jobs[0]
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
