package main_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testworker"
)

// pythonClient is the Python client's directory, relative to this package.
const pythonClient = "../../clients/python"

// TestPythonClient runs the Python client's own tests (clients/python/tests,
// stdlib unittest) against a rowq process on every database: they call
// every method of the client for real, with a worker of their own.
func TestPythonClient(t *testing.T) {
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("the Python client's tests need python3 (scripts/test.sh installs it): %v", err)
	}
	dir, err := filepath.Abs(pythonClient)
	if err != nil {
		t.Fatal(err)
	}
	dbtest.ForEachDialect(t, func(t *testing.T, dialect string) {
		dbURL := dbtest.URL(t, dialect)
		p := serve(t, t.TempDir(), testEnv(dbURL)...)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		// Two outbox rows without a URL of a category that routes nowhere,
		// for tests/test_outbox.py: both become rejects.
		st := dbtest.OpenURL(t, dbURL)
		payload := `{"n": 1}`
		if err := st.OutboxInsert(ctx, []*store.OutboxRow{{Category: "py-outbox", Payload: &payload}, {Category: "py-outbox", Payload: &payload}}); err != nil {
			t.Fatal(err)
		}
		testworker.WaitFor(t, 10*time.Second, "the outbox's 2 rejects", func() bool {
			n, err := st.OutboxRejectsCount(ctx)
			return err == nil && n == 2
		})
		cmd := exec.CommandContext(ctx, python, "-m", "unittest", "discover", "-s", "tests", "-v")
		cmd.Dir = dir
		cmd.Env = append(baseEnv(), "ROWQ_URL=http://"+p.addr, "PYTHONPATH="+dir, "PYTHONDONTWRITEBYTECODE=1")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(out), "Ran 0 tests") {
			t.Fatalf("python3 -m unittest: %v\n%s", err, out)
		}
		t.Logf("Python client tests on %s passed in %v", dialect, time.Since(start).Round(time.Millisecond))
	})
}

// TestPythonClient_Typed checks the Python client's type hints with
// mypy --strict (Debian's package mypy; scripts/test.sh installs it).
func TestPythonClient_Typed(t *testing.T) {
	t.Parallel()
	mypy, err := exec.LookPath("mypy")
	if err != nil {
		t.Fatalf("checking the Python client's types needs mypy (scripts/test.sh installs it): %v", err)
	}
	cmd := exec.Command(mypy, "--strict", "--cache-dir", t.TempDir(), "rowq", "tests")
	cmd.Dir = pythonClient
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mypy --strict: %v\n%s", err, out)
	}
}
