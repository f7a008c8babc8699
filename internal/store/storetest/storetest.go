// Package storetest is the conformance suite every store dialect passes.
// A dialect's test calls Run with a function that opens a fresh, migrated
// store on a real database.
package storetest

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// NewStore opens a fresh, migrated, empty store for one test and arranges
// for it to be closed when the test ends.
type NewStore func(t *testing.T) store.Store

// Run runs every conformance test against the stores newStore opens.
func Run(t *testing.T, newStore NewStore) {
	tests := []conformanceTest{
		{"Migrate_Twice", testMigrateTwice},
		{"Migrate_Concurrent", testMigrateConcurrent},
		{"Now_IsUTCAndClose", testNow},
		{"Queue_PutGetListDelete", testQueueCRUD},
		{"Queue_Ensure", testQueueEnsure},
		{"Routing_PutGetListDelete", testRoutingCRUD},
		{"Routing_UnknownQueue", testRoutingUnknownQueue},
		{"Jobs_InsertAndGet", testJobsInsertAndGet},
		{"Jobs_GrabOrderAndLimit", testJobsGrabOrderAndLimit},
		{"Jobs_GrabSkipsDeferredAndOtherQueues", testJobsGrabSkipsDeferred},
		{"Jobs_GrabConcurrentNoDuplicates", testJobsGrabConcurrent},
		{"Jobs_CompleteOnlyByHolder", testJobsComplete},
		{"Jobs_ReleaseOnlyByHolder", testJobsRelease},
		{"Jobs_Retry", testJobsRetry},
		{"Jobs_Fail", testJobsFail},
		{"Jobs_ExtendAndRescue", testJobsExtendAndRescue},
		{"Nodes_LeadershipClaimAndTakeover", testLeadership},
		{"Nodes_ConcurrentClaimOneLeader", testLeadershipConcurrent},
	}
	tests = append(tests, inspectTests...)
	tests = append(tests, statsTests...)
	tests = append(tests, jobsExtraTests...)
	tests = append(tests, perfTests...)
	tests = append(tests, lockTests...)
	tests = append(tests, scheduleTests...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newStore(t))
		})
	}
}

// conformanceTest is one test of the suite.
type conformanceTest struct {
	name string
	fn   func(t *testing.T, s store.Store)
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// must turns a (value, error) result into the value, failing the test on
// an error: must(s.QueueGet(ctx, "q"))(t).
func must[T any](v T, err error) func(t *testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func ok(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func putQueue(t *testing.T, s store.Store, name string) *store.Queue {
	t.Helper()
	return must(s.QueuePut(ctxT(t), &store.Queue{Name: name, PollingInterval: 200, MaxWorkers: 20}))(t)
}

func insert(t *testing.T, s store.Store, queue string, n int, runAfter time.Duration) []int64 {
	t.Helper()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = &store.JobInsertParams{
			Queue: queue, Category: "cat", URL: "http://127.0.0.1:1/work",
			Payload:  json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			RunAfter: runAfter, MaxRetries: 3, RetryDelay: 1, Timeout: 5,
		}
	}
	return must(s.JobsInsert(ctxT(t), ps))(t)
}

func heartbeat(t *testing.T, s store.Store, node string, ttl time.Duration) {
	t.Helper()
	ok(t, s.NodeHeartbeat(ctxT(t), &store.NodeHeartbeatParams{ID: node, Host: node + ":8080", TTL: ttl}))
}

func testMigrateTwice(t *testing.T, s store.Store) {
	ok(t, s.Migrate(ctxT(t)))
	ok(t, s.Migrate(ctxT(t)))
}

func testMigrateConcurrent(t *testing.T, s store.Store) {
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() { errs <- s.Migrate(ctxT(t)) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		ok(t, err)
	}
}

func testNow(t *testing.T, s store.Store) {
	now := must(s.Now(ctxT(t)))(t)
	if now.Location() != time.UTC {
		t.Errorf("Now location = %v, want UTC", now.Location())
	}
	if d := time.Since(now); d > time.Minute || d < -time.Minute {
		t.Errorf("database clock is %v away from this host's", d)
	}
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
	list := must(s.QueueList(ctx))(t)
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
	if list := must(s.QueueList(ctx))(t); len(list) != 1 {
		t.Fatalf("QueueList after delete = %+v", list)
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

func testRoutingCRUD(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	putQueue(t, s, "qa")
	putQueue(t, s, "qb")
	if _, err := s.RoutingGet(ctx, "c1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RoutingGet(missing) err = %v", err)
	}
	must(s.RoutingPut(ctx, &store.Routing{JobCategory: "c2", QueueName: "qa"}))(t)
	must(s.RoutingPut(ctx, &store.Routing{JobCategory: "c1", QueueName: "qa"}))(t)
	r := must(s.RoutingPut(ctx, &store.Routing{JobCategory: "c1", QueueName: "qb"}))(t)
	if r.QueueName != "qb" {
		t.Fatalf("RoutingPut returned %+v", r)
	}
	if r := must(s.RoutingGet(ctx, "c1"))(t); r.QueueName != "qb" {
		t.Fatalf("RoutingGet after replace = %+v", r)
	}
	list := must(s.RoutingList(ctx))(t)
	if len(list) != 2 || list[0].JobCategory != "c1" || list[1].JobCategory != "c2" {
		t.Fatalf("RoutingList = %+v", list)
	}
	if r := must(s.RoutingDelete(ctx, "c1"))(t); r.QueueName != "qb" {
		t.Fatalf("RoutingDelete returned %+v", r)
	}
	if _, err := s.RoutingDelete(ctx, "c1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second RoutingDelete err = %v", err)
	}
	// Deleting a queue keeps its routings.
	must(s.QueueDelete(ctx, "qa"))(t)
	if r := must(s.RoutingGet(ctx, "c2"))(t); r.QueueName != "qa" {
		t.Fatalf("routing after queue delete = %+v", r)
	}
}

func testRoutingUnknownQueue(t *testing.T, s store.Store) {
	_, err := s.RoutingPut(ctxT(t), &store.Routing{JobCategory: "c", QueueName: "nope"})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RoutingPut to missing queue err = %v, want ErrNotFound", err)
	}
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
	a := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "alive", Limit: 2, Lease: 500 * time.Millisecond}))(t)
	d := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "dead", Limit: 2, Lease: 500 * time.Millisecond}))(t)
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
	time.Sleep(500 * time.Millisecond)
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

func jobIDs(js []*store.Job) []int64 {
	ids := make([]int64, len(js))
	for i, j := range js {
		ids[i] = j.ID
	}
	return ids
}

func sorted[T cmp.Ordered](xs []T) []T {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}
