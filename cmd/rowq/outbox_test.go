package main_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// TestServe_KillNineOutboxMover kills (SIGKILL) the node that moves the
// outbox (the live node with the lowest id, node-a; the test checks by
// the nodes' logs that node-a moves and node-b does not at the kill) while
// it drains a backlog of committed rows into a paused queue, so that the
// jobs stay countable: node-b takes the outbox over within seconds (the
// database ends node-a's session, node-b reaps its registration), and
// every row becomes exactly one job, none lost, none doubled. The mover
// spends most of a drain inside its move transactions, so the kill most
// likely lands in one; the deterministic case (a move stopped after its
// deletes and inserts, before its commit) is each dialect's
// TestOutboxMove_AbortedBeforeCommit, which on SQLite kills a process
// inside its move.
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
		victim, victimID, survivor := nodes["node-a"], "node-a", nodes["node-b"]

		st := dbtest.OpenURL(t, dbURL)
		ctx := t.Context()
		newest := func() int64 {
			jobs, err := st.JobsList(ctx, &store.JobsListParams{Queue: "q", Kind: store.JobsWaiting, Desc: true, Limit: 1})
			if err != nil {
				t.Fatal(err)
			}
			if len(jobs) == 0 {
				return 0
			}
			return jobs[0].ID
		}
		var (
			killedAt   time.Time
			lastAtKill int64
			leftAtKill int
		)
		kill := func() {
			if !movesOutbox(victim) || movesOutbox(survivor) {
				t.Fatalf("at the kill, %s moves the outbox: %v, node-b: %v; want %s alone", victimID, movesOutbox(victim), movesOutbox(survivor), victimID)
			}
			rows, err := st.OutboxRead(ctx, chunk)
			if err != nil {
				t.Fatal(err)
			}
			killedAt, leftAtKill = time.Now(), len(rows)
			if err := victim.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			lastAtKill = newest()
		}
		url := "http://127.0.0.1:1/never"
		for c := 0; c < n; c += chunk {
			rows := make([]*store.OutboxRow, chunk)
			for i := range rows {
				payload := fmt.Sprintf(`"row-%d"`, c+i)
				rows[i] = &store.OutboxRow{Category: "cat", URL: &url, Payload: &payload}
			}
			if err := st.OutboxInsert(ctx, rows); err != nil {
				t.Fatal(err)
			}
			if killedAt.IsZero() && c >= n/4 && newest() > 0 { // the mover is at work, with a backlog
				kill()
			}
		}
		if killedAt.IsZero() {
			// SQLite: the inserts may have kept the one writer from the mover.
			testworker.WaitFor(t, 20*time.Second, "node-a moving rows", func() bool { return newest() > 0 })
			kill()
		}
		if code := victim.wait(t, 5*time.Second); code != -1 {
			t.Fatalf("%s exit code = %d, want -1 (killed)", victimID, code)
		}
		testworker.WaitFor(t, 20*time.Second, "node-b moving rows", func() bool { return newest() > lastAtKill })
		takeover := time.Since(killedAt)
		if !movesOutbox(survivor) {
			t.Errorf("rows moved after the kill, but node-b does not say it moves the outbox")
		}
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
		t.Logf("kill of the mover with %d+ rows left in the outbox → node-b moved the next after %v", leftAtKill, takeover.Round(time.Millisecond))
	})
}

// movesOutbox reports whether p's log says it moves the outbox: its last
// word on it is "moving the outbox", not "no longer moving the outbox".
func movesOutbox(p *proc) bool {
	out := p.out.String()
	return strings.LastIndex(out, `msg="moving the outbox"`) > strings.LastIndex(out, `msg="no longer moving the outbox"`)
}
