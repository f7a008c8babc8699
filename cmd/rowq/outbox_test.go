package main_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestServe_KillNineOutboxMover kills (SIGKILL) the node that moves the
// outbox while it drains a backlog of committed rows into a paused queue,
// so that the jobs stay countable: the other node takes the outbox over
// within seconds, and every row becomes exactly one job, none lost, none
// doubled. The mover spends most of a drain inside its move transactions,
// so the kill most likely lands in one; the deterministic case (a move
// aborted after its inserts and deletes, before its commit) is each
// dialect's TestOutboxMove_AbortedBeforeCommit.
func TestServe_KillNineOutboxMover(t *testing.T) {
	t.Parallel()
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		const (
			n     = 10_000
			chunk = 500
		)
		dbURL := dbtest.URL(t, dialect)
		a, b, aID, bID := twoNodes(t, dbURL, 10*time.Second, 30*time.Second, 4)
		a.mustCall(t, "POST", "/queue/q/pause", nil)
		nodes := map[string]*proc{aID: a, bID: b}
		mover := func(asked *proc) string {
			code, out, err := asked.do("GET", "/lock/rowq.outbox", nil)
			if err != nil || code != 200 {
				return ""
			}
			var lock struct {
				Holders []struct {
					Owner string `json:"owner"`
				} `json:"holders"`
			}
			raw, _ := json.Marshal(out)
			if json.Unmarshal(raw, &lock) != nil || len(lock.Holders) != 1 {
				return ""
			}
			return lock.Holders[0].Owner
		}
		var victimID string
		testworker.WaitFor(t, 10*time.Second, "a node moving the outbox", func() bool { victimID = mover(a); return victimID != "" })
		victim := nodes[victimID]
		survivorID := map[string]string{aID: bID, bID: aID}[victimID]

		st := dbtest.OpenURL(t, dbURL)
		ctx := t.Context()
		url := "http://127.0.0.1:1/never"
		killed := false
		var killedAt time.Time
		for c := 0; c < n; c += chunk {
			rows := make([]*store.OutboxRow, chunk)
			for i := range rows {
				payload := fmt.Sprintf(`"row-%d"`, c+i)
				rows[i] = &store.OutboxRow{Category: "cat", URL: &url, Payload: &payload}
			}
			if err := st.OutboxInsert(ctx, rows); err != nil {
				t.Fatal(err)
			}
			if killed || c < n/4 {
				continue
			}
			jobs, err := st.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) > 0 { // the mover is at work, with a backlog
				killedAt = time.Now()
				if err := victim.cmd.Process.Kill(); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
		if !killed {
			t.Fatalf("the outbox was not moved while %d rows were inserted", n)
		}
		if code := victim.wait(t, 5*time.Second); code != -1 {
			t.Fatalf("%s exit code = %d, want -1 (killed)", victimID, code)
		}
		testworker.WaitFor(t, 20*time.Second, survivorID+" moving the outbox", func() bool { return mover(nodes[survivorID]) == survivorID })
		takeover := time.Since(killedAt)
		testworker.WaitFor(t, 60*time.Second, "an empty outbox", func() bool {
			rows, err := st.OutboxRead(ctx, 1)
			return err == nil && len(rows) == 0
		})

		seen := make(map[string]int, n)
		var after *store.JobKey
		for {
			jobs, err := st.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Limit: 1000, After: after})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				seen[string(j.Payload)]++
			}
			if len(jobs) < 1000 {
				break
			}
			last := jobs[len(jobs)-1]
			after = &store.JobKey{NextTry: last.NextTry, ID: last.ID}
		}
		missing := 0
		for i := range n {
			switch k := seen[fmt.Sprintf(`"row-%d"`, i)]; {
			case k == 0:
				missing++
			case k > 1:
				t.Errorf("row-%d became %d jobs", i, k)
			}
		}
		if missing > 0 || len(seen) != n {
			t.Fatalf("%d rows became no job (%d distinct jobs, want %d)", missing, len(seen), n)
		}
		t.Logf("kill of the mover → %s moving the outbox after %v", survivorID, takeover.Round(time.Millisecond))
	})
}
