package browsertest

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// failedTB is a test that has failed, whose logs are kept.
type failedTB struct {
	testing.TB
	logs []string
}

func (f *failedTB) Failed() bool { return true }
func (f *failedTB) Name() string { return "TestSomething/sub test" }
func (f *failedTB) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}

// TestScreenshotIfFailed: a failed test's tab is kept as a PNG in
// $ROWQ_TEST_ARTIFACTS, and the log names the file; a test that passed
// keeps nothing.
func TestScreenshotIfFailed(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ROWQ_TEST_ARTIFACTS", dir)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("<h1>what the test saw</h1>"))
	}))
	defer site.Close()
	tab := Tab(t, New(t))
	Do(t, tab, chromedp.Navigate(site.URL))

	screenshotIfFailed(t, tab) // this test has not failed
	if files, _ := os.ReadDir(dir); len(files) != 0 {
		t.Fatalf("a passing test kept %d files", len(files))
	}
	f := &failedTB{TB: t}
	screenshotIfFailed(f, tab)
	files, _ := filepath.Glob(filepath.Join(dir, "TestSomething_sub_test-*.png"))
	if len(files) != 1 {
		t.Fatalf("screenshots kept: %v (logs %q)", files, f.logs)
	}
	b, err := os.ReadFile(files[0])
	if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
		t.Errorf("%s is not a PNG (%v)", files[0], err)
	}
	if len(f.logs) != 1 || !strings.Contains(f.logs[0], files[0]) {
		t.Errorf("the log %q does not name %s", f.logs, files[0])
	}
}
