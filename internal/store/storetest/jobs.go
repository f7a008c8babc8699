package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// jobTests are the conformance tests of store.JobStore.
var jobTests = []conformanceTest{
	{"Jobs_InsertAndGet", testJobsInsertAndGet},
	{"Jobs_GrabOrderAndLimit", testJobsGrabOrderAndLimit},
	{"Jobs_GrabSkipsDeferredAndOtherQueues", testJobsGrabSkipsDeferred},
	{"Jobs_GrabConcurrentNoDuplicates", testJobsGrabConcurrent},
	{"Jobs_CompleteOnlyByHolder", testJobsComplete},
	{"Jobs_ReleaseOnlyByHolder", testJobsRelease},
	{"Jobs_Retry", testJobsRetry},
	{"Jobs_Defer", testJobsDefer},
	{"Jobs_Fail", testJobsFail},
	{"Jobs_ExtendAndRescue", testJobsExtendAndRescue},
	{"Jobs_PushAndUniqueKey", testJobsPush},
	{"Jobs_PushUniqueKeyConcurrent", testJobsPushConcurrent},
	{"Jobs_PushKeysInAnyOrder", testJobsPushKeysAnyOrder},
	{"Jobs_InsertUniqueKeyConflict", testJobsInsertUniqueConflict},
	{"Jobs_GrabByPriority", testJobsGrabPriority},
	{"Jobs_InsertGrabbed", testJobsInsertGrabbed},
	{"Jobs_NextDue", testJobsNextDue},
	{"Jobs_Expired", testJobsExpired},
	{"Jobs_RescueGrabsOfUnregisteredNode", testJobsRescueUnregistered},
	{"Jobs_TraceKept", testJobsTrace},
}

func testJobsInsertAndGet(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	before := must(s.Now(ctx))(t)
	ids := must(s.JobsInsert(ctx, []*store.JobInsertParams{
		{Queue: "q", Category: "c", URL: "http://a/1", Payload: json.RawMessage(`"raw string"`), MaxRetries: 2, RetryDelay: 3, Timeout: 4},
		{Queue: "q", Category: "c", URL: "http://a/2"},
		{Queue: "q", Category: "c", URL: "http://a/3", Payload: json.RawMessage(`{"a":[1,2]}`), RunAfter: time.Hour},
	}))(t)
	if len(ids) != 3 || !(ids[0] < ids[1] && ids[1] < ids[2]) {
		t.Fatalf("JobsInsert ids = %v, want 3 increasing", ids)
	}
	j := must(s.JobGet(ctx, "q", ids[0]))(t)
	if j.ID != ids[0] || j.Queue != "q" || j.Category != "c" || j.URL != "http://a/1" || string(j.Payload) != `"raw string"` ||
		j.MaxRetries != 2 || j.RetryDelay != 3 || j.Timeout != 4 || j.FailCount != 0 || j.State != store.StateWaiting ||
		j.GrabbedBy != "" || j.GrabbedTil != nil {
		t.Fatalf("JobGet = %+v", j)
	}
	if j.CreatedAt.Before(before.Add(-time.Second)) || j.NextTry.Before(j.CreatedAt.Add(-time.Millisecond)) || j.NextTry.After(j.CreatedAt.Add(time.Second)) {
		t.Fatalf("times: before=%v created=%v next=%v", before, j.CreatedAt, j.NextTry)
	}
	if j.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt location = %v, want UTC", j.CreatedAt.Location())
	}
	if j := must(s.JobGet(ctx, "q", ids[1]))(t); j.Payload != nil {
		t.Fatalf("job without payload has payload %q", j.Payload)
	}
	j3 := must(s.JobGet(ctx, "q", ids[2]))(t)
	if d := j3.NextTry.Sub(j3.CreatedAt); d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Fatalf("run_after 1h gave next_try - created_at = %v", d)
	}
	if string(j3.Payload) != `{"a":[1,2]}` && string(j3.Payload) != `{"a": [1, 2]}` {
		t.Fatalf("payload = %s", j3.Payload)
	}
	if _, err := s.JobGet(ctx, "other", ids[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobGet in other queue err = %v", err)
	}
	if ids := must(s.JobsInsert(ctx, nil))(t); len(ids) != 0 {
		t.Fatalf("JobsInsert(nil) = %v", ids)
	}
	// A large batch (MySQL splits it into statements) keeps its order too.
	ps := make([]*store.JobInsertParams, 1500)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Queue: "big", Category: "c", URL: fmt.Sprintf("http://a/%d", i)}
	}
	ids = must(s.JobsInsert(ctx, ps))(t)
	if len(ids) != len(ps) {
		t.Fatalf("JobsInsert of %d jobs returned %d ids", len(ps), len(ids))
	}
	for i, id := range ids {
		if j := must(s.JobGet(ctx, "big", id))(t); j.URL != ps[i].URL {
			t.Fatalf("id %d, returned for job %d (%s), holds %s", id, i, ps[i].URL, j.URL)
		}
	}
}

