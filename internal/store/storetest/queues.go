package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// queueTests are the conformance tests of store.QueueStore.
var queueTests = []conformanceTest{
	{"Queue_PutGetListDelete", testQueueCRUD},
	{"Queue_Ensure", testQueueEnsure},
	{"Queue_Paused", testQueuePaused},
	{"Queue_LedSince", testQueuesLedSince},
}

// ledBy returns the queues node leads (QueuesLed, every one).
func ledBy(t *testing.T, s store.Store, node string) []*store.Queue {
	t.Helper()
	return must(s.QueuesLed(ctxT(t), &store.QueuesLedParams{Node: node}))(t).Queues
}

// testQueuesLedSince: a read since an earlier read's At returns the
// queues led whose settings changed since (put, pause), and none of those
// that did not change nor of those another node leads.
func testQueuesLedSince(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for _, name := range []string{"a", "b", "c"} {
		putQueue(t, s, name)
	}
	heartbeat(t, s, "n1", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1", Limit: 2})) // a, b
	heartbeat(t, s, "n2", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"})) // c
	first := must(s.QueuesLed(ctx, &store.QueuesLedParams{Node: "n1"}))(t)
	if len(first.Queues) != 2 || first.At.IsZero() {
		t.Fatalf("QueuesLed(n1) = %d queues at %v, want a and b at the read's time", len(first.Queues), first.At)
	}
	if drift := time.Since(first.At); drift > time.Minute || drift < -time.Minute {
		t.Fatalf("QueuesLed At = %v, a minute or more from now", first.At)
	}
	names := func(qs []*store.Queue) []string {
		var out []string
		for _, q := range qs {
			out = append(out, q.Name)
		}
		return out
	}
	// Nothing changed since: none (the clock has moved on past At, on a
	// database whose clock ticks in microseconds).
	waitPast(t, s, first.At)
	since := must(s.QueuesLed(ctx, &store.QueuesLedParams{Node: "n1", Since: first.At.Add(time.Microsecond)}))(t)
	if got := names(since.Queues); len(got) != 0 {
		t.Fatalf("QueuesLed since the last read = %v, want none", got)
	}
	must(s.QueuePut(ctx, &store.Queue{Name: "b", PollingInterval: 300, MaxWorkers: 7}))(t)
	must(s.QueuePut(ctx, &store.Queue{Name: "c", PollingInterval: 300, MaxWorkers: 7}))(t) // n2's
	since = must(s.QueuesLed(ctx, &store.QueuesLedParams{Node: "n1", Since: first.At.Add(time.Microsecond)}))(t)
	if got := names(since.Queues); len(got) != 1 || got[0] != "b" || since.Queues[0].MaxWorkers != 7 {
		t.Fatalf("QueuesLed since a put = %v, want [b] with max_workers 7", got)
	}
	if !since.At.After(first.At) {
		t.Fatalf("QueuesLed At = %v, not after the first read's %v", since.At, first.At)
	}
	waitPast(t, s, since.At)
	must(s.QueueSetPaused(ctx, "a", true))(t)
	paused := must(s.QueuesLed(ctx, &store.QueuesLedParams{Node: "n1", Since: since.At.Add(time.Microsecond)}))(t)
	if got := names(paused.Queues); len(got) != 1 || got[0] != "a" || !paused.Queues[0].Paused {
		t.Fatalf("QueuesLed since a pause = %v, want [a] paused", got)
	}
}

// waitPast waits until the database's clock has passed at.
func waitPast(t *testing.T, s store.Store, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for must(s.Now(ctxT(t)))(t).Sub(at) <= time.Millisecond {
		if time.Now().After(deadline) {
			t.Fatalf("the database's clock did not pass %v", at)
		}
		time.Sleep(time.Millisecond)
	}
}

func testQueueCRUD(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if _, err := s.QueueGet(ctx, "q1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueGet(missing) err = %v, want ErrNotFound", err)
	}
	rate, burst := 12.5, 7
	q := must(s.QueuePut(ctx, &store.Queue{Name: "q1", PollingInterval: 150, MaxWorkers: 3, MaxDispatchesPerSecond: &rate, MaxBurstSize: &burst}))(t)
	if q.Name != "q1" || q.PollingInterval != 150 || q.MaxWorkers != 3 || *q.MaxDispatchesPerSecond != 12.5 || *q.MaxBurstSize != 7 {
		t.Fatalf("QueuePut returned %+v", q)
	}
	putQueue(t, s, "q0")
	// Replace: throttle removed.
	q = must(s.QueuePut(ctx, &store.Queue{Name: "q1", PollingInterval: 300, MaxWorkers: 9}))(t)
	got := must(s.QueueGet(ctx, "q1"))(t)
	if got.PollingInterval != 300 || got.MaxWorkers != 9 || got.MaxDispatchesPerSecond != nil || got.MaxBurstSize != nil {
		t.Fatalf("QueueGet after replace = %+v", got)
	}
	list := must(s.QueueList(ctx, &store.QueueListParams{}))(t)
	if len(list) != 2 || list[0].Name != "q0" || list[1].Name != "q1" {
		t.Fatalf("QueueList = %+v", list)
	}
	del := must(s.QueueDelete(ctx, "q1"))(t)
	if del.Name != "q1" || del.MaxWorkers != 9 {
		t.Fatalf("QueueDelete returned %+v", del)
	}
	if _, err := s.QueueDelete(ctx, "q1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second QueueDelete err = %v, want ErrNotFound", err)
	}
	if list := must(s.QueueList(ctx, &store.QueueListParams{}))(t); len(list) != 1 {
		t.Fatalf("QueueList after delete = %+v", list)
	}
	// Pages, by name.
	for _, q := range []string{"b", "a", "c", "q0b"} {
		putQueue(t, s, q)
	}
	var pages [][]string
	for after := ""; ; {
		page := must(s.QueueList(ctx, &store.QueueListParams{After: after, Limit: 2}))(t)
		if len(page) == 0 {
			break
		}
		var names []string
		for _, q := range page {
			names = append(names, q.Name)
		}
		pages = append(pages, names)
		after = page[len(page)-1].Name
	}
	if fmt.Sprint(pages) != "[[a b] [c q0] [q0b]]" {
		t.Fatalf("QueueList pages of 2 = %v, want [[a b] [c q0] [q0b]]", pages)
	}
}

