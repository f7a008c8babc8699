package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// leaseTests are the conformance tests of the lease methods of
// store.JobStore: accepted jobs, their completion and their expiry.
var leaseTests = []conformanceTest{
	{"Leases_GrabsCountAndLeaseHolds", testLeasesHold},
	{"Leases_FinishRecordsResult", testLeasesFinish},
	{"Leases_ExpiredLease", testLeasesExpired},
	{"Leases_ResultsPurge", testLeasesPurge},
	{"Leases_Cancel", testLeasesCancel},
	{"Leases_CancelRacesFinish", testLeasesCancelRace},
}

// grabOne inserts one job with maxRetries into queue q and grabs it for
// node n1.
func grabOne(t *testing.T, s store.Store, q string, maxRetries int) *store.Job {
	t.Helper()
	ctx := ctxT(t)
	must(s.JobsInsert(ctx, []*store.JobInsertParams{{Queue: q, Category: "c", URL: "http://w/x", MaxRetries: maxRetries}}))(t)
	jobs := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: q, Node: "n1", Limit: 1, Lease: time.Minute}))(t)
	if len(jobs) != 1 {
		t.Fatalf("grabbed %d jobs, want 1", len(jobs))
	}
	return jobs[0]
}

func testLeasesHold(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	j := grabOne(t, s, "q", 0)
	if j.Grabs != 1 {
		t.Fatalf("first grab: Grabs = %d, want 1", j.Grabs)
	}
	if _, err := s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: 2, Lease: time.Minute}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobLease of another grab: err = %v, want ErrNotFound", err)
	}
	before := must(s.Now(ctx))(t)
	progress, msg := 0.5, "half way ✓"
	until := must(s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: 1, Lease: time.Hour, Progress: &progress, Message: &msg}))(t)
	if d := until.Sub(before); d < time.Hour-time.Second || d > time.Hour+5*time.Second {
		t.Fatalf("lease until %v, %v after now, want an hour", until, d)
	}
	got := must(s.JobGet(ctx, "q", j.ID))(t)
	if got.State != store.StateLeased || got.GrabbedTil == nil || !got.GrabbedTil.Equal(until) ||
		got.Progress == nil || *got.Progress != 0.5 || got.ProgressMessage != msg || got.Grabs != 1 {
		t.Fatalf("leased job = %+v (until %v), want leased until %v with progress 0.5 and %q", got, got.GrabbedTil, until, msg)
	}
	// A heartbeat without progress keeps the last one.
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: 1, Lease: time.Hour}))(t)
	if got := must(s.JobGet(ctx, "q", j.ID))(t); got.Progress == nil || *got.Progress != 0.5 || got.ProgressMessage != msg {
		t.Fatalf("after a heartbeat without progress: %+v", got)
	}
	// The node's extension does not touch it, and its rescue does not take
	// it, though the node that delivered it never registered.
	if n := must(s.JobsExtend(ctx, &store.JobsExtendParams{Queue: "q", Node: "n1", Lease: time.Second}))(t); n != 0 {
		t.Fatalf("JobsExtend moved %d leased jobs", n)
	}
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 0 {
		t.Fatalf("JobsRescue took %d leased jobs", n)
	}
	if ex := must(s.JobsExpired(ctx, []string{"q"}))(t); len(ex) != 0 {
		t.Fatalf("JobsExpired = %v with the lease held", ex)
	}
	if got := must(s.JobHeld(ctx, j.ID, 1))(t); got.ID != j.ID || got.Queue != "q" {
		t.Fatalf("JobHeld = %+v", got)
	}
	if _, err := s.JobHeld(ctx, j.ID, 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobHeld of another grab: err = %v", err)
	}
	// A hand-off is a grab: its jobs are grab 1.
	held := must(s.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: "n1", Lease: time.Minute,
		Jobs: []*store.JobInsertParams{{Queue: "q", Category: "c", URL: "http://w/x"}}}))(t)
	if held[0].Grabs != 1 || must(s.JobGet(ctx, "q", held[0].ID))(t).Grabs != 1 {
		t.Fatalf("handed-off job: Grabs = %d, want 1", held[0].Grabs)
	}
}

