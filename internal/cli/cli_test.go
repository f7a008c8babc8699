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
)

// startServer runs a node on a fresh SQLite file for the client commands
// to talk to. The commands hold no SQL, so one dialect is enough here.
func startServer(t *testing.T) string {
	t.Helper()
	return startServerOn(t, "sqlite://"+filepath.Join(t.TempDir(), "rowq.db"), nil)
}

// startServerWithQueue runs a node as startServer does, with queue q, to
// which category c is routed.
func startServerWithQueue(t *testing.T) string {
	t.Helper()
	srv := startServer(t)
	mustRun(t, srv, "queue", "put", "q")
	mustRun(t, srv, "routing", "put", "c", "q")
	return srv
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

// jsonInt formats a JSON number that holds an id as an argument.
func jsonInt(f float64) string { return strconv.FormatInt(int64(f), 10) }
