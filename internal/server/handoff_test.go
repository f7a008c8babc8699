package server_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// steadyLeader keeps the test node's leadership through heartbeats slowed
// by a loaded machine: a runner started anew has not yet looked for work,
// so it does not take hand-offs until its first grab.
func steadyLeader(c *config.Config) { c.NodeTTL = 10 * time.Second }

// TestHandoff_JobIsGrabbedWhenAnswered checks that hand-off happens: on an
// idle queue led by the node that accepts the job, the job is already
// grabbed by that node when the enqueue is answered, also while grabs run
// for jobs that came another way.
func TestHandoff_JobIsGrabbedWhenAnswered(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			if strings.Contains(body, "held") {
				return 200, `{"status":"success"}`, 2 * time.Second
			}
			return 200, `{"status":"success"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), steadyLeader)
		// max_workers well above the held deliveries: on a loaded machine
		// acknowledgements commit late and hold their slots meanwhile, and
		// a grab that finds the few slots left taken, or that asks for one
		// job and gets it, rightly ends hand-off until a grab comes back
		// short (a held job would then go waiting, failing the test
		// without a fault).
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 100, "polling_interval": 1})
		// A first job, delivered, shows that the node leads q and its
		// dispatcher has looked for work.
		push(t, s, "cat", map[string]any{"url": w.URL, "payload": "warm-up"})
		testworker.WaitFor(t, 30*time.Second, "the warm-up job's delivery", func() bool { return w.Count(`warm-up`) == 1 })

		// Meanwhile jobs arrive as from another node, straight into the
		// database, one at a time (each once the last is delivered, so no
		// backlog forms and hand-off stays on): the look every millisecond
		// finds each and the runner grabs it, so grabs run while the held
		// jobs are enqueued. A grab must leave worker slots to the
		// hand-offs.
		stop := make(chan struct{})
		var trickled atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			for {
				n := trickled.Load()
				j := &store.JobInsertParams{Queue: "q", Category: "cat", URL: w.URL, Payload: []byte(fmt.Sprintf(`"trickle-%d"`, n)), Timeout: 10}
				if _, err := s.Store().JobsInsert(context.Background(), []*store.JobInsertParams{j}); err != nil {
					t.Error(err)
					return
				}
				trickled.Add(1)
				for w.Count(fmt.Sprintf("trickle-%d", n)) == 0 {
					select {
					case <-stop:
						return
					case <-time.After(time.Millisecond):
					}
				}
			}
		})
		const held = 10
		for i := range held {
			time.Sleep(10 * time.Millisecond)
			id := push(t, s, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("held-%d", i)})
			j, err := s.Store().JobGet(context.Background(), "q", id)
			if err != nil {
				t.Fatalf("job %d: %v", id, err)
			}
			if j.State != store.StateGrabbed || j.GrabbedBy != s.NodeID() {
				t.Errorf("job %d right after its enqueue: state %q grabbed by %q, want grabbed by this node %q", id, j.State, j.GrabbedBy, s.NodeID())
			}
		}
		close(stop)
		wg.Wait()
		t.Logf("%d jobs trickled in while %d were handed off", trickled.Load(), held)
		testworker.WaitFor(t, 30*time.Second, "every delivery", func() bool { return w.Answered() == 1+held+int(trickled.Load()) })
	})
}

// TestHandoff_MaxWorkersHolds enqueues from many clients at once on the
// node that leads the queue, so that hand-offs and grabs compete for the
// worker slots, and checks that no more than max_workers deliveries run at
// once and every job is delivered exactly once.
func TestHandoff_MaxWorkersHolds(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			n          = 300
			maxWorkers = 4
		)
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 5 * time.Millisecond
		})
		var most atomic.Int64
		w.SetOnDelivery(func(_, open int) {
			if int64(open) > most.Load() {
				most.Store(int64(open))
			}
		})
		s := startNode(t, dbtest.URL(t, dialect), steadyLeader)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": maxWorkers})
		waitLeads(t, 30*time.Second, s, "q", nil)
		var wg sync.WaitGroup
		for c := range 16 {
			wg.Go(func() {
				for i := c; i < n; i += 16 {
					push(t, s, "cat", map[string]any{"url": w.URL, "payload": map[string]int{"n": i}})
				}
			})
		}
		wg.Wait()
		testworker.WaitFor(t, 60*time.Second, "every delivery", func() bool { return w.Distinct() == n })
		time.Sleep(300 * time.Millisecond) // room for a duplicate to show
		for i := range n {
			if got := w.Count(fmt.Sprintf(`{"n":%d}`, i)); got != 1 {
				t.Errorf("job %d delivered %d times", i, got)
			}
		}
		if got := most.Load(); got > maxWorkers {
			t.Errorf("%d deliveries ran at once, want at most max_workers = %d", got, maxWorkers)
		}
	})
}

// TestHandoff_WaitsBehindBacklog checks that hand-off keeps FIFO order: a
// job enqueued while older jobs wait for a worker slot is delivered after
// them, not handed the next free slot.
func TestHandoff_WaitsBehindBacklog(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(body string, _ int) (int, string, time.Duration) {
			if body == "A" {
				return 200, `{"status":"success"}`, time.Second
			}
			return 200, `{"status":"success"}`, 0
		})
		s := startNode(t, dbtest.URL(t, dialect), steadyLeader)
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 1})
		job := func(body string) map[string]any { return map[string]any{"url": w.URL, "payload": body} }
		push(t, s, "cat", job("A"))
		testworker.WaitFor(t, 30*time.Second, "A's delivery", func() bool { return w.Count("A") == 1 })
		// The one slot is A's: B and C wait.
		push(t, s, "cat", job("B"))
		push(t, s, "cat", job("C"))
		testworker.WaitFor(t, 30*time.Second, "A's answer", func() bool { return w.Answered() >= 1 })
		// A's slot frees about now; D must not take it before B and C.
		push(t, s, "cat", job("D"))
		testworker.WaitFor(t, 30*time.Second, "every delivery", func() bool { return w.Answered() == 4 })
		order := []string{"A", "B", "C", "D"}
		for i := 1; i < len(order); i++ {
			prev, cur := w.Of(order[i-1]), w.Of(order[i])
			if len(prev) != 1 || len(cur) != 1 {
				t.Fatalf("%s delivered %d times, %s %d times, want once each", order[i-1], len(prev), order[i], len(cur))
			}
			if cur[0].At.Before(prev[0].At) {
				t.Errorf("%s delivered before %s, want enqueue order A, B, C, D", order[i], order[i-1])
			}
		}
	})
}
