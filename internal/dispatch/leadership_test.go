package dispatch

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// ledReads counts the reads of all led queues and of the changed ones.
type ledReads struct {
	store.Store
	all, changed atomic.Int64
}

func (s *ledReads) QueuesLed(ctx context.Context, p *store.QueuesLedParams) (*store.LedQueues, error) {
	if p.Since.IsZero() {
		s.all.Add(1)
	} else {
		s.changed.Add(1)
	}
	return s.Store.QueuesLed(ctx, p)
}

// settings returns the settings the runner of queue runs with, nil when
// the node runs none.
func (d *Dispatcher) settingsOf(queue string) *store.Queue {
	if r := d.runner(queue); r != nil {
		return r.settings.Load()
	}
	return nil
}

// TestLeadership_ReadsOnlyChangedQueues: once a node leads its queues, its
// leadership cycle reads no longer all of them but those whose settings
// changed: a change made through another node whose nudge was lost
// applies within readEvery cycles, one made through this node at once, and
// a queue deleted (Changed names it) loses its runner, all without a read
// of every queue.
func TestLeadership_ReadsOnlyChangedQueues(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			s := &ledReads{Store: dbtest.Open(t, dialect)}
			putQueues(t, s, 5)
			d := leading(t, s, Config{RefreshInterval: 50 * time.Millisecond}, 5)
			ctx := context.Background()
			testworker.WaitFor(t, 30*time.Second, "a read of changes", func() bool { return s.changed.Load() > 0 })
			all := s.all.Load()

			// Through another node, nudge lost: no Changed here.
			if _, err := s.QueuePut(ctx, &store.Queue{Name: "q1", PollingInterval: 200, MaxWorkers: 9}); err != nil {
				t.Fatal(err)
			}
			testworker.WaitFor(t, 30*time.Second, "q1's new max_workers applied", func() bool { return d.settingsOf("q1").MaxWorkers == 9 })

			// Through this node: at once (well before readEvery cycles of
			// a long refresh would pass, but the refresh is short here; the
			// point is the read names it).
			if _, err := s.QueuePut(ctx, &store.Queue{Name: "q3", PollingInterval: 200, MaxWorkers: 4}); err != nil {
				t.Fatal(err)
			}
			d.Changed("q3")
			testworker.WaitFor(t, 30*time.Second, "q3's new max_workers applied", func() bool { return d.settingsOf("q3").MaxWorkers == 4 })

			if _, err := s.QueueDelete(ctx, "q2"); err != nil {
				t.Fatal(err)
			}
			d.Changed("q2")
			testworker.WaitFor(t, 30*time.Second, "q2's runner stopped", func() bool { return d.settingsOf("q2") == nil })

			if got := s.all.Load() - all; got != 0 {
				t.Errorf("%d reads of every led queue after the node led them, want none: only changes are read", got)
			}
			if d.settingsOf("q0") == nil || d.settingsOf("q4") == nil {
				t.Error("a queue not changed lost its runner")
			}
		})
	}
}