func testJobsGrabOrderAndLimit(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ids := insert(t, s, "q", 5, 0)
	got := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 3, Lease: time.Minute}))(t)
	if len(got) != 3 {
		t.Fatalf("grabbed %d, want 3", len(got))
	}
	for i, j := range got {
		if j.ID != ids[i] {
			t.Errorf("grab order: got[%d] = %d, want %d", i, j.ID, ids[i])
		}
		if j.State != store.StateGrabbed || j.GrabbedBy != "n1" || j.GrabbedTil == nil || j.URL == "" || j.Category != "cat" || j.MaxRetries != 3 || j.Timeout != 5 {
			t.Errorf("grabbed job = %+v", j)
		}
		if string(j.Payload) != fmt.Sprintf(`{"i":%d}`, i) && string(j.Payload) != fmt.Sprintf(`{"i": %d}`, i) {
			t.Errorf("grabbed payload = %s", j.Payload)
		}
	}
	stored := must(s.JobGet(ctx, "q", ids[0]))(t)
	if stored.State != store.StateGrabbed || stored.GrabbedBy != "n1" || stored.GrabbedTil == nil {
		t.Fatalf("stored grabbed job = %+v", stored)
	}
	if d := stored.GrabbedTil.Sub(must(s.Now(ctx))(t)); d < 50*time.Second || d > 70*time.Second {
		t.Fatalf("grabbed_until - now = %v, want about 1m", d)
	}
	rest := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n2", Limit: 10, Lease: time.Minute}))(t)
	if len(rest) != 2 || rest[0].ID != ids[3] || rest[1].ID != ids[4] {
		t.Fatalf("second grab = %v", jobIDs(rest))
	}
	if none := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n2", Limit: 10, Lease: time.Minute}))(t); len(none) != 0 {
		t.Fatalf("third grab = %v, want none", jobIDs(none))
	}
}

func testJobsGrabSkipsDeferred(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	insert(t, s, "q", 2, time.Hour)
	insert(t, s, "other", 2, 0)
	soon := insert(t, s, "q", 1, 300*time.Millisecond)
	if got := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t); len(got) != 0 {
		t.Fatalf("grabbed deferred jobs %v", jobIDs(got))
	}
	time.Sleep(400 * time.Millisecond)
	got := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t)
	if len(got) != 1 || got[0].ID != soon[0] {
		t.Fatalf("grab after run_after = %v, want %v", jobIDs(got), soon)
	}
}

func testJobsGrabConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n = 300
	ids := insert(t, s, "q", n, 0)
	var (
		mu   sync.Mutex
		seen = map[int64]string{}
		wg   sync.WaitGroup
		errs = make(chan error, 6)
	)
	for w := range 6 {
		node := fmt.Sprintf("node-%d", w)
		wg.Go(func() {
			for {
				got, err := s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: node, Limit: 7, Lease: time.Minute})
				if err != nil {
					errs <- err
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, j := range got {
					if prev, dup := seen[j.ID]; dup {
						errs <- fmt.Errorf("job %d grabbed by %s and %s", j.ID, prev, node)
					}
					seen[j.ID] = node
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if len(seen) != n {
		t.Fatalf("grabbed %d distinct jobs, want %d", len(seen), n)
	}
	for _, id := range ids {
		j := must(s.JobGet(ctx, "q", id))(t)
		if j.GrabbedBy != seen[id] {
			t.Fatalf("job %d stored as grabbed by %q, returned to %q", id, j.GrabbedBy, seen[id])
		}
	}
}

func testJobsComplete(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ids := insert(t, s, "q", 4, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 3, Lease: time.Minute}))(t)
	// ids[3] is still waiting; a completion must not delete it, nor may
	// another node complete n1's jobs.
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n2", IDs: ids}))(t); n != 0 {
		t.Fatalf("JobsComplete by non-holder deleted %d", n)
	}
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids}))(t); n != 3 {
		t.Fatalf("JobsComplete deleted %d, want 3", n)
	}
	for _, id := range ids[:3] {
		if _, err := s.JobGet(ctx, "q", id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("completed job %d still there: %v", id, err)
		}
	}
	must(s.JobGet(ctx, "q", ids[3]))(t)
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: nil}))(t); n != 0 {
		t.Fatalf("JobsComplete(nil) = %d", n)
	}
}

func testJobsRelease(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ids := insert(t, s, "q", 4, 0)
	grabbed := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 3, Lease: time.Minute}))(t)
	// ids[3] is still waiting: releasing it changes nothing, nor may
	// another node release n1's jobs.
	if n := must(s.JobsRelease(ctx, &store.JobsReleaseParams{Node: "n2", IDs: ids}))(t); n != 0 {
		t.Fatalf("JobsRelease by non-holder released %d", n)
	}
	if n := must(s.JobsRelease(ctx, &store.JobsReleaseParams{Node: "n1", IDs: ids}))(t); n != 3 {
		t.Fatalf("JobsRelease released %d, want 3", n)
	}
	for i, g := range grabbed {
		j := must(s.JobGet(ctx, "q", g.ID))(t)
		if j.State != store.StateWaiting || j.GrabbedBy != "" || j.GrabbedTil != nil || j.FailCount != 0 || !j.NextTry.Equal(g.NextTry) {
			t.Fatalf("released job %d = %+v, want waiting as before its grab (next_try %v, fail_count 0)", i, j, g.NextTry)
		}
	}
	// Released jobs are due again, in their old order.
	again := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n2", Limit: 10, Lease: time.Minute}))(t)
	if got, want := jobIDs(again), ids; !slices.Equal(got, want) {
		t.Fatalf("grab after release = %v, want %v", got, want)
	}
	if n := must(s.JobsRelease(ctx, &store.JobsReleaseParams{Node: "n1", IDs: nil}))(t); n != 0 {
		t.Fatalf("JobsRelease(nil) = %d", n)
	}
}

