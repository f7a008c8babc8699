package web_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rowq/rowq/internal/auth"
	"github.com/rowq/rowq/internal/store"
	"github.com/rowq/rowq/internal/store/dbtest"
	"github.com/rowq/rowq/internal/web"
)

// clock is a settable clock for the sessions' expiry.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// loginBundle is a dashboard with authentication on, its tokens by name,
// and its clock.
type loginBundle struct {
	*bundle
	tokens map[string]string
	clock  *clock
}

// newToken stores a token and returns it.
func newToken(t *testing.T, st store.Store, name string, scopes []string, queues ...string) string {
	t.Helper()
	tok, hash := auth.NewToken()
	if _, err := st.TokenCreate(context.Background(), &store.TokenCreateParams{Name: name, Hash: hash, Scopes: scopes, Queues: queues}); err != nil {
		t.Fatal(err)
	}
	return tok
}

func setupLogin(t *testing.T, dialect string, tls bool) *loginBundle {
	t.Helper()
	lb := &loginBundle{tokens: map[string]string{}, clock: &clock{now: time.Now()}}
	lb.bundle = setupWith(t, dialect, func(cfg *web.Config, st store.Store) {
		for name, scopes := range map[string][]string{"reader": {"read"}, "pusher": {"enqueue"}, "admin": {"admin"}} {
			lb.tokens[name] = newToken(t, st, name, scopes)
		}
		lb.tokens["mail-only"] = newToken(t, st, "mail-only", []string{"read"}, "mai*")
		v := auth.New(auth.Config{Tokens: st, Mode: auth.ModeOn, Interval: 100 * time.Millisecond})
		if err := v.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { v.Stop(context.Background()) })
		cfg.Auth, cfg.SessionKey, cfg.Now = v, []byte("a key for the tests of the dashboard"), lb.clock.Now
	})
	if tls {
		lb.srv.Close()
		lb.srv = httptest.NewTLSServer(lb.srv.Config.Handler)
		t.Cleanup(lb.srv.Close)
	}
	return lb
}

// browser is an HTTP client with a cookie jar that does not follow
// redirects, so that a test sees each one.
type browser struct {
	t    *testing.T
	c    *http.Client
	base string
}

func (lb *loginBundle) browser(t *testing.T) *browser {
	jar, _ := cookiejar.New(nil)
	c := *lb.srv.Client() // a copy: each browser has its own jar
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &browser{t: t, c: &c, base: lb.srv.URL}
}

// do sends a request; form, if not nil, is posted as a form.
func (b *browser) do(method, path string, form url.Values, header ...string) (*http.Response, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res, string(raw)
}

func (b *browser) expect(method, path string, form url.Values, want int, header ...string) (*http.Response, string) {
	b.t.Helper()
	res, body := b.do(method, path, form, header...)
	if res.StatusCode != want {
		b.t.Fatalf("%s %s: %d, want %d\n%s", method, path, res.StatusCode, want, body)
	}
	return res, body
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf returns the CSRF token of a page's form.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRE.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF field in the page:\n%s", page)
	}
	return m[1]
}

// login logs in with token and returns the session cookie it got.
func (b *browser) login(token string) *http.Cookie {
	b.t.Helper()
	_, page := b.expect("GET", "/ui/login", nil, 200)
	res, _ := b.expect("POST", "/ui/login", url.Values{"csrf": {csrf(b.t, page)}, "token": {token}}, http.StatusSeeOther)
	for _, c := range res.Cookies() {
		if c.Name == "rowq_session" {
			return c
		}
	}
	b.t.Fatalf("login set no session cookie: %v", res.Header["Set-Cookie"])
	return nil
}

func location(t *testing.T, res *http.Response, want string) {
	t.Helper()
	if got := res.Header.Get("Location"); got != want {
		t.Errorf("redirected to %q, want %q", got, want)
	}
}

