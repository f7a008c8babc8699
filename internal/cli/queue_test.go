package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/testworker"
)

// rowq queue's verbs, and rowq stats and rowq nodes, which are short for
// two of them. Pause and resume are in TestFailedCommands, where a paused
// queue keeps retried jobs waiting.
func TestQueueCommands(t *testing.T) {
	t.Parallel()
	srv := startServer(t)

	var q map[string]any
	runJSON(t, srv, &q, "queue", "put", "q", "--max-workers", "3", "--max-dispatches-per-second", "2", "--keep-finished", "3600")
	if q["name"] != "q" || q["max_workers"] != 3.0 || q["max_dispatches_per_second"] != 2.0 || q["keep_finished"] != 3600.0 {
		t.Errorf("queue put answered %v", q)
	}
	if out := mustRun(t, srv, "queue", "ls"); !strings.Contains(out, "NAME") || !strings.Contains(out, "q ") {
		t.Errorf("queue ls:\n%s", out)
	}

	// One deferred job, for the statistics to count.
	mustRun(t, srv, "routing", "put", "c", "q")
	mustRun(t, srv, "job", "push", "c", "--url", "http://127.0.0.1:1/w", "--run-after", "3600")
	testworker.WaitFor(t, 30*time.Second, "pushes counted", func() bool {
		var st map[string]any
		runJSON(t, srv, &st, "queue", "stats", "q")
		return st["total_pushes"] == 1.0 && st["outstanding_jobs"] == 1.0
	})
	if out := mustRun(t, srv, "stats"); !strings.Contains(out, "OUTSTANDING") || !strings.Contains(out, "q ") {
		t.Errorf("queue stats table:\n%s", out)
	}
	testworker.WaitFor(t, 30*time.Second, "a leader", func() bool {
		code, _, _ := run(t, srv, "queue", "node", "q")
		return code == 0
	})
	if out := mustRun(t, srv, "nodes"); !strings.Contains(out, "QUEUES") || !strings.Contains(out, "\t1\t") && !strings.Contains(out, " 1 ") {
		t.Errorf("nodes table (one node leading the one queue):\n%s", out)
	}
	for _, args := range [][]string{
		{"queue", "get"},
		{"queue", "frobnicate"},
	} {
		if code, _, _ := run(t, srv, args...); code != 1 {
			t.Errorf("rowq %s: exit %d, want 1", strings.Join(args, " "), code)
		}
	}
	mustRun(t, srv, "queue", "rm", "q")
}
