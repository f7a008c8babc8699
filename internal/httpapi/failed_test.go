package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
)

// failEntries stores n failed jobs of queue through the store and returns
// their log entries, oldest first.
func failEntries(t *testing.T, st store.Store, queue string, n int) []*store.FailedJob {
	t.Helper()
	ctx := context.Background()
	ps := make([]*store.JobInsertParams, n)
	for i := range ps {
		ps[i] = &store.JobInsertParams{Queue: queue, Category: "cat", URL: "http://w/", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i)),
			MaxRetries: 2, RetryDelay: 5, Timeout: 7, JobOptions: store.JobOptions{Priority: 9}}
	}
	ids, err := st.JobsInsert(ctx, ps)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: queue, Node: "n", Limit: n, Lease: time.Minute}); err != nil {
		t.Fatal(err)
	}
	out := make([]*store.FailedJob, n)
	for i, id := range ids {
		if out[i], err = st.JobFail(ctx, &store.JobFailParams{ID: id, Node: "n", Status: "permanent-failure", Code: 500}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestFailedJobs_RetryAndDelete(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		fs := failEntries(t, b.st, "q", 6)

		var j pushedAnswer
		b.ok(t, "POST", fmt.Sprintf("/queue/q/failed/%d/retry", fs[0].ID), "", &j)
		if j.ID != fs[0].JobID || j.QueueName != "q" || string(j.Payload) != `{"i":0}` || j.MaxRetries != 2 || j.RetryDelay != 5 || *j.Priority != 9 || j.RunAfter != 0 {
			t.Fatalf("retry answer = %+v, want job %d with its settings", j, fs[0].JobID)
		}
		msg := errorMessage(t, b.do(t, "POST", fmt.Sprintf("/queue/q/failed/%d/retry", fs[0].ID), ""), http.StatusNotFound)
		if !strings.Contains(msg, "id") {
			t.Fatalf("second retry error %q does not name id", msg)
		}

		var n map[string]int
		b.ok(t, "POST", "/queue/q/failed/retry", fmt.Sprintf(`{"ids":[%d,%d,999999]}`, fs[1].ID, fs[2].ID), &n)
		if n["retried"] != 2 {
			t.Fatalf("bulk retry of 2 ids = %v", n)
		}
		b.ok(t, "POST", "/queue/q/failed/retry", `{"ids":[]}`, &n)
		if n["retried"] != 0 {
			t.Fatalf("bulk retry of no ids = %v", n)
		}
		if got := countJobs(t, b.st, "q"); got != 3 {
			t.Fatalf("queue holds %d jobs after 3 retries", got)
		}
		b.ok(t, "DELETE", "/queue/q/failed", fmt.Sprintf(`{"ids":[%d]}`, fs[3].ID), &n)
		if n["deleted"] != 1 {
			t.Fatalf("bulk delete of 1 id = %v", n)
		}
		b.ok(t, "DELETE", "/queue/q/failed", "", &n)
		if n["deleted"] != 2 {
			t.Fatalf("bulk delete of all = %v, want 2", n)
		}
		for _, f := range fs {
			if _, err := b.st.FailedJobGet(t.Context(), "q", f.ID); err == nil {
				t.Fatalf("entry %d still in the log", f.ID)
			}
		}
		b.ok(t, "POST", "/queue/q/failed/retry", "", &n)
		if n["retried"] != 0 {
			t.Fatalf("bulk retry of an empty log = %v", n)
		}
	})
}

// TestFailedJobs_BulkRetryManyChunks retries more entries than one
// transaction takes.
func TestFailedJobs_BulkRetryManyChunks(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		b := setupDialect(t, dialect, nil)
		failEntries(t, b.st, "q", 1100)
		var n map[string]int
		b.ok(t, "POST", "/queue/q/failed/retry", "", &n)
		if n["retried"] != 1100 {
			t.Fatalf("bulk retry = %v, want 1100", n)
		}
		if got := countJobs(t, b.st, "q"); got != 1100 {
			t.Fatalf("queue holds %d jobs, want 1100", got)
		}
	})
}
