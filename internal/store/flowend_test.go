package store_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// fakeFlow is an in-memory FlowTx: FlowEnd's rules are tested here, the
// dialects' SQL by the conformance suite (storetest, flow.go).
type fakeFlow struct {
	jobs     map[int64]*store.Job // live jobs
	flows    map[int64]*store.JobFlow
	edges    [][2]int64 // parent, child
	batches  map[int64]*store.BatchRow
	inserted []*store.JobInsertParams
	ended    map[int64]string // jobs FlowEndBlocked ended, and how
}

func newFakeFlow() *fakeFlow {
	return &fakeFlow{jobs: map[int64]*store.Job{}, flows: map[int64]*store.JobFlow{},
		batches: map[int64]*store.BatchRow{}, ended: map[int64]string{}}
}

// job adds a live job with a flow: blocked when it has parents.
func (f *fakeFlow) job(id int64, queue string, fl store.JobFlow, parents ...int64) *store.Job {
	j := &store.Job{ID: id, Queue: queue, Category: "c", State: store.StateGrabbed, Flow: true}
	if len(parents) > 0 {
		j.State = store.StateBlocked
	}
	fl.JobID, fl.Pending = id, len(parents)
	f.jobs[id], f.flows[id] = j, &fl
	for _, p := range parents {
		f.edges = append(f.edges, [2]int64{p, id})
	}
	return j
}

func (f *fakeFlow) FlowsOf(_ context.Context, ids []int64) ([]*store.JobFlow, error) {
	var out []*store.JobFlow
	for _, id := range ids {
		if fl := f.flows[id]; fl != nil {
			c := *fl
			out = append(out, &c)
		}
	}
	return out, nil
}

func (f *fakeFlow) FlowChildren(_ context.Context, parents []int64) ([]store.FlowChild, error) {
	var out []store.FlowChild
	for _, e := range f.edges {
		j := f.jobs[e[1]]
		if slices.Contains(parents, e[0]) && j != nil && j.State == store.StateBlocked {
			fl := f.flows[e[1]]
			out = append(out, store.FlowChild{Parent: e[0], Child: e[1], Pending: fl.Pending, OnParentFailure: fl.OnParentFailure})
		}
	}
	return out, nil
}

func (f *fakeFlow) FlowSetPending(_ context.Context, pending map[int64]int) error {
	for id, n := range pending {
		f.flows[id].Pending = n
	}
	return nil
}

func (f *fakeFlow) FlowRelease(_ context.Context, ids []int64) ([]string, error) {
	var queues []string
	for _, id := range ids {
		f.jobs[id].State = store.StateWaiting
		if !slices.Contains(queues, f.jobs[id].Queue) {
			queues = append(queues, f.jobs[id].Queue)
		}
	}
	return queues, nil
}

func (f *fakeFlow) FlowEndBlocked(_ context.Context, ids []int64, status, _ string) ([]*store.Job, error) {
	var out []*store.Job
	for _, id := range ids {
		if j := f.jobs[id]; j != nil && j.State == store.StateBlocked {
			out = append(out, j)
			delete(f.jobs, id)
			f.ended[id] = status
		}
	}
	return out, nil
}

func (f *fakeFlow) FlowForget(_ context.Context, ids []int64) error {
	for _, id := range ids {
		delete(f.flows, id)
	}
	f.edges = slices.DeleteFunc(f.edges, func(e [2]int64) bool { return slices.Contains(ids, e[0]) || slices.Contains(ids, e[1]) })
	return nil
}

func (f *fakeFlow) FlowInsertJobs(_ context.Context, jobs []*store.JobInsertParams) error {
	f.inserted = append(f.inserted, jobs...)
	return nil
}

func (f *fakeFlow) BatchCount(_ context.Context, id int64, n store.BatchCounts) (*store.BatchRow, error) {
	b := f.batches[id]
	if b == nil {
		return nil, store.ErrNotFound
	}
	b.Succeeded += n.Succeeded
	b.Failed += n.Failed
	b.Cancelled += n.Cancelled
	b.Pending -= n.Succeeded + n.Failed + n.Cancelled
	if b.Pending == 0 {
		now := time.Unix(1700000000, 0)
		b.FinishedAt = &now
	}
	c := *b
	return &c, nil
}

// end ends the live job id with status, as a dialect would: removed from
// jobs, then FlowEnd.
func (f *fakeFlow) end(t *testing.T, id int64, status string) store.FlowDone {
	t.Helper()
	j := f.jobs[id]
	delete(f.jobs, id)
	done, err := store.FlowEnd(context.Background(), f, []store.FlowEnded{{Job: j, Status: status, Message: "m", Result: json.RawMessage(`{"r":1}`)}})
	if err != nil {
		t.Fatal(err)
	}
	return done
}

