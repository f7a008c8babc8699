package storetest

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// flowTests are the conformance tests of FlowStore and of the end paths
// that apply flows (FlowEnd): callbacks, dependencies and batches.
var flowTests = slices.Concat(flowCallbackTests(), []conformanceTest{
	{"Flow_CallbackDueAndRouted", testFlowCallbackRouted},
	{"Flow_ChainReleasedStepByStep", testFlowChain},
	{"Flow_DiamondReleasedOnce", testFlowDiamond},
	{"Flow_ParentFailureCancelCascades", testFlowCancelCascade},
	{"Flow_ParentFailureFail", testFlowParentFail},
	{"Flow_ParentFailureRun", testFlowParentRun},
	{"Flow_ParentGrabbedWithStaleFlow", testFlowParentGrabbed},
	{"Flow_ParentLeasedWithStaleFlow", testFlowParentLeased},
	{"Flow_ParentFinishedAndKept", testFlowParentKept},
	{"Flow_ParentUnknown", testFlowParentUnknown},
	{"Flow_BatchCallbacksOnce", testFlowBatch},
	{"Flow_BatchWithFailure", testFlowBatchFailure},
	{"Flow_KeepAndRetry", testFlowKeepAndRetry},
	{"Flow_PlainJobsKeepTheirPath", testFlowPlain},
	{"Flow_BlockedInvisible", testFlowBlockedInvisible},
	{"Flow_BlockedHeadsNoKey", testFlowBlockedKeyHeads},
	{"Flow_ReadsNotFound", testFlowNotFound},
	{"Flow_FanIn", testFlowFanIn},
})

// flowJob is a job of queue q for JobsInsertFlow, with its payload.
func flowJob(q string, payload string) *store.JobInsertParams {
	return &store.JobInsertParams{Queue: q, Category: "cat", URL: "http://127.0.0.1:1/work", Payload: json.RawMessage(payload),
		MaxRetries: 3, RetryDelay: 1, Timeout: 5}
}

// callback is a callback to queue q whose own payload names tag.
func callback(q, tag string) *store.JobInsertParams {
	return &store.JobInsertParams{Queue: q, Category: "cb", URL: "http://127.0.0.1:1/callback", Payload: json.RawMessage(`{"tag":"` + tag + `"}`),
		MaxRetries: 2, RetryDelay: 3, Timeout: 7}
}

func insertFlow(t *testing.T, s store.Store, p *store.FlowInsertParams) *store.FlowInserted {
	t.Helper()
	out := must(s.JobsInsertFlow(ctxT(t), p))(t)
	if len(out.IDs) != len(p.Jobs) || len(out.Blocked) != len(p.Jobs) {
		t.Fatalf("JobsInsertFlow = %+v for %d jobs", out, len(p.Jobs))
	}
	return out
}

// chainParams are jobs of queue q, each depending on the one before it
// with policy (the first on none).
func chainParams(q string, n int, policy string) *store.FlowInsertParams {
	p := &store.FlowInsertParams{}
	for i := range n {
		j := &store.FlowJobParams{Job: flowJob(q, fmt.Sprintf(`{"step":%d}`, i)), OnParentFailure: policy}
		if i > 0 {
			j.DependsOn = []store.FlowParent{{Index: i - 1}}
		}
		p.Jobs = append(p.Jobs, j)
	}
	return p
}

// flowWatch records what the store's FlowWatch function is told.
type flowWatch struct {
	mu   sync.Mutex
	done store.FlowDone
	n    int
}

func watchFlows(t *testing.T, s store.Store) *flowWatch {
	w := &flowWatch{}
	s.FlowWatch(func(d store.FlowDone) {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done.Add(d)
		w.n++
	})
	t.Cleanup(func() { s.FlowWatch(nil) })
	return w
}

func (w *flowWatch) get() (store.FlowDone, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.done
	d.Queues = slices.Clone(d.Queues)
	slices.Sort(d.Queues)
	return d, w.n
}

// grabIDs grabs every due job of q (up to 100) and returns their ids,
// ascending.
func grabIDs(t *testing.T, s store.Store, q string) []int64 {
	t.Helper()
	return sorted(jobIDs(grabAll(t, s, q, "n1")))
}

func complete(t *testing.T, s store.Store, ids ...int64) {
	t.Helper()
	if n := must(s.JobsComplete(ctxT(t), &store.JobsCompleteParams{Node: "n1", IDs: ids}))(t); n != int64(len(ids)) {
		t.Fatalf("JobsComplete(%v) = %d, want %d", ids, n, len(ids))
	}
}

// waiting returns the waiting, due jobs of q, by next_try and id.
func waiting(t *testing.T, s store.Store, q string) []*store.Job {
	t.Helper()
	return must(s.JobsList(ctxT(t), &store.JobsListParams{Queue: q, Kind: store.JobsWaiting, Limit: 1000}))(t)
}

func failJob(t *testing.T, s store.Store, id int64, keep bool) {
	t.Helper()
	must(s.JobFail(ctxT(t), &store.JobFailParams{ID: id, Node: "n1", Status: "permanent-failure", Code: 500, Message: "boom", Keep: keep}))(t)
}

// notLive checks that the jobs ids of q are no longer live.
func notLive(t *testing.T, s store.Store, q string, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		if _, err := s.JobGet(ctxT(t), q, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("JobGet(%d) of queue %q: err = %v, want ErrNotFound", id, q, err)
		}
	}
}

func jobState(t *testing.T, s store.Store, q string, id int64) string {
	t.Helper()
	return must(s.JobGet(ctxT(t), q, id))(t).State
}