func testJobsRetry(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ids := insert(t, s, "q", 1, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Minute}))(t)
	if err := s.JobRetry(ctx, &store.JobRetryParams{ID: ids[0], Node: "n2", Delay: 0}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobRetry by non-holder err = %v", err)
	}
	ok(t, s.JobRetry(ctx, &store.JobRetryParams{ID: ids[0], Node: "n1", Delay: 500 * time.Millisecond}))
	j := must(s.JobGet(ctx, "q", ids[0]))(t)
	if j.State != store.StateWaiting || j.FailCount != 1 || j.GrabbedBy != "" || j.GrabbedTil != nil {
		t.Fatalf("retried job = %+v", j)
	}
	if got := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Minute}))(t); len(got) != 0 {
		t.Fatal("retried job grabbed before its delay")
	}
	if err := s.JobRetry(ctx, &store.JobRetryParams{ID: ids[0], Node: "n1"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobRetry of a waiting job err = %v", err)
	}
	time.Sleep(600 * time.Millisecond)
	got := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Minute}))(t)
	if len(got) != 1 || got[0].FailCount != 1 {
		t.Fatalf("grab after retry delay = %+v", got)
	}
}

// testJobsDefer: the holder puts jobs back, each due after its own delay,
// fail_count unchanged; Count adds a deferral; another node's jobs and
// waiting jobs are left alone.
func testJobsDefer(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ids := insert(t, s, "q", 3, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 2, Lease: time.Minute}))(t)
	jobs := []store.JobDelay{{ID: ids[0], Delay: time.Hour}, {ID: ids[1], Delay: 0}, {ID: ids[2], Delay: 0}}
	if n := must(s.JobsDefer(ctx, &store.JobsDeferParams{Node: "n2", Jobs: jobs, Count: true}))(t); n != 0 {
		t.Fatalf("JobsDefer by a node that holds none deferred %d", n)
	}
	if n := must(s.JobsDefer(ctx, &store.JobsDeferParams{Node: "n1", Jobs: jobs, Count: true}))(t); n != 2 {
		t.Fatalf("JobsDefer deferred %d, want the 2 grabbed", n)
	}
	now := must(s.Now(ctx))(t)
	for i, id := range ids {
		j := must(s.JobGet(ctx, "q", id))(t)
		want := 1
		if i == 2 {
			want = 0 // it was waiting
		}
		if j.State != store.StateWaiting || j.GrabbedBy != "" || j.GrabbedTil != nil || j.FailCount != 0 || j.Deferrals != want {
			t.Fatalf("job %d after JobsDefer = %+v, want waiting, fail_count 0, deferrals %d", i, j, want)
		}
	}
	if j := must(s.JobGet(ctx, "q", ids[0]))(t); j.NextTry.Sub(now) < 59*time.Minute {
		t.Fatalf("job deferred by an hour is due at %v, now %v", j.NextTry, now)
	}
	got := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 10, Lease: time.Minute}))(t)
	// The second is due again from now, after the third, which never left.
	if want := []int64{ids[2], ids[1]}; !slices.Equal(jobIDs(got), want) {
		t.Fatalf("grab after JobsDefer = %v, want %v (the first deferred by an hour)", jobIDs(got), want)
	}
	// Without Count, deferrals stay as they are.
	must(s.JobsDefer(ctx, &store.JobsDeferParams{Node: "n1", Jobs: []store.JobDelay{{ID: ids[1]}}}))(t)
	if j := must(s.JobGet(ctx, "q", ids[1]))(t); j.Deferrals != 1 || j.State != store.StateWaiting {
		t.Fatalf("job held back without Count = %+v, want deferrals 1", j)
	}
	if n := must(s.JobsDefer(ctx, &store.JobsDeferParams{Node: "n1"}))(t); n != 0 {
		t.Fatalf("JobsDefer of no jobs = %d", n)
	}
}

