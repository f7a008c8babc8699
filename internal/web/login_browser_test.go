package web_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/rowq/rowq/internal/browsertest"
	"github.com/rowq/rowq/internal/config"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/testcert"
)

// cookies reads the cookies the browser would send to the tab's page.
func cookies(ctx context.Context, t *chromedp.Target) (map[string]*network.Cookie, error) {
	r, err := cdp.Call(ctx, t, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		return nil, err
	}
	out := map[string]*network.Cookie{}
	for _, c := range r.Cookies {
		out[c.Name] = c
	}
	return out, nil
}

// logIn types token into the login form the tab shows and submits it;
// then waits for what shows on the next page (a CSS selector).
func logIn(t *testing.T, tab context.Context, token, then string) {
	t.Helper()
	browsertest.Do(t, tab,
		chromedp.SetValue(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS(then)))
}

// TestLogin_InChromium: with authentication on, a browser that opens /ui
// lands on the login page; a wrong token shows the error; a read token
// shows the dashboard, with a session cookie that is HttpOnly and
// SameSite=Strict; the logout goes back to the login page; a revoked
// token's session ends within 2 s; and a token confined to mai* sees its
// queue only. On every database, one browser, an incognito tab per user.
func TestLogin_InChromium(t *testing.T) {
	browser := browsertest.New(t)
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			lb := setupLogin(t, dialect, false)
			tab := browsertest.Incognito(t, browser)
			browsertest.Do(t, tab, chromedp.Navigate(lb.srv.URL+"/ui"))
			if loc := browsertest.Get(t, tab, chromedp.Location()); loc != lb.srv.URL+"/ui/login" {
				t.Fatalf("/ui without a session landed on %s, want the login page", loc)
			}

			logIn(t, tab, "rowq_wrong", "#error")
			if msg := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS("#error"))); !strings.Contains(msg, "not valid") {
				t.Errorf("a wrong token's page says %q", msg)
			}
			logIn(t, tab, lb.tokens["reader"], "#logout")
			if loc := browsertest.Get(t, tab, chromedp.Location()); loc != lb.srv.URL+"/ui" {
				t.Errorf("after the login the browser is on %s, want /ui", loc)
			}
			if user := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS("#user"))); user != "reader" {
				t.Errorf("the page names the token %q, want reader", user)
			}
			browsertest.Do(t, tab, chromedp.WaitVisible(chromedp.CSS(`a[href="/ui/queue/mail"]`)))
			jar := browsertest.Get(t, tab, cookies)
			s := jar["rowq_session"]
			switch {
			case s == nil:
				t.Fatalf("no session cookie in the browser: %v", jar)
			case !s.HTTPOnly || s.SameSite != network.CookieSameSiteStrict || s.Path != "/ui" || s.Secure:
				t.Errorf("session cookie: HttpOnly %v, SameSite %q, Path %q, Secure %v; want true, Strict, /ui, false (HTTP)", s.HTTPOnly, s.SameSite, s.Path, s.Secure)
			}
			if left := time.Until(time.Unix(int64(s.Expires), 0)); left < 12*time.Hour-time.Minute || left > 12*time.Hour+time.Minute {
				t.Errorf("the session cookie expires in %v, want 12 h", left)
			}
			if strings.Contains(s.Value, lb.tokens["reader"]) {
				t.Error("the session cookie holds the token")
			}

			browsertest.Do(t, tab, chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("#login")))
			if loc := browsertest.Get(t, tab, chromedp.Location()); loc != lb.srv.URL+"/ui/login" {
				t.Errorf("after the logout the browser is on %s, want the login page", loc)
			}
			if jar := browsertest.Get(t, tab, cookies); jar["rowq_session"] != nil {
				t.Error("the logout left the session cookie")
			}

			logIn(t, tab, lb.tokens["reader"], "#logout")
			if _, err := lb.st.TokenRevoke(t.Context(), "reader"); err != nil {
				t.Fatal(err)
			}
			revoked := time.Now()
			for {
				browsertest.Do(t, tab, chromedp.Navigate(lb.srv.URL+"/ui"))
				if browsertest.Get(t, tab, chromedp.Location()) == lb.srv.URL+"/ui/login" {
					t.Logf("the revoked token's session ended after %v", time.Since(revoked).Round(time.Millisecond))
					break
				}
				if time.Since(revoked) > 2*time.Second {
					t.Fatal("the revoked token's session still shows the dashboard after 2 s")
				}
				time.Sleep(50 * time.Millisecond)
			}

			tenant := browsertest.Incognito(t, browser)
			browsertest.Do(t, tenant, chromedp.Navigate(lb.srv.URL+"/ui"))
			logIn(t, tenant, lb.tokens["mail-only"], "#logout")
			queues := browsertest.Get(t, tenant, chromedp.Text(chromedp.CSS("table")))
			if !strings.Contains(queues, "mail") || strings.Contains(queues, "idle") {
				t.Errorf("a token confined to mai* sees the queues %q, want mail and not idle", queues)
			}
		})
	}
}

// TestLogin_InChromiumOverTLS: a real node with authentication on, served
// over HTTPS: the browser logs in, keeps the session cookie as Secure,
// and is shown the dashboard with it.
func TestLogin_InChromiumOverTLS(t *testing.T) {
	ca := testcert.NewCA(t, "rowq test CA")
	cert := ca.Issue(t)
	url := dbtest.URL(t, "sqlite")
	token := newToken(t, dbtest.OpenURL(t, url), "ops", []string{"read"})
	base, _ := startTLSNode(t, url, ca, cert, func(c *config.Config) { c.Auth = "on" })
	browser := browsertest.New(t, browsertest.TrustCert(cert.Leaf))
	tab := browsertest.Tab(t, browser)
	browsertest.Do(t, tab, chromedp.Navigate(base+"/ui"))
	logIn(t, tab, token, "#logout")
	if user := browsertest.Get(t, tab, chromedp.Text(chromedp.CSS("#user"))); user != "ops" {
		t.Errorf("the page names the token %q, want ops", user)
	}
	jar := browsertest.Get(t, tab, cookies)
	if s := jar["rowq_session"]; s == nil || !s.Secure || !s.HTTPOnly || s.SameSite != network.CookieSameSiteStrict {
		t.Errorf("session cookie over HTTPS: %+v, want Secure, HttpOnly, SameSite=Strict", s)
	}
}
