package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// pullTests are the conformance tests of pull queues: the queue's
// delivery, grabs that lease their jobs to a puller, the release of jobs
// a puller did not take, and the list of a queue's leases.
var pullTests = []conformanceTest{
	{"Pull_QueueDelivery", testPullQueueDelivery},
	{"Pull_GrabLeased", testPullGrabLeased},
	{"Pull_ReleaseLeased", testPullReleaseLeased},
	{"Pull_JobsLeased", testPullJobsLeased},
	{"Pull_JobsSucceed", testPullJobsSucceed},
}

func testPullQueueDelivery(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	if q := putQueue(t, s, "push"); q.Delivery != store.DeliveryPush || q.Pull() {
		t.Fatalf("a queue put without a delivery: %+v, want push", q)
	}
	q := must(s.QueuePut(ctx, &store.Queue{Name: "pull", PollingInterval: 200, MaxWorkers: 3, Delivery: store.DeliveryPull}))(t)
	if !q.Pull() {
		t.Fatalf("QueuePut pull = %+v", q)
	}
	if q := must(s.QueueGet(ctx, "pull"))(t); !q.Pull() {
		t.Fatalf("QueueGet = %+v, want pull", q)
	}
	// QueueEnsure keeps the stored delivery; QueuePut replaces it.
	if q := must(s.QueueEnsure(ctx, &store.Queue{Name: "pull", PollingInterval: 1, MaxWorkers: 1}))(t); !q.Pull() {
		t.Fatalf("QueueEnsure changed the delivery: %+v", q)
	}
	if q := must(s.QueueEnsure(ctx, &store.Queue{Name: "new", PollingInterval: 1, MaxWorkers: 1, Delivery: store.DeliveryPull}))(t); !q.Pull() {
		t.Fatalf("QueueEnsure of a new pull queue = %+v", q)
	}
	ok(t, s.NodeHeartbeat(ctx, &store.NodeHeartbeatParams{ID: "n1", Host: "h", TTL: time.Minute}))
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n1"}))
	list := ledBy(t, s, "n1")
	var pulls []string
	for _, q := range list {
		if q.Pull() {
			pulls = append(pulls, q.Name)
		}
	}
	if !slices.Equal(pulls, []string{"new", "pull"}) {
		t.Fatalf("QueuesLed shows pull queues %v, want [new pull]", pulls)
	}
	q = must(s.QueuePut(ctx, &store.Queue{Name: "pull", PollingInterval: 200, MaxWorkers: 3}))(t)
	if q.Pull() {
		t.Fatalf("QueuePut back to push = %+v", q)
	}
}

func testPullGrabLeased(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	insert(t, s, "q", 3, 0)
	before := must(s.Now(ctx))(t)
	jobs := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 2, Lease: time.Hour, Leased: true}))(t)
	if len(jobs) != 2 {
		t.Fatalf("grabbed %d, want 2", len(jobs))
	}
	for _, j := range jobs {
		got := must(s.JobGet(ctx, "q", j.ID))(t)
		if j.State != store.StateLeased || got.State != store.StateLeased || got.Grabs != 1 || j.Grabs != 1 ||
			got.GrabbedTil == nil || got.GrabbedTil.Sub(before) < time.Hour-time.Second || !got.GrabbedTil.Equal(*j.GrabbedTil) {
			t.Fatalf("leased grab returned %+v, stored %+v, want leased an hour, grab 1", j, got)
		}
	}
	// Held by its lease, not by the node's grabs: the node's extension,
	// rescue and acknowledgements leave it alone; a lease token's
	// heartbeat holds it.
	if n := must(s.JobsExtend(ctx, &store.JobsExtendParams{Queue: "q", Node: "n1", Lease: time.Second}))(t); n != 0 {
		t.Fatalf("JobsExtend moved %d leased jobs", n)
	}
	if n := must(s.JobsRescue(ctx, "q"))(t); n != 0 {
		t.Fatalf("JobsRescue took %d leased jobs", n)
	}
	if n := must(s.JobsComplete(ctx, &store.JobsCompleteParams{Node: "n1", IDs: []int64{jobs[0].ID}}))(t); n != 0 {
		t.Fatalf("JobsComplete deleted %d leased jobs", n)
	}
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: jobs[0].ID, Grabs: 1, Lease: time.Minute}))(t)
	// The third job is still there for the next grab, a plain one.
	rest := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 5, Lease: time.Minute}))(t)
	if len(rest) != 1 || rest[0].State != store.StateGrabbed {
		t.Fatalf("the next grab took %+v, want the third job grabbed", rest)
	}
}