func cb(category string) *store.JobInsertParams {
	return &store.JobInsertParams{Queue: "q-" + category, Category: category, URL: "http://w/" + category, Payload: json.RawMessage(`{"own":true}`)}
}

func categories(ps []*store.JobInsertParams) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Category)
	}
	return out
}

func TestFlowEnd_CallbacksByOutcome(t *testing.T) {
	for _, tc := range []struct {
		status string
		want   []string
	}{
		{store.FinishedSucceeded, []string{"ok", "fin"}},
		{store.FinishedFailed, []string{"bad", "fin"}},
		{store.FinishedCancelled, []string{"fin"}},
	} {
		t.Run(tc.status, func(t *testing.T) {
			f := newFakeFlow()
			f.job(1, "q", store.JobFlow{OnSuccess: cb("ok"), OnFailure: cb("bad"), OnFinish: cb("fin")})
			done := f.end(t, 1, tc.status)
			if got := categories(f.inserted); !slices.Equal(got, tc.want) {
				t.Fatalf("callbacks %v, want %v", got, tc.want)
			}
			if done.Callbacks != len(tc.want) || !slices.Contains(done.Queues, "q-fin") {
				t.Fatalf("done %+v", done)
			}
			var p struct {
				Job struct {
					ID       int64           `json:"id"`
					Status   string          `json:"status"`
					Attempts int             `json:"attempts"`
					Result   json.RawMessage `json:"result"`
				} `json:"job"`
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(f.inserted[0].Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Job.ID != 1 || p.Job.Status != tc.status || p.Job.Attempts != 1 || string(p.Payload) != `{"own":true}` {
				t.Fatalf("payload %s", f.inserted[0].Payload)
			}
			if len(f.flows) != 0 {
				t.Fatalf("flow rows left: %v", f.flows)
			}
		})
	}
}

func TestFlowEnd_JobWithoutFlowIsPassedOver(t *testing.T) {
	f := newFakeFlow()
	done, err := store.FlowEnd(context.Background(), f, []store.FlowEnded{{Job: &store.Job{ID: 9}, Status: store.FinishedSucceeded}})
	if err != nil || done.Callbacks+done.Released+done.Ended != 0 {
		t.Fatalf("done %+v, err %v", done, err)
	}
}

func TestFlowEnd_DiamondReleasesOnceAfterBoth(t *testing.T) {
	f := newFakeFlow()
	f.job(1, "q", store.JobFlow{})
	f.job(2, "q", store.JobFlow{}, 1)
	f.job(3, "q", store.JobFlow{}, 1)
	f.job(4, "d", store.JobFlow{}, 2, 3)
	if done := f.end(t, 1, store.FinishedSucceeded); done.Released != 2 || f.jobs[2].State != store.StateWaiting {
		t.Fatalf("after A: %+v", done)
	}
	if done := f.end(t, 2, store.FinishedSucceeded); done.Released != 0 || f.jobs[4].State != store.StateBlocked || f.flows[4].Pending != 1 {
		t.Fatalf("after B: %+v, D pending %d", done, f.flows[4].Pending)
	}
	done := f.end(t, 3, store.FinishedSucceeded)
	if done.Released != 1 || !slices.Equal(done.Queues, []string{"d"}) || f.jobs[4].State != store.StateWaiting {
		t.Fatalf("after C: %+v", done)
	}
}

func TestFlowEnd_ParentFailure(t *testing.T) {
	for _, tc := range []struct {
		policy string
		ended  string // how the child ended ("" = it was released)
	}{
		{"", store.FinishedCancelled},
		{store.ParentFailureCancel, store.FinishedCancelled},
		{store.ParentFailureFail, store.FinishedFailed},
		{store.ParentFailureRun, ""},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			f := newFakeFlow()
			f.job(1, "q", store.JobFlow{})
			f.job(2, "q", store.JobFlow{OnParentFailure: tc.policy, OnFailure: cb("bad"), OnFinish: cb("fin")}, 1)
			f.end(t, 1, store.FinishedFailed)
			if got := f.ended[2]; got != tc.ended {
				t.Fatalf("child ended %q, want %q", got, tc.ended)
			}
			want := []string{"fin"}
			switch tc.ended {
			case store.FinishedFailed:
				want = []string{"bad", "fin"}
			case "":
				want = nil
			}
			if got := categories(f.inserted); !slices.Equal(got, want) {
				t.Fatalf("child's callbacks %v, want %v", got, want)
			}
		})
	}
}

