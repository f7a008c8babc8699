package browsertest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/rowq/rowq/internal/browsertest"
)

// TestTabs: tabs of one browser share its cookies, an incognito tab has
// none of them.
func TestTabs(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/set" {
			http.SetCookie(w, &http.Cookie{Name: "session", Value: "s1", Path: "/"})
		}
		w.Write([]byte("<p>cookie: [" + r.Header.Get("Cookie") + "]</p>"))
	}))
	defer site.Close()
	browser := browsertest.New(t)
	cookie := func(tab, path string) string {
		ctx := browsertest.Tab(t, browser)
		if tab == "incognito" {
			ctx = browsertest.Incognito(t, browser)
		}
		browsertest.Do(t, ctx, chromedp.Navigate(site.URL+path))
		return browsertest.Get(t, ctx, chromedp.Text(chromedp.CSS("p")))
	}
	if got := cookie("tab", "/set"); got != "cookie: []" {
		t.Fatalf("first visit: %q, want no cookie yet", got)
	}
	if got := cookie("tab", "/"); got != "cookie: [session=s1]" {
		t.Errorf("another tab: %q, want the cookie the first tab got", got)
	}
	if got := cookie("incognito", "/"); got != "cookie: []" {
		t.Errorf("incognito tab: %q, want no cookie", got)
	}
}