func testJobsFail(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	ids := must(s.JobsInsert(ctx, []*store.JobInsertParams{
		{Queue: "q", Category: "c", URL: "http://w/x", Payload: json.RawMessage(`"hello"`), MaxRetries: 1},
	}))(t)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Minute}))(t)
	ok(t, s.JobRetry(ctx, &store.JobRetryParams{ID: ids[0], Node: "n1"}))
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Minute}))(t)
	if _, err := s.JobFail(ctx, &store.JobFailParams{ID: ids[0], Node: "n2", Status: "failure"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobFail by non-holder err = %v", err)
	}
	f := must(s.JobFail(ctx, &store.JobFailParams{ID: ids[0], Node: "n1", Status: "permanent-failure", Code: 500, Message: "boom ✓"}))(t)
	if f.JobID != ids[0] || f.Queue != "q" || f.Category != "c" || f.URL != "http://w/x" || string(f.Payload) != `"hello"` ||
		f.Status != "permanent-failure" || f.Code != 500 || f.Message != "boom ✓" || f.FailCount != 2 || f.ID == 0 {
		t.Fatalf("JobFail returned %+v", f)
	}
	if f.FailedAt.Before(f.CreatedAt) {
		t.Fatalf("failed_at %v before created_at %v", f.FailedAt, f.CreatedAt)
	}
	if _, err := s.JobGet(ctx, "q", ids[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("failed job still in jobs: %v", err)
	}
	got := must(s.FailedJobGet(ctx, "q", f.ID))(t)
	if got.JobID != f.JobID || got.Message != f.Message || got.Code != 500 || !got.FailedAt.Equal(f.FailedAt) {
		t.Fatalf("FailedJobGet = %+v, want %+v", got, f)
	}
	if _, err := s.FailedJobGet(ctx, "other", f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FailedJobGet in other queue err = %v", err)
	}
	if _, err := s.JobFail(ctx, &store.JobFailParams{ID: ids[0], Node: "n1", Status: "failure"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second JobFail err = %v", err)
	}
}

func testJobsExtendAndRescue(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	insert(t, s, "q", 4, 0)
	// Both nodes are registered: the dead one is found out by its lease.
	heartbeat(t, s, "alive", time.Minute)
	heartbeat(t, s, "dead", time.Minute)
	// Leases of 2 s: a loaded machine (CI at load 20) took over 500 ms
	// between the grabs and the first rescue.
	a := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "alive", Limit: 2, Lease: 2 * time.Second}))(t)
	d := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "dead", Limit: 2, Lease: 2 * time.Second}))(t)
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 0 {
		t.Fatalf("rescued %d unexpired jobs", n)
	}
	time.Sleep(200 * time.Millisecond)
	if n := must(s.JobsExtend(ctx, &store.JobsExtendParams{Queue: "q", Node: "alive", Lease: time.Minute}))(t); n != 2 {
		t.Fatalf("JobsExtend moved %d, want 2", n)
	}
	if n := must(s.JobsExtend(ctx, &store.JobsExtendParams{Queue: "other", Node: "alive", Lease: time.Minute}))(t); n != 0 {
		t.Fatalf("JobsExtend on other queue moved %d", n)
	}
	time.Sleep(2 * time.Second)
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 2 {
		t.Fatalf("JobsRescue = %d, want 2", n)
	}
	for _, j := range d {
		got := must(s.JobGet(ctx, "q", j.ID))(t)
		if got.State != store.StateWaiting || got.GrabbedBy != "" || got.FailCount != 0 {
			t.Fatalf("rescued job = %+v", got)
		}
	}
	for _, j := range a {
		if got := must(s.JobGet(ctx, "q", j.ID))(t); got.State != store.StateGrabbed || got.GrabbedBy != "alive" {
			t.Fatalf("extended job = %+v", got)
		}
	}
	// The dead node's late completion must not delete the rescued jobs.
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "dead", IDs: jobIDs(d)}))(t); n != 0 {
		t.Fatalf("dead node completed %d rescued jobs", n)
	}
	again := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "new", Limit: 10, Lease: time.Minute}))(t)
	if fmt.Sprint(sorted(jobIDs(again))) != fmt.Sprint(sorted(jobIDs(d))) {
		t.Fatalf("regrabbed %v, want %v", jobIDs(again), jobIDs(d))
	}
}

func testJobsPush(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	extra := store.JobOptions{Priority: 7, UniqueKey: "k1", RetryBackoff: store.BackoffExponential, RetryDelayMax: 60, RetryJitter: 0.25}
	res := must(s.JobsPush(ctx, []*store.JobInsertParams{
		{Queue: "q", Category: "c", URL: "http://a/1", Payload: json.RawMessage(`{"n":1}`), MaxRetries: 2, RetryDelay: 3, JobOptions: extra},
		{Queue: "q", Category: "c", URL: "http://a/2"},
		{Queue: "q", Category: "c", URL: "http://a/3", JobOptions: store.JobOptions{UniqueKey: "k1"}}, // same key, same call
		{Queue: "other", Category: "c", URL: "http://a/4", JobOptions: store.JobOptions{UniqueKey: "k1"}},
	}))(t)
	if len(res) != 4 {
		t.Fatalf("JobsPush gave %d results, want 4", len(res))
	}
	if res[0].Existing || res[1].Existing || res[3].Existing || !res[2].Existing || res[2].ID != res[0].ID || res[2].Job == nil {
		t.Fatalf("JobsPush = %+v, want job 2 to name job 0 as existing", res)
	}
	if res[0].ID == res[1].ID || res[0].ID == res[3].ID || res[1].ID == res[3].ID {
		t.Fatalf("JobsPush ids = %+v, want distinct new jobs", res)
	}
	j := must(s.JobGet(ctx, "q", res[0].ID))(t)
	if j.JobOptions != extra || j.MaxRetries != 2 || j.RetryDelay != 3 || string(j.Payload) != `{"n":1}` {
		t.Fatalf("JobGet = %+v, want the pushed settings %+v", j, extra)
	}
	if got := res[2].Job; got.ID != j.ID || got.URL != "http://a/1" || got.UniqueKey != "k1" {
		t.Fatalf("existing job = %+v, want the first push", got)
	}
	if j := must(s.JobGet(ctx, "q", res[1].ID))(t); j.UniqueKey != "" || j.RetryBackoff != store.BackoffFixed || j.Priority != 0 {
		t.Fatalf("job without extras = %+v, want no key, fixed backoff, priority 0", j)
	}

	// A second push of the key names the pending job, grabbed or not.
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t)
	again := must(s.JobsPush(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://a/5", JobOptions: store.JobOptions{UniqueKey: "k1"}}}))(t)
	if !again[0].Existing || again[0].ID != res[0].ID || again[0].Job.State != store.StateGrabbed {
		t.Fatalf("push of a grabbed key = %+v, want existing job %d", again[0], res[0].ID)
	}
	// Once the job is done the key is free.
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n", IDs: []int64{res[0].ID}}))(t); n != 1 {
		t.Fatalf("JobsComplete = %d", n)
	}
	fresh := must(s.JobsPush(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://a/6", JobOptions: store.JobOptions{UniqueKey: "k1"}}}))(t)
	if fresh[0].Existing || fresh[0].ID == res[0].ID {
		t.Fatalf("push after completion = %+v, want a new job", fresh[0])
	}
	if res := must(s.JobsPush(ctx, nil))(t); len(res) != 0 {
		t.Fatalf("JobsPush(nil) = %v", res)
	}
}

// testJobsPushConcurrent pushes one key from many goroutines at once: one
// job is stored and every push names it.
func testJobsPushConcurrent(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n = 24
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		ids   = map[int64]int{}
		fresh int
		errs  []error
	)
	for i := range n {
		wg.Go(func() {
			res, err := s.JobsPush(ctx, []*store.JobInsertParams{
				{Queue: "q", Category: "c", URL: fmt.Sprintf("http://a/%d", i), JobOptions: store.JobOptions{UniqueKey: "same"}},
				{Queue: "q", Category: "c", URL: "http://a/plain"},
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids[res[0].ID]++
			if !res[0].Existing {
				fresh++
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d pushes failed, first: %v", len(errs), n, errs[0])
	}
	if len(ids) != 1 || fresh != 1 {
		t.Fatalf("pushes of one key gave ids %v with %d new, want one id and one new", ids, fresh)
	}
	jobs := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 100, Lease: time.Minute}))(t)
	if len(jobs) != n+1 {
		t.Fatalf("queue holds %d jobs, want %d (one keyed, %d plain)", len(jobs), n+1, n)
	}
}

func testJobsInsertUniqueConflict(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	k := store.JobOptions{UniqueKey: "k"}
	must(s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://a/", JobOptions: k}}))(t)
	_, err := s.JobsInsert(ctx, []*store.JobInsertParams{
		{Queue: "q", Category: "c", URL: "http://a/"},
		{Queue: "q", Category: "c", URL: "http://a/", JobOptions: k},
	})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("JobsInsert of a taken key err = %v, want ErrConflict", err)
	}
	// All or nothing: the job without a key was not stored either.
	if jobs := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t); len(jobs) != 1 {
		t.Fatalf("queue holds %d jobs after a refused insert, want 1", len(jobs))
	}
}

func testJobsGrabPriority(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	var ps []*store.JobInsertParams
	for _, p := range []int{0, 5, -3, 5, 1000, -1000, 0} {
		ps = append(ps, &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://a/", JobOptions: store.JobOptions{Priority: p}})
	}
	// A deferred job of the highest priority waits for its time.
	ps = append(ps, &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://a/", RunAfter: time.Hour, JobOptions: store.JobOptions{Priority: 1000}})
	ids := must(s.JobsInsert(ctx, ps))(t)
	want := []int64{ids[4], ids[1], ids[3], ids[0], ids[6], ids[2], ids[5]}
	got := jobIDs(must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 3, Lease: time.Minute}))(t))
	got = append(got, jobIDs(must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t))...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("grab order = %v, want %v (priority desc, then next_try, id)", got, want)
	}
}