// eventually polls cond until it holds or a generous deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 30s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// callbackPayload is the payload of a job's callback (CallbackPayload).
type callbackPayload struct {
	Job struct {
		ID       int64           `json:"id"`
		Queue    string          `json:"queue_name"`
		Category string          `json:"category"`
		Status   string          `json:"status"`
		Attempts int             `json:"attempts"`
		Result   json.RawMessage `json:"result"`
		Message  string          `json:"message"`
	} `json:"job"`
	Payload struct {
		Tag string `json:"tag"`
	} `json:"payload"`
}

// batchPayload is the payload of a batch's callback.
type batchPayload struct {
	Batch struct {
		ID                                  int64
		Total, Succeeded, Failed, Cancelled int
		Meta                                json.RawMessage
		FinishedAt                          *time.Time `json:"finished_at"`
	} `json:"batch"`
	Payload struct {
		Tag string `json:"tag"`
	} `json:"payload"`
}

func decode[T any](t *testing.T, j *store.Job) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(j.Payload, &v); err != nil {
		t.Fatalf("payload of job %d: %q: %v", j.ID, j.Payload, err)
	}
	return v
}

// flowEndCase is one way a job with callbacks ends.
type flowEndCase struct {
	name    string
	waiting bool          // ended waiting, not grabbed
	leased  bool          // grabbed leased (for a puller)
	lease   time.Duration // 0: a minute
	end     func(t *testing.T, s store.Store, j *store.Job)
	// What its callbacks are told; message "*" is not checked.
	status, message, result string
	attempts                int
}

func flowEndCases() []flowEndCase {
	return []flowEndCase{
		{name: "CompleteWithNote", status: store.FinishedSucceeded, message: "done", result: `{"rows":2}`, attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) {
				must(s.JobsComplete(ctxT(t), &store.JobsCompleteParams{Node: "n1", IDs: []int64{j.ID},
					Flow: []store.FinishNote{{ID: j.ID, Message: "done", Result: json.RawMessage(`{"rows": 2}`)}}}))(t)
			}},
		{name: "CompleteWithoutNote", status: store.FinishedSucceeded, attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) { complete(t, s, j.ID) }},
		{name: "Succeed", leased: true, status: store.FinishedSucceeded, message: "ok", result: `[1,"a"]`, attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) {
				must(s.JobsSucceed(ctxT(t), &store.JobsSucceedParams{Grabs: []store.JobGrab{{ID: j.ID, Grabs: j.Grabs}}, Status: "success",
					Notes: []store.FinishNote{{ID: j.ID, Message: "ok", Result: json.RawMessage(`[1,"a"]`)}}}))(t)
			}},
		{name: "FinishDelete", leased: true, status: store.FinishedSucceeded, message: "fine", result: `true`, attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) {
				must(s.JobFinish(ctxT(t), &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishDelete, Status: "success",
					Message: "fine", Result: json.RawMessage(`true`)}))(t)
			}},
		{name: "FinishFail", leased: true, status: store.FinishedFailed, message: "bad", attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) {
				must(s.JobFinish(ctxT(t), &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishFail,
					Status: "permanent-failure", Code: 500, Message: "bad"}))(t)
			}},
		{name: "FinishFailExpired", leased: true, lease: time.Millisecond, status: store.FinishedFailed, message: "lease expired", attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) {
				eventually(t, "lease expired", func() bool {
					_, err := s.JobFinish(ctxT(t), &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishFail,
						Status: "permanent-failure", Message: "lease expired", Expired: true})
					if errors.Is(err, store.ErrNotFound) {
						return false
					}
					ok(t, err)
					return true
				})
			}},
		{name: "Fail", status: store.FinishedFailed, message: "boom", attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) { failJob(t, s, j.ID, false) }},
		{name: "FailKept", status: store.FinishedFailed, message: "boom", attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) { failJob(t, s, j.ID, true) }},
		{name: "CancelWaiting", waiting: true, status: store.FinishedCancelled, message: "*",
			end: func(t *testing.T, s store.Store, j *store.Job) { must(s.JobCancel(ctxT(t), "w", j.ID))(t) }},
		{name: "CancelGrabbed", status: store.FinishedCancelled, message: "*", attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) { must(s.JobCancel(ctxT(t), "w", j.ID))(t) }},
		{name: "Delete", status: store.FinishedCancelled, message: "*", attempts: 1,
			end: func(t *testing.T, s store.Store, j *store.Job) { must(s.JobDelete(ctxT(t), "w", j.ID))(t) }},
	}
}

func flowCallbackTests() []conformanceTest {
	var out []conformanceTest
	for _, c := range flowEndCases() {
		out = append(out, conformanceTest{"Flow_Callbacks_" + c.name, func(t *testing.T, s store.Store) { testFlowCallbacks(t, s, c) }})
	}
	return out
}

