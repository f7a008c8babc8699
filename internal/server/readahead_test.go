package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/server"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// gate holds the worker's answers while shut; done opens it for good.
type gate struct {
	mu   sync.Mutex
	ch   chan struct{}
	done chan struct{}
}

func newGate() *gate {
	g := &gate{ch: make(chan struct{}), done: make(chan struct{})}
	close(g.ch)
	return g
}

func (g *gate) shut() { g.mu.Lock(); g.ch = make(chan struct{}); g.mu.Unlock() }
func (g *gate) open() { g.mu.Lock(); close(g.ch); g.mu.Unlock() }
func (g *gate) wait() {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	select {
	case <-ch:
	case <-g.done:
	}
}

func grabbed(t *testing.T, s *server.Server, q string) int {
	t.Helper()
	js, err := s.Store().JobsList(context.Background(), &store.JobsListParams{Queue: q, Kind: store.JobsGrabbed, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(js)
}

// TestServer_ReadAheadGoesBackOnPauseAndStop drains a backlog with a worker
// that holds its answers: the runner holds max_workers deliveries and as
// many jobs read ahead. Pausing the queue, and stopping the node, put the
// read-ahead back to waiting at once (not after the grab lease), and every
// job is still delivered exactly once.
func TestServer_ReadAheadGoesBackOnPauseAndStop(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		g := newGate()
		w := testworker.New(t, func(body string, attempt int) (int, string, time.Duration) {
			g.wait()
			return 200, `{"status":"success"}`, 0
		})
		url := dbtest.URL(t, dialect)
		s := startNode(t, url, nil)
		t.Cleanup(func() { close(g.done) }) // before the node stops, should the test fail
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 2, "polling_interval": 50})
		waitLeads(t, 10*time.Second, s, "q", nil)
		// backlog: pause, enqueue 20 jobs, hold the worker, resume: the
		// runner's grabs come back full, so it reads ahead.
		backlog := func(round int) {
			mustCall(t, s, "POST", "/queue/q/pause", nil)
			for i := range 20 {
				push(t, s, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("r%d-%d", round, i)})
			}
			g.shut()
			mustCall(t, s, "POST", "/queue/q/resume", nil)
			testworker.WaitFor(t, 10*time.Second, "2 deliveries and 2 jobs read ahead", func() bool {
				return grabbed(t, s, "q") == 4
			})
		}

		backlog(1)
		mustCall(t, s, "POST", "/queue/q/pause", nil)
		// The grab lease is 2 s and extended while deliveries run: only the
		// give-back makes the read-ahead waiting again this soon.
		testworker.WaitFor(t, time.Second, "the read-ahead back to waiting on pause", func() bool {
			return grabbed(t, s, "q") == 2
		})
		g.open()
		time.Sleep(300 * time.Millisecond) // room for a wrong delivery to show
		if n := w.Distinct(); n != 2 {
			t.Fatalf("%d jobs delivered while paused, want the 2 in flight at the pause", n)
		}
		mustCall(t, s, "POST", "/queue/q/resume", nil)
		testworker.WaitFor(t, 20*time.Second, "20 deliveries", func() bool { return w.Distinct() == 20 })

		backlog(2)
		stopped := make(chan error, 1)
		go func() { stopped <- s.Stop(nil) }()
		testworker.WaitFor(t, time.Second, "the read-ahead back to waiting on stop", func() bool {
			return grabbed(t, s, "q") == 2
		})
		g.open()
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if n := w.Distinct(); n != 22 {
			t.Fatalf("%d jobs delivered by the stopped node, want 22", n)
		}
		startNode(t, url, nil)
		testworker.WaitFor(t, 20*time.Second, "40 deliveries on the next node", func() bool { return w.Distinct() == 40 })
		for i := range 20 {
			for r := 1; r <= 2; r++ {
				if n := w.Count(fmt.Sprintf("r%d-%d", r, i)); n != 1 {
					t.Errorf("job r%d-%d delivered %d times, want once", r, i, n)
				}
			}
		}
	})
}
