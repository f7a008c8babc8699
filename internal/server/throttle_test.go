package server_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestServer_ThrottleBoundsDispatches pushes 20 jobs to a queue limited to
// 5 dispatches per second with a burst of 5: the first 5 may go at once,
// the other 15 take at least 3 seconds. Only lower bounds on time are
// checked, counted from before the first push (a delivery is never
// earlier than its dispatch, which the bucket holds back), so a slow
// machine cannot fail the test: measured from the first delivery instead,
// a first delivery late by a stall made the later ones look early.
func TestServer_ThrottleBoundsDispatches(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, nil)
		s := startNode(t, dbtest.URL(t, dialect), nil)
		// The burst is left to its default: one second's worth, 5.
		setupQueue(t, s, "q", "cat", map[string]any{"max_workers": 20, "max_dispatches_per_second": 5})
		const n, rate, burst = 20, 5.0, 5
		pushed := time.Now() // before any token of the bucket is spent
		for i := range n {
			push(t, s, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprint(i)})
		}
		testworker.WaitFor(t, 60*time.Second, "20 deliveries", func() bool { return w.Distinct() == n })
		var at []time.Time
		for i := range n {
			for _, d := range w.Of(fmt.Sprint(i)) {
				at = append(at, d.At)
			}
		}
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		if got := at[n-1].Sub(pushed); got < 2500*time.Millisecond {
			t.Errorf("20 jobs at 5/s (burst 5) went out in %v, want about 3s", got)
		}
		// The k-th delivery (from 1) needs k - burst tokens beyond the
		// burst: at least (k-burst)/rate after the burst was spent, which
		// is after the first push, less some slack for the bucket's
		// rounding.
		for k := burst + 1; k <= n; k++ {
			min := time.Duration(float64(k-burst)/rate*float64(time.Second)) - 400*time.Millisecond
			if got := at[k-1].Sub(pushed); got < min {
				t.Errorf("delivery %d came %v after the first push, want at least %v", k, got, min)
			}
		}
	})
}