// testFlowCallbacks ends a job with the three callbacks as c says, and
// checks that exactly the callbacks its outcome calls for are inserted,
// each with its payload.
func testFlowCallbacks(t *testing.T, s store.Store, c flowEndCase) {
	ctx := ctxT(t)
	for _, q := range []string{"w", "ok", "ko", "fin"} {
		putQueue(t, s, q)
	}
	w := watchFlows(t, s)
	id := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: flowJob("w", `{"n":1}`),
		OnSuccess: callback("ok", "s"), OnFailure: callback("ko", "f"), OnFinish: callback("fin", "e")}}}).IDs[0]
	j := must(s.JobGet(ctx, "w", id))(t)
	if !c.waiting {
		lease := cmp.Or(c.lease, time.Minute)
		jobs := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "w", Node: "n1", Limit: 10, Lease: lease, Leased: c.leased}))(t)
		if len(jobs) != 1 || jobs[0].ID != id {
			t.Fatalf("grabbed %v, want [%d]", jobIDs(jobs), id)
		}
		j = jobs[0]
	}
	if !j.Flow {
		t.Fatalf("job with callbacks read with Flow false: %+v", j)
	}
	c.end(t, s, j)
	notLive(t, s, "w", id)
	want := map[string]string{"fin": "e"}
	switch c.status {
	case store.FinishedSucceeded:
		want["ok"] = "s"
	case store.FinishedFailed:
		want["ko"] = "f"
	}
	for _, q := range []string{"ok", "ko", "fin"} {
		jobs := waiting(t, s, q)
		tag, wanted := want[q]
		if !wanted {
			if len(jobs) != 0 {
				t.Fatalf("queue %q: %d callbacks, want none", q, len(jobs))
			}
			continue
		}
		if len(jobs) != 1 {
			t.Fatalf("queue %q: %d callbacks, want 1", q, len(jobs))
		}
		p := decode[callbackPayload](t, jobs[0])
		if p.Job.ID != id || p.Job.Queue != "w" || p.Job.Category != "cat" || p.Job.Status != c.status ||
			p.Job.Attempts != c.attempts || (c.message != "*" && p.Job.Message != c.message) || p.Payload.Tag != tag {
			t.Fatalf("queue %q: callback payload %s, want job %d %s after %d attempts, message %q, tag %q",
				q, jobs[0].Payload, id, c.status, c.attempts, c.message, tag)
		}
		if !jsonEqual(p.Job.Result, c.result) {
			t.Fatalf("queue %q: callback result %s, want %s", q, p.Job.Result, c.result)
		}
	}
	d, n := w.get()
	if n != 1 || d.Callbacks != len(want) || d.Released != 0 || d.Ended != 0 || len(d.Queues) != len(want) {
		t.Fatalf("FlowWatch told %d times: %+v, want once %d callbacks", n, d, len(want))
	}
}

// jsonEqual compares JSON values; "" and null are none.
func jsonEqual(got json.RawMessage, want string) bool {
	if want == "" {
		return len(got) == 0 || string(got) == "null"
	}
	var a, b any
	if json.Unmarshal(got, &a) != nil || json.Unmarshal([]byte(want), &b) != nil {
		return false
	}
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func testFlowCallbackRouted(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, q := range []string{"w", "cb", "later"} {
		putQueue(t, s, q)
	}
	cb := callback("cb", "s")
	cb.JobOptions = store.JobOptions{Priority: 5, RetryBackoff: store.BackoffExponential, RetryDelayMax: 60, RetryJitter: 0.5,
		ConcurrencyKey: "k", ConcurrencyLimit: 2}
	cb.Trace = store.Trace{Parent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", State: "rowq=1"}
	later := callback("later", "e")
	later.RunAfter = time.Hour
	id := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: flowJob("w", `{}`), OnSuccess: cb, OnFinish: later}}}).IDs[0]
	grabIDs(t, s, "w")
	before := must(s.Now(ctx))(t)
	complete(t, s, id)
	jobs := grabAll(t, s, "cb", "n2")
	if len(jobs) != 1 {
		t.Fatalf("grabbed %d callbacks, want 1", len(jobs))
	}
	j := jobs[0]
	if j.Queue != "cb" || j.Category != "cb" || j.URL != cb.URL || j.MaxRetries != 2 || j.RetryDelay != 3 || j.Timeout != 7 ||
		j.JobOptions != cb.JobOptions || j.Trace != cb.Trace || j.Flow {
		t.Fatalf("callback job = %+v, want as stored: %+v", j, cb)
	}
	if p := decode[callbackPayload](t, j); p.Job.ID != id || p.Payload.Tag != "s" {
		t.Fatalf("callback payload %s", j.Payload)
	}
	if got := grabAll(t, s, "later", "n2"); len(got) != 0 {
		t.Fatalf("a callback due in an hour was grabbed: %v", jobIDs(got))
	}
	deferred := must(s.JobsList(ctx, &store.JobsListParams{Queue: "later", Kind: store.JobsDeferred, Limit: 10}))(t)
	if len(deferred) != 1 || deferred[0].NextTry.Before(before.Add(50*time.Minute)) || deferred[0].NextTry.After(before.Add(70*time.Minute)) {
		t.Fatalf("deferred callbacks = %+v, want one due in an hour from %v", deferred, before)
	}
}

func testFlowChain(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	w := watchFlows(t, s)
	out := insertFlow(t, s, chainParams("q", 3, ""))
	if !slices.Equal(out.Blocked, []bool{false, true, true}) {
		t.Fatalf("Blocked = %v, want [false true true]", out.Blocked)
	}
	a, b, c := out.IDs[0], out.IDs[1], out.IDs[2]
	info := must(s.FlowGet(ctx, b))(t)
	if info.JobID != b || !slices.Equal(info.WaitsFor, []int64{a}) || !slices.Equal(info.Dependents, []int64{c}) ||
		info.OnParentFailure != store.ParentFailureCancel || info.BatchID != 0 || len(info.Callbacks) != 0 {
		t.Fatalf("FlowGet(%d) = %+v", b, info)
	}
	blocked := must(s.JobsBlocked(ctx, &store.JobsBlockedParams{Queue: "q", Limit: 10}))(t)
	if len(blocked) != 2 || blocked[0].Job.ID != b || !slices.Equal(blocked[0].WaitsFor, []int64{a}) ||
		blocked[1].Job.ID != c || !slices.Equal(blocked[1].WaitsFor, []int64{b}) || blocked[0].Job.State != store.StateBlocked {
		t.Fatalf("JobsBlocked = %+v", blocked)
	}
	if page := must(s.JobsBlocked(ctx, &store.JobsBlockedParams{Queue: "q", After: b, Limit: 10}))(t); len(page) != 1 || page[0].Job.ID != c {
		t.Fatalf("JobsBlocked after %d = %+v", b, page)
	}
	for i, id := range out.IDs {
		if got := grabIDs(t, s, "q"); !slices.Equal(got, []int64{id}) {
			t.Fatalf("step %d: grabbed %v, want [%d]", i, got, id)
		}
		if i < 2 && jobState(t, s, "q", out.IDs[i+1]) != store.StateBlocked {
			t.Fatalf("step %d: the next job is not blocked", i)
		}
		complete(t, s, id)
		d, _ := w.get()
		if want := min(i+1, 2); d.Released != want || !slices.Equal(d.Queues, []string{"q"}) {
			t.Fatalf("step %d: FlowWatch told %+v, want %d released in [q]", i, d, want)
		}
	}
	if _, err := s.FlowGet(ctx, c); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FlowGet of an ended job: err = %v, want ErrNotFound", err)
	}
	if blocked := must(s.JobsBlocked(ctx, &store.JobsBlockedParams{Queue: "q", Limit: 10}))(t); len(blocked) != 0 {
		t.Fatalf("JobsBlocked at the end = %+v", blocked)
	}
}

