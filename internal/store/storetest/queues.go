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
	if led := must(s.QueuesLed(ctx, "n"))(t); len(led) != 1 || !led[0].Paused {
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
