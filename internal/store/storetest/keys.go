package storetest

import (
	"maps"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// keyTests are the conformance tests of per-key concurrency and ordering
// (store.JobOptions.ConcurrencyKey): the settings kept on every path a job
// takes, the grab that leaves keys out, and the two reads a queue's
// leader counts with.
var keyTests = []conformanceTest{
	{"Keys_SettingsKept", testKeysSettingsKept},
	{"Keys_GrabSkipsKeys", testKeysGrabSkips},
	{"Keys_Heads", testKeysHeads},
	{"Keys_Busy", testKeysBusy},
}

// insertKeyed inserts one job of queue per key ("" for none), each key
// with a limit of 2, in order, and returns their ids.
func insertKeyed(t *testing.T, s store.Store, queue string, keys ...string) []int64 {
	t.Helper()
	return insertKeys(t, s, queue, store.JobOptions{ConcurrencyLimit: 2}, keys...)
}

// insertOrdered inserts one job of queue per ordered key ("" for an
// unkeyed one), in order, and returns their ids.
func insertOrdered(t *testing.T, s store.Store, queue string, keys ...string) []int64 {
	t.Helper()
	return insertKeys(t, s, queue, store.JobOptions{Ordered: true}, keys...)
}

// insertKeys inserts one job of queue per key, with opts ("" for an
// unkeyed job, without them), and returns their ids.
func insertKeys(t *testing.T, s store.Store, queue string, opts store.JobOptions, keys ...string) []int64 {
	t.Helper()
	ps := make([]*store.JobInsertParams, len(keys))
	for i, k := range keys {
		ps[i] = &store.JobInsertParams{Queue: queue, Category: "cat", URL: "http://127.0.0.1:1/work", MaxRetries: 3}
		if k != "" {
			ps[i].JobOptions = opts
			ps[i].ConcurrencyKey = k
		}
	}
	return must(s.JobsInsert(ctxT(t), ps))(t)
}

func testKeysSettingsKept(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	opts := store.JobOptions{ConcurrencyKey: "tenant-é", ConcurrencyLimit: 3, Ordered: true}
	check := func(what string, j *store.Job) {
		t.Helper()
		if j.ConcurrencyKey != opts.ConcurrencyKey || j.ConcurrencyLimit != opts.ConcurrencyLimit || j.Ordered != opts.Ordered {
			t.Errorf("%s: key %q limit %d ordered %v, want %+v", what, j.ConcurrencyKey, j.ConcurrencyLimit, j.Ordered, opts)
		}
	}
	p := &store.JobInsertParams{Queue: "q", Category: "cat", URL: "http://a/", JobOptions: opts}
	id := must(s.JobsInsert(ctx, []*store.JobInsertParams{p}))(t)[0]
	check("JobGet", must(s.JobGet(ctx, "q", id))(t))
	pushed := must(s.JobsPush(ctx, []*store.JobInsertParams{p}))(t)
	check("JobGet of a pushed job", must(s.JobGet(ctx, "q", pushed[0].ID))(t))
	held := must(s.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: "n1", Lease: time.Minute, Jobs: []*store.JobInsertParams{p}}))(t)
	check("JobsInsertGrabbed", held[0])
	check("JobGet of a grabbed insert", must(s.JobGet(ctx, "q", held[0].ID))(t))
	grabbed := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 10, Lease: time.Minute}))(t)
	if len(grabbed) != 2 {
		t.Fatalf("grabbed %d jobs, want 2", len(grabbed))
	}
	check("JobsGrab", grabbed[0])
	// A lease that ends in the failure log, and a retry from it.
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: grabbed[0].ID, Grabs: grabbed[0].Grabs, Lease: time.Minute}))(t)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: grabbed[0].ID, Grabs: grabbed[0].Grabs, Outcome: store.FinishFail, Status: "failure"}))(t)
	page := must(s.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: "q", Limit: 10}))(t)
	if len(page) != 1 {
		t.Fatalf("failure log holds %d entries, want 1", len(page))
	}
	if f := page[0]; f.ConcurrencyKey != opts.ConcurrencyKey || f.ConcurrencyLimit != opts.ConcurrencyLimit || f.Ordered != opts.Ordered {
		t.Errorf("failure log entry: key %q limit %d ordered %v, want %+v", f.ConcurrencyKey, f.ConcurrencyLimit, f.Ordered, opts)
	}
	check("FailedJobRetry", must(s.FailedJobRetry(ctx, "q", page[0].ID))(t))
}