// testFlowDiamond ends the two middle jobs of A → (B, C) → D in two
// concurrent transactions, and checks that D is released once, again and
// again.
func testFlowDiamond(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	w := watchFlows(t, s)
	const rounds = 10
	for round := range rounds {
		out := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
			{Job: flowJob("q", `{"n":"a"}`)},
			{Job: flowJob("q", `{"n":"b"}`), DependsOn: []store.FlowParent{{Index: 0}}},
			{Job: flowJob("q", `{"n":"c"}`), DependsOn: []store.FlowParent{{Index: 0}}},
			{Job: flowJob("q", `{"n":"d"}`), DependsOn: []store.FlowParent{{Index: 1}, {Index: 2}}},
		}})
		a, b, c, d := out.IDs[0], out.IDs[1], out.IDs[2], out.IDs[3]
		if got := grabIDs(t, s, "q"); !slices.Equal(got, []int64{a}) {
			t.Fatalf("round %d: grabbed %v, want [%d]", round, got, a)
		}
		complete(t, s, a)
		if got := grabIDs(t, s, "q"); !slices.Equal(got, []int64{b, c}) {
			t.Fatalf("round %d: grabbed %v, want [%d %d]", round, got, b, c)
		}
		var wg sync.WaitGroup
		errs := make(chan error, 2)
		for _, id := range []int64{b, c} {
			wg.Go(func() {
				n, err := s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: []int64{id}})
				if err == nil && n != 1 {
					err = fmt.Errorf("JobsComplete(%d) = %d, want 1", id, n)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			ok(t, err)
		}
		eventually(t, "D released", func() bool { return jobState(t, s, "q", d) == store.StateWaiting })
		if got := grabIDs(t, s, "q"); !slices.Equal(got, []int64{d}) {
			t.Fatalf("round %d: grabbed %v, want [%d]", round, got, d)
		}
		complete(t, s, d)
	}
	if done, _ := w.get(); done.Released != 3*rounds || done.Ended != 0 {
		t.Fatalf("FlowWatch told %+v, want %d released", done, 3*rounds)
	}
}

func testFlowCancelCascade(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	putQueue(t, s, "fin")
	w := watchFlows(t, s)
	p := chainParams("q", 4, store.ParentFailureCancel)
	p.Jobs[3].OnFinish = callback("fin", "e")
	ids := insertFlow(t, s, p).IDs
	grabIDs(t, s, "q")
	failJob(t, s, ids[0], true)
	notLive(t, s, "q", ids...)
	for i, id := range ids[1:] {
		f := must(s.FinishedGet(ctx, "q", id))(t)
		if want := fmt.Sprintf("parent %d", ids[i]); f.Status != store.FinishedCancelled || f.Attempts != 0 ||
			len(f.Message) < len(want) || f.Message[:len(want)] != want {
			t.Fatalf("history of job %d = %+v, want cancelled for its parent %d", id, f, ids[i])
		}
	}
	fin := waiting(t, s, "fin")
	if len(fin) != 1 {
		t.Fatalf("%d on_finish callbacks, want 1", len(fin))
	}
	if cb := decode[callbackPayload](t, fin[0]); cb.Job.ID != ids[3] || cb.Job.Status != store.FinishedCancelled || cb.Job.Attempts != 0 {
		t.Fatalf("on_finish payload %s", fin[0].Payload)
	}
	if failed := must(s.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: "q", Limit: 10}))(t); len(failed) != 1 || failed[0].JobID != ids[0] {
		t.Fatalf("failure log = %+v, want job %d alone", failed, ids[0])
	}
	if d, _ := w.get(); d.Ended != 3 || d.Callbacks != 1 || d.Released != 0 {
		t.Fatalf("FlowWatch told %+v, want 3 ended, 1 callback", d)
	}
}

func testFlowParentFail(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	p := chainParams("q", 3, store.ParentFailureFail)
	p.Jobs[2].OnParentFailure = store.ParentFailureCancel
	ids := insertFlow(t, s, p).IDs
	grabIDs(t, s, "q")
	failJob(t, s, ids[0], false)
	notLive(t, s, "q", ids...)
	failed := must(s.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: "q", Limit: 10}))(t)
	if len(failed) != 2 || failed[0].JobID != ids[0] || failed[1].JobID != ids[1] {
		t.Fatalf("failure log = %+v, want jobs %v", failed, ids[:2])
	}
	if f := failed[1]; f.Status != store.FailedParent || f.Code != 0 || f.FailCount != 1 || string(f.Payload) != `{"step":1}` || f.Queue != "q" {
		t.Fatalf("failure log entry of the dependent = %+v", f)
	}
	if f := must(s.FinishedGet(ctx, "q", ids[1]))(t); f.Status != store.FinishedFailed {
		t.Fatalf("history of the failed dependent = %+v", f)
	}
	if f := must(s.FinishedGet(ctx, "q", ids[2]))(t); f.Status != store.FinishedCancelled {
		t.Fatalf("history of the cancelled grandchild = %+v", f)
	}
	// Retried from the failure log, the dependent runs as a plain job.
	j := must(s.FailedJobRetry(ctx, "q", failed[1].ID))(t)
	if j.ID != ids[1] || j.Flow || j.State != store.StateWaiting {
		t.Fatalf("retried dependent = %+v", j)
	}
	if got := grabIDs(t, s, "q"); !slices.Equal(got, []int64{ids[1]}) {
		t.Fatalf("grabbed %v, want the retried dependent", got)
	}
}

