package main_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestServe_KillNineFailsOverThroughTheSession kills the node leading a
// queue while it delivers, with a node TTL and a grab lease far longer than
// the test waits: the survivor can only take the queue, and deliver the
// jobs the dead node held, because the database ended the dead node's
// session lock. Every job is delivered; the times are logged (the targets
// are measured by `rowq chaos`, docs/reliability.md).
func TestServe_KillNineFailsOverThroughTheSession(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			n          = 40
			maxWorkers = 4
			nodeTTL    = 60 * time.Second
			grabLease  = 120 * time.Second
			// Far below nodeTTL and grabLease: only the session can
			// explain a takeover within it.
			bound = 20 * time.Second
		)
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 200, `{"status":"success"}`, 100 * time.Millisecond
		})
		victim, survivor, victimID, survivorID := twoNodes(t, dbtest.URL(t, dialect), nodeTTL, grabLease, maxWorkers)

		var killAt atomic.Int64 // UnixNano
		w.SetOnDelivery(func(distinct, open int) {
			if distinct >= maxWorkers && open >= 2 && killAt.Load() == 0 {
				killAt.Store(time.Now().UnixNano())
				victim.cmd.Process.Kill()
			}
		})
		for i := range n {
			survivor.mustPush(t, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("job-%d", i)})
		}
		testworker.WaitFor(t, bound, "the kill", func() bool { return killAt.Load() != 0 })
		if code := victim.wait(t, 5*time.Second); code != -1 {
			t.Fatalf("%s exit code = %d, want -1 (killed)", victimID, code)
		}
		testworker.WaitFor(t, bound, "every job answered", func() bool { return w.Answered() == n })
		killed := time.Unix(0, killAt.Load())

		// The first delivery by the survivor after the kill, and the last
		// redelivery of a job the victim held.
		var takeover, redelivered time.Duration
		for i := range n {
			ds := w.Of(fmt.Sprintf("job-%d", i))
			for j, d := range ds {
				if d.By == survivorID && d.At.After(killed) && (takeover == 0 || d.At.Sub(killed) < takeover) {
					takeover = d.At.Sub(killed)
				}
				if j > 0 && d.At.Sub(killed) > redelivered {
					redelivered = d.At.Sub(killed)
				}
			}
			if len(ds) > 2 {
				t.Errorf("job-%d delivered %d times", i, len(ds))
			}
		}
		if takeover == 0 {
			t.Fatalf("%s delivered nothing after the kill", survivorID)
		}
		if got := survivor.leader(t, "q"); got != survivorID {
			t.Errorf("after the kill, q is led by %q, want %s", got, survivorID)
		}
		t.Logf("kill of the leader → first delivery by the survivor %v; jobs held by the dead node delivered again within %v",
			takeover.Round(time.Millisecond), redelivered.Round(time.Millisecond))
	})
}
