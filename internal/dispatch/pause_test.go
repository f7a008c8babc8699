package dispatch

import (
	"context"
	"testing"

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