func testFlowParentRun(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	out := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		{Job: flowJob("q", `{"n":"a"}`)},
		{Job: flowJob("q", `{"n":"a2"}`)},
		{Job: flowJob("q", `{"n":"b"}`), DependsOn: []store.FlowParent{{Index: 0}}, OnParentFailure: store.ParentFailureRun},
		{Job: flowJob("q", `{"n":"c"}`), DependsOn: []store.FlowParent{{Index: 0}, {Index: 1}}, OnParentFailure: store.ParentFailureRun},
	}})
	a, a2, b, c := out.IDs[0], out.IDs[1], out.IDs[2], out.IDs[3]
	grabIDs(t, s, "q")
	failJob(t, s, a, false)
	if st := jobState(t, s, "q", b); st != store.StateWaiting {
		t.Fatalf("dependent of a failed parent under run: %s, want waiting", st)
	}
	if info := must(s.FlowGet(ctx, c))(t); jobState(t, s, "q", c) != store.StateBlocked || !slices.Equal(info.WaitsFor, []int64{a2}) {
		t.Fatalf("job with a parent left: %+v, want blocked on %d", info, a2)
	}
	must(s.JobCancel(ctx, "q", a2))(t)
	if st := jobState(t, s, "q", c); st != store.StateWaiting {
		t.Fatalf("dependent of a cancelled parent under run: %s, want waiting", st)
	}
}

// testFlowParentGrabbed names live parents by id: one grabbed before it
// got a dependent (its holder's Job.Flow is false: JobsComplete must end
// it through FlowEnd all the same), one waiting, then cancelled.
func testFlowParentGrabbed(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putQueue(t, s, "c")
	w := watchFlows(t, s)
	held := insert(t, s, "q", 1, 0)[0]
	if jobs := grabAll(t, s, "q", "n1"); len(jobs) != 1 || jobs[0].Flow {
		t.Fatalf("grabbed %+v, want job %d without flow", jobs, held)
	}
	later := insert(t, s, "q", 1, time.Hour)[0]
	out := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		{Job: flowJob("c", `{"n":1}`), DependsOn: []store.FlowParent{{ID: held}}},
		{Job: flowJob("c", `{"n":2}`), DependsOn: []store.FlowParent{{ID: later}}},
	}})
	if !slices.Equal(out.Blocked, []bool{true, true}) {
		t.Fatalf("Blocked = %v, want both", out.Blocked)
	}
	if info := must(s.FlowGet(ctx, held))(t); !slices.Equal(info.Dependents, []int64{out.IDs[0]}) {
		t.Fatalf("FlowGet of the parent = %+v", info)
	}
	complete(t, s, held)
	if st := jobState(t, s, "c", out.IDs[0]); st != store.StateWaiting {
		t.Fatalf("dependent of a completed parent grabbed before: %s, want waiting", st)
	}
	must(s.JobCancel(ctx, "q", later))(t)
	notLive(t, s, "c", out.IDs[1])
	if d, _ := w.get(); d.Released != 1 || d.Ended != 1 || !slices.Equal(d.Queues, []string{"c"}) {
		t.Fatalf("FlowWatch told %+v, want 1 released and 1 ended in [c]", d)
	}
}

func testFlowParentKept(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	putQueue(t, s, "c")
	ids := insert(t, s, "q", 3, 0)
	grabAll(t, s, "q", "n1")
	must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids[:1], Keep: []store.FinishNote{{ID: ids[0]}}}))(t)
	failJob(t, s, ids[1], true)
	must(s.JobCancel(ctx, "q", ids[2]))(t)
	succeeded, failed, cancelled := ids[0], ids[1], ids[2]
	child := func(policy string, parents ...int64) *store.FlowJobParams {
		j := &store.FlowJobParams{Job: flowJob("c", `{}`), OnParentFailure: policy}
		for _, p := range parents {
			j.DependsOn = append(j.DependsOn, store.FlowParent{ID: p})
		}
		return j
	}
	out := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{child("", succeeded), child(store.ParentFailureRun, failed, cancelled)}})
	if !slices.Equal(out.Blocked, []bool{false, false}) {
		t.Fatalf("Blocked = %v, want none", out.Blocked)
	}
	for _, c := range []struct {
		policy string
		parent int64
		status string
	}{{"", failed, store.FinishedFailed}, {store.ParentFailureFail, cancelled, store.FinishedCancelled}} {
		_, err := s.JobsInsertFlow(ctx, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{child(""), child(c.policy, succeeded, c.parent)}})
		var pe *store.ParentError
		if !errors.As(err, &pe) || pe.Job != 1 || pe.Item != 1 || pe.Parent.ID != c.parent || pe.Status != c.status {
			t.Fatalf("JobsInsertFlow with a parent %s: err = %v (%+v), want ParentError of job 1, item 1", c.status, err, pe)
		}
	}
	if jobs := waiting(t, s, "c"); len(jobs) != 2 {
		t.Fatalf("queue c holds %d jobs, want the 2 first inserted (a refused call stores none)", len(jobs))
	}
}

