package enqueue_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rowq/rowq/internal/enqueue"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// flowStore answers JobsInsertFlow with the second job blocked.
type flowStore struct {
	store.Store
	got *store.FlowInsertParams
}

func (s *flowStore) JobsInsertFlow(_ context.Context, p *store.FlowInsertParams) (*store.FlowInserted, error) {
	s.got = p
	return &store.FlowInserted{IDs: []int64{1, 2, 3}, Blocked: []bool{false, true, false}, BatchID: 7}, nil
}

// TestPushFlow_WakesTheJobsNotBlocked: the queues of the jobs stored due
// are woken (those due later told), a blocked job's queue is not (its
// release will); FlowDone wakes each queue a flow made jobs due in, and
// has it looked at for those due later.
func TestPushFlow_WakesTheJobsNotBlocked(t *testing.T) {
	t.Parallel()
	st := &flowStore{Store: dbtest.Open(t, "sqlite")}
	d := &told{}
	s := setup(t, st, enqueue.Config{Dispatcher: d})
	job := func(q string) *store.FlowJobParams {
		return &store.FlowJobParams{Job: &store.JobInsertParams{Queue: q, Category: "c", URL: "http://127.0.0.1:1/"}}
	}
	p := &store.FlowInsertParams{Jobs: []*store.FlowJobParams{job("a"), job("b"), job("c")}, Batch: &store.BatchParams{}}
	res, err := s.PushFlow(t.Context(), p)
	if err != nil || res.BatchID != 7 || st.got != p {
		t.Fatalf("PushFlow = %+v, %v; want the store's answer", res, err)
	}
	if got, want := strings.Join(d.calls, ", "), "wake a, wake c"; got != want {
		t.Fatalf("told the dispatcher %q, want %q", got, want)
	}
	d.calls = nil
	s.FlowDone([]string{"x", "y"})
	if got, want := strings.Join(d.calls, ", "), "later x, wake x, later y, wake y"; got != want {
		t.Fatalf("FlowDone told the dispatcher %q, want %q", got, want)
	}
}
