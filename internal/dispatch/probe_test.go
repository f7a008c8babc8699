package dispatch_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/dispatch"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// countingStore counts the calls that look for jobs; everything goes to
// the real store.
type countingStore struct {
	store.Store
	grabs, probes, rescues atomic.Int64
}

func (s *countingStore) JobsRescue(ctx context.Context, queue string) (int64, error) {
	s.rescues.Add(1)
	return s.Store.JobsRescue(ctx, queue)
}

func (s *countingStore) JobsGrab(ctx context.Context, p *store.JobsGrabParams) ([]*store.Job, error) {
	s.grabs.Add(1)
	return s.Store.JobsGrab(ctx, p)
}

func (s *countingStore) JobsNextDue(ctx context.Context, queues []string) ([]store.QueueDue, error) {
	s.probes.Add(1)
	return s.Store.JobsNextDue(ctx, queues)
}

// TestIdleQueuesShareOneLook checks that idle queues are not polled one by
// one: while nothing is due, a node leading 50 queues with a 50 ms
// polling_interval looks for jobs with about one query a second in all
// (the sweep), not 50 grabs per interval, and rescues none one by one; and
// a job that becomes
// due without a wake-up (enqueued by another node, deferred, or left by a
// node that died) is still found and delivered.
func TestIdleQueuesShareOneLook(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			const queues = 50
			ctx := context.Background()
			s := idleQueues(t, dialect, queues, 50)
			w := testworker.New(t, nil)
			leadAll(t, s, dispatch.Config{RescueInterval: 300 * time.Millisecond}, queues)
			// Each runner grabs once when it starts, then parks.
			testworker.WaitFor(t, 30*time.Second, "every runner's first grab", func() bool { return s.grabs.Load() >= queues })
			time.Sleep(200 * time.Millisecond)

			grabs, probes, rescues := s.grabs.Load(), s.probes.Load(), s.rescues.Load()
			const watch = 2 * time.Second
			time.Sleep(watch)
			grabs, probes, rescues = s.grabs.Load()-grabs, s.probes.Load()-probes, s.rescues.Load()-rescues
			t.Logf("in %v: %d grabs, %d looks, %d rescues", watch, grabs, probes, rescues)
			// Rescuing each queue would be 50 × 6 = 300 rescues.
			if rescues > 0 {
				t.Errorf("%d rescues in %v while no grab had expired, want none", rescues, watch)
			}
			// Polling each queue would be 50 × 40 = 2,000 grabs.
			if grabs > 0 {
				t.Errorf("%d grabs in %v while nothing was due, want none: idle queues are looked at together", grabs, watch)
			}
			if probes < 1 || probes > 3 {
				t.Errorf("%d looks in %v, want about one a second (the sweep), whatever the polling_interval", probes, watch)
			}

			// Jobs written straight to the database, as another node would:
			// no wake-up reaches this node's runners.
			now := &store.JobInsertParams{Queue: "q17", Category: "c", URL: w.URL, Payload: []byte(`"now"`), Timeout: 5}
			later := &store.JobInsertParams{Queue: "q33", Category: "c", URL: w.URL, Payload: []byte(`"later"`), Timeout: 5, RunAfter: 300 * time.Millisecond}
			if _, err := s.JobsInsert(ctx, []*store.JobInsertParams{now, later}); err != nil {
				t.Fatal(err)
			}
			// And one held by a node that died: its grab expires.
			orphan := &store.JobInsertParams{Queue: "q42", Category: "c", URL: w.URL, Payload: []byte(`"orphan"`), Timeout: 5}
			if _, err := s.JobsInsertGrabbed(ctx, &store.JobsInsertGrabbedParams{Node: "gone", Lease: 200 * time.Millisecond, Jobs: []*store.JobInsertParams{orphan}}); err != nil {
				t.Fatal(err)
			}
			testworker.WaitFor(t, 10*time.Second, "the three jobs delivered", func() bool {
				return w.Count("now") == 1 && w.Count("later") == 1 && w.Count("orphan") == 1
			})
		})
	}
}

