package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/client"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/rowqtype"
)

// pullSetup makes pull queue q with category cat → q.
func pullSetup(t *testing.T, c *client.Client, maxWorkers int) {
	t.Helper()
	ctx := t.Context()
	if _, err := c.PutQueue(ctx, "q", &rowqtype.QueueRequest{Delivery: new("pull"), MaxWorkers: &maxWorkers}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutRouting(ctx, "cat", "q"); err != nil {
		t.Fatal(err)
	}
}

// TestClient_Lease: Lease gets a pull queue's jobs with their tokens, and
// none after its wait; Complete ends them.
func TestClient_Lease(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			c, _ := startServer(t, dialect)
			ctx := t.Context()
			pullSetup(t, c, 10)
			for range 3 {
				if _, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{Payload: []byte(`"x"`)}); err != nil {
					t.Fatal(err)
				}
			}
			jobs, err := c.Lease(ctx, "q", &rowqtype.LeaseRequest{Max: new(2), Wait: new(5.0)})
			if err != nil || len(jobs) != 2 || jobs[0].LeaseToken == "" || jobs[0].Attempt != 1 {
				t.Fatalf("Lease = %+v, %v; want 2 jobs", jobs, err)
			}
			for _, j := range jobs {
				if _, err := c.Complete(ctx, j.ID, &rowqtype.JobCompletion{LeaseToken: j.LeaseToken, Status: "success"}); err != nil {
					t.Fatal(err)
				}
			}
			if jobs, err := c.Lease(ctx, "q", nil); err != nil || len(jobs) != 1 {
				t.Fatalf("Lease(nil) = %+v, %v; want the third job", jobs, err)
			}
			began := time.Now()
			if jobs, err := c.Lease(ctx, "q", &rowqtype.LeaseRequest{Wait: new(0.5)}); err != nil || len(jobs) != 0 {
				t.Fatalf("Lease of an empty queue = %+v, %v", jobs, err)
			} else if time.Since(began) < 400*time.Millisecond {
				t.Fatalf("Lease with wait 0.5 answered after %v", time.Since(began))
			}
			var e *client.Error
			if _, err := c.Lease(ctx, "q", &rowqtype.LeaseRequest{Max: new(0)}); !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("Lease with max 0: %v, want a 400", err)
			}
		})
	}
}

// TestWorker_RunsCompletesAndStops: a Worker with 4 slots works every job
// of the queue: a nil result completes it, an error retries it, a
// Permanent error fails it for good; the leases of slow jobs are renewed
// while they run. Cancelling Run's context stops the pulling, and the
// handler in flight finishes and completes its job before Run returns.
func TestWorker_RunsCompletesAndStops(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			c, _ := startServer(t, dialect)
			ctx := t.Context()
			pullSetup(t, c, 4)
			push := func(payload string, retries int) int64 {
				j, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{Payload: []byte(`"` + payload + `"`), MaxRetries: &retries})
				if err != nil {
					t.Fatal(err)
				}
				return j.ID
			}
			for range 10 {
				push("ok", 0)
			}
			flaky := push("flaky", 1)
			bad := push("bad", 3)
			slow := push("slow", 0)

			var (
				mu             sync.Mutex
				attempts       = map[int64][]int{}
				inFlight, most int
				all            = make(chan struct{})
				allOnce        sync.Once
			)
			w := &client.Worker{Client: c, Queue: "q", Concurrency: 4, Lease: 3 * time.Second, Wait: time.Second,
				Handler: func(ctx context.Context, j *rowqtype.LeasedJob) error {
					mu.Lock()
					attempts[j.ID] = append(attempts[j.ID], j.Attempt)
					inFlight++
					most = max(most, inFlight)
					if len(attempts) == 13 && len(attempts[flaky]) == 2 {
						allOnce.Do(func() { close(all) })
					}
					mu.Unlock()
					defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
					switch {
					case j.ID == slow:
						// Longer than its 3 s lease: heartbeats keep it.
						time.Sleep(5 * time.Second)
					case j.ID == flaky && j.Attempt == 1:
						return errors.New("try again")
					case j.ID == bad:
						return client.Permanent(errors.New("bad input"))
					}
					return nil
				}}
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- w.Run(runCtx) }()
			select {
			case <-all:
			case <-time.After(60 * time.Second):
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("the worker ran %v, want all 13 jobs and the flaky one twice", attempts)
			}
			var last *rowqtype.QueueStats
			waitFor(t, "every job done", func() bool {
				s, err := c.QueueStats(ctx, "q")
				last = s
				return err == nil && s.TotalSuccesses == 12 && s.TotalFailures == 2 && s.TotalPermanentFailures == 1
			}, func() string { return fmt.Sprintf("stats %+v", last) })
			mu.Lock()
			if most > 4 {
				t.Errorf("%d handlers ran at once, Concurrency 4", most)
			}
			if got := attempts[slow]; len(got) != 1 {
				t.Errorf("the slow job ran %v: its lease was not kept", got)
			}
			if got := attempts[bad]; len(got) != 1 {
				t.Errorf("the permanently failed job ran %v", got)
			}
			mu.Unlock()

			stop()
			if err := <-ran; !errors.Is(err, context.Canceled) {
				t.Fatalf("Run = %v, want context.Canceled", err)
			}
		})
	}
}

