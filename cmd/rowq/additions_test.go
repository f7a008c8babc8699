package main_test

// Process-level test of the command-line verbs of rowq's queue additions,
// against a `rowq serve` process on each dialect.

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// rowqIn runs a client subcommand with stdin and returns its stdout and
// stderr together, and its exit code.
func (p *proc) rowqIn(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	return runRowq(t, []string{"ROWQ_SERVER=http://" + p.addr}, stdin, args...)
}

// runRowq runs rowq with args, env added to baseEnv, and stdin, and
// returns its stdout and stderr together, and its exit code.
func runRowq(t *testing.T, env []string, stdin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, rowqBin, args...)
	cmd.Env = append(baseEnv(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if exit, ok := err.(*exec.ExitError); ok {
		return string(out), exit.ExitCode()
	}
	if err != nil {
		t.Fatalf("rowq %s: %v", strings.Join(args, " "), err)
	}
	return string(out), 0
}

func TestQueueAdditionsCLI(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		w := testworker.New(t, func(string, int) (int, string, time.Duration) {
			return 500, `{"status":"permanent-failure","message":"no"}`, 0
		})
		p := serve(t, t.TempDir(), testEnv(dbtest.URL(t, dialect))...)
		ok := func(stdin string, args ...string) string {
			t.Helper()
			out, code := p.rowqIn(t, stdin, args...)
			if code != 0 {
				t.Fatalf("rowq %s: exit %d, output:\n%s", strings.Join(args, " "), code, out)
			}
			return out
		}
		failed := func() int {
			var page struct {
				FailedJobs []any `json:"failed_jobs"`
			}
			if err := json.Unmarshal([]byte(ok("", "failed", "ls", "q", "--json")), &page); err != nil {
				t.Fatal(err)
			}
			return len(page.FailedJobs)
		}
		ok("", "queue", "put", "q", "--paused")
		ok("", "routing", "put", "c", "q")

		// A batch from stdin lands in the paused queue, undelivered.
		out := ok(`{"jobs": [{"category": "c", "url": "`+w.URL+`", "payload": "a", "priority": 9},
			{"category": "c", "url": "`+w.URL+`", "payload": "b", "unique_key": "k"}]}`, "job", "push-batch", "--file", "-")
		if strings.Count(out, "\n") != 3 || !strings.Contains(out, " 9 ") {
			t.Fatalf("push-batch printed:\n%s", out)
		}
		if n := w.Distinct(); n != 0 {
			t.Fatalf("%d deliveries from a paused queue", n)
		}
		if out := ok("", "job", "push", "c", "--url", w.URL, "--unique-key", "k"); !strings.Contains(out, "existing: job") {
			t.Errorf("push of a pending key:\n%s", out)
		}

		// Resumed, both fail into the log; purge refuses without --all.
		ok("", "queue", "resume", "q")
		testworker.WaitFor(t, 30*time.Second, "2 failure log entries", func() bool { return failed() == 2 })
		if out, code := p.rowqIn(t, "", "failed", "purge", "q"); code != 1 || !strings.Contains(out, "--all") {
			t.Errorf("failed purge q without IDs or --all: exit %d, output %s; want 1 naming --all", code, out)
		}
		ok("", "queue", "pause", "q")
		if out := ok("", "failed", "retry", "q", "--all"); !strings.Contains(out, "retried 2 ") {
			t.Errorf("failed retry q --all:\n%s", out)
		}
		ok("", "queue", "resume", "q")
		testworker.WaitFor(t, 30*time.Second, "2 entries again", func() bool { return failed() == 2 })
		if out := ok("", "failed", "purge", "q", "--all", "--json"); !strings.Contains(out, `"deleted": 2`) {
			t.Errorf("failed purge q --all --json:\n%s", out)
		}
		if n := failed(); n != 0 {
			t.Errorf("%d entries after purge --all", n)
		}
	})
}
