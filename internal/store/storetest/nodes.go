package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// nodeTests are the conformance tests of store.NodeStore, with the leadership it gives (QueuesClaim).
var nodeTests = []conformanceTest{
	{"Nodes_LeadershipClaimAndTakeover", testLeadership},
	{"Nodes_ConcurrentClaimOneLeader", testLeadershipConcurrent},
}

func testLeadership(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "a")
	putQueue(t, s, "b")
	if _, err := s.QueueLeader(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueLeader with none err = %v", err)
	}
	heartbeat(t, s, "n1", 600*time.Millisecond)
	heartbeat(t, s, "n2", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1"}))
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"}))
	if led := must(s.QueuesLed(ctx, "n1"))(t); len(led) != 2 || led[0].Name != "a" || led[0].MaxWorkers != 20 {
		t.Fatalf("n1 leads %+v, want a and b", led)
	}
	if led := must(s.QueuesLed(ctx, "n2"))(t); len(led) != 0 {
		t.Fatalf("n2 leads %+v while n1 is alive", led)
	}
	leader := must(s.QueueLeader(ctx, "a"))(t)
	if leader.ID != "n1" || leader.Host != "n1:8080" {
		t.Fatalf("QueueLeader = %+v", leader)
	}
	// A new queue is claimed by the next claim.
	putQueue(t, s, "c")
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"}))
	if led := must(s.QueuesLed(ctx, "n2"))(t); len(led) != 1 || led[0].Name != "c" {
		t.Fatalf("n2 leads %+v, want c", led)
	}
	// n1 stops heartbeating: n2 takes over once n1's registration expires.
	time.Sleep(700 * time.Millisecond)
	if _, err := s.QueueLeader(ctx, "a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueLeader of expired node err = %v", err)
	}
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"}))
	if led := must(s.QueuesLed(ctx, "n2"))(t); len(led) != 3 {
		t.Fatalf("n2 leads %+v after takeover, want 3", led)
	}
	if led := must(s.QueuesLed(ctx, "n1"))(t); len(led) != 0 {
		t.Fatalf("expired n1 still leads %+v", led)
	}
	// Release hands the queues back to the pool; deleting the node too.
	ok(t, s.QueuesRelease(ctx, "n2"))
	if led := must(s.QueuesLed(ctx, "n2"))(t); len(led) != 0 {
		t.Fatalf("n2 leads %+v after release", led)
	}
	heartbeat(t, s, "n3", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n3"}))
	if led := must(s.QueuesLed(ctx, "n3"))(t); len(led) != 3 {
		t.Fatalf("n3 leads %+v after release, want 3", led)
	}
	ok(t, s.NodeDelete(ctx, "n3"))
	if _, err := s.QueueLeader(ctx, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueLeader of deleted node err = %v", err)
	}
	heartbeat(t, s, "n4", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n4"}))
	if led := must(s.QueuesLed(ctx, "n4"))(t); len(led) != 3 {
		t.Fatalf("n4 leads %+v after n3 deleted, want 3", led)
	}
	// An unregistered node claims nothing.
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "ghost"}))
	if led := must(s.QueuesLed(ctx, "ghost"))(t); len(led) != 0 {
		t.Fatalf("unregistered node leads %+v", led)
	}
}

func testLeadershipConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for i := range 20 {
		putQueue(t, s, fmt.Sprintf("q%02d", i))
	}
	nodes := []string{"n1", "n2", "n3", "n4"}
	for _, n := range nodes {
		heartbeat(t, s, n, time.Minute)
	}
	var wg sync.WaitGroup
	errs := make(chan error, len(nodes))
	for _, n := range nodes {
		wg.Go(func() { errs <- s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: n}) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		ok(t, err)
	}
	led := map[string]string{}
	for _, n := range nodes {
		for _, q := range must(s.QueuesLed(ctx, n))(t) {
			if prev, dup := led[q.Name]; dup {
				t.Fatalf("queue %s led by %s and %s", q.Name, prev, n)
			}
			led[q.Name] = n
		}
	}
	if len(led) != 20 {
		t.Fatalf("%d queues led, want 20", len(led))
	}
}