// TestWorker_StopWaitsForHandlers: when Run's context ends, the worker
// pulls no more jobs, and Run returns only once the handler in flight has
// finished and its job is completed.
func TestWorker_StopWaitsForHandlers(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			c, _ := startServer(t, dialect)
			ctx := t.Context()
			pullSetup(t, c, 4)
			j, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{})
			if err != nil {
				t.Fatal(err)
			}
			started, release := make(chan struct{}), make(chan struct{})
			w := &client.Worker{Client: c, Queue: "q", Concurrency: 2, Wait: time.Second,
				Handler: func(ctx context.Context, _ *rowqtype.LeasedJob) error {
					close(started)
					<-release
					return ctx.Err() // nil: the lease was kept
				}}
			runCtx, stop := context.WithCancel(ctx)
			ran := make(chan error, 1)
			go func() { ran <- w.Run(runCtx) }()
			select {
			case <-started:
			case <-time.After(30 * time.Second):
				t.Fatal("the handler did not start")
			}
			stop()
			select {
			case err := <-ran:
				t.Fatalf("Run returned %v with a handler in flight", err)
			case <-time.After(300 * time.Millisecond):
			}
			later, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{})
			if err != nil {
				t.Fatal(err)
			}
			close(release)
			select {
			case err := <-ran:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Run = %v, want context.Canceled", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return once its handler finished")
			}
			if _, err := c.Job(ctx, "q", j.ID); !client.IsNotFound(err) {
				t.Fatalf("the job in flight at the stop: %v, want it completed (404)", err)
			}
			// The server may notice the stopped worker's lease request gone
			// only after it leased the job to it: it then gives it back.
			waitFor(t, "a job enqueued after the stop waiting", func() bool {
				got, err := c.Job(ctx, "q", later.ID)
				return err == nil && got.Status == rowqtype.JobStatusClaimed
			})
		})
	}
}

// waitFor polls cond until it holds, failing the test after 30 s with
// what and the state say tells.
func waitFor(t *testing.T, what string, cond func() bool, state ...func() string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			for _, s := range state {
				what += "; " + s()
			}
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestWorker_StopsWhenRefused: a lease request refused for good (a queue
// that does not exist, a push queue) ends Run with that error instead of
// asking again forever.
func TestWorker_StopsWhenRefused(t *testing.T) {
	t.Parallel()
	c, _ := startServer(t, "sqlite")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := c.PutQueue(ctx, "push", &rowqtype.QueueRequest{}); err != nil {
		t.Fatal(err)
	}
	for queue, status := range map[string]int{"nosuch": 404, "push": 409} {
		w := &client.Worker{Client: c, Queue: queue, Handler: func(context.Context, *rowqtype.LeasedJob) error { return nil }}
		err := w.Run(ctx)
		var e *client.Error
		if !errors.As(err, &e) || e.Status != status || ctx.Err() != nil {
			t.Fatalf("Run on queue %q = %v (ctx %v), want the server's %d", queue, err, ctx.Err(), status)
		}
	}
}

// TestWorker_ResultHandlerKeepsResults: a ResultHandler's result is sent
// with the success and kept in the job's history; one that cannot be
// encoded, or that the server refuses as over --max-result-bytes, is
// dropped with a note and the success stands.
func TestWorker_ResultHandlerKeepsResults(t *testing.T) {
	t.Parallel()
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			c, _ := startServer(t, dialect)
			ctx := t.Context()
			if _, err := c.PutQueue(ctx, "q", &rowqtype.QueueRequest{Delivery: new("pull"), MaxWorkers: new(4), KeepFinished: new(3600)}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutRouting(ctx, "cat", "q"); err != nil {
				t.Fatal(err)
			}
			ids := map[string]int64{}
			for _, p := range []string{"map", "raw", "none", "huge", "bad"} {
				j, err := c.PushJob(ctx, "cat", &rowqtype.JobRequest{Payload: []byte(`"` + p + `"`)})
				if err != nil {
					t.Fatal(err)
				}
				ids[p] = j.ID
			}
			w := &client.Worker{Client: c, Queue: "q", Concurrency: 2, Wait: time.Second,
				ResultHandler: func(_ context.Context, j *rowqtype.LeasedJob) (any, error) {
					switch string(j.Payload) {
					case `"map"`:
						return map[string]int{"n": 1}, nil
					case `"raw"`:
						return json.RawMessage(`[1,2]`), nil
					case `"huge"`:
						return strings.Repeat("x", 70<<10), nil // over the default 64 KiB
					case `"bad"`:
						return func() {}, nil
					}
					return nil, nil
				}}
			runCtx, stop := context.WithCancel(ctx)
			defer stop()
			go w.Run(runCtx)
			got := map[string]*rowqtype.FinishedJob{}
			waitFor(t, "every job's history", func() bool {
				for p, id := range ids {
					if f, err := c.FinishedJob(ctx, "q", id); err == nil && f.Status == "succeeded" {
						got[p] = f
					}
				}
				return len(got) == len(ids)
			})
			for p, want := range map[string]string{"map": `{"n":1}`, "raw": `[1,2]`, "none": ``, "huge": ``, "bad": ``} {
				f := got[p]
				if f.Status != "succeeded" || string(f.Result) != want {
					t.Errorf("%s: status %q, result %s; want succeeded, %s", p, f.Status, f.Result, want)
				}
				if dropped := strings.HasPrefix(f.Message, "result dropped: "); dropped != (p == "huge" || p == "bad") {
					t.Errorf("%s: message %q", p, f.Message)
				}
			}
		})
	}
}
