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

// The verbs of rowq's queue additions: push-batch, the job push flags,
// queue pause and resume, failed retry and purge.
func TestQueueAdditionCommands(t *testing.T) {
	t.Parallel()
	srv := startServer(t)
	w := testworker.New(t, func(string, int) (int, string, time.Duration) {
		return 500, `{"status":"permanent-failure","message":"no"}`, 0
	})
	mustRun(t, srv, "queue", "put", "q")
	mustRun(t, srv, "routing", "put", "c", "q")

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
		{[]string{"job", "push-batch"}, "--file"},
		{[]string{"job", "push-batch", "--file", filepath.Join(t.TempDir(), "none.json")}, "--file"},
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

	// job push with rowq's fields, on a paused queue; the same unique
	// key again returns the pending job.
	mustRun(t, srv, "queue", "pause", "q")
	var j struct {
		ID            float64
		Priority      float64
		UniqueKey     string  `json:"unique_key"`
		RetryBackoff  string  `json:"retry_backoff"`
		RetryDelayMax float64 `json:"retry_delay_max"`
		RetryJitter   float64 `json:"retry_jitter"`
		Existing      bool
	}
	push := []string{"job", "push", "c", "--url", w.URL, "--priority", "-5", "--unique-key", "k1",
		"--retry-backoff", "exponential", "--retry-delay", "2", "--retry-delay-max", "60", "--retry-jitter", "0.25", "--max-retries", "3"}
	runJSON(t, srv, &j, push...)
	if j.Priority != -5 || j.UniqueKey != "k1" || j.RetryBackoff != "exponential" || j.RetryDelayMax != 60 || j.RetryJitter != 0.25 || j.Existing {
		t.Fatalf("job push answered %+v", j)
	}
	first := j.ID
	if out := mustRun(t, srv, push...); !strings.Contains(out, "existing: job "+jsonInt(first)) {
		t.Errorf("job push of a pending key:\n%s", out)
	}
	if code, _, errb := run(t, srv, "job", "push", "c", "--url", w.URL, "--retry-backoff", "sideways"); code != 1 || !strings.Contains(errb, "retry_backoff") {
		t.Errorf("job push --retry-backoff sideways: exit %d, %s; want 1 naming retry_backoff", code, errb)
	}

	// push-batch from stdin; refusals name what is wrong.
	stdin = strings.NewReader(`{"jobs": [{"category": "c", "url": "` + w.URL + `", "unique_key": "k1"}, {"category": "c", "url": "` + w.URL + `"}]}`)
	runJSON(t, srv, &pushed, "job", "push-batch", "--file", "-")
	if len(pushed.Jobs) != 2 || jsonInt(pushed.Jobs[0].ID) != jsonInt(first) {
		t.Errorf("push-batch from stdin answered %+v, want the pending job %v first", pushed, first)
	}
	for _, tc := range []struct{ body, want string }{
		{`{"jobs": [{"category": "c", "url": "` + w.URL + `", "prority": 1}]}`, "prority"},
		{`{"jobs": []}`, "jobs:"},
		{`[]`, "want one JSON object"},
		{`{"jobs": [{"category": "c"}]}`, "url"},
	} {
		stdin = strings.NewReader(tc.body)
		if code, _, errb := run(t, srv, "job", "push-batch", "--file", "-"); code != 1 || !strings.Contains(errb, tc.want) {
			t.Errorf("push-batch of %s: exit %d, %s; want 1 naming %q", tc.body, code, errb, tc.want)
		}
	}
}
