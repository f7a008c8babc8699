package storetest

import (
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// statsTests are the conformance tests of store.StatsStore.
var statsTests = []conformanceTest{
	{"Stats_AddSumsAcrossNodes", testStatsAdd},
	{"Stats_GetSomeQueues", testStatsGetQueues},
	{"Stats_FoldVanishedNodes", testStatsFold},
}

func statsAdd(t *testing.T, s store.Store, node string, ds ...*store.StatsDelta) {
	t.Helper()
	ok(t, s.StatsAdd(ctxT(t), &store.StatsAddParams{Node: node, Deltas: ds}))
}

func testStatsAdd(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q1")
	putQueue(t, s, "q2")
	empty := must(s.StatsGet(ctx, &store.StatsGetParams{Fresh: time.Minute}))(t)
	if len(empty) != 2 || empty["q1"].Pushes != 0 || empty["q1"].MaxWorkers != 20 || empty["q1"].Active {
		t.Fatalf("stats before any count = %+v", empty)
	}

	statsAdd(t, s, "a",
		&store.StatsDelta{Queue: "q1", StatsCounters: store.StatsCounters{Pushes: 3, Pops: 2, Successes: 1, Failures: 1, PermanentFailures: 1, Completes: 2, ElapsedMs: 70, WaitMs: 40, Cancels: 2},
			BusyWorkers: 2, PushesPerSecond: 1.5, PopsPerSecond: 1},
		&store.StatsDelta{Queue: "gone", StatsCounters: store.StatsCounters{Pushes: 9}})
	statsAdd(t, s, "b", &store.StatsDelta{Queue: "q1", StatsCounters: store.StatsCounters{Pushes: 4, ElapsedMs: 5, WaitMs: 2}, BusyWorkers: 1, PushesPerSecond: 0.5})
	// Counters add up; gauges are replaced.
	statsAdd(t, s, "a", &store.StatsDelta{Queue: "q1", StatsCounters: store.StatsCounters{Pushes: 1, Pops: 1}, BusyWorkers: 0, PushesPerSecond: 2})

	insert(t, s, "q1", 2, 0)
	insert(t, s, "q1", 1, time.Hour)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q1", Node: "a", Limit: 1, Lease: time.Minute}))(t)
	heartbeat(t, s, "a", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "a"}))

	all := must(s.StatsGet(ctx, &store.StatsGetParams{Fresh: time.Minute}))(t)
	if len(all) != 2 || all["gone"] != nil {
		t.Fatalf("stats of %d queues (want q1, q2 only): %+v", len(all), all)
	}
	q1 := all["q1"]
	want := store.StatsCounters{Pushes: 8, Pops: 3, Successes: 1, Failures: 1, PermanentFailures: 1, Completes: 2, ElapsedMs: 75, WaitMs: 42, Cancels: 2}
	if q1.StatsCounters != want {
		t.Errorf("q1 counters = %+v, want %+v", q1.StatsCounters, want)
	}
	if q1.BusyWorkers != 1 || q1.PushesPerSecond != 2.5 || q1.PopsPerSecond != 0 {
		t.Errorf("q1 gauges: busy %d, pushes/s %v, pops/s %v; want 1, 2.5, 0", q1.BusyWorkers, q1.PushesPerSecond, q1.PopsPerSecond)
	}
	if q1.Outstanding != 3 || q1.MaxWorkers != 20 || !q1.Active || q1.Queue != "q1" {
		t.Errorf("q1 = %+v, want 3 outstanding, 20 workers, active", q1)
	}
	if q2 := all["q2"]; !q2.StatsCounters.IsZero() || q2.Outstanding != 0 || !q2.Active {
		t.Errorf("q2 = %+v", q2)
	}

	one := must(s.StatsGet(ctx, &store.StatsGetParams{Queue: "q1", Fresh: time.Minute}))(t)
	if len(one) != 1 || one["q1"].StatsCounters != want || one["q1"].Outstanding != 3 {
		t.Errorf("stats of q1 alone = %+v", one)
	}
	if none := must(s.StatsGet(ctx, &store.StatsGetParams{Queue: "nope", Fresh: time.Minute}))(t); len(none) != 0 {
		t.Errorf("stats of a missing queue = %+v", none)
	}

	// Rows older than Fresh keep their counters but lose their gauges.
	time.Sleep(50 * time.Millisecond)
	stale := must(s.StatsGet(ctx, &store.StatsGetParams{Queue: "q1", Fresh: 10 * time.Millisecond}))(t)["q1"]
	if stale.StatsCounters != want || stale.BusyWorkers != 0 || stale.PushesPerSecond != 0 {
		t.Errorf("stale q1 = %+v, want counters kept and gauges zero", stale)
	}
}

