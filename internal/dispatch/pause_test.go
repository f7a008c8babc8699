package dispatch

import (
	"context"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// TestSync_KeepsAPauseNewerThanItsRead: a leadership cycle reads the queues
// (not paused), a pause commits and is applied here, then the cycle
// applies what it read. The pause must hold, for a runner that was
// running and for one the cycle starts; a later cycle's read, which began
// after the pause, is applied as read.
func TestSync_KeepsAPauseNewerThanItsRead(t *testing.T) {
	d := New(Config{Store: dbtest.Open(t, "sqlite"), Node: "n1"})
	t.Cleanup(func() { d.Stop(context.Background()) })
	readBegins := func() uint64 { d.mu.Lock(); defer d.mu.Unlock(); return d.pauses }
	d.sync(readAll([]*store.Queue{{Name: "q", MaxWorkers: 2}}), readBegins())
	r := d.runners["q"]
	paused := func(name string) bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.runners[name].settings.Load().Paused
	}

	before := readBegins()
	d.SetPaused("q", true)
	d.SetPaused("new", true) // this node does not run "new" yet
	d.sync(readAll([]*store.Queue{{Name: "q", MaxWorkers: 5}, {Name: "new", MaxWorkers: 1}}), before)
	if q := r.settings.Load(); !q.Paused || q.MaxWorkers != 5 {
		t.Fatalf("after a read from before the pause: paused %v, max_workers %d; want the pause kept, max_workers 5", q.Paused, q.MaxWorkers)
	}
	if !paused("new") {
		t.Fatal("a runner started from a read from before the pause is not paused")
	}

	d.sync(readAll([]*store.Queue{{Name: "q"}, {Name: "new"}}), readBegins())
	if paused("q") || paused("new") {
		t.Fatal("a read that began after the pause (another node resumed since) left a queue paused")
	}
	if len(d.marks) != 0 {
		t.Fatalf("marks left after a fresh read: %v", d.marks)
	}

	before = readBegins()
	d.SetPaused("q", true)
	d.SetPaused("q", false)
	d.sync(readAll([]*store.Queue{{Name: "q", Paused: true}, {Name: "new"}}), before)
	if paused("q") {
		t.Fatal("a read from before the resume paused the queue again")
	}
}

// readAll is a leadership cycle's read of all the queues led.
func readAll(led []*store.Queue) ledRead { return ledRead{queues: led, read: true, all: true} }

// pausingGrab pauses the queue while a grab runs (after the database has
// answered it), as a pause that lands during a grab's round trip.
type pausingGrab struct {
	store.Store
	d *Dispatcher
}

func (s *pausingGrab) JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error) {
	jobs, err := s.Store.JobsGrab(ctx, p)
	s.d.SetPaused(p.Queue, true)
	return jobs, err
}

// TestPushTurn_PausedDuringTheGrabStartsNone: a grab whose answer comes
// after a pause starts none of its jobs (one may have been enqueued after
// the pause answered); the next turn, held, gives them back to waiting.
func TestPushTurn_PausedDuringTheGrabStartsNone(t *testing.T) {
	var ps *pausingGrab
	b := setupRunner(t, store.Queue{MaxWorkers: 10}, func(s store.Store) Store {
		ps = &pausingGrab{Store: s}
		return ps
	})
	ps.d = b.d
	b.insert(t, jobParams(1, "", 0, false)...)
	b.r.turn.look = true
	q := b.r.settings.Load()
	s := b.r.pushTurn(q, time.Now(), false)
	if !s.ran || s.err != nil {
		t.Fatalf("the grab: %+v", s)
	}
	if !b.r.settings.Load().Paused {
		t.Fatal("the queue was not paused during the grab")
	}
	if n := b.r.ahead.len(); n != 1 {
		t.Fatalf("%d jobs held back after the grab, want 1", n)
	}
	b.r.pushTurn(b.r.settings.Load(), time.Now(), true) // held: paused
	jobs, err := b.s.JobsList(context.Background(), &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != 1 {
		t.Errorf("%d jobs waiting after the held turn, want the grabbed one back", len(jobs))
	}
	if got := b.r.slots.inflight.Load(); got != 0 {
		t.Errorf("%d worker slots taken, want 0", got)
	}
	if n := b.w.deliveries(); n != 0 {
		t.Errorf("%d deliveries while paused, want none", n)
	}
}