func testFlowParentUnknown(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	ids := insert(t, s, "q", 1, 0)
	grabAll(t, s, "q", "n1")
	complete(t, s, ids[0]) // gone, not kept
	for _, id := range []int64{ids[0], 1 << 40} {
		_, err := s.JobsInsertFlow(ctx, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
			{Job: flowJob("q", `{}`), DependsOn: []store.FlowParent{{ID: id}}, OnParentFailure: store.ParentFailureRun}}})
		var pe *store.ParentError
		if !errors.As(err, &pe) || pe.Job != 0 || pe.Item != 0 || pe.Parent.ID != id || pe.Status != "" {
			t.Fatalf("JobsInsertFlow with unknown parent %d: err = %v, want ParentError without status", id, err)
		}
	}
	if jobs := waiting(t, s, "q"); len(jobs) != 0 {
		t.Fatalf("a refused call stored %d jobs", len(jobs))
	}
}

// batchParams is a batch of n jobs of queue q with both callbacks.
func batchParams(q string, n int) *store.FlowInsertParams {
	p := &store.FlowInsertParams{Batch: &store.BatchParams{OnSuccess: callback("ok", "s"), OnFinish: callback("fin", "e"),
		Meta: json.RawMessage(`{"name":"b"}`)}}
	for i := range n {
		p.Jobs = append(p.Jobs, &store.FlowJobParams{Job: flowJob(q, fmt.Sprintf(`{"i":%d}`, i))})
	}
	return p
}

func testFlowBatch(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, q := range []string{"q", "ok", "fin"} {
		putQueue(t, s, q)
	}
	const n = 5
	out := insertFlow(t, s, batchParams("q", n))
	b := must(s.BatchGet(ctx, out.BatchID))(t)
	if b.ID != out.BatchID || b.Total != n || b.Pending != n || b.Succeeded+b.Failed+b.Cancelled != 0 || b.FinishedAt != nil ||
		!b.HasOnSuccess || !b.HasOnFinish || !jsonEqual(b.Meta, `{"name":"b"}`) || b.CreatedAt.IsZero() {
		t.Fatalf("BatchGet = %+v", b)
	}
	if info := must(s.FlowGet(ctx, out.IDs[0]))(t); info.BatchID != out.BatchID {
		t.Fatalf("FlowGet = %+v, want batch %d", info, out.BatchID)
	}
	ids := grabIDs(t, s, "q")
	for i, id := range ids {
		if len(waiting(t, s, "ok"))+len(waiting(t, s, "fin")) != 0 {
			t.Fatalf("batch callbacks with %d jobs left", n-i)
		}
		complete(t, s, id)
	}
	for _, q := range []string{"ok", "fin"} {
		jobs := waiting(t, s, q)
		if len(jobs) != 1 {
			t.Fatalf("queue %q: %d batch callbacks, want 1", q, len(jobs))
		}
		p := decode[batchPayload](t, jobs[0])
		if p.Batch.ID != out.BatchID || p.Batch.Total != n || p.Batch.Succeeded != n || p.Batch.FinishedAt == nil ||
			!jsonEqual(p.Batch.Meta, `{"name":"b"}`) || p.Payload.Tag != map[string]string{"ok": "s", "fin": "e"}[q] {
			t.Fatalf("queue %q: batch callback payload %s", q, jobs[0].Payload)
		}
	}
	if b := must(s.BatchGet(ctx, out.BatchID))(t); b.Pending != 0 || b.Succeeded != n || b.FinishedAt == nil {
		t.Fatalf("BatchGet at the end = %+v", b)
	}
}

func testFlowBatchFailure(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, q := range []string{"q", "ok", "fin"} {
		putQueue(t, s, q)
	}
	first := insertFlow(t, s, batchParams("q", 3))
	second := insertFlow(t, s, batchParams("other", 1))
	ids := grabIDs(t, s, "q")
	complete(t, s, ids[0])
	failJob(t, s, ids[1], false)
	must(s.JobDelete(ctx, "q", ids[2]))(t)
	if n := len(waiting(t, s, "ok")); n != 0 {
		t.Fatalf("%d on_success callbacks of a batch with a failure", n)
	}
	fin := waiting(t, s, "fin")
	if len(fin) != 1 {
		t.Fatalf("%d on_finish callbacks, want 1", len(fin))
	}
	if p := decode[batchPayload](t, fin[0]); p.Batch.ID != first.BatchID || p.Batch.Succeeded != 1 || p.Batch.Failed != 1 || p.Batch.Cancelled != 1 {
		t.Fatalf("on_finish payload %s", fin[0].Payload)
	}
	bs := must(s.BatchesList(ctx, &store.BatchesListParams{Limit: 10}))(t)
	if len(bs) != 2 || bs[0].ID != second.BatchID || bs[1].ID != first.BatchID || bs[0].Pending != 1 || bs[1].Pending != 0 {
		t.Fatalf("BatchesList = %+v, want batches %d then %d", bs, second.BatchID, first.BatchID)
	}
	if bs := must(s.BatchesList(ctx, &store.BatchesListParams{Before: second.BatchID, Limit: 10}))(t); len(bs) != 1 || bs[0].ID != first.BatchID {
		t.Fatalf("BatchesList before %d = %+v", second.BatchID, bs)
	}
	// Retried from the failure log, the failed job runs as a plain job: its
	// success reopens nothing and fires nothing.
	failed := must(s.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: "q", Limit: 10}))(t)
	if len(failed) != 1 {
		t.Fatalf("failure log holds %d entries, want 1", len(failed))
	}
	if j := must(s.FailedJobRetry(ctx, "q", failed[0].ID))(t); j.Flow {
		t.Fatalf("job retried from the failure log has Flow: %+v", j)
	}
	complete(t, s, grabIDs(t, s, "q")...)
	if b := must(s.BatchGet(ctx, first.BatchID))(t); b.Succeeded != 1 || b.Failed != 1 || b.Cancelled != 1 || b.Pending != 0 {
		t.Fatalf("batch after a retried job succeeded = %+v", b)
	}
	if n := len(waiting(t, s, "ok")) + len(waiting(t, s, "fin")); n != 1 {
		t.Fatalf("%d batch callbacks after a retried job succeeded, want the 1 before", n)
	}
}

