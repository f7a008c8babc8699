package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/server/servertest"
	"github.com/rowq/rowq/internal/testworker"
)

// startServer runs a node on a fresh SQLite file for the client commands
// to talk to. The commands hold no SQL, so one dialect is enough here.
func startServer(t *testing.T) string {
	t.Helper()
	return startServerOn(t, "sqlite://"+filepath.Join(t.TempDir(), "rowq.db"), nil)
}

// startServerOn runs a node on the database, configured by tweak if not
// nil, and returns its base URL.
func startServerOn(t *testing.T, dbURL string, tweak func(*config.Config)) string {
	t.Helper()
	cfg := config.Default()
	cfg.Bind = "127.0.0.1:0"
	cfg.DatabaseURL = dbURL
	cfg.QueueDefault = ""
	cfg.ConfigRefreshInterval = 100 * time.Millisecond
	if tweak != nil {
		tweak(&cfg)
	}
	s := servertest.Start(t, cfg)
	return "http://" + s.Addr()
}

// run runs rowq with args against the server and returns its exit code,
// stdout and stderr.
func run(t *testing.T, srv string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(append(args, "--server", srv), &out, &errb)
	return code, out.String(), errb.String()
}

// mustRun runs rowq and fails the test unless it exits 0.
func mustRun(t *testing.T, srv string, args ...string) string {
	t.Helper()
	code, out, errb := run(t, srv, args...)
	if code != 0 {
		t.Fatalf("rowq %s: exit %d: %s%s", strings.Join(args, " "), code, out, errb)
	}
	return out
}

func runJSON(t *testing.T, srv string, dst any, args ...string) {
	t.Helper()
	out := mustRun(t, srv, append(args, "--json")...)
	if err := json.Unmarshal([]byte(out), dst); err != nil {
		t.Fatalf("rowq %s --json: %v: %s", strings.Join(args, " "), err, out)
	}
}

func TestClientCommands(t *testing.T) {
	t.Parallel()
	srv := startServer(t)

	var q map[string]any
	runJSON(t, srv, &q, "queue", "put", "q", "--max-workers", "3", "--max-dispatches-per-second", "2")
	if q["name"] != "q" || q["max_workers"] != 3.0 || q["max_dispatches_per_second"] != 2.0 {
		t.Errorf("queue put answered %v", q)
	}
	if out := mustRun(t, srv, "queue", "ls"); !strings.Contains(out, "NAME") || !strings.Contains(out, "q ") {
		t.Errorf("queue ls:\n%s", out)
	}
	mustRun(t, srv, "routing", "put", "c", "q")
	if out := mustRun(t, srv, "routing", "get", "c"); !strings.Contains(out, "c ") || !strings.Contains(out, " q") {
		t.Errorf("routing get:\n%s", out)
	}

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
	mustRun(t, srv, "job", "rm", "q", jsonInt(pushed.ID))
	if code, _, errb := run(t, srv, "job", "get", "q", jsonInt(pushed.ID)); code != 1 || !strings.Contains(errb, "404") {
		t.Errorf("job get of a deleted job: exit %d, %s", code, errb)
	}
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
		{"job", "get", "q", "x"},
		{"job", "ls", "q", "--state", "sideways"},
		{"job", "push", "c", "--url", "http://x", "--payload", "not json"},
		{"queue", "get"},
		{"queue", "frobnicate"},
	} {
		if code, _, _ := run(t, srv, args...); code != 1 {
			t.Errorf("rowq %s: exit %d, want 1", strings.Join(args, " "), code)
		}
	}
	mustRun(t, srv, "routing", "rm", "c")
	mustRun(t, srv, "queue", "rm", "q")
	if out := mustRun(t, srv, "routing", "ls", "--json"); strings.TrimSpace(out) != "[]" {
		t.Errorf("routing ls after rm: %s", out)
	}
}

func jsonInt(f float64) string { return strconv.FormatInt(int64(f), 10) }
