package storetest

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// perfTests are the conformance tests of the performance area.
var perfTests = []conformanceTest{
	{"Jobs_InsertGrabbed", testJobsInsertGrabbed},
	{"Jobs_Due", testJobsDue},
	{"Jobs_Expired", testJobsExpired},
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

// testJobsDue checks the probe of idle queues: it names exactly the queues
// with a waiting job due now, whatever else they hold.
func testJobsDue(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if got := must(s.JobsDue(ctx, nil))(t); len(got) != 0 {
		t.Fatalf("JobsDue of no queues = %v", got)
	}
	for _, q := range []string{"empty", "due.1", "deferred", "grabbed", "done", "due-2"} {
		putQueue(t, s, q)
	}
	insert(t, s, "due.1", 3, 0)
	insert(t, s, "due-2", 1, 0)
	insert(t, s, "deferred", 2, time.Hour)
	soon := insert(t, s, "deferred", 1, 500*time.Millisecond)
	insert(t, s, "grabbed", 2, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "grabbed", Node: "n1", Limit: 10, Lease: time.Minute}))(t)
	done := insert(t, s, "done", 1, 0)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "done", Node: "n1", Limit: 10, Lease: time.Minute}))(t)
	must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: done}))(t)

	all := []string{"empty", "due.1", "deferred", "grabbed", "done", "due-2", "no-such-queue"}
	got := sorted(must(s.JobsDue(ctx, all))(t))
	if want := []string{"due-2", "due.1"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("JobsDue(%v) = %v, want %v", all, got, want)
	}
	if got := must(s.JobsDue(ctx, []string{"due.1"}))(t); fmt.Sprint(got) != "[due.1]" {
		t.Fatalf("JobsDue([due.1]) = %v", got)
	}
	// The deferred queue turns due when its first job does.
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := must(s.JobsDue(ctx, []string{"deferred", "empty"}))(t)
		if fmt.Sprint(got) == "[deferred]" {
			break
		}
		if len(got) != 0 || time.Now().After(deadline) {
			t.Fatalf("JobsDue([deferred empty]) = %v, want [deferred] once job %v is due", got, soon)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// InsertGrabbed runs the conformance test of JobsInsertGrabbed alone on s,
// for a dialect that inserts them in more than one way (MySQL with and
// without RETURNING).
func InsertGrabbed(t *testing.T, s store.Store) { testJobsInsertGrabbed(t, s) }

// testJobsInsertGrabbed checks jobs written already grabbed (local
// hand-off): returned as stored, held by the node, invisible to grabs,
// acknowledged like any grab, and rescued when the lease passes.
func testJobsInsertGrabbed(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
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