func testLeasesFinish(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// Success deletes and records the result.
	j := grabOne(t, s, "q", 1)
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: 1, Lease: time.Hour}))(t)
	if q := must(s.JobFinish(ctx, &store.JobFinishParams{ID: j.ID, Grabs: 1, Outcome: store.FinishDelete, Status: "success"}))(t); q != "q" {
		t.Fatalf("JobFinish returned queue %q", q)
	}
	if _, err := s.JobGet(ctx, "q", j.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("finished job still there: %v", err)
	}
	if st := must(s.JobResult(ctx, j.ID, 1))(t); st != "success" {
		t.Fatalf("JobResult = %q", st)
	}
	if _, err := s.JobFinish(ctx, &store.JobFinishParams{ID: j.ID, Grabs: 1, Outcome: store.FinishDelete, Status: "success"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second JobFinish: err = %v", err)
	}
	if _, err := s.JobResult(ctx, j.ID, 2); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobResult of another grab: err = %v", err)
	}

	// A retry of a job still grabbed (completed before its delivery's
	// answer was recorded) puts it back; its next grab is grab 2, and grab
	// 1's lease is gone.
	j = grabOne(t, s, "r", 1)
	progress := 0.25
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: 1, Lease: time.Hour, Progress: &progress}))(t)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: j.ID, Grabs: 1, Outcome: store.FinishRetry, Status: "failure"}))(t)
	got := must(s.JobGet(ctx, "r", j.ID))(t)
	if got.State != store.StateWaiting || got.FailCount != 1 || got.Progress != nil || got.GrabbedBy != "" {
		t.Fatalf("retried job = %+v", got)
	}
	again := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "r", Node: "n2", Limit: 1, Lease: time.Minute}))(t)
	if len(again) != 1 || again[0].Grabs != 2 {
		t.Fatalf("regrab = %+v, want grab 2", again)
	}
	if _, err := s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: 1, Lease: time.Hour}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobLease of the old grab: err = %v", err)
	}
	// A failure moves it to the failure log, from the grabbed state too.
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: j.ID, Grabs: 2, Outcome: store.FinishFail, Status: "permanent-failure", Message: "no ✓"}))(t)
	failed := must(s.FailedJobsList(ctx, &store.FailedJobsListParams{Queue: "r", Limit: 10}))(t)
	if len(failed) != 1 || failed[0].JobID != j.ID || failed[0].Status != "permanent-failure" || failed[0].Message != "no ✓" || failed[0].FailCount != 2 {
		t.Fatalf("failure log = %+v", failed)
	}
	if st := must(s.JobResult(ctx, j.ID, 2))(t); st != "permanent-failure" {
		t.Fatalf("JobResult = %q", st)
	}
	// A retry from the failure log keeps the grab count, so the job's next
	// delivery is grab 3, not grab 1 of its first life again.
	back := must(s.FailedJobRetry(ctx, "r", failed[0].ID))(t)
	if back.Grabs != 2 {
		t.Fatalf("retried from the failure log: Grabs = %d, want 2", back.Grabs)
	}
	again = must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "r", Node: "n2", Limit: 1, Lease: time.Minute}))(t)
	if len(again) != 1 || again[0].Grabs != 3 {
		t.Fatalf("grab after the retry from the failure log = %+v, want grab 3", again)
	}
}

func testLeasesExpired(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q") // JobsExpired looks at known queues only
	short := grabOne(t, s, "q", 1)
	long := grabOne(t, s, "q", 1)
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: short.ID, Grabs: 1, Lease: 50 * time.Millisecond}))(t)
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: long.ID, Grabs: 1, Lease: time.Hour}))(t)
	time.Sleep(200 * time.Millisecond)
	if ex := must(s.JobsExpired(ctx, []string{"q", "other"}))(t); !slices.Equal(ex, []string{"q"}) {
		t.Fatalf("JobsExpired = %v, want [q]", ex)
	}
	ex := must(s.JobsLeaseExpired(ctx, &store.JobsLeaseExpiredParams{Queue: "q", Limit: 10}))(t)
	if len(ex) != 1 || ex[0].ID != short.ID || ex[0].State != store.StateLeased {
		t.Fatalf("JobsLeaseExpired = %+v, want job %d", ex, short.ID)
	}
	if _, err := s.JobFinish(ctx, &store.JobFinishParams{ID: long.ID, Grabs: 1, Outcome: store.FinishRetry, Expired: true}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobFinish Expired of a lease that holds: err = %v", err)
	}
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: short.ID, Grabs: 1, Outcome: store.FinishRetry, Status: "failure", Message: "lease expired", Expired: true}))(t)
	if got := must(s.JobGet(ctx, "q", short.ID))(t); got.State != store.StateWaiting || got.FailCount != 1 {
		t.Fatalf("expired job = %+v, want waiting with one failure", got)
	}
	if _, err := s.JobResult(ctx, short.ID, 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expiry recorded a result: err = %v", err)
	}
	if ex := must(s.JobsExpired(ctx, []string{"q"}))(t); len(ex) != 0 {
		t.Fatalf("JobsExpired = %v after the expiry", ex)
	}
}

