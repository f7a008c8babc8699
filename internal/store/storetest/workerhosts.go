package storetest

import (
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// workerHostTests are the conformance tests of store.WorkerHostStore.
var workerHostTests = []conformanceTest{
	{"WorkerHosts_SetListAndLeader", testWorkerHosts},
}

// testWorkerHosts: a leader's set replaces its queue's hosts; the list
// shows the rows of each queue's current leader only, by queue then host.
func testWorkerHosts(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "a")
	putQueue(t, s, "b")
	heartbeat(t, s, "n1", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1"}))
	rate := 2.5
	until := time.Now().Add(30 * time.Second).UTC().Truncate(time.Millisecond)
	ok(t, s.WorkerHostsSet(ctx, &store.WorkerHostsSetParams{Queue: "a", Node: "n1", Hosts: []*store.WorkerHost{
		{Host: "w2:80", Breaker: store.BreakerOpen, Failures: 5, OpenUntil: &until},
		{Host: "w1:443", Rate: &rate, Breaker: store.BreakerClosed},
	}}))
	ok(t, s.WorkerHostsSet(ctx, &store.WorkerHostsSetParams{Queue: "b", Node: "n1", Hosts: []*store.WorkerHost{
		{Host: "w1:443", Breaker: store.BreakerHalfOpen, Failures: 6},
	}}))
	// Another node's rows (a former leader's) are not shown.
	ok(t, s.WorkerHostsSet(ctx, &store.WorkerHostsSetParams{Queue: "c", Node: "n9", Hosts: []*store.WorkerHost{{Host: "x:80", Breaker: store.BreakerOpen}}}))

	all := must(s.WorkerHostsList(ctx, ""))(t)
	if len(all) != 3 {
		t.Fatalf("WorkerHostsList(\"\") = %d hosts, want 3", len(all))
	}
	a1, a2, b1 := all[0], all[1], all[2]
	if a1.Queue != "a" || a1.Host != "w1:443" || a1.Rate == nil || *a1.Rate != rate || a1.Breaker != store.BreakerClosed || a1.OpenUntil != nil {
		t.Fatalf("first host = %+v, want a's w1:443 at rate %v, closed", a1, rate)
	}
	if a2.Host != "w2:80" || a2.Rate != nil || a2.Breaker != store.BreakerOpen || a2.Failures != 5 || a2.OpenUntil == nil || !a2.OpenUntil.Equal(until) {
		t.Fatalf("second host = %+v, want a's w2:80 open until %v after 5 failures", a2, until)
	}
	if b1.Queue != "b" || b1.Breaker != store.BreakerHalfOpen || b1.UpdatedAt.IsZero() {
		t.Fatalf("third host = %+v, want b's, half-open", b1)
	}
	if got := must(s.WorkerHostsList(ctx, "b"))(t); len(got) != 1 || got[0].Host != "w1:443" {
		t.Fatalf("WorkerHostsList(b) = %+v", got)
	}
	// A set replaces the queue's hosts; an empty one deletes them.
	ok(t, s.WorkerHostsSet(ctx, &store.WorkerHostsSetParams{Queue: "a", Node: "n1", Hosts: []*store.WorkerHost{{Host: "w3:80", Breaker: store.BreakerClosed, Failures: 2}}}))
	if got := must(s.WorkerHostsList(ctx, "a"))(t); len(got) != 1 || got[0].Host != "w3:80" || got[0].Failures != 2 {
		t.Fatalf("after a second set, a's hosts = %+v, want w3:80 only", got)
	}
	ok(t, s.WorkerHostsSet(ctx, &store.WorkerHostsSetParams{Queue: "a", Node: "n1"}))
	if got := must(s.WorkerHostsList(ctx, "a"))(t); len(got) != 0 {
		t.Fatalf("after an empty set, a's hosts = %+v", got)
	}
	// A new leader does not see the old one's rows.
	ok(t, s.QueuesRelease(ctx, "n1"))
	heartbeat(t, s, "n2", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n2"}))
	if got := must(s.WorkerHostsList(ctx, "b"))(t); len(got) != 0 {
		t.Fatalf("after a takeover, b's hosts = %+v, want none (the former leader's)", got)
	}
}
