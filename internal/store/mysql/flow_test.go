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