// TestIdleQueuesKnowWhenTheyAreDue checks that a parked queue is looked at
// once, not polled: 200 queues led at once start cold (no grab, no rescue
// each); with a polling_interval of a minute they cost no statement at all
// for seconds on end, yet a job due later
// (announced with Later, as the enqueue path does) and a retry the worker
// asked for are delivered when due, because the look told the prober when.
func TestIdleQueuesKnowWhenTheyAreDue(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			const queues = 200
			ctx := context.Background()
			s := idleQueues(t, dialect, queues, 60000)
			// The first delivery of "retry" fails and asks for a retry in
			// 1 s; every other delivery succeeds.
			w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
				if body == "retry" && attempt == 1 {
					return 200, `{"status":"failure","retry_after":1}`, 0
				}
				return 200, `{"status":"success"}`, 0
			})
			d := leadAll(t, s, dispatch.Config{}, queues)
			testworker.WaitFor(t, 30*time.Second, "the first look", func() bool { return s.probes.Load() >= 1 })
			time.Sleep(time.Second)
			// 200 queues led at once start cold: the prober looks at them
			// together, instead of a grab and a rescue each.
			if grabs, rescues := s.grabs.Load(), s.rescues.Load(); grabs+rescues > 0 {
				t.Errorf("%d grabs and %d rescues as 200 idle queues started, want none: they start cold", grabs, rescues)
			}

			grabs, probes, rescues := s.grabs.Load(), s.probes.Load(), s.rescues.Load()
			const watch = 3 * time.Second
			time.Sleep(watch)
			grabs, probes, rescues = s.grabs.Load()-grabs, s.probes.Load()-probes, s.rescues.Load()-rescues
			t.Logf("in %v: %d grabs, %d looks, %d rescues", watch, grabs, probes, rescues)
			if grabs+probes+rescues > 0 {
				t.Errorf("%d grabs, %d looks and %d rescues in %v of 200 idle queues, want none", grabs, probes, rescues, watch)
			}

			// A job due in 1.5 s and one that will ask for a retry, each
			// announced as the enqueue path does.
			later := &store.JobInsertParams{Queue: "q7", Category: "c", URL: w.URL, Payload: []byte(`"later"`), Timeout: 5, RunAfter: 1500 * time.Millisecond}
			retry := &store.JobInsertParams{Queue: "q99", Category: "c", URL: w.URL, Payload: []byte(`"retry"`), Timeout: 5, MaxRetries: 1}
			began := time.Now()
			if _, err := s.JobsInsert(ctx, []*store.JobInsertParams{later, retry}); err != nil {
				t.Fatal(err)
			}
			d.Later("q7")
			d.Wake("q99")
			deadline := time.Now().Add(30 * time.Second)
			for w.Count("later") != 1 || w.Count("retry") != 2 {
				if time.Now().After(deadline) {
					t.Fatalf("after 30 s the deferred job was delivered %d times (want 1), the retried one %d (want 2)", w.Count("later"), w.Count("retry"))
				}
				time.Sleep(20 * time.Millisecond)
			}
			// Both well before the polling_interval: found by their times,
			// not by a poll (generous for a loaded machine).
			if took := time.Since(began); took < time.Second || took > 20*time.Second {
				t.Errorf("delivered after %v, want between 1 s (their due times) and well under the minute's polling_interval", took)
			}
		})
	}
}

// idleQueues opens a store of the dialect, counting its looks, with n
// queues q0… of the polling interval (ms).
func idleQueues(t *testing.T, dialect string, n, interval int) *countingStore {
	t.Helper()
	s := &countingStore{Store: dbtest.Open(t, dialect)}
	for i := range n {
		if _, err := s.QueuePut(context.Background(), &store.Queue{Name: fmt.Sprintf("q%d", i), PollingInterval: interval, MaxWorkers: 5}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// leadAll starts a dispatcher of node n1 on s with cfg, stopped when the
// test ends, and waits until it leads all n queues.
func leadAll(t *testing.T, s *countingStore, cfg dispatch.Config, n int) *dispatch.Dispatcher {
	t.Helper()
	cfg.Store, cfg.Node, cfg.Host = s, "n1", "n1:1"
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	d := dispatch.New(cfg)
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stop, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(stop)
	})
	testworker.WaitFor(t, 30*time.Second, "the node leads every queue", func() bool {
		led, err := s.QueuesLed(context.Background(), &store.QueuesLedParams{Node: "n1"})
		return err == nil && len(led.Queues) == n
	})
	return d
}
