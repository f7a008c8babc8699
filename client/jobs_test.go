package client_test

import (
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/server/servertest"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/rowqtype"
)

// startServer starts a rowq node on a fresh database of the dialect and
// returns a client of it and the node.
func startServer(t *testing.T, dialect string) (*client.Client, *server.Server) {
	t.Helper()
	cfg := config.Default()
	cfg.Bind = "127.0.0.1:0"
	cfg.DatabaseURL = dbtest.URL(t, dialect)
	cfg.QueueDefault = ""
	cfg.ConfigRefreshInterval = 100 * time.Millisecond
	s := servertest.Start(t, cfg)
	return client.New(s.Addr(), nil), s
}

func TestClient_JobsExtra(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			c, s := startServer(t, dialect)
			ctx := t.Context()
			// A paused queue, so that no job is delivered (to a worker that
			// does not exist) while the test looks at them.
			if _, err := c.PutQueue(ctx, "q", &rowqtype.QueueRequest{MaxWorkers: new(2), Paused: new(true)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutRouting(ctx, "cat", "q"); err != nil {
				t.Fatal(err)
			}
			q, err := c.Queue(ctx, "q")
			if err != nil || !q.Paused {
				t.Fatalf("Queue = %+v, %v; want paused", q, err)
			}

			jobs, err := c.PushJobs(ctx, []*rowqtype.BatchJob{
				{Category: "cat", JobRequest: rowqtype.JobRequest{URL: "http://127.0.0.1:1/", Priority: new(7), UniqueKey: new("k"),
					RetryBackoff: new("exponential"), RetryDelay: new(1), RetryDelayMax: new(8), RetryJitter: new(0.5), MaxRetries: new(3)}},
				{Category: "cat", JobRequest: rowqtype.JobRequest{URL: "http://127.0.0.1:1/", UniqueKey: new("k")}},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) != 2 || *jobs[0].Existing || !*jobs[1].Existing || jobs[1].ID != jobs[0].ID || jobs[0].Priority != 7 ||
				jobs[0].RetryBackoff != "exponential" || jobs[0].RetryDelayMax != 8 || jobs[0].RetryJitter != 0.5 || jobs[0].UniqueKey != "k" {
				t.Fatalf("PushJobs = %+v %+v", jobs[0], jobs[1])
			}
			one, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{URL: "http://127.0.0.1:1/", UniqueKey: new("k")})
			if err != nil || !*one.Existing || one.ID != jobs[0].ID {
				t.Fatalf("PushJob with a pending key = %+v, %v", one, err)
			}
			if _, err := c.PushJobs(ctx, []*rowqtype.BatchJob{{Category: "cat"}}); err == nil {
				t.Fatal("PushJobs of a job without url succeeded")
			}

			// Pause and resume another queue: q must stay paused.
			if _, err := c.PutQueue(ctx, "p", &rowqtype.QueueRequest{}); err != nil {
				t.Fatal(err)
			}
			if q, err := c.PauseQueue(ctx, "p"); err != nil || !q.Paused {
				t.Fatalf("PauseQueue = %+v, %v", q, err)
			}
			if q, err := c.ResumeQueue(ctx, "p"); err != nil || q.Paused {
				t.Fatalf("ResumeQueue = %+v, %v", q, err)
			}
			if q, err := c.PauseQueue(ctx, "q"); err != nil || !q.Paused {
				t.Fatalf("PauseQueue = %+v, %v", q, err)
			}
			if _, err := c.PauseQueue(ctx, "none"); !client.IsNotFound(err) {
				t.Fatalf("PauseQueue of a missing queue err = %v, want not found", err)
			}

			// Move the job to the failure log through the store, as a
			// dispatcher would, then retry it and clear the log. The grab
			// is the node's own: a grab by a node that is not registered
			// is rescued at the queue runner's next rescue (the first turn
			// of a runner started late on a loaded machine once took it
			// between the grab and the fail).
			st, node := s.Store(), s.NodeID()
			if _, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: node, Limit: 10, Lease: time.Minute}); err != nil {
				t.Fatal(err)
			}
			f, err := st.JobFail(ctx, &store.JobFailParams{ID: jobs[0].ID, Node: node, Status: "permanent-failure"})
			if err != nil {
				t.Fatal(err)
			}
			back, err := c.RetryFailedJob(ctx, "q", f.ID)
			if err != nil || back.ID != jobs[0].ID || back.Priority != 7 || back.MaxRetries != 3 {
				t.Fatalf("RetryFailedJob = %+v, %v", back, err)
			}
			if _, err := c.RetryFailedJob(ctx, "q", f.ID); !client.IsNotFound(err) {
				t.Fatalf("second RetryFailedJob err = %v, want not found", err)
			}
			for range 2 {
				if _, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: node, Limit: 10, Lease: time.Minute}); err != nil {
					t.Fatal(err)
				}
				if _, err := st.JobFail(ctx, &store.JobFailParams{ID: jobs[0].ID, Node: node, Status: "permanent-failure"}); err != nil {
					t.Fatal(err)
				}
				if n, err := c.RetryFailedJobs(ctx, "q", nil); err != nil || n != 1 {
					t.Fatalf("RetryFailedJobs(all) = %d, %v", n, err)
				}
			}
			if _, err := st.JobsGrab(ctx, &store.JobsGrabParams{Queue: "q", Node: node, Limit: 10, Lease: time.Minute}); err != nil {
				t.Fatal(err)
			}
			f, err = st.JobFail(ctx, &store.JobFailParams{ID: jobs[0].ID, Node: node, Status: "permanent-failure"})
			if err != nil {
				t.Fatal(err)
			}
			if n, err := c.DeleteFailedJobs(ctx, "q", []int64{f.ID + 1000}); err != nil || n != 0 {
				t.Fatalf("DeleteFailedJobs(unknown id) = %d, %v", n, err)
			}
			if n, err := c.DeleteFailedJobs(ctx, "q", []int64{f.ID}); err != nil || n != 1 {
				t.Fatalf("DeleteFailedJobs(id) = %d, %v", n, err)
			}
			if n, err := c.DeleteFailedJobs(ctx, "q", nil); err != nil || n != 0 {
				t.Fatalf("DeleteFailedJobs(all) of an empty log = %d, %v", n, err)
			}
		})
	}
}