// testJobsPushKeysAnyOrder pushes batches of the same keys in opposite
// orders at once: every push succeeds and each key names one job.
func testJobsPushKeysAnyOrder(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	keys := []string{"a", "b", "c", "d", "e", "f"}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  = map[string]map[int64]bool{}
		errs []error
	)
	for g := range 8 {
		wg.Go(func() {
			ps := make([]*store.JobInsertParams, len(keys))
			for i, k := range keys {
				if g%2 == 1 {
					k = keys[len(keys)-1-i]
				}
				ps[i] = &store.JobInsertParams{Queue: "q", Category: "c", URL: "http://a/", JobOptions: store.JobOptions{UniqueKey: k}}
			}
			res, err := s.JobsPush(ctx, ps)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			for i, r := range res {
				k := ps[i].UniqueKey
				if ids[k] == nil {
					ids[k] = map[int64]bool{}
				}
				ids[k][r.ID] = true
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d pushes failed, first: %v", len(errs), errs[0])
	}
	for _, k := range keys {
		if len(ids[k]) != 1 {
			t.Fatalf("key %q named jobs %v, want one", k, ids[k])
		}
	}
}

// testJobsExpired checks the look for expired grabs: it names exactly the
// queues whose rescue has something to do.
func testJobsExpired(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if got := must(s.JobsExpired(ctx, nil))(t); len(got) != 0 {
		t.Fatalf("JobsExpired of no queues = %v", got)
	}
	for _, q := range []string{"empty", "waiting", "held", "lapsed.1"} {
		putQueue(t, s, q)
	}
	insert(t, s, "waiting", 2, 0)
	insert(t, s, "held", 2, 0)
	heartbeat(t, s, "n1", time.Minute)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "held", Node: "n1", Limit: 10, Lease: time.Minute}))(t)
	insert(t, s, "lapsed.1", 2, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "lapsed.1", Node: "n1", Limit: 1, Lease: 100 * time.Millisecond}))(t)

	all := []string{"empty", "waiting", "held", "lapsed.1", "no-such-queue"}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := must(s.JobsExpired(ctx, all))(t)
		if fmt.Sprint(got) == "[lapsed.1]" {
			break
		}
		if len(got) != 0 || time.Now().After(deadline) {
			t.Fatalf("JobsExpired(%v) = %v, want [lapsed.1] once its grab's 100ms lease has passed", all, got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := must(s.JobsRescue(ctx, "lapsed.1"))(t); n != 1 {
		t.Fatalf("JobsRescue(lapsed.1) = %d, want 1", n)
	}
	if got := must(s.JobsExpired(ctx, all))(t); len(got) != 0 {
		t.Fatalf("after the rescue, JobsExpired = %v, want none", got)
	}
}

// testJobsNextDue checks the look at idle queues: for exactly the queues
// that hold a waiting job, a grab or a lease, it tells how long until the
// earliest job is due and the earliest grab or lease runs out.
func testJobsNextDue(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if got := must(s.JobsNextDue(ctx, nil))(t); len(got) != 0 {
		t.Fatalf("JobsNextDue of no queues = %v", got)
	}
	for _, q := range []string{"empty", "due.1", "deferred", "grabbed", "done", "due-2"} {
		putQueue(t, s, q)
	}
	insert(t, s, "due.1", 3, 0)
	insert(t, s, "due-2", 1, 0)
	insert(t, s, "deferred", 2, time.Hour)
	insert(t, s, "deferred", 1, 10*time.Minute)
	insert(t, s, "grabbed", 2, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "grabbed", Node: "n1", Limit: 1, Lease: time.Minute}))(t)
	done := insert(t, s, "done", 1, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "done", Node: "n1", Limit: 10, Lease: time.Minute}))(t)
	must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: done}))(t)

	all := []string{"empty", "due.1", "deferred", "grabbed", "done", "due-2", "no-such-queue"}
	got := map[string]store.QueueDue{}
	for _, d := range must(s.JobsNextDue(ctx, all))(t) {
		if _, dup := got[d.Queue]; dup {
			t.Fatalf("JobsNextDue names %q twice", d.Queue)
		}
		got[d.Queue] = d
	}
	if names := sorted(slices.Collect(maps.Keys(got))); fmt.Sprint(names) != "[deferred due-2 due.1 grabbed]" {
		t.Fatalf("JobsNextDue(%v) names %v, want [deferred due-2 due.1 grabbed]", all, names)
	}
	// Generous bounds: the machine may be loaded, and the clocks of the
	// test and the database differ by the round trip.
	for _, q := range []string{"due.1", "due-2"} {
		if d := got[q]; d.Job > 0 || d.Job < -time.Minute || d.Expiry != store.Never {
			t.Errorf("%s: %+v, want a job due now and no grab", q, d)
		}
	}
	if d := got["deferred"]; d.Job < 9*time.Minute || d.Job > 10*time.Minute || d.Expiry != store.Never {
		t.Errorf("deferred: %+v, want its earlier job due in about 10m and no grab", d)
	}
	if d := got["grabbed"]; d.Job > 0 || d.Expiry < 50*time.Second || d.Expiry > time.Minute {
		t.Errorf("grabbed: %+v, want its second job due now and its grab to run out in about 1m", d)
	}
}