// testFlowKeepAndRetry completes a flow job of a queue that keeps its
// history (both are written), and retries another (no end: nothing fires).
func testFlowKeepAndRetry(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keepQueue(t, s, "q")
	putQueue(t, s, "ok")
	p := &store.FlowInsertParams{}
	for range 2 {
		p.Jobs = append(p.Jobs, &store.FlowJobParams{Job: flowJob("q", `{}`), OnSuccess: callback("ok", "s"), OnFinish: callback("ok", "e")})
	}
	ids := insertFlow(t, s, p).IDs
	if got := grabIDs(t, s, "q"); !slices.Equal(got, ids) {
		t.Fatalf("grabbed %v, want %v", got, ids)
	}
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: ids[1], Grabs: 1, Outcome: store.FinishRetry, Status: "failure", Delay: time.Hour}))(t)
	if j := must(s.JobGet(ctx, "q", ids[1]))(t); j.State != store.StateWaiting || !j.Flow {
		t.Fatalf("retried flow job = %+v", j)
	}
	if n := len(waiting(t, s, "ok")); n != 0 {
		t.Fatalf("a retry fired %d callbacks", n)
	}
	n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids[:1],
		Keep: []store.FinishNote{{ID: ids[0], Message: "kept"}}, Flow: []store.FinishNote{{ID: ids[0], Message: "kept"}}}))(t)
	if n != 1 {
		t.Fatalf("JobsComplete = %d, want 1", n)
	}
	if f := must(s.FinishedGet(ctx, "q", ids[0]))(t); f.Status != store.FinishedSucceeded || f.Message != "kept" {
		t.Fatalf("history of a completed flow job = %+v", f)
	}
	if n := len(waiting(t, s, "ok")); n != 2 {
		t.Fatalf("%d callbacks, want on_success and on_finish", n)
	}
}

// testFlowPlain completes plain and flow jobs in one JobsComplete: each
// ends, the flow job's callback fires once, and another flow job's rows
// stay untouched; plain jobs alone tell FlowWatch nothing.
func testFlowPlain(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putQueue(t, s, "ok")
	w := watchFlows(t, s)
	plain := insert(t, s, "q", 2, 0)
	flow := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: flowJob("q", `{}`), OnSuccess: callback("ok", "s")}}}).IDs[0]
	idle := flowJob("q", `{}`)
	idle.RunAfter = time.Hour
	other := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: idle, OnSuccess: callback("ok", "o")}}}).IDs[0]
	ids := grabIDs(t, s, "q")
	if want := sorted(append(slices.Clone(plain), flow)); !slices.Equal(ids, want) {
		t.Fatalf("grabbed %v, want %v", ids, want)
	}
	n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids, Flow: []store.FinishNote{{ID: flow, Message: "m"}}}))(t)
	if n != 3 {
		t.Fatalf("JobsComplete = %d, want 3", n)
	}
	notLive(t, s, "q", ids...)
	cbs := waiting(t, s, "ok")
	if len(cbs) != 1 {
		t.Fatalf("%d callbacks, want 1", len(cbs))
	}
	if p := decode[callbackPayload](t, cbs[0]); p.Job.ID != flow || p.Job.Message != "m" || p.Payload.Tag != "s" {
		t.Fatalf("callback payload %s", cbs[0].Payload)
	}
	if info := must(s.FlowGet(ctx, other))(t); !slices.Equal(info.Callbacks, []string{"on_success"}) {
		t.Fatalf("FlowGet of another flow job = %+v", info)
	}
	more := insert(t, s, "q", 3, 0)
	grabAll(t, s, "q", "n1")
	complete(t, s, more...)
	if d, calls := w.get(); calls != 1 || d.Callbacks != 1 {
		t.Fatalf("FlowWatch told %d times (%+v), want once", calls, d)
	}
}

// testFlowBlockedInvisible checks that a blocked job is neither grabbed,
// nor due, nor listed but as blocked.
func testFlowBlockedInvisible(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "p")
	putQueue(t, s, "q")
	out := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{
		{Job: flowJob("p", `{}`)},
		{Job: flowJob("q", `{}`), DependsOn: []store.FlowParent{{Index: 0}}},
	}})
	b := out.IDs[1]
	if jobs := grabAll(t, s, "q", "n1"); len(jobs) != 0 {
		t.Fatalf("grabbed blocked jobs %v", jobIDs(jobs))
	}
	if due := must(s.JobsNextDue(ctx, []string{"q"}))(t); len(due) != 0 {
		t.Fatalf("JobsNextDue of a queue with only a blocked job = %+v", due)
	}
	for _, kind := range []string{store.JobsWaiting, store.JobsDeferred, store.JobsGrabbed} {
		if jobs := must(s.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: kind, Limit: 10}))(t); len(jobs) != 0 {
			t.Fatalf("JobsList %s lists blocked jobs %v", kind, jobIDs(jobs))
		}
	}
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 0 {
		t.Fatalf("JobsRescue = %d", n)
	}
	if j := must(s.JobGet(ctx, "q", b))(t); j.State != store.StateBlocked || !j.Flow {
		t.Fatalf("JobGet of a blocked job = %+v", j)
	}
	// Deleting the blocked job leaves its parent as it was.
	must(s.JobDelete(ctx, "q", b))(t)
	if got := grabIDs(t, s, "p"); !slices.Equal(got, []int64{out.IDs[0]}) {
		t.Fatalf("grabbed %v, want the parent", got)
	}
	if info := must(s.FlowGet(ctx, out.IDs[0]))(t); len(info.Dependents) != 0 {
		t.Fatalf("FlowGet of the parent after its dependent was deleted = %+v", info)
	}
	complete(t, s, out.IDs[0])
}

