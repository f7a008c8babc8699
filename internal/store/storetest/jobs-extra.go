package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// jobsExtraTests cover rowq's additions to the queue API: batch push with
// unique keys, priorities, settings kept through the failure log, pausing
// queues and retrying or deleting failure log entries.
var jobsExtraTests = []conformanceTest{
	{"JobsExtra_PushAndUniqueKey", testJobsPush},
	{"JobsExtra_PushUniqueKeyConcurrent", testJobsPushConcurrent},
	{"JobsExtra_PushKeysInAnyOrder", testJobsPushKeysAnyOrder},
	{"JobsExtra_InsertUniqueKeyConflict", testJobsInsertUniqueConflict},
	{"JobsExtra_GrabByPriority", testJobsGrabPriority},
	{"JobsExtra_QueuePaused", testQueuePaused},
	{"JobsExtra_FailedJobRetry", testFailedJobRetry},
	{"JobsExtra_FailedJobsBulk", testFailedJobsBulk},
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

func testQueuePaused(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	q := putQueue(t, s, "q")
	if q.Paused {
		t.Fatal("new queue is paused")
	}
	if q := must(s.QueueSetPaused(ctx, "q", true))(t); !q.Paused || q.MaxWorkers != 20 {
		t.Fatalf("QueueSetPaused(true) = %+v", q)
	}
	// Putting the queue's settings keeps the pause.
	putQueue(t, s, "q")
	must(s.QueueEnsure(ctx, &store.Queue{Name: "q", PollingInterval: 1, MaxWorkers: 1}))(t)
	if q := must(s.QueueGet(ctx, "q"))(t); !q.Paused {
		t.Fatalf("QueuePut dropped the pause: %+v", q)
	}
	heartbeat(t, s, "n", time.Minute)
	ok(t, s.QueuesClaim(ctx, &store.QueuesClaimParams{Node: "n"}))
	if led := must(s.QueuesLed(ctx, "n"))(t); len(led) != 1 || !led[0].Paused {
		t.Fatalf("QueuesLed = %+v, want q paused", led)
	}
	if qs := must(s.QueueList(ctx))(t); len(qs) != 1 || !qs[0].Paused {
		t.Fatalf("QueueList = %+v, want q paused", qs)
	}
	if q := must(s.QueueSetPaused(ctx, "q", false))(t); q.Paused {
		t.Fatalf("QueueSetPaused(false) = %+v", q)
	}
	if _, err := s.QueueSetPaused(ctx, "none", true); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("QueueSetPaused of a missing queue err = %v, want ErrNotFound", err)
	}
}

// failJobs inserts n jobs into queue with the given settings and moves them
// to the failure log; it returns the entries oldest first.
func failJobs(t *testing.T, s store.Store, queue string, n int, p store.JobInsertParams) []*store.FailedJob {
	t.Helper()
	ctx := ctxT(t)
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		c := p
		c.Queue, c.Payload = queue, json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		ps[i] = &c
	}
	ids := must(s.JobsInsert(ctx, ps))(t)
	must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: queue, Node: "n", Limit: n, Lease: time.Minute}))(t)
	out := make([]*store.FailedJob, n)
	for i, id := range ids {
		out[i] = must(s.JobFail(ctx, &store.JobFailParams{ID: id, Node: "n", Status: "permanent-failure", Code: 500, Message: "no"}))(t)
	}
	return out
}