// TestLogin_Flow walks a browser's way through the login over HTTP on
// each database: sent to the login page, a wrong token refused, a right
// one let in with a session cookie of the right attributes, and a logout.
func TestLogin_Flow(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			lb := setupLogin(t, dialect, false)
			b := lb.browser(t)
			res, _ := b.expect("GET", "/ui", nil, http.StatusSeeOther)
			location(t, res, "/ui/login")
			res, _ = b.expect("GET", "/ui/queue/mail", nil, http.StatusSeeOther)
			location(t, res, "/ui/login?next=%2Fui%2Fqueue%2Fmail")

			_, page := b.expect("GET", "/ui/login?next=/ui/queue/mail", nil, 200)
			tok := csrf(t, page)
			_, page = b.expect("POST", "/ui/login", url.Values{"csrf": {tok}, "token": {"rowq_wrong"}, "next": {"/ui/queue/mail"}}, http.StatusUnauthorized)
			contains(t, "a wrong token's answer", page, "That token is not valid", `name="token"`)
			_, page = b.expect("POST", "/ui/login", url.Values{"csrf": {tok}, "token": {lb.tokens["pusher"]}}, http.StatusForbidden)
			contains(t, "an enqueue token's answer", page, "lacks scope read")

			res, _ = b.expect("POST", "/ui/login", url.Values{"csrf": {tok}, "token": {lb.tokens["reader"]}, "next": {"/ui/queue/mail"}}, http.StatusSeeOther)
			location(t, res, "/ui/queue/mail")
			var sess *http.Cookie
			for _, c := range res.Cookies() {
				if c.Name == "rowq_session" {
					sess = c
				}
			}
			if sess == nil {
				t.Fatal("no session cookie")
			}
			if !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Path != "/ui" || sess.Secure || sess.MaxAge != 12*3600 {
				t.Errorf("session cookie: HttpOnly %v, SameSite %v, Path %q, Secure %v, Max-Age %d; want true, Strict, /ui, false (no TLS), 43200",
					sess.HttpOnly, sess.SameSite, sess.Path, sess.Secure, sess.MaxAge)
			}
			if strings.Contains(sess.Value, lb.tokens["reader"]) {
				t.Error("the session cookie holds the token")
			}
			_, page = b.expect("GET", "/ui", nil, 200)
			contains(t, "/ui logged in", page, `<b id="user">reader</b>`, `action="/ui/logout"`, `<a href="/ui/queue/mail">mail</a>`)
			res, _ = b.expect("GET", "/ui/login", nil, http.StatusSeeOther)
			location(t, res, "/ui")

			b.expect("POST", "/ui/logout", url.Values{}, http.StatusForbidden)
			b.expect("POST", "/ui/logout", url.Values{"csrf": {tok}}, http.StatusForbidden) // the login page's token is not the session's
			b.expect("POST", "/ui/logout", url.Values{"csrf": {csrf(t, page)}}, http.StatusForbidden, "Sec-Fetch-Site", "cross-site")
			res, _ = b.expect("POST", "/ui/logout", url.Values{"csrf": {csrf(t, page)}}, http.StatusSeeOther)
			location(t, res, "/ui/login")
			res, _ = b.expect("GET", "/ui", nil, http.StatusSeeOther)
			location(t, res, "/ui/login")
		})
	}
}

// TestLogin_CSRF: the login form is refused without the CSRF token of the
// browser's cookie, with another one, and from another origin.
func TestLogin_CSRF(t *testing.T) {
	lb := setupLogin(t, "sqlite", false)
	b := lb.browser(t)
	good := url.Values{"token": {lb.tokens["reader"]}}
	_, page := b.expect("GET", "/ui/login", nil, 200)
	b.expect("POST", "/ui/login", good, http.StatusForbidden)
	good.Set("csrf", "AAAAAAAAAAAAAAAAAAAAAA")
	b.expect("POST", "/ui/login", good, http.StatusForbidden)
	good.Set("csrf", csrf(t, page))
	b.expect("POST", "/ui/login", good, http.StatusForbidden, "Origin", "https://evil.example")
	other := lb.browser(t) // a browser without the cookie
	other.expect("POST", "/ui/login", good, http.StatusForbidden)
	b.expect("POST", "/ui/login", good, http.StatusSeeOther)
}