func testLeasesPurge(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	j := grabOne(t, s, "q", 0)
	must(s.JobFinish(ctx, &store.JobFinishParams{ID: j.ID, Grabs: 1, Outcome: store.FinishDelete, Status: "success"}))(t)
	if n := must(s.JobResultsPurge(ctx, time.Hour))(t); n != 0 {
		t.Fatalf("purged %d results younger than an hour", n)
	}
	time.Sleep(20 * time.Millisecond)
	if n := must(s.JobResultsPurge(ctx, 10*time.Millisecond))(t); n != 1 {
		t.Fatalf("purged %d results, want 1", n)
	}
	if _, err := s.JobResult(ctx, j.ID, 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("purged result still there: %v", err)
	}
}

func testLeasesCancel(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	// A waiting job is removed, and nothing is recorded.
	waiting := insert(t, s, "q", 1, time.Hour)[0]
	if _, err := s.JobCancel(ctx, "other", waiting); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobCancel in another queue: err = %v", err)
	}
	if j := must(s.JobCancel(ctx, "q", waiting))(t); j.ID != waiting || j.State != store.StateWaiting {
		t.Fatalf("JobCancel of a deferred job returned %+v", j)
	}
	if _, err := s.JobGet(ctx, "q", waiting); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancelled job still there: %v", err)
	}
	if _, err := s.JobCancel(ctx, "q", waiting); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second JobCancel: err = %v", err)
	}
	// A leased job is removed, and its grab's result says cancelled: its
	// worker's next heartbeat or completion finds no lease and that result.
	j := grabOne(t, s, "r", 3)
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: 1, Lease: time.Hour}))(t)
	if got := must(s.JobCancel(ctx, "r", j.ID))(t); got.State != store.StateLeased || got.Grabs != 1 || got.GrabbedBy != "n1" {
		t.Fatalf("JobCancel of a leased job returned %+v", got)
	}
	if _, err := s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: 1, Lease: time.Hour}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobLease after the cancel: err = %v", err)
	}
	if _, err := s.JobFinish(ctx, &store.JobFinishParams{ID: j.ID, Grabs: 1, Outcome: store.FinishRetry, Status: "failure"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobFinish after the cancel: err = %v", err)
	}
	if st := must(s.JobResult(ctx, j.ID, 1))(t); st != store.ResultCancelled {
		t.Fatalf("JobResult after the cancel = %q", st)
	}
	// A grabbed job (a delivery in flight) likewise; the node's
	// acknowledgement finds nothing.
	g := grabOne(t, s, "g", 0)
	if got := must(s.JobCancel(ctx, "g", g.ID))(t); got.State != store.StateGrabbed {
		t.Fatalf("JobCancel of a grabbed job returned %+v", got)
	}
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: []int64{g.ID}}))(t); n != 0 {
		t.Fatalf("the node acknowledged a cancelled job")
	}
	if st := must(s.JobResult(ctx, g.ID, 1))(t); st != store.ResultCancelled {
		t.Fatalf("JobResult of the cancelled delivery = %q", st)
	}
}

// testLeasesCancelRace cancels leased jobs while their workers complete
// them: for each job exactly one of the two takes effect.
func testLeasesCancelRace(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	const n = 20
	var jobs []*store.Job
	for range n {
		j := grabOne(t, s, "q", 0)
		must(s.JobLease(ctx, &store.JobLeaseParams{ID: j.ID, Grabs: j.Grabs, Lease: time.Hour}))(t)
		jobs = append(jobs, j)
	}
	var wg sync.WaitGroup
	cancelled := make([]error, n)
	finished := make([]error, n)
	for i, j := range jobs {
		wg.Go(func() { _, cancelled[i] = s.JobCancel(ctx, "q", j.ID) })
		wg.Go(func() {
			_, finished[i] = s.JobFinish(ctx, &store.JobFinishParams{ID: j.ID, Grabs: j.Grabs, Outcome: store.FinishDelete, Status: "success"})
		})
	}
	wg.Wait()
	for i, j := range jobs {
		c, f := cancelled[i], finished[i]
		if c != nil && !errors.Is(c, store.ErrNotFound) || f != nil && !errors.Is(f, store.ErrNotFound) {
			t.Fatalf("job %d: cancel %v, finish %v", j.ID, c, f)
		}
		if (c == nil) == (f == nil) {
			t.Fatalf("job %d: cancel err %v and finish err %v: want exactly one to take effect", j.ID, c, f)
		}
		want := "success"
		if c == nil {
			want = store.ResultCancelled
		}
		if st := must(s.JobResult(ctx, j.ID, j.Grabs))(t); st != want {
			t.Fatalf("job %d: result %q, want %q", j.ID, st, want)
		}
	}
	if left := must(s.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 10}))(t); len(left) != 0 {
		t.Fatalf("jobs left: %v", fmt.Sprint(jobIDs(left)))
	}
}
