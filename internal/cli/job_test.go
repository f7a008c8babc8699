package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/testworker"
)

// rowq job's verbs as Fireworq has them: push, get, ls and rm.
func TestJobCommands(t *testing.T) {
	t.Parallel()
	srv := startServerWithQueue(t)

	var pushed struct{ ID float64 }
	runJSON(t, srv, &pushed, "job", "push", "c", "--url", "http://127.0.0.1:1/w", "--payload", `{"a":1}`, "--run-after", "3600")
	if out := mustRun(t, srv, "job", "get", "q", jsonInt(pushed.ID), "--json"); !strings.Contains(out, `"a": 1`) {
		t.Errorf("job get --json: %s", out)
	}
	var page struct {
		Jobs []struct {
			ID     float64
			Status string
		}
	}
	runJSON(t, srv, &page, "job", "ls", "q", "--state", "deferred", "--limit", "10", "--order", "asc")
	if len(page.Jobs) != 1 || page.Jobs[0].ID != pushed.ID || page.Jobs[0].Status != "claimed" {
		t.Errorf("job ls --state deferred: %+v", page)
	}
	if out := mustRun(t, srv, "job", "ls", "q", "--state", "deferred", "--all"); !strings.Contains(out, jsonInt(pushed.ID)+" ") {
		t.Errorf("job ls table:\n%s", out)
	}
	mustRun(t, srv, "job", "rm", "q", jsonInt(pushed.ID))
	if code, _, errb := run(t, srv, "job", "get", "q", jsonInt(pushed.ID)); code != 1 || !strings.Contains(errb, "404") {
		t.Errorf("job get of a deleted job: exit %d, %s", code, errb)
	}
	for _, args := range [][]string{
		{"job", "get", "q", "x"},
		{"job", "ls", "q", "--state", "sideways"},
		{"job", "push", "c", "--url", "http://x", "--payload", "not json"},
	} {
		if code, _, _ := run(t, srv, args...); code != 1 {
			t.Errorf("rowq %s: exit %d, want 1", strings.Join(args, " "), code)
		}
	}
}

// rowq's additions to job push: its fields as flags, a unique key that
// returns the pending job, and push-batch (from a file, in
// TestFailedCommands, and here from stdin) with its refusals.
func TestJobCommands_Additions(t *testing.T) {
	t.Parallel()
	srv := startServerWithQueue(t)
	w := testworker.New(t, func(string, int) (int, string, time.Duration) {
		return 500, `{"status":"permanent-failure","message":"no"}`, 0
	})

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
	var pushed struct {
		Jobs []struct {
			ID       float64
			Priority float64
		}
	}
	stdin = strings.NewReader(`{"jobs": [{"category": "c", "url": "` + w.URL + `", "unique_key": "k1"}, {"category": "c", "url": "` + w.URL + `"}]}`)
	runJSON(t, srv, &pushed, "job", "push-batch", "--file", "-")
	if len(pushed.Jobs) != 2 || jsonInt(pushed.Jobs[0].ID) != jsonInt(first) {
		t.Errorf("push-batch from stdin answered %+v, want the pending job %v first", pushed, first)
	}
	// With "batch", the jobs make a batch (docs/lifecycle.md).
	var batched struct {
		Jobs    []struct{ ID float64 }
		BatchID float64 `json:"batch_id"`
	}
	stdin = strings.NewReader(`{"jobs": [{"category": "c", "url": "` + w.URL + `"}], "batch": {"meta": {"k": 1}}}`)
	runJSON(t, srv, &batched, "job", "push-batch", "--file", "-")
	if len(batched.Jobs) != 1 || batched.BatchID < 1 {
		t.Errorf("push-batch with a batch answered %+v, want one job and a batch_id", batched)
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
	for _, args := range [][]string{
		{"job", "push-batch"},
		{"job", "push-batch", "--file", filepath.Join(t.TempDir(), "none.json")},
	} {
		if code, out, errb := run(t, srv, args...); code != 1 || !strings.Contains(errb, "--file") {
			t.Errorf("rowq %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(args, " "), code, out, errb, "--file")
		}
	}
}
