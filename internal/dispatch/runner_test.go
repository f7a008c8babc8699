package dispatch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// runnerBundle is a dispatcher of node n1 on a SQLite store, fresh (its
// heartbeat just succeeded) and not started, leading queue "q" with a
// runner that runs no loop: the test calls its steps. Its jobs go to
// worker w.
type runnerBundle struct {
	s store.Store // the SQLite store, whatever the dispatcher is given
	d *Dispatcher
	r *runner
	w *busyWorker
}

// setupRunner stores q (named "q"), and makes the dispatcher on the store,
// or on what wrap makes of it (a fake of some of its methods).
func setupRunner(t *testing.T, q store.Queue, wrap func(store.Store) Store) *runnerBundle {
	t.Helper()
	w := newBusyWorker(t)
	s := dbtest.Open(t, "sqlite")
	q.Name = "q"
	if q.PollingInterval == 0 {
		q.PollingInterval = 1000
	}
	stored, err := s.QueuePut(context.Background(), &q)
	if err != nil {
		t.Fatal(err)
	}
	var ds Store = s
	if wrap != nil {
		ds = wrap(s)
	}
	d := New(Config{Store: ds, Node: "n1"})
	t.Cleanup(func() { d.Stop(context.Background()) })
	d.lastBeat.Store(time.Now().UnixNano())
	r := newRunner(d, stored)
	d.mu.Lock()
	d.runners["q"] = r
	d.mu.Unlock()
	// Stop would wait for the end of a loop that never ran.
	t.Cleanup(func() {
		d.mu.Lock()
		delete(d.runners, "q")
		d.mu.Unlock()
	})
	return &runnerBundle{s: s, d: d, r: r, w: w}
}

// insert inserts the jobs ps into queue q, waiting, for worker w.
func (b *runnerBundle) insert(t *testing.T, ps ...*store.JobInsertParams) {
	t.Helper()
	for _, p := range ps {
		p.Queue, p.Category, p.URL = "q", "c", b.w.URL
	}
	if _, err := b.s.JobsInsert(context.Background(), ps); err != nil {
		t.Fatal(err)
	}
}

// grabNew inserts the jobs ps into queue q and grabs them for this node,
// as a grab or a hand-off would, in the grab's order.
func (b *runnerBundle) grabNew(t *testing.T, ps ...*store.JobInsertParams) []*store.Job {
	t.Helper()
	b.insert(t, ps...)
	jobs, err := b.s.JobsGrab(context.Background(), &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: len(ps), Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return jobs
}

// state returns the state job id is stored in, or "" once it left the
// jobs table.
func (b *runnerBundle) state(t *testing.T, id int64) string {
	t.Helper()
	j, err := b.s.JobGet(context.Background(), "q", id)
	if errors.Is(err, store.ErrNotFound) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return j.State
}

// jobParams returns n jobs of key ("": none) with its limit, or
// ordered, each with retries left.
func jobParams(n int, key string, limit int, ordered bool) []*store.JobInsertParams {
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Timeout: 5, MaxRetries: 3, RetryDelay: 1,
			JobOptions: store.JobOptions{ConcurrencyKey: key, ConcurrencyLimit: limit, Ordered: ordered}}
	}
	return ps
}

// memRunner is a runner of queue q with maxWorkers slots, of a fresh
// dispatcher with no store: for the rules that touch no database.
func memRunner(t *testing.T, maxWorkers int) *runner {
	t.Helper()
	d := New(Config{Node: "n1"})
	t.Cleanup(func() {
		d.complete.Close()
		d.heads.Close()
		d.holds.Close()
		d.succeed.Close()
	})
	d.lastBeat.Store(time.Now().UnixNano())
	return newRunner(d, &store.Queue{Name: "q", MaxWorkers: maxWorkers, PollingInterval: 1000})
}

// setQueue changes the runner's settings, as a leadership cycle would.
func (b *runnerBundle) setQueue(change func(q *store.Queue)) {
	q := *b.r.settings.Load()
	change(&q)
	b.r.settings.Store(&q)
}