// TestLogin_SessionEnds: a session ends after 12 h, when its token is
// revoked, and when its cookie is forged; a forged next never leaves the
// dashboard.
func TestLogin_SessionEnds(t *testing.T) {
	for _, dialect := range dbtest.Dialects {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			lb := setupLogin(t, dialect, false)
			b := lb.browser(t)
			b.login(lb.tokens["reader"])
			lb.clock.add(12*time.Hour - time.Second)
			b.expect("GET", "/ui", nil, 200)
			lb.clock.add(time.Second)
			res, _ := b.expect("GET", "/ui", nil, http.StatusSeeOther)
			location(t, res, "/ui/login")

			sess := b.login(lb.tokens["reader"])
			forged := lb.browser(t)
			u, _ := url.Parse(lb.srv.URL + "/ui")
			payload, mac, _ := strings.Cut(sess.Value, ".")
			forged.c.Jar.SetCookies(u, []*http.Cookie{{Name: "rowq_session", Value: payload + "x." + mac}})
			forged.expect("GET", "/ui", nil, http.StatusSeeOther)

			if _, err := lb.st.TokenRevoke(context.Background(), "reader"); err != nil {
				t.Fatal(err)
			}
			revoked := time.Now()
			for {
				res, _ := b.do("GET", "/ui", nil)
				if res.StatusCode == http.StatusSeeOther {
					t.Logf("the revoked token's session ended after %v", time.Since(revoked).Round(time.Millisecond))
					break
				}
				if time.Since(revoked) > 2*time.Second {
					t.Fatalf("the revoked token's session still works after 2 s (%d)", res.StatusCode)
				}
				time.Sleep(20 * time.Millisecond)
			}

			_, page := b.expect("GET", "/ui/login", nil, 200)
			for _, next := range []string{"//evil.example/ui", "https://evil.example/", "/ui/../x", `/ui\evil`} {
				res, _ := b.expect("POST", "/ui/login", url.Values{"csrf": {csrf(t, page)}, "token": {lb.tokens["admin"]}, "next": {next}}, http.StatusSeeOther)
				location(t, res, "/ui")
			}
		})
	}
}

// TestLogin_Tokens: a token in the request works as for the API (curl),
// and a token confined to some queues sees only those.
func TestLogin_Tokens(t *testing.T) {
	lb := setupLogin(t, "sqlite", false)
	b := lb.browser(t)
	res, _ := b.expect("GET", "/ui", nil, http.StatusUnauthorized, "Authorization", "Bearer rowq_wrong")
	if res.Header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	b.expect("GET", "/ui", nil, http.StatusForbidden, "Authorization", "Bearer "+lb.tokens["pusher"])
	_, page := b.expect("GET", "/ui", nil, 200, "Authorization", "Bearer "+lb.tokens["reader"])
	contains(t, "/ui with a read token", page, `/ui/queue/mail`, `/ui/queue/idle`)
	if strings.Contains(page, `action="/ui/logout"`) {
		t.Error("a page served to a token, not a session, has a logout button")
	}

	b.login(lb.tokens["mail-only"])
	_, page = b.expect("GET", "/ui", nil, 200)
	contains(t, "/ui confined to mai*", page, `/ui/queue/mail`)
	for _, hidden := range []string{"/ui/queue/idle", "nightly", "deploy"} {
		if strings.Contains(page, hidden) {
			t.Errorf("a token confined to mai* sees %q", hidden)
		}
	}
	_, page = b.expect("GET", "/ui/queue/idle", nil, http.StatusForbidden)
	contains(t, "/ui/queue/idle confined to mai*", page, "confined to queues mai*")
	b.expect("GET", "/ui/queue/mailx", nil, http.StatusNotFound)
}

// TestLogin_SecureUnderTLS: served over TLS, the session cookie is Secure.
func TestLogin_SecureUnderTLS(t *testing.T) {
	lb := setupLogin(t, "sqlite", true)
	if sess := lb.browser(t).login(lb.tokens["reader"]); !sess.Secure {
		t.Error("the session cookie is not Secure under TLS")
	}
}

// TestLogin_Off: with authentication off the dashboard needs no login
// and has no logout button; its forms still carry a CSRF token.
func TestLogin_Off(t *testing.T) {
	b := setupWith(t, "sqlite", func(cfg *web.Config, st store.Store) {
		cfg.Auth = auth.New(auth.Config{Tokens: st, Mode: auth.ModeOff})
		cfg.SessionKey = []byte("k")
	})
	page := b.get(t, "/ui", 200)
	if strings.Contains(page, "/ui/logout") {
		t.Error("with auth off the page has a logout button")
	}
	res, err := http.Get(b.srv.URL + "/ui/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Request.URL.Path != "/ui" {
		t.Errorf("/ui/login with auth off ended on %s, want /ui", res.Request.URL.Path)
	}
}