// testJobsInsertGrabbed checks jobs written already grabbed (local
// hand-off): returned as stored, held by the node, invisible to grabs,
// acknowledged like any grab, and rescued when the lease passes.
func testJobsInsertGrabbed(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	// The nodes are registered: n1 is found out by its lease, not by a
	// missing row.
	heartbeat(t, s, "n1", time.Minute)
	heartbeat(t, s, "n2", time.Minute)
	waiting := insert(t, s, "q", 1, 0)
	ps := make([]*store.JobInsertParams, 3)
	for i := range ps {
		ps[i] = &store.JobInsertParams{
			Queue: "q", Category: "cat", URL: fmt.Sprintf("http://127.0.0.1:1/work/%d", i),
			Payload: json.RawMessage(fmt.Sprintf(`{"i": %d}`, i)), MaxRetries: 2, RetryDelay: 3, Timeout: 4,
		}
	}
	ps[1].JobOptions = store.JobOptions{Priority: 7, UniqueKey: "k1", RetryBackoff: store.BackoffExponential, RetryDelayMax: 60, RetryJitter: 0.25}
	ps[2].Payload = nil
	before := must(s.Now(ctx))(t)
	jobs := must(s.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: "n1", Lease: 700 * time.Millisecond, Jobs: ps}))(t)
	if len(jobs) != len(ps) {
		t.Fatalf("JobsInsertGrabbed returned %d jobs for %d", len(jobs), len(ps))
	}
	ids := jobIDs(jobs)
	for i, j := range jobs {
		if i > 0 && j.ID <= ids[i-1] {
			t.Fatalf("ids %v are not increasing in the order given", ids)
		}
		want := ps[i].JobOptions
		if want.RetryBackoff == "" {
			want.RetryBackoff = store.BackoffFixed
		}
		if j.Queue != "q" || j.Category != "cat" || j.State != store.StateGrabbed || j.GrabbedBy != "n1" || j.GrabbedTil == nil ||
			j.URL != ps[i].URL || string(j.Payload) != string(ps[i].Payload) || (j.Payload == nil) != (ps[i].Payload == nil) ||
			j.MaxRetries != 2 || j.RetryDelay != 3 || j.Timeout != 4 || j.FailCount != 0 || j.JobOptions != want {
			t.Fatalf("returned job %d = %+v, want grabbed by n1 with the fields given (%+v)", i, j, ps[i])
		}
		if d := j.GrabbedTil.Sub(before); d < 500*time.Millisecond || d > 30*time.Second {
			t.Errorf("grabbed_until is %v after the insert began, want about the 700ms lease", d)
		}
		if !j.NextTry.Equal(j.CreatedAt) || j.CreatedAt.Before(before.Add(-time.Second)) || j.GrabbedTil.Sub(j.CreatedAt) != 700*time.Millisecond {
			t.Errorf("created_at %v, next_try %v, grabbed_until %v: want the insert's now, now and now + 700ms", j.CreatedAt, j.NextTry, j.GrabbedTil)
		}
		// What it returned is what it stored.
		stored := must(s.JobGet(ctx, "q", j.ID))(t)
		if !sameJob(j, stored) {
			t.Fatalf("returned job %+v (grabbed until %v)\nstored   job %+v (grabbed until %v)", j, j.GrabbedTil, stored, stored.GrabbedTil)
		}
	}
	if must(s.JobGet(ctx, "q", ids[2]))(t).Payload != nil {
		t.Error("a job without payload came back with one")
	}
	// A grab sees only the waiting job.
	got := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n2", Limit: 10, Lease: time.Minute}))(t)
	if fmt.Sprint(jobIDs(got)) != fmt.Sprint(waiting) {
		t.Fatalf("grab returned %v, want only the waiting job %v", jobIDs(got), waiting)
	}
	// The holder acknowledges like any grab; another node cannot.
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n2", IDs: ids[:1]}))(t); n != 0 {
		t.Fatalf("another node completed %d of n1's jobs", n)
	}
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: ids[:1]}))(t); n != 1 {
		t.Fatalf("JobsComplete by the holder = %d, want 1", n)
	}
	// When the lease passes (the node died), the others are rescued.
	deadline := time.Now().Add(30 * time.Second)
	var rescued int64
	for rescued < 2 && time.Now().Before(deadline) {
		rescued += must(s.JobsRescue(ctx, "q"))(t)
		time.Sleep(100 * time.Millisecond)
	}
	if rescued != 2 {
		t.Fatalf("rescued %d jobs after the lease, want 2", rescued)
	}
	again := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n3", Limit: 10, Lease: time.Minute}))(t)
	if fmt.Sprint(sorted(jobIDs(again))) != fmt.Sprint(sorted(ids[1:])) {
		t.Fatalf("regrabbed %v, want %v", jobIDs(again), ids[1:])
	}
}

