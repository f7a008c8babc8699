package main_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestServe_KillNineLosesNoHandedOffJob kills a node with -9 while jobs it
// accepted and handed to its own dispatcher (inserted already grabbed, never
// seen by a grab) are being delivered, and checks that a new node delivers
// every one of them again once their grab lease has passed.
func TestServe_KillNineLosesNoHandedOffJob(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			n         = 5
			nodeTTL   = 2 * time.Second
			grabLease = 3 * time.Second
		)
		// The victim's deliveries are never answered: it dies with them.
		w := testworker.New(t, func(_ string, attempt int) (int, string, time.Duration) {
			if attempt == 1 {
				return 200, `{"status":"success"}`, time.Minute
			}
			return 200, `{"status":"success"}`, 0
		})
		dbURL := dbtest.URL(t, dialect)
		dir := t.TempDir()
		node := func(id string) *proc {
			return serve(t, dir, testEnv(dbURL, "ROWQ_NODE_ID="+id, "ROWQ_DISPATCH_USER_AGENT="+id,
				"ROWQ_NODE_TTL="+nodeTTL.String(), "ROWQ_GRAB_LEASE="+grabLease.String())...)
		}
		victim := node("victim")
		victim.mustCall(t, "PUT", "/queue/q", map[string]any{"max_workers": 10})
		victim.mustCall(t, "PUT", "/routing/cat", map[string]any{"queue_name": "q"})
		testworker.WaitFor(t, 10*time.Second, "the victim to lead q", func() bool { return victim.leader(t, "q") == "victim" })
		// A first job, delivered, shows that the victim's dispatcher has
		// looked for work and found none: the next jobs are handed off.
		victim.mustPush(t, "cat", map[string]any{"url": w.URL, "payload": "warm-up"})
		testworker.WaitFor(t, 10*time.Second, "the warm-up delivery", func() bool { return w.Count("warm-up") == 1 })

		st := dbtest.OpenURL(t, dbURL)
		ids := make([]int64, n)
		for i := range n {
			ids[i] = victim.mustPush(t, "cat", map[string]any{"url": w.URL, "payload": fmt.Sprintf("job-%d", i)})
			j, err := st.JobGet(t.Context(), "q", ids[i])
			if err != nil {
				t.Fatal(err)
			}
			if j.State != store.StateGrabbed || j.GrabbedBy != "victim" {
				t.Fatalf("job %d right after its enqueue: state %q grabbed by %q, want handed off to the victim", ids[i], j.State, j.GrabbedBy)
			}
		}
		testworker.WaitFor(t, 10*time.Second, "the victim's deliveries", func() bool {
			for i := range n {
				if w.Count(fmt.Sprintf("job-%d", i)) == 0 {
					return false
				}
			}
			return true
		})
		if err := victim.cmd.Process.Kill(); err != nil {
			t.Fatalf("kill -9 the victim: %v", err)
		}
		victim.wait(t, 5*time.Second)

		node("survivor")
		testworker.WaitFor(t, nodeTTL+grabLease+30*time.Second, "every job delivered again and acknowledged", func() bool {
			for _, id := range ids {
				if !jobGone(t, st, "q", id) {
					return false
				}
			}
			return true
		})
		for i := range n {
			ds := w.Of(fmt.Sprintf("job-%d", i))
			if len(ds) != 2 || ds[0].By != "victim" || ds[1].By != "survivor" {
				var by []string
				for _, d := range ds {
					by = append(by, d.By)
				}
				t.Errorf("job-%d delivered by %v, want by the victim, then once by the survivor", i, by)
			}
		}
	})
}