// testStatsGetQueues reads the statistics of some queues, as a page of
// the dashboard's overview does: those that exist, summed over the nodes,
// and none of the others.
func testStatsGetQueues(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	for i, q := range []string{"qa", "qb", "qc"} {
		putQueue(t, s, q)
		n := int64(i + 1)
		statsAdd(t, s, "a", &store.StatsDelta{Queue: q, StatsCounters: store.StatsCounters{Pushes: n, Completes: 10 * n}, BusyWorkers: 1})
		statsAdd(t, s, "b", &store.StatsDelta{Queue: q, StatsCounters: store.StatsCounters{Pushes: 100 * n}, BusyWorkers: 2})
		insert(t, s, q, i+1, 0)
	}

	some := must(s.StatsGet(ctx, &store.StatsGetParams{Queues: []string{"qa", "qc", "nope"}, Fresh: time.Minute}))(t)
	if len(some) != 2 || some["qa"] == nil || some["qc"] == nil {
		t.Fatalf("stats of qa, qc and nope = %+v, want qa and qc", some)
	}
	for q, n := range map[string]int64{"qa": 1, "qc": 3} {
		got := some[q]
		want := store.StatsCounters{Pushes: 101 * n, Completes: 10 * n}
		if got.Queue != q || got.StatsCounters != want || got.BusyWorkers != 3 || got.Outstanding != n || got.MaxWorkers != 20 {
			t.Errorf("%s = %+v, want counters %+v, 3 busy, %d outstanding, 20 workers", q, got, want, n)
		}
	}

	if all := must(s.StatsGet(ctx, &store.StatsGetParams{Queues: []string{}, Fresh: time.Minute}))(t); len(all) != 3 {
		t.Errorf("stats with no queues named = %+v, want all 3", all)
	}
}

func testStatsFold(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	heartbeat(t, s, "alive", time.Minute)
	c := store.StatsCounters{Pushes: 1, Pops: 2, Successes: 3, Failures: 4, PermanentFailures: 5, Completes: 6, ElapsedMs: 7, WaitMs: 8, Cancels: 8}
	for _, node := range []string{"alive", "dead1", "dead2"} {
		statsAdd(t, s, node, &store.StatsDelta{Queue: "q", StatsCounters: c, BusyWorkers: 1})
	}
	before := must(s.StatsGet(ctx, &store.StatsGetParams{Queue: "q", Fresh: time.Minute}))(t)["q"]
	if n := must(s.StatsFold(ctx, &store.StatsFoldParams{OlderThan: time.Hour}))(t); n != 0 {
		t.Fatalf("folded %d recent rows", n)
	}
	time.Sleep(20 * time.Millisecond)
	if n := must(s.StatsFold(ctx, &store.StatsFoldParams{OlderThan: 10 * time.Millisecond}))(t); n != 2 {
		t.Fatalf("folded %d rows, want the 2 of unregistered nodes", n)
	}
	statsAdd(t, s, "dead1", &store.StatsDelta{Queue: "q", StatsCounters: c})
	time.Sleep(20 * time.Millisecond)
	if n := must(s.StatsFold(ctx, &store.StatsFoldParams{OlderThan: 10 * time.Millisecond}))(t); n != 1 {
		t.Fatalf("second fold folded %d rows, want 1", n)
	}
	after := must(s.StatsGet(ctx, &store.StatsGetParams{Queue: "q", Fresh: time.Minute}))(t)["q"]
	want := before.StatsCounters
	want.Add(&c)
	if after.StatsCounters != want {
		t.Errorf("counters after folding = %+v, want %+v", after.StatsCounters, want)
	}
}
