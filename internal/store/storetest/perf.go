package storetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// perfTests are the conformance tests of the performance area.
var perfTests = []conformanceTest{
	{"Jobs_InsertGrabbed", testJobsInsertGrabbed},
}

// testJobsInsertGrabbed checks jobs written already grabbed (local
// hand-off): held by the node, invisible to grabs, acknowledged like any
// grab, and rescued when the lease passes.
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
	ps[2].Payload = nil
	before := must(s.Now(ctx))(t)
	ids := must(s.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: "n1", Lease: 700 * time.Millisecond, Jobs: ps}))(t)
	if len(ids) != len(ps) {
		t.Fatalf("JobsInsertGrabbed returned %d ids for %d jobs", len(ids), len(ps))
	}
	for i, id := range ids {
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("ids %v are not increasing in the order given", ids)
		}
		j := must(s.JobGet(ctx, "q", id))(t)
		if j.State != store.StateGrabbed || j.GrabbedBy != "n1" || j.GrabbedTil == nil || j.URL != ps[i].URL ||
			string(j.Payload) != string(ps[i].Payload) || j.MaxRetries != 2 || j.RetryDelay != 3 || j.Timeout != 4 || j.FailCount != 0 {
			t.Fatalf("job %d = %+v, want grabbed by n1 with the fields given (%+v)", id, j, ps[i])
		}
		if d := j.GrabbedTil.Sub(before); d < 500*time.Millisecond || d > 30*time.Second {
			t.Errorf("grabbed_until is %v after the insert began, want about the 700ms lease", d)
		}
		if j.NextTry.Before(before.Add(-time.Second)) || j.NextTry.After(*j.GrabbedTil) {
			t.Errorf("next_try %v, want the insert's now (%v)", j.NextTry, before)
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