func testKeysGrabSkips(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	ids := insertKeyed(t, s, "q", "a", "", "b", "a", "c", "")
	grab := func(p store.JobsGrabParams) []int64 {
		p.Queue, p.Node, p.Limit, p.Lease = "q", "n1", 10, time.Minute
		got := jobIDs(must(s.JobsGrab(ctx, &p))(t))
		must(s.JobsRelease(ctx, &store.JobsReleaseParams{Node: "n1", IDs: got}))(t)
		return got
	}
	if got, want := grab(store.JobsGrabParams{SkipKeys: []string{"a", "c"}}), []int64{ids[1], ids[2], ids[5]}; !equalIDs(got, want) {
		t.Errorf("grab skipping keys a and c = %v, want %v", got, want)
	}
	if got, want := grab(store.JobsGrabParams{NoKeys: true}), []int64{ids[1], ids[5]}; !equalIDs(got, want) {
		t.Errorf("grab of unkeyed jobs = %v, want %v", got, want)
	}
	if got := grab(store.JobsGrabParams{}); !equalIDs(got, ids) {
		t.Errorf("grab = %v, want %v", got, ids)
	}
}

func testKeysHeads(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putQueue(t, s, "other")
	insertKeyed(t, s, "q", "a") // without order: not a head of a's ordered jobs
	ids := insertOrdered(t, s, "q", "a", "b", "a", "", "a")
	insertOrdered(t, s, "other", "a")
	heads := func(keys ...string) map[string]int64 {
		return must(s.JobsKeyHeads(ctx, &store.JobsKeyHeadsParams{Queue: "q", Keys: keys}))(t)
	}
	if got, want := heads("a", "b", "none"), map[string]int64{"a": ids[0], "b": ids[1]}; !maps.Equal(got, want) {
		t.Fatalf("heads = %v, want %v", got, want)
	}
	// A grabbed head, then one retried for later, is still the head.
	g := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 2, Lease: time.Minute}))(t)
	if got := heads("a"); got["a"] != ids[0] || g[1].ID != ids[0] {
		t.Fatalf("heads with the head grabbed = %v, want a: %d", got, ids[0])
	}
	ok(t, s.JobRetry(ctx, &store.JobRetryParams{ID: ids[0], Node: "n1", Delay: time.Hour}))
	if got := heads("a"); got["a"] != ids[0] {
		t.Fatalf("heads with the head retried = %v, want a: %d", got, ids[0])
	}
	// Once it is gone, whichever way, the next of its key is.
	must(s.JobCancel(ctx, "q", ids[0]))(t)
	if got := heads("a"); got["a"] != ids[2] {
		t.Fatalf("heads with the head cancelled = %v, want a: %d", got, ids[2])
	}
	grabbed := func(id int64) {
		t.Helper()
		for _, j := range must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 10, Lease: time.Minute}))(t) {
			if j.ID == id {
				return
			}
		}
		t.Fatalf("job %d was not grabbed", id)
	}
	grabbed(ids[2])
	fj := must(s.JobFail(ctx, &store.JobFailParams{ID: ids[2], Node: "n1", Status: "failure", Message: "x"}))(t)
	if got := heads("a"); got["a"] != ids[4] {
		t.Fatalf("heads with the head failed = %v, want a: %d", got, ids[4])
	}
	// Retried from the failure log, it is the head again, with its old id.
	must(s.FailedJobRetry(ctx, "q", fj.ID))(t)
	if got := heads("a"); got["a"] != ids[2] {
		t.Fatalf("heads with the head retried from the failure log = %v, want a: %d", got, ids[2])
	}
	grabbed(ids[2])
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: []int64{ids[2]}, Ordered: []int64{ids[2]}}))(t); n != 1 {
		t.Fatalf("completed %d jobs, want 1", n)
	}
	if got := heads("a"); got["a"] != ids[4] {
		t.Fatalf("heads with the head completed = %v, want a: %d", got, ids[4])
	}
	if got := heads(); len(got) != 0 {
		t.Fatalf("heads of no key = %v, want none", got)
	}
}

func testKeysBusy(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	insertKeyed(t, s, "q", "a", "b", "", "a", "a")
	grab := func(node string, n int) []*store.Job {
		return must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: node, Limit: n, Lease: time.Minute}))(t)
	}
	n1 := grab("n1", 3) // a, b and the unkeyed job
	grab("n2", 1)       // the second a
	// n1's first a is accepted by its worker: leased, in delivery still.
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: n1[0].ID, Grabs: n1[0].Grabs, Lease: time.Minute}))(t)
	busy := func(node string) map[string]int {
		return must(s.JobsKeyBusy(ctx, &store.JobsKeyBusyParams{Queue: "q", Node: node}))(t)
	}
	if got, want := busy("n1"), map[string]int{"a": 2}; !maps.Equal(got, want) {
		t.Errorf("busy beside n1 = %v, want %v (n2's grab and the lease)", got, want)
	}
	if got, want := busy("n2"), map[string]int{"a": 1, "b": 1}; !maps.Equal(got, want) {
		t.Errorf("busy beside n2 = %v, want %v (n1's lease of a and grab of b)", got, want)
	}
	if got, want := busy("n3"), map[string]int{"a": 2, "b": 1}; !maps.Equal(got, want) {
		t.Errorf("busy beside n3 = %v, want %v", got, want)
	}
}

func equalIDs(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