func testPullReleaseLeased(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	insert(t, s, "q", 2, 0)
	leased := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Hour, Leased: true}))(t)
	grabbed := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Hour}))(t)
	ids := []int64{leased[0].ID, grabbed[0].ID}
	// Another node's release, or a release of the wrong state, does nothing.
	if n := must(s.JobsRelease(ctx, &store.JobsReleaseParams{Node: "n2", IDs: ids, Leased: true}))(t); n != 0 {
		t.Fatalf("another node released %d", n)
	}
	if n := must(s.JobsRelease(ctx, &store.JobsReleaseParams{Node: "n1", IDs: ids, Leased: true}))(t); n != 1 {
		t.Fatalf("released %d leased jobs, want 1", n)
	}
	got := must(s.JobGet(ctx, "q", leased[0].ID))(t)
	if got.State != store.StateWaiting || got.FailCount != 0 {
		t.Fatalf("released job = %+v, want waiting as it was", got)
	}
	if got := must(s.JobGet(ctx, "q", grabbed[0].ID))(t); got.State != store.StateGrabbed {
		t.Fatalf("a leased release put back a grabbed job: %+v", got)
	}
	again := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Hour, Leased: true}))(t)
	if len(again) != 1 || again[0].ID != leased[0].ID || again[0].Grabs != 2 {
		t.Fatalf("grab after the release = %+v, want job %d, grab 2", again, leased[0].ID)
	}
	// The first lease's grab no longer holds it.
	if _, err := s.JobHeld(ctx, leased[0].ID, 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("JobHeld of the released grab: err = %v", err)
	}
}

func testPullJobsLeased(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	putQueue(t, s, "other")
	if got := must(s.JobsLeased(ctx, "q"))(t); len(got) != 0 {
		t.Fatalf("JobsLeased of an empty queue = %v", got)
	}
	insert(t, s, "q", 4, 0)
	insert(t, s, "other", 1, 0)
	leased := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 2, Lease: time.Hour, Leased: true}))(t)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Hour}))(t)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "other", Node: "n1", Limit: 1, Lease: time.Hour, Leased: true}))(t)
	// An expired lease still counts until it is failed.
	must(s.JobLease(ctx, &store.JobLeaseParams{ID: leased[1].ID, Grabs: 1, Lease: time.Microsecond}))(t)
	got := must(s.JobsLeased(ctx, "q"))(t)
	slices.SortFunc(got, func(a, b store.JobGrab) int { return int(a.ID - b.ID) })
	want := []store.JobGrab{{ID: leased[0].ID, Grabs: 1}, {ID: leased[1].ID, Grabs: 1}}
	if !slices.Equal(got, want) {
		t.Fatalf("JobsLeased = %v, want %v", got, want)
	}
}

func testPullJobsSucceed(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "q")
	insert(t, s, "q", 3, 0)
	leased := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 2, Lease: time.Hour, Leased: true}))(t)
	grabbed := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n1", Limit: 1, Lease: time.Hour}))(t)
	a, b, c := leased[0], leased[1], grabbed[0]
	if got := must(s.JobsSucceed(ctx, &store.JobsSucceedParams{Status: "success"}))(t); len(got) != 0 {
		t.Fatalf("JobsSucceed of nothing = %v", got)
	}
	got := must(s.JobsSucceed(ctx, &store.JobsSucceedParams{Status: "success", Grabs: []store.JobGrab{
		{ID: a.ID, Grabs: a.Grabs},
		{ID: b.ID, Grabs: b.Grabs + 1}, // another grab's completion
		{ID: c.ID, Grabs: c.Grabs},
		{ID: a.ID, Grabs: a.Grabs}, // the same completion twice in one batch
		{ID: 999999, Grabs: 1},
	}}))(t)
	if want := []string{"q", "", "q", "", ""}; !slices.Equal(got, want) {
		t.Fatalf("JobsSucceed = %q, want %q", got, want)
	}
	for _, j := range []*store.Job{a, c} {
		if _, err := s.JobGet(ctx, "q", j.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("job %d after its success: err = %v, want ErrNotFound", j.ID, err)
		}
		if r := must(s.JobResult(ctx, j.ID, j.Grabs))(t); r != "success" {
			t.Fatalf("result of job %d = %q, want success", j.ID, r)
		}
	}
	if j := must(s.JobGet(ctx, "q", b.ID))(t); j.State != store.StateLeased {
		t.Fatalf("job %d completed by another grab: %+v, want still leased", b.ID, j)
	}
	if _, err := s.JobResult(ctx, b.ID, b.Grabs+1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a result recorded for a grab that held nothing: err = %v", err)
	}
	// Again: nothing is held any more, and nothing changes.
	if got := must(s.JobsSucceed(ctx, &store.JobsSucceedParams{Status: "success", Grabs: []store.JobGrab{{ID: a.ID, Grabs: a.Grabs}}}))(t); got[0] != "" {
		t.Fatalf("JobsSucceed of a job already done = %q", got)
	}
}