func testFailedJobRetry(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	settings := store.JobInsertParams{Category: "c", URL: "http://a/", Timeout: 9, MaxRetries: 4, RetryDelay: 2,
		JobOptions: store.JobOptions{Priority: 3, UniqueKey: "u", RetryBackoff: store.BackoffExponential, RetryDelayMax: 50, RetryJitter: 0.5}}
	f := failJobs(t, s, "q", 1, settings)[0]
	got := must(s.FailedJobGet(ctx, "q", f.ID))(t)
	wantExtra := settings.JobOptions
	wantExtra.UniqueKey = ""
	if got.Timeout != 9 || got.MaxRetries != 4 || got.RetryDelay != 2 || got.JobOptions != wantExtra || got.FailCount != 1 {
		t.Fatalf("failure log entry = %+v, want the job's settings without its key", got)
	}
	if _, err := s.FailedJobRetry(ctx, "other", f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("FailedJobRetry in another queue err = %v, want ErrNotFound", err)
	}
	j := must(s.FailedJobRetry(ctx, "q", f.ID))(t)
	if j.ID != f.JobID || j.State != store.StateWaiting || j.FailCount != 0 || j.Timeout != 9 || j.MaxRetries != 4 ||
		j.RetryDelay != 2 || j.JobOptions != wantExtra || string(j.Payload) != `{"i":0}` || !j.CreatedAt.Equal(f.CreatedAt) {
		t.Fatalf("FailedJobRetry = %+v, want job %d back with its settings and fail_count 0", j, f.JobID)
	}
	if _, err := s.FailedJobGet(ctx, "q", f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("retried entry still in the log: %v", err)
	}
	if _, err := s.FailedJobRetry(ctx, "q", f.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second FailedJobRetry err = %v, want ErrNotFound", err)
	}
	// Due now: the next grab takes it.
	if jobs := must(s.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: "n", Limit: 10, Lease: time.Minute}))(t); len(jobs) != 1 || jobs[0].ID != f.JobID {
		t.Fatalf("grab after retry = %v, want job %d", jobIDs(jobs), f.JobID)
	}
}

func testFailedJobsBulk(t *testing.T, s store.Store) {
	ctx := ctxT(t)
	fs := failJobs(t, s, "q", 7, store.JobInsertParams{Category: "c", URL: "http://a/", MaxRetries: 1})
	failJobs(t, s, "other", 2, store.JobInsertParams{Category: "c", URL: "http://a/"})

	// Retry two named entries (and one of another queue, which is left alone).
	others := failJobs(t, s, "other", 1, store.JobInsertParams{Category: "c", URL: "http://a/"})
	res := must(s.FailedJobsRetry(ctx, &store.FailedJobsBulkParams{Queue: "q", IDs: []int64{fs[1].ID, fs[4].ID, others[0].ID}, Limit: 10}))(t)
	if res.Count != 2 || res.Last != fs[1].ID {
		t.Fatalf("FailedJobsRetry(ids) = %+v, want 2 retried, last %d", res, fs[1].ID)
	}
	for _, f := range []*store.FailedJob{fs[1], fs[4]} {
		if j := must(s.JobGet(ctx, "q", f.JobID))(t); j.State != store.StateWaiting || j.FailCount != 0 || j.MaxRetries != 1 {
			t.Fatalf("retried job = %+v", j)
		}
	}
	must(s.FailedJobGet(ctx, "other", others[0].ID))(t)

	// Walk the rest of the log, newest first, two at a time.
	var deleted []int64
	var before int64
	for {
		res := must(s.FailedJobsDelete(ctx, &store.FailedJobsBulkParams{Queue: "q", Before: before, Limit: 2}))(t)
		if res.Count == 0 {
			break
		}
		if before > 0 && res.Last >= before {
			t.Fatalf("Last = %d, not below Before = %d", res.Last, before)
		}
		deleted = append(deleted, res.Last)
		before = res.Last
	}
	if want := fmt.Sprint([]int64{fs[5].ID, fs[2].ID, fs[0].ID}); fmt.Sprint(deleted) != want {
		t.Fatalf("delete walk stopped at %v, want %s", deleted, want)
	}
	for _, f := range fs {
		if _, err := s.FailedJobGet(ctx, "q", f.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("entry %d still in the log: %v", f.ID, err)
		}
	}
	// The other queue's log is untouched; an empty id list does nothing.
	if res := must(s.FailedJobsDelete(ctx, &store.FailedJobsBulkParams{Queue: "other", IDs: []int64{}, Limit: 10}))(t); res.Count != 0 {
		t.Fatalf("FailedJobsDelete(no ids) = %+v", res)
	}
	if res := must(s.FailedJobsRetry(ctx, &store.FailedJobsBulkParams{Queue: "other", Limit: 10}))(t); res.Count != 3 {
		t.Fatalf("FailedJobsRetry(all of other) = %+v, want 3", res)
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