func testFlowNotFound(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	plain := insert(t, s, "q", 1, 0)[0]
	for _, id := range []int64{plain, 1 << 40} {
		if _, err := s.FlowGet(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("FlowGet(%d): err = %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.BatchGet(ctx, 1<<40); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("BatchGet of no batch: err = %v, want ErrNotFound", err)
	}
	if bs := must(s.BatchesList(ctx, &store.BatchesListParams{Limit: 10}))(t); len(bs) != 0 {
		t.Fatalf("BatchesList = %+v", bs)
	}
	if bs := must(s.JobsBlocked(ctx, &store.JobsBlockedParams{Queue: "q", Limit: 10}))(t); len(bs) != 0 {
		t.Fatalf("JobsBlocked = %+v", bs)
	}
}

// testFlowFanIn releases one child of 10,000 parents, each hundred of
// them completed in one call, once, after the last. Each call has its own
// deadline (ctxT): the whole test may take longer than one.
func testFlowFanIn(t *testing.T, s store.Store) {
	putQueue(t, s, "q")
	putQueue(t, s, "c")
	w := watchFlows(t, s)
	const n = 10000
	child := &store.FlowJobParams{Job: flowJob("c", `{}`)}
	p := &store.FlowInsertParams{}
	for i := range n {
		p.Jobs = append(p.Jobs, &store.FlowJobParams{Job: flowJob("q", `{}`)})
		child.DependsOn = append(child.DependsOn, store.FlowParent{Index: i})
	}
	p.Jobs = append(p.Jobs, child)
	out := insertFlow(t, s, p)
	id := out.IDs[n]
	if !out.Blocked[n] || out.Blocked[0] {
		t.Fatal("the child is not blocked, or a parent is")
	}
	for left := n; left > 0; {
		if left == 100 {
			blocked := must(s.JobsBlocked(ctxT(t), &store.JobsBlockedParams{Queue: "c", Limit: 10}))(t)
			if len(blocked) != 1 || blocked[0].Job.ID != id || len(blocked[0].WaitsFor) != 100 {
				t.Fatalf("with 100 parents left: JobsBlocked = %d jobs", len(blocked))
			}
		}
		ids := grabIDs(t, s, "q")
		if len(ids) == 0 {
			t.Fatalf("no parent to grab with %d left", left)
		}
		complete(t, s, ids...)
		left -= len(ids)
	}
	if st := jobState(t, s, "c", id); st != store.StateWaiting {
		t.Fatalf("child after its last parent: %s, want waiting", st)
	}
	if d, _ := w.get(); d.Released != 1 {
		t.Fatalf("FlowWatch told %+v, want 1 released", d)
	}
}

// testFlowBlockedKeyHeads: a blocked ordered job holds back none of its
// key's jobs; released, it takes its place (its id) in the key's order.
func testFlowBlockedKeyHeads(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	ordered := func() *store.JobInsertParams {
		j := flowJob("q", `{}`)
		j.ConcurrencyKey, j.ConcurrencyLimit, j.Ordered = "k", 1, true
		return j
	}
	parent := insert(t, s, "q", 1, 0)[0]
	child := insertFlow(t, s, &store.FlowInsertParams{Jobs: []*store.FlowJobParams{{Job: ordered(), DependsOn: []store.FlowParent{{ID: parent}}}}}).IDs[0]
	later := must(s.JobsInsert(ctx, []*store.JobInsertParams{ordered()}))(t)[0]
	head := func() int64 {
		t.Helper()
		return must(s.JobsKeyHeads(ctx, &store.JobsKeyHeadsParams{Queue: "q", Keys: []string{"k"}}))(t)["k"]
	}
	if got := head(); got != later {
		t.Fatalf("head of the key while its oldest job is blocked = %d, want %d", got, later)
	}
	jobs := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 10, Lease: time.Minute, NoKeys: true}))(t)
	if len(jobs) != 1 || jobs[0].ID != parent {
		t.Fatalf("grabbed %v, want the parent %d", jobIDs(jobs), parent)
	}
	complete(t, s, parent)
	if got := head(); got != child {
		t.Fatalf("head of the key once its oldest job is released = %d, want %d", got, child)
	}
}

// testFlowParentLeased gives leased jobs dependents after their grab (the
// holder's Job.Flow is false), then ends them by JobsSucceed and JobFinish:
// each end goes through FlowEnd all the same.
func testFlowParentLeased(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putQueue(t, s, "c")
	ids := insert(t, s, "q", 3, 0)
	jobs := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 3, Lease: time.Minute, Leased: true}))(t)
	if got := sorted(jobIDs(jobs)); !slices.Equal(got, ids) || jobs[0].Flow {
		t.Fatalf("grabbed %v (Flow %v), want %v without flow", got, jobs[0].Flow, ids)
	}
	p := &store.FlowInsertParams{}
	for _, id := range ids {
		p.Jobs = append(p.Jobs, &store.FlowJobParams{Job: flowJob("c", `{}`), DependsOn: []store.FlowParent{{ID: id}}})
	}
	children := insertFlow(t, s, p).IDs
	must(s.JobsSucceed(ctx, &store.JobsSucceedParams{Grabs: []store.JobGrab{{ID: ids[0], Grabs: 1}}, Status: "success"}))(t)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: ids[1], Grabs: 1, Outcome: store.FinishDelete, Status: "success"}))(t)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: ids[2], Grabs: 1, Outcome: store.FinishFail, Status: "permanent-failure", Message: "no"}))(t)
	for i, id := range children[:2] {
		if st := jobState(t, s, "c", id); st != store.StateWaiting {
			t.Fatalf("dependent of parent %d: %s, want waiting", ids[i], st)
		}
	}
	notLive(t, s, "c", children[2])
}
