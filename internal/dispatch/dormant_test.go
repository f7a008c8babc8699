package dispatch

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// leading starts a dispatcher of node n1 on s, stopped when the test
// ends, and waits until it runs a runner for each of the n queues.
func leading(t *testing.T, s store.Store, cfg Config, n int) *Dispatcher {
	t.Helper()
	cfg.Store, cfg.Node, cfg.Host = s, "n1", "n1:1"
	d := New(cfg)
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		d.Stop(ctx)
	})
	testworker.WaitFor(t, 30*time.Second, "the node runs every queue", func() bool { return d.running(n) })
	return d
}

// running reports whether the dispatcher runs exactly n runners.
func (d *Dispatcher) running(n int) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.runners) == n
}

// dormant counts the runners without a goroutine.
func (d *Dispatcher) dormant() (n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.runners {
		if r.life.Load() == lifeDormant {
			n++
		}
	}
	return n
}

func putQueues(t *testing.T, s store.Store, n int) {
	t.Helper()
	for i := range n {
		if _, err := s.QueuePut(context.Background(), &store.Queue{Name: fmt.Sprintf("q%d", i), PollingInterval: 200, MaxWorkers: 5}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRunner_IdleQueuesHoldNoGoroutine: a queue with no work is an entry
// of the prober's, not a goroutine, whether its runner started cold (many
// queues led at once) or warm (a grab first); a job enqueued to one gives
// it a goroutine, is delivered, and the runner goes dormant again.
func TestRunner_IdleQueuesHoldNoGoroutine(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queues int
	}{
		{"cold", 500},
		{"warm", coldAbove / 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := dbtest.Open(t, "sqlite")
			putQueues(t, s, tc.queues)
			w := newBusyWorker(t)
			before := runtime.NumGoroutine()
			d := leading(t, s, Config{}, tc.queues)
			testworker.WaitFor(t, 30*time.Second, "every runner dormant", func() bool { return d.dormant() == tc.queues })
			// The dispatcher's own loops, the batchers and the database's
			// pool are a few goroutines; a goroutine per queue would be
			// hundreds.
			if grew := runtime.NumGoroutine() - before; grew > 30 {
				t.Errorf("%d idle queues added %d goroutines, want a few for the node, none per queue", tc.queues, grew)
			}
			for i, q := range []string{"q1", fmt.Sprintf("q%d", tc.queues-1)} {
				if _, err := s.JobsInsert(context.Background(), []*store.JobInsertParams{{Queue: q, Category: "c", URL: w.URL, Payload: []byte(`{}`), Timeout: 5}}); err != nil {
					t.Fatal(err)
				}
				d.Wake(q)
				testworker.WaitFor(t, 30*time.Second, "the job delivered", func() bool { return w.deliveries() == i+1 })
			}
			testworker.WaitFor(t, 30*time.Second, "every runner dormant again", func() bool { return d.dormant() == tc.queues })
		})
	}
}

// TestRunner_DormantRunnerStops: a dormant runner stopped (its queue
// given up) ends through its loop's end, with no delivery left.
func TestRunner_DormantRunnerStops(t *testing.T) {
	s := dbtest.Open(t, "sqlite")
	putQueues(t, s, 3)
	d := leading(t, s, Config{}, 3)
	testworker.WaitFor(t, 30*time.Second, "every runner dormant", func() bool { return d.dormant() == 3 })
	d.mu.Lock()
	r := d.runners["q1"]
	d.mu.Unlock()
	done := make(chan struct{})
	go func() { r.halt(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("halt of a dormant runner did not return")
	}
}