func testQueueEnsure(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	q := must(s.QueueEnsure(ctx, &store.Queue{Name: "d", PollingInterval: 200, MaxWorkers: 20}))(t)
	if q.MaxWorkers != 20 {
		t.Fatalf("QueueEnsure created %+v", q)
	}
	must(s.QueuePut(ctx, &store.Queue{Name: "d", PollingInterval: 200, MaxWorkers: 5}))(t)
	q = must(s.QueueEnsure(ctx, &store.Queue{Name: "d", PollingInterval: 200, MaxWorkers: 20}))(t)
	if q.MaxWorkers != 5 {
		t.Fatalf("QueueEnsure replaced existing settings: %+v", q)
	}
}

func testQueuePaused(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	q := putQueue(t, s, "q")
	if q.Paused {
		t.Fatal("new queue is paused")
	}
	if q := must(s.QueueSetPaused(ctx, "q", true))(t); !q.Paused || q.MaxWorkers != 20 {
		t.Fatalf("QueueSetPaused(true) = %+v", q)
	}
	// Putting the queue's settings keeps the pause.
	putQueue(t, s, "q")
	must(s.QueueEnsure(ctx, &store.Queue{Name: "q", PollingInterval: 1, MaxWorkers: 1}))(t)
	if q := must(s.QueueGet(ctx, "q"))(t); !q.Paused {
		t.Fatalf("QueuePut dropped the pause: %+v", q)
	}
	heartbeat(t, s, "n", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n"}))
	if led := ledBy(t, s, "n"); len(led) != 1 || !led[0].Paused {
		t.Fatalf("QueuesLed = %+v, want q paused", led)
	}
	if qs := must(s.QueueList(ctx, &store.QueueListParams{}))(t); len(qs) != 1 || !qs[0].Paused {
		t.Fatalf("QueueList = %+v, want q paused", qs)
	}
	if q := must(s.QueueSetPaused(ctx, "q", false))(t); q.Paused {
		t.Fatalf("QueueSetPaused(false) = %+v", q)
	}
	if _, err := s.QueueSetPaused(ctx, "none", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueSetPaused of a missing queue err = %v, want ErrNotFound", err)
	}
}
