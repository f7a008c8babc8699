package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
)

// failedTests are the conformance tests of store.FailedJobStore: the failure log keeps a job's settings, and its entries go back to the jobs or away.
var failedTests = []conformanceTest{
	{"Failed_JobRetry", testFailedJobRetry},
	{"Failed_JobsBulk", testFailedJobsBulk},
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
		JobOptions: store.JobOptions{Priority: 3, UniqueKey: "u", RetryBackoff: store.BackoffExponential, RetryDelayMax: 50, RetryJitter: 0.5,
			ConcurrencyKey: "ck", ConcurrencyLimit: 1, Ordered: true}}
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