// sameJob reports whether a and b hold the same values, times compared as
// instants.
func sameJob(a, b *store.Job) bool {
	ta, tb := a.GrabbedTil, b.GrabbedTil
	if (ta == nil) != (tb == nil) || (ta != nil && !ta.Equal(*tb)) {
		return false
	}
	x, y := *a, *b
	x.GrabbedTil, y.GrabbedTil = nil, nil
	x.Payload, y.Payload = nil, nil
	if !x.CreatedAt.Equal(y.CreatedAt) || !x.NextTry.Equal(y.NextTry) || string(a.Payload) != string(b.Payload) {
		return false
	}
	x.CreatedAt, y.CreatedAt, x.NextTry, y.NextTry = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

// testJobsRescueUnregistered checks that a grab whose node has no
// registration (reaped or deleted) counts as expired at once, however long
// its lease, while a registered node's unexpired grabs are left alone.
func testJobsRescueUnregistered(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putQueue(t, s, "other")
	insert(t, s, "q", 4, 0)
	insert(t, s, "other", 1, 0)
	heartbeat(t, s, "alive", time.Minute)
	a := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "alive", Limit: 2, Lease: time.Hour}))(t)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "other", Node: "alive", Limit: 1, Lease: time.Hour}))(t)
	gone := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "gone", Limit: 2, Lease: time.Hour}))(t)
	if len(a) != 2 || len(gone) != 2 {
		t.Fatalf("grabbed %d and %d, want 2 and 2", len(a), len(gone))
	}
	all := []string{"q", "other"}
	if got := must(s.JobsExpired(ctx, all))(t); fmt.Sprint(got) != "[q]" {
		t.Fatalf("JobsExpired(%v) = %v, want [q]: the unregistered node's grabs", all, got)
	}
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 2 {
		t.Fatalf("JobsRescue = %d, want the unregistered node's 2", n)
	}
	for _, j := range gone {
		if got := must(s.JobGet(ctx, "q", j.ID))(t); got.State != store.StateWaiting || got.GrabbedBy != "" {
			t.Fatalf("job of the unregistered node after the rescue = %+v", got)
		}
	}
	for _, j := range a {
		if got := must(s.JobGet(ctx, "q", j.ID))(t); got.State != store.StateGrabbed || got.GrabbedBy != "alive" {
			t.Fatalf("job of the live node after the rescue = %+v", got)
		}
	}
	if got := must(s.JobsExpired(ctx, all))(t); len(got) != 0 {
		t.Fatalf("after the rescue, JobsExpired = %v, want none", got)
	}
	if n := must(s.JobsRescue(ctx, "other"))(t); n != 0 {
		t.Fatalf("JobsRescue(other) = %d, want 0 while its node is registered", n)
	}
	// Its registration deleted, the live node's grabs are expired too.
	ok(t, s.NodeDelete(ctx, "alive"))
	if got := sorted(must(s.JobsExpired(ctx, all))(t)); fmt.Sprint(got) != "[other q]" {
		t.Fatalf("after NodeDelete, JobsExpired = %v, want [other q]", got)
	}
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 2 {
		t.Fatalf("after NodeDelete, JobsRescue = %d, want 2", n)
	}
}

