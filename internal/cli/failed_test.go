package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/testworker"
)

// failedIDs lists the ids of the queue's failure log.
func failedIDs(t *testing.T, srv, queue string) []string {
	t.Helper()
	var page struct {
		FailedJobs []struct{ ID float64 } `json:"failed_jobs"`
	}
	runJSON(t, srv, &page, "failed", "ls", queue)
	var ids []string
	for _, f := range page.FailedJobs {
		ids = append(ids, jsonInt(f.ID))
	}
	return ids
}

// rowq failed's verbs: ls, get and rm of the failure log as Fireworq has
// them, and rowq's bulk retry and purge, with queue pause and resume
// around them (a paused queue keeps retried jobs waiting).
func TestFailedCommands(t *testing.T) {
	t.Parallel()
	srv := startServerWithQueue(t)
	w := testworker.New(t, func(string, int) (int, string, time.Duration) {
		return 500, `{"status":"permanent-failure","message":"no"}`, 0
	})

	var failed struct {
		FailedJobs []any `json:"failed_jobs"`
	}
	runJSON(t, srv, &failed, "failed", "ls", "q", "--order", "created")
	if failed.FailedJobs == nil || len(failed.FailedJobs) != 0 {
		t.Errorf("failed ls: %+v", failed)
	}
	for _, args := range [][]string{
		{"failed", "get", "q", "1"},
		{"failed", "rm", "q", "1"},
	} {
		if code, _, _ := run(t, srv, args...); code != 1 {
			t.Errorf("rowq %s: exit %d, want 1", strings.Join(args, " "), code)
		}
	}

	// push-batch: three jobs, all failing at once into the failure log.
	file := filepath.Join(t.TempDir(), "jobs.json")
	batch := `{"jobs": [{"category": "c", "url": "` + w.URL + `", "payload": "a"},
		{"category": "c", "url": "` + w.URL + `", "payload": "b", "priority": 3},
		{"category": "c", "url": "` + w.URL + `", "payload": "c"}]}`
	if err := os.WriteFile(file, []byte(batch), 0o600); err != nil {
		t.Fatal(err)
	}
	var pushed struct {
		Jobs []struct {
			ID       float64
			Priority float64
		}
	}
	runJSON(t, srv, &pushed, "job", "push-batch", "--file", file)
	if len(pushed.Jobs) != 3 || pushed.Jobs[1].Priority != 3 {
		t.Fatalf("push-batch answered %+v", pushed)
	}
	testworker.WaitFor(t, 30*time.Second, "3 failure log entries", func() bool { return len(failedIDs(t, srv, "q")) == 3 })

	// Paused, the queue keeps retried jobs waiting.
	if out := mustRun(t, srv, "queue", "pause", "q"); !strings.Contains(out, "PAUSED") || !strings.Contains(out, "true") {
		t.Errorf("queue pause:\n%s", out)
	}
	var q struct{ Paused bool }
	runJSON(t, srv, &q, "queue", "get", "q")
	if !q.Paused {
		t.Fatalf("queue get after pause: not paused")
	}
	ids := failedIDs(t, srv, "q") // newest first
	var retried struct{ Retried int }
	runJSON(t, srv, &retried, "failed", "retry", "q", ids[0])
	if retried.Retried != 1 {
		t.Errorf("failed retry q %s: retried %d, want 1", ids[0], retried.Retried)
	}
	var waiting struct{ Jobs []any }
	runJSON(t, srv, &waiting, "job", "ls", "q")
	if len(waiting.Jobs) != 1 {
		t.Errorf("waiting after one retry: %d jobs, want 1", len(waiting.Jobs))
	}

	// Refusals: nothing named, both named and --all, an entry not in
	// the log (the others are still handled), bad ids.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"failed", "purge", "q"}, "--all"},
		{[]string{"failed", "retry", "q"}, "--all"},
		{[]string{"failed", "purge", "q", ids[1], "--all"}, "not both"},
		{[]string{"failed", "retry", "q", "x"}, "id:"},
		{[]string{"failed", "purge", "q", "0"}, "id:"},
		{[]string{"failed", "retry", "q", ids[0]}, "1 of the 1 entries"},
	} {
		code, out, errb := run(t, srv, tc.args...)
		if code != 1 || !strings.Contains(errb, tc.want) {
			t.Errorf("rowq %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), code, out, errb, tc.want)
		}
	}
	if got := failedIDs(t, srv, "q"); len(got) != 2 {
		t.Fatalf("after the refusals the log holds %v, want 2 entries", got)
	}

	// Purge one by id (a repeated id counts once), then retry the rest.
	if out := mustRun(t, srv, "failed", "purge", "q", ids[1], ids[1]); !strings.Contains(out, "deleted 1 ") {
		t.Errorf("failed purge q %s:\n%s", ids[1], out)
	}
	runJSON(t, srv, &retried, "failed", "retry", "q", "--all")
	if retried.Retried != 1 {
		t.Errorf("failed retry q --all: retried %d, want 1", retried.Retried)
	}
	if got := failedIDs(t, srv, "q"); len(got) != 0 {
		t.Fatalf("log after retry --all: %v, want empty", got)
	}

	// Resumed, the two retried jobs fail again; purge --all clears them.
	var resumed struct{ Paused bool }
	runJSON(t, srv, &resumed, "queue", "resume", "q")
	if resumed.Paused {
		t.Errorf("queue resume answered paused")
	}
	testworker.WaitFor(t, 30*time.Second, "2 entries again", func() bool { return len(failedIDs(t, srv, "q")) == 2 })
	var deleted struct{ Deleted int }
	runJSON(t, srv, &deleted, "failed", "purge", "q", "--all")
	if deleted.Deleted != 2 || len(failedIDs(t, srv, "q")) != 0 {
		t.Errorf("failed purge q --all: deleted %d, want 2", deleted.Deleted)
	}
}
