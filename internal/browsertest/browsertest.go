// Package browsertest drives a real headless Chromium from Go tests, through
// chromedp, for the tests of rowq's dashboard: what a browser does with a
// page (cookies, forms, redirects, TLS) is checked by a browser, not only by
// HTTP requests. It uses Debian's chromium package, which scripts/test.sh
// installs; a missing browser fails the test.
//
// A test starts one browser (New) and opens a tab per page or per subtest
// (Tab, or Incognito for cookies of its own); Do and Get run chromedp
// actions in a tab and fail the test on error. A tab of a test that failed
// is kept as a screenshot in ArtifactsDir, whose path the test logs.
package browsertest

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Timeout bounds the start of a browser, and each Do or Get.
const Timeout = 30 * time.Second

// Path returns the Chromium binary: $ROWQ_TEST_CHROMIUM if set, else
// chromium (Debian's package) or chromium-browser on the PATH. It fails
// the test when there is none.
func Path(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("ROWQ_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("browsertest: no Chromium: install Debian's chromium package (scripts/test.sh does) or set ROWQ_TEST_CHROMIUM")
	return ""
}

// TrustCert makes the browser accept a server certificate whose public key
// is cert's, whoever signed it, and no other invalid certificate: a test
// serving HTTPS with a throwaway CA (package testcert) passes it to New.
func TrustCert(cert *x509.Certificate) chromedp.ExecAllocatorOption {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return chromedp.Flag("ignore-certificate-errors-spki-list", base64.StdEncoding.EncodeToString(sum[:]))
}

// New starts a headless Chromium for the test, with opts added to the
// defaults, and returns the context of its first tab. The browser lives
// until the test ends.
//
// chromedp's defaults suit a container (--headless, no use of /dev/shm,
// which containers keep small); New adds --no-sandbox, since tests run as
// root and Chromium's sandbox refuses root.
func New(t testing.TB, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	all := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(Path(t)), chromedp.NoSandbox)
	// No deadline on the browser's own context: chromedp ends the browser
	// with it. Each Do and Get has one of its own.
	ctx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(all, opts...)...)
	ctx, cancelBrowser := chromedp.NewContext(ctx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	open(t, ctx, "start Chromium") // a missing or broken browser fails here
	return ctx
}

// open makes the first run on a chromedp context, which starts its browser
// or opens its tab. It runs on ctx itself, not on a context with a
// deadline: what it starts lives as long as the context of that run.
func open(t testing.TB, ctx context.Context, what string) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("browsertest: %s: %v", what, err)
		}
	case <-time.After(Timeout):
		t.Fatalf("browsertest: %s: not done within %v", what, Timeout)
	}
}

// Tab opens a new tab in the browser of ctx (from New) and closes it when
// the test ends; if the test failed, a screenshot of the tab is kept
// first (ArtifactsDir). Tabs of one browser share its cookies.
func Tab(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	open(t, tab, "open a tab")
	t.Cleanup(func() { screenshotIfFailed(t, tab) })
	return tab
}

// ArtifactsDir is where a failed test keeps the screenshots of its tabs:
// $ROWQ_TEST_ARTIFACTS, else rowq-test-artifacts under os.TempDir().
// CI (.ci/run) lists it at the end when it is not empty.
func ArtifactsDir() string {
	if d := os.Getenv("ROWQ_TEST_ARTIFACTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "rowq-test-artifacts")
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// screenshotIfFailed saves a PNG of what the tab shows into ArtifactsDir
// if the test failed, and logs its path.
func screenshotIfFailed(t testing.TB, tab context.Context) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(tab, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.MkdirAll(ArtifactsDir(), 0o755)
	}
	name := filepath.Join(ArtifactsDir(), unsafeName.ReplaceAllString(t.Name(), "_")+"-"+time.Now().UTC().Format("150405.000")+".png")
	if err == nil {
		err = os.WriteFile(name, png, 0o644)
	}
	if err != nil {
		t.Logf("browsertest: no screenshot of the failing tab: %v", err)
		return
	}
	t.Logf("browsertest: screenshot of the failing tab: %s", name)
}

// Incognito opens a tab in a browser context of its own, whose cookies and
// storage no other tab sees: a second user, or one who never logged in.
func Incognito(t testing.TB, ctx context.Context) context.Context {
	t.Helper()
	tab, cancel := chromedp.NewContext(ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	open(t, tab, "open an incognito tab")
	t.Cleanup(func() { screenshotIfFailed(t, tab) })
	return tab
}

// Do runs the steps in the tab ctx, in order, within Timeout, and fails
// the test at the first that fails.
func Do(t testing.TB, ctx context.Context, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("browser: %v", err)
	}
}

// Get runs an action that reads a value in the tab ctx, such as
// chromedp.Text, within Timeout, and returns the value; it fails the test
// if the action fails.
func Get[T any](t testing.TB, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	return v
}
