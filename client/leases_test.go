package client_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/rowqtype"
)

// TestClient_AcceptedThenComplete: a worker accepts its jobs; the client
// heartbeats one with progress, completes it (twice), and cancels another,
// whose heartbeat then tells the worker to stop.
func TestClient_AcceptedThenComplete(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			tokens := make(chan [2]string, 2)
			w := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				tokens <- [2]string{r.Header.Get("Rowq-Job-Id"), r.Header.Get("Rowq-Lease-Token")}
				w.WriteHeader(http.StatusAccepted)
				io.WriteString(w, `{"status":"accepted","lease":300}`)
			}))
			t.Cleanup(w.Close)
			c, _ := startServer(t, dialect)
			ctx := t.Context()
			if _, err := c.PutQueue(ctx, "q", &rowqtype.QueueRequest{}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutRouting(ctx, "cat", "q"); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				if _, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{URL: w.URL}); err != nil {
					t.Fatal(err)
				}
			}
			var got [][2]string
			for range 2 {
				select {
				case d := <-tokens:
					got = append(got, d)
				case <-time.After(20 * time.Second):
					t.Fatal("no delivery")
				}
			}
			var ids [2]int64
			for i, d := range got {
				fmt.Sscan(d[0], &ids[i])
				// The acceptance is recorded after the answer.
				for deadline := time.Now().Add(10 * time.Second); ; {
					j, err := c.Job(ctx, "q", ids[i])
					if err == nil && j.Status == rowqtype.JobStatusLeased {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("job %d not leased: %+v, %v", ids[i], j, err)
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			lease, progress, msg := 600.0, 0.5, "half"
			l, err := c.Heartbeat(ctx, ids[0], &rowqtype.JobHeartbeat{LeaseToken: got[0][1], Lease: &lease, Progress: &progress, Message: &msg})
			if err != nil || l.ID != ids[0] || time.Until(l.LeaseExpiresAt) < 9*time.Minute {
				t.Fatalf("Heartbeat = %+v, %v", l, err)
			}
			if j, err := c.Job(ctx, "q", ids[0]); err != nil || j.Progress == nil || *j.Progress != 0.5 || j.Message != "half" {
				t.Fatalf("Job after the heartbeat = %+v, %v", j, err)
			}
			done := &rowqtype.JobCompletion{LeaseToken: got[0][1], Status: "success"}
			for range 2 {
				if out, err := c.Complete(ctx, ids[0], done); err != nil || out.Status != "success" {
					t.Fatalf("Complete = %+v, %v", out, err)
				}
			}
			if j, err := c.CancelJob(ctx, "q", ids[1]); err != nil || j.Status != rowqtype.JobStatusLeased {
				t.Fatalf("CancelJob = %+v, %v", j, err)
			}
			_, err = c.Heartbeat(ctx, ids[1], &rowqtype.JobHeartbeat{LeaseToken: got[1][1], Lease: &lease})
			if !client.IsConflict(err) || client.LeaseReason(err) != rowqtype.LeaseCancelled {
				t.Fatalf("Heartbeat of a cancelled job: %v (reason %q), want a 409 cancelled", err, client.LeaseReason(err))
			}
			if _, err := c.CancelJob(ctx, "q", ids[1]); !client.IsNotFound(err) {
				t.Fatalf("second CancelJob: %v, want a 404", err)
			}
		})
	}
}
