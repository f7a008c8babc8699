package client_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/rowqtype"
)

// TestClient_FinishedJobs: a pull queue that keeps its finished jobs; a
// job completed with a result reads back finished with it, and the
// listing pages and filters the history.
func TestClient_FinishedJobs(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			c, _ := startServer(t, dialect)
			ctx := t.Context()
			q, err := c.PutQueue(ctx, "q", &rowqtype.QueueRequest{Delivery: new("pull"), KeepFinished: new(3600)})
			if err != nil || q.KeepFinished != 3600 {
				t.Fatalf("PutQueue = %+v, %v", q, err)
			}
			if _, err := c.PutRouting(ctx, "cat", "q"); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{Payload: json.RawMessage(`{"n":1}`)}); err != nil {
					t.Fatal(err)
				}
			}
			jobs, err := c.Lease(ctx, "q", &rowqtype.LeaseRequest{Max: new(2), Wait: new(10.0)})
			if err != nil || len(jobs) != 2 {
				t.Fatalf("Lease = %d jobs, %v", len(jobs), err)
			}
			for i, j := range jobs {
				done := &rowqtype.JobCompletion{LeaseToken: j.LeaseToken, Status: "success", Result: json.RawMessage(`{"sum":42}`)}
				if i == 1 {
					done = &rowqtype.JobCompletion{LeaseToken: j.LeaseToken, Status: "permanent-failure", Message: "no"}
				}
				if _, err := c.Complete(ctx, j.ID, done); err != nil {
					t.Fatal(err)
				}
			}
			f, err := c.FinishedJob(ctx, "q", jobs[0].ID)
			if err != nil || f.Status != rowqtype.FinishedSucceeded || string(f.Result) != `{"sum":42}` || f.Attempts != 1 {
				t.Fatalf("FinishedJob = %+v, %v", f, err)
			}
			page, err := c.FinishedJobs(ctx, "q", &client.FinishedOptions{Limit: 1})
			if err != nil || len(page.FinishedJobs) != 1 || page.NextCursor == "" {
				t.Fatalf("FinishedJobs limit 1 = %+v, %v", page, err)
			}
			next, err := c.FinishedJobs(ctx, "q", &client.FinishedOptions{Limit: 1, Cursor: page.NextCursor})
			if err != nil || len(next.FinishedJobs) != 1 || next.FinishedJobs[0].ID == page.FinishedJobs[0].ID || next.NextCursor != "" {
				t.Fatalf("FinishedJobs second page = %+v, %v", next, err)
			}
			failed, err := c.FinishedJobs(ctx, "q", &client.FinishedOptions{Status: rowqtype.FinishedFailed, Category: "cat",
				Since: time.Now().Add(-time.Hour), Until: time.Now().Add(time.Hour)})
			if err != nil || len(failed.FinishedJobs) != 1 || failed.FinishedJobs[0].ID != jobs[1].ID || failed.FinishedJobs[0].Message != "no" {
				t.Fatalf("FinishedJobs failed = %+v, %v", failed, err)
			}
		})
	}
}