// JobsBehindFrozenTx checks that extending, rescuing and grabbing jobs wait
// for no transaction that a node left open when it was frozen half-way
// (SIGSTOP, a stalled VM: its session, and so its row locks, live on).
// freeze opens a transaction on s's database that marks job grab as
// grabbed by node "frozen" without committing (a frozen grab) and locks job
// lock (a frozen acknowledgement), and returns the function that rolls it
// back. It is for the dialects whose transactions lock rows (MySQL,
// PostgreSQL); SQLite has one writer, whose frozen transaction every other
// writer waits for.
func JobsBehindFrozenTx(t *testing.T, s store.Store, freeze func(t *testing.T, grab, lock int64) (rollback func())) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	heartbeat(t, s, "live", time.Minute)
	heartbeat(t, s, "frozen", time.Minute)
	ids := insert(t, s, "q", 4, 0)
	// live holds ids[0]; "gone", which has no registration, held ids[1]
	// and ids[2]: their grabs have expired. ids[3] waits.
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "live", Limit: 1, Lease: time.Minute}))(t)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "gone", Limit: 2, Lease: time.Minute}))(t)
	rollback := freeze(t, ids[3], ids[2])
	defer rollback()

	// Well within store.LockWait, after which a wait fails.
	bound := store.LockWait / 2
	timed := func(what string, f func() (int64, error)) int64 {
		t.Helper()
		start := time.Now()
		n, err := f()
		if err != nil {
			t.Fatalf("%s beside a frozen transaction: %v", what, err)
		}
		if took := time.Since(start); took > bound {
			t.Fatalf("%s took %v beside a frozen transaction; want no wait (under %v)", what, took, bound)
		}
		return n
	}
	extend := func() (int64, error) {
		return s.JobsExtend(ctx, &store.JobsExtendParams{Queue: "q", Node: "live", Lease: time.Minute})
	}
	if n := timed("JobsExtend", extend); n != 1 {
		t.Errorf("JobsExtend extended %d jobs, want 1", n)
	}
	rescue := func() (int64, error) { return s.JobsRescue(ctx, "q") }
	if n := timed("JobsRescue", rescue); n != 1 {
		t.Errorf("JobsRescue rescued %d jobs, want 1 (the expired grab no transaction holds)", n)
	}
	var got []*store.Job
	timed("JobsGrab", func() (n int64, err error) {
		got, err = s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "live", Limit: 10, Lease: time.Minute})
		return int64(len(got)), err
	})
	if want := []int64{ids[1]}; !slices.Equal(jobIDs(got), want) {
		t.Errorf("JobsGrab took %v, want %v (the rescued job, not the one the frozen grab holds)", jobIDs(got), want)
	}

	// Once the frozen transaction ends, its rows are anybody's again.
	rollback()
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 1 {
		t.Errorf("JobsRescue after the rollback rescued %d jobs, want 1 (the grab the frozen transaction held)", n)
	}
	got = must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "live", Limit: 10, Lease: time.Minute}))(t)
	if want := []int64{ids[2], ids[3]}; !slices.Equal(sorted(jobIDs(got)), want) {
		t.Errorf("JobsGrab after the rollback took %v, want %v", jobIDs(got), want)
	}
}

// testJobsTrace checks that every way of inserting a job keeps its trace
// context as given (a tracestate of 512 characters whole), and that every
// read of jobs returns it; a job without one reads "".
func testJobsTrace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	trace := func(i int) store.Trace {
		return store.Trace{
			Parent: fmt.Sprintf("00-4bf92f3577b34da6a3ce929d0e0e47%02d-00f067aa0ba902b7-01", i),
			State:  fmt.Sprintf("rojo=%d,congo=t61rcWkgMzE", i),
		}
	}
	long := store.Trace{Parent: trace(9).Parent, State: "a=" + strings.Repeat("v", 255) + ",b=" + strings.Repeat("w", 252)}
	job := func(i int, tr store.Trace) *store.JobInsertParams {
		return &store.JobInsertParams{Queue: "q", Category: "c", URL: fmt.Sprintf("http://a/%d", i), Trace: tr}
	}
	want := map[int64]store.Trace{}
	inserted := must(s.JobsInsert(ctx, []*store.JobInsertParams{job(1, trace(1)), job(2, store.Trace{})}))(t)
	want[inserted[0]], want[inserted[1]] = trace(1), store.Trace{}
	keyed := job(4, trace(4))
	keyed.UniqueKey = "k"
	pushed := must(s.JobsPush(ctx, []*store.JobInsertParams{job(3, trace(3)), keyed}))(t)
	want[pushed[0].ID], want[pushed[1].ID] = trace(3), trace(4)
	existing := must(s.JobsPush(ctx, []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://a/5", JobOptions: store.JobOptions{UniqueKey: "k"}}}))(t)
	if !existing[0].Existing || existing[0].Job.Trace != trace(4) {
		t.Fatalf("the key's holder came back as %+v, want job %d with its trace %+v", existing[0], pushed[1].ID, trace(4))
	}
	grabbed := must(s.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: "n1", Lease: time.Minute,
		Jobs: []*store.JobInsertParams{job(6, long), job(7, store.Trace{})}}))(t)
	if grabbed[0].Trace != long || grabbed[1].Trace != (store.Trace{}) {
		t.Fatalf("JobsInsertGrabbed returned traces %+v and %+v, want %+v and none", grabbed[0].Trace, grabbed[1].Trace, long)
	}
	want[grabbed[0].ID], want[grabbed[1].ID] = long, store.Trace{}
	for id, tr := range want {
		if got := must(s.JobGet(ctx, "q", id))(t).Trace; got != tr {
			t.Errorf("JobGet(%d).Trace = %+v, want %+v", id, got, tr)
		}
	}
	heartbeat(t, s, "n2", time.Minute)
	got := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n2", Limit: 10, Lease: time.Minute}))(t)
	if len(got) != 4 {
		t.Fatalf("grabbed %d jobs, want the 4 waiting", len(got))
	}
	for _, j := range got {
		if j.Trace != want[j.ID] {
			t.Errorf("grabbed job %d has trace %+v, want %+v", j.ID, j.Trace, want[j.ID])
		}
	}
	listed := must(s.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsGrabbed, Limit: 10}))(t)
	if len(listed) != len(want) {
		t.Fatalf("listed %d grabbed jobs, want %d", len(listed), len(want))
	}
	for _, j := range listed {
		if j.Trace != want[j.ID] {
			t.Errorf("listed job %d has trace %+v, want %+v", j.ID, j.Trace, want[j.ID])
		}
	}
}