func TestFlowEnd_CancelCascadesThreeLevels(t *testing.T) {
	f := newFakeFlow()
	f.job(1, "q", store.JobFlow{})
	f.job(2, "q", store.JobFlow{}, 1)
	f.job(3, "q", store.JobFlow{}, 2)
	f.job(4, "q", store.JobFlow{OnFinish: cb("fin")}, 3)
	f.job(5, "q", store.JobFlow{OnParentFailure: store.ParentFailureRun}, 3)
	done := f.end(t, 1, store.FinishedCancelled)
	if done.Ended != 3 || done.Released != 1 {
		t.Fatalf("done %+v", done)
	}
	for _, id := range []int64{2, 3, 4} {
		if f.ended[id] != store.FinishedCancelled {
			t.Fatalf("job %d: %q", id, f.ended[id])
		}
	}
	if f.jobs[5].State != store.StateWaiting {
		t.Fatalf("job 5 (run) is %s", f.jobs[5].State)
	}
	if got := categories(f.inserted); !slices.Equal(got, []string{"fin"}) {
		t.Fatalf("callbacks %v", got)
	}
}

func TestFlowEnd_FailureWinsOverSuccessInOneRound(t *testing.T) {
	f := newFakeFlow()
	f.job(1, "q", store.JobFlow{})
	f.job(2, "q", store.JobFlow{})
	f.job(3, "q", store.JobFlow{}, 1, 2)
	j1, j2 := f.jobs[1], f.jobs[2]
	delete(f.jobs, 1)
	delete(f.jobs, 2)
	_, err := store.FlowEnd(context.Background(), f, []store.FlowEnded{
		{Job: j1, Status: store.FinishedSucceeded}, {Job: j2, Status: store.FinishedFailed},
	})
	if err != nil || f.ended[3] != store.FinishedCancelled {
		t.Fatalf("child: %q, err %v", f.ended[3], err)
	}
}

func TestFlowEnd_BatchCallbacksOnceWithCounts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []string
		want     []string
	}{
		{"all succeeded", []string{store.FinishedSucceeded, store.FinishedSucceeded, store.FinishedSucceeded}, []string{"bok", "bfin"}},
		{"one failed", []string{store.FinishedSucceeded, store.FinishedFailed, store.FinishedSucceeded}, []string{"bfin"}},
		{"one cancelled", []string{store.FinishedCancelled, store.FinishedSucceeded, store.FinishedSucceeded}, []string{"bfin"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeFlow()
			f.batches[7] = &store.BatchRow{Batch: store.Batch{ID: 7, Total: 3, Pending: 3, Meta: json.RawMessage(`{"m":1}`)},
				OnSuccess: cb("bok"), OnFinish: cb("bfin")}
			for i := range 3 {
				f.job(int64(i+1), "q", store.JobFlow{BatchID: 7})
			}
			for i, st := range tc.statuses {
				f.end(t, int64(i+1), st)
				if i < 2 && len(f.inserted) != 0 {
					t.Fatalf("callbacks after %d of 3 jobs: %v", i+1, categories(f.inserted))
				}
			}
			if got := categories(f.inserted); !slices.Equal(got, tc.want) {
				t.Fatalf("callbacks %v, want %v", got, tc.want)
			}
			var p struct {
				Batch struct {
					Total, Succeeded, Failed, Cancelled int
					Meta                                json.RawMessage
				} `json:"batch"`
			}
			if err := json.Unmarshal(f.inserted[0].Payload, &p); err != nil {
				t.Fatal(err)
			}
			if p.Batch.Total != 3 || p.Batch.Succeeded+p.Batch.Failed+p.Batch.Cancelled != 3 || string(p.Batch.Meta) != `{"m":1}` {
				t.Fatalf("payload %s", f.inserted[0].Payload)
			}
		})
	}
}

func TestCallback_EncodeDecodeRoundTrip(t *testing.T) {
	p := cb("x")
	p.RunAfter, p.MaxRetries, p.Priority, p.RetryBackoff, p.Ordered = 1500*time.Millisecond, 3, 5, store.BackoffExponential, true
	b, err := store.EncodeCallback(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.DecodeCallback(b)
	if err != nil {
		t.Fatal(err)
	}
	if got.Queue != p.Queue || got.URL != p.URL || got.RunAfter != p.RunAfter || got.MaxRetries != 3 || got.Priority != 5 ||
		got.RetryBackoff != p.RetryBackoff || !got.Ordered || string(got.Payload) != string(p.Payload) {
		t.Fatalf("got %+v", got)
	}
	if none, err := store.DecodeCallback(nil); none != nil || err != nil {
		t.Fatalf("nil: %v %v", none, err)
	}
}
