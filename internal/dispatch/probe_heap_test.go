package dispatch

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

func TestRunnerHeap_OrdersByKeyAndTakesOutAtZero(t *testing.T) {
	h := &runnerHeap{which: events}
	rs := make([]*runner, 5)
	for i := range rs {
		rs[i] = &runner{name: string(rune('a' + i))}
		rs[i].probe.heap = [2]int{-1, -1}
	}
	for i, at := range []int64{50, 10, 40, 30, 20} {
		h.set(rs[i], at)
	}
	h.set(rs[2], 5)  // moved to the front
	h.set(rs[3], 0)  // taken out
	h.set(rs[3], 0)  // taken out again: nothing
	h.set(rs[0], 15) // moved
	if at, ok := h.top(); !ok || at != 5 {
		t.Fatalf("top = %d, %t, want 5", at, ok)
	}
	var got []string
	for r := h.due(20); r != nil; r = h.due(20) {
		got = append(got, r.name)
		if r.probe.heap[events] != -1 {
			t.Errorf("runner %s taken out still has index %d", r.name, r.probe.heap[events])
		}
	}
	if want := "cbae"; join(got) != want {
		t.Errorf("due(20) took %v, want %s in order", got, want)
	}
	if h.Len() != 0 {
		t.Errorf("%d left in the heap, want none (d was taken out)", h.Len())
	}
	if _, ok := h.top(); ok {
		t.Error("top of an empty heap reported a key")
	}
}

func join(ss []string) (s string) {
	for _, x := range ss {
		s += x
	}
	return s
}

// failingLooks fails every look at parked queues, and counts grabs.
type failingLooks struct {
	store.Store
	looks, grabs atomic.Int64
}

func (s *failingLooks) JobsNextDue(ctx context.Context, queues []string) ([]store.QueueDue, error) {
	s.looks.Add(1)
	return nil, errors.New("database away")
}

func (s *failingLooks) JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error) {
	s.grabs.Add(1)
	return s.Store.JobsGrab(ctx, p)
}

// TestProber_FailedLookIsRetriedWithoutWakingRunners: while the look at
// parked queues fails, the prober looks again about every lookRetry; it
// wakes no runner to grab on its own, and the runners stay dormant.
func TestProber_FailedLookIsRetriedWithoutWakingRunners(t *testing.T) {
	s := &failingLooks{Store: dbtest.Open(t, "sqlite")}
	const queues = 300 // over coldAbove: they start dormant, their first look the prober's
	putQueues(t, s, queues)
	d := leading(t, s, Config{}, queues)
	testworker.WaitFor(t, 30*time.Second, "a failed look", func() bool { return s.looks.Load() > 0 })
	looks := s.looks.Load()
	testworker.WaitFor(t, 30*time.Second, "the look tried again", func() bool { return s.looks.Load() > looks })
	if got := s.grabs.Load(); got != 0 {
		t.Errorf("%d grabs while looks failed, want none: the runners wait for the prober", got)
	}
	if n := d.dormant(); n != queues {
		t.Errorf("%d of %d runners dormant while looks fail, want all", n, queues)
	}
	began := time.Now()
	looks = s.looks.Load()
	time.Sleep(3 * lookRetry)
	// At most one look a lookRetry (each in chunks of probeChunk: one
	// statement here), and a slow machine may do fewer.
	if n, most := s.looks.Load()-looks, int64(time.Since(began)/lookRetry)+1; n > most {
		t.Errorf("%d looks in %v, want at most %d: one a lookRetry", n, time.Since(began), most)
	}
}
