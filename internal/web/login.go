package web

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/rowq/rowq/internal/auth"
)

type sessionKey struct{}

// sessionFrom returns the login session of a request's context, or nil
// (a token in the request, or authentication off).
func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

// loginPath is the dashboard's login page.
const loginPath = "/ui/login"

// guard is the auth decision of the dashboard's pages. While
// authentication is off every request may read everything. Else a request
// needs the read scope, from a token it carries (Authorization, as the
// API takes it: for curl) or from a login session; a browser with
// neither, or whose session ended, is sent to the login page. The page
// finds the grant in the request's context: a token confined to some
// queues sees those only.
func (d *dashboard) guard(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g, s, err := d.authenticate(r)
		switch {
		case errors.Is(err, errBadSession):
			http.SetCookie(w, cookie(r, sessionCookie, "", -1))
			d.toLogin(w, r)
			return
		case errors.Is(err, auth.ErrBadToken): // the token the request carries
			auth.Challenge(w.Header())
			d.message(w, r, http.StatusUnauthorized, err.Error())
			return
		case err != nil:
			d.fail(w, r, err)
			return
		}
		if err := g.Need(auth.Read); err != nil {
			d.message(w, r, http.StatusForbidden, err.Error())
			return
		}
		ctx := auth.NewContext(r.Context(), g)
		if s != nil {
			ctx = context.WithValue(ctx, sessionKey{}, s)
		}
		h(w, r.WithContext(ctx))
	}
}

// on reports whether the dashboard needs a login.
func (d *dashboard) on(ctx context.Context) (bool, error) {
	if d.cfg.Auth == nil {
		return false, nil
	}
	return d.cfg.Auth.Enabled(ctx)
}

// authenticate returns the grant of a request (see guard) and its
// session, if it came with one: errBadSession when it needs a login,
// auth.ErrBadToken when the token it carries is not valid.
func (d *dashboard) authenticate(r *http.Request) (*auth.Grant, *session, error) {
	on, err := d.on(r.Context())
	if err != nil || !on {
		return auth.Unrestricted, nil, err
	}
	if tok := auth.TokenFrom(r); tok != "" {
		g, err := d.cfg.Auth.Check(r.Context(), tok)
		return g, nil, err
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return nil, nil, errBadSession
	}
	s, err := unseal(d.cfg.SessionKey, c.Value, d.now())
	if err != nil {
		return nil, nil, err
	}
	h, ok := s.hash()
	if !ok {
		return nil, nil, errBadSession
	}
	g, err := d.cfg.Auth.CheckHash(r.Context(), h)
	if errors.Is(err, auth.ErrBadToken) || (err == nil && g.Name != s.Name) {
		return nil, nil, errBadSession
	}
	return g, s, err
}

// toLogin sends a browser to the login page, which brings it back here.
func (d *dashboard) toLogin(w http.ResponseWriter, r *http.Request) {
	target := loginPath
	if r.Method == http.MethodGet && r.URL.Path != "/ui" {
		target += "?next=" + url.QueryEscape(r.URL.Path)
	}
	http.Redirect(w, r, target, http.StatusSeeOther)
}

// nextRE is where a login may send the browser after it: a dashboard
// path, never another site.
var nextRE = regexp.MustCompile(`^/ui(/[A-Za-z0-9_.:-]+)*$`)

func next(r *http.Request) string {
	if n := r.FormValue("next"); nextRE.MatchString(n) && path.Clean(n) == n && n != loginPath {
		return n
	}
	return "/ui"
}

// loginPage shows the login form; a browser already logged in (or with
// authentication off) goes on to the dashboard.
func (d *dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	if g, _, err := d.authenticate(r); err == nil && g.Has(auth.Read) {
		http.Redirect(w, r, next(r), http.StatusSeeOther)
		return
	}
	d.renderLogin(w, r, http.StatusOK, "")
}

func (d *dashboard) renderLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	d.render(w, r, status, "login.html", map[string]any{"Title": "rowq: log in", "Error": msg, "Next": next(r)})
}

// login checks the token of the login form and, if it may read, starts a
// session: a cookie that names the token (never holds it), lasts
// SessionTTL and is checked again on every request.
func (d *dashboard) login(w http.ResponseWriter, r *http.Request) {
	if err := checkForm(w, r); err != nil {
		d.formError(w, r, err, d.renderLogin)
		return
	}
	on, err := d.on(r.Context())
	if err != nil {
		d.fail(w, r, err)
		return
	}
	if !on {
		http.Redirect(w, r, "/ui", http.StatusSeeOther)
		return
	}
	tok := strings.TrimSpace(r.PostForm.Get("token"))
	g, err := d.cfg.Auth.Check(r.Context(), tok)
	switch {
	case errors.Is(err, auth.ErrBadToken), errors.Is(err, auth.ErrNoToken):
		// Whether a token of that name exists is not said.
		d.renderLogin(w, r, http.StatusUnauthorized, "That token is not valid: mistyped, revoked or expired.")
		return
	case err != nil:
		d.fail(w, r, err)
		return
	}
	if err := g.Need(auth.Read); err != nil {
		d.renderLogin(w, r, http.StatusForbidden, err.Error()+": the dashboard needs read or admin.")
		return
	}
	s := &session{Name: g.Name, Hash: auth.Hash(tok), Expires: d.now().Add(SessionTTL).Unix(), CSRF: randomToken()}
	http.SetCookie(w, cookie(r, sessionCookie, seal(d.cfg.SessionKey, s), int(SessionTTL.Seconds())))
	d.cfg.Logger.Info("dashboard login", "token", g.Name)
	http.Redirect(w, r, next(r), http.StatusSeeOther)
}

// logout ends the browser's session: it deletes the cookie. A copy of
// the cookie taken before stays valid until it expires or its token is
// revoked (docs/security.md).
func (d *dashboard) logout(w http.ResponseWriter, r *http.Request) {
	// The form carries the session's CSRF token, also once the session
	// has expired (it is read at the zero time); without a session, the
	// browser's CSRF cookie's.
	if c, err := r.Cookie(sessionCookie); err == nil {
		if s, err := unseal(d.cfg.SessionKey, c.Value, time.Time{}); err == nil {
			r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
		}
	}
	if err := checkForm(w, r); err != nil {
		d.formError(w, r, err, d.message)
		return
	}
	http.SetCookie(w, cookie(r, sessionCookie, "", -1))
	http.Redirect(w, r, loginPath, http.StatusSeeOther)
}

// formError answers a form that checkForm refused: 403 for a forged one,
// 413 or 400 for a body too large or malformed; show renders the page.
func (d *dashboard) formError(w http.ResponseWriter, r *http.Request, err error, show func(http.ResponseWriter, *http.Request, int, string)) {
	var tooBig *http.MaxBytesError
	switch {
	case errors.Is(err, errCSRF):
		show(w, r, http.StatusForbidden, err.Error())
	case errors.As(err, &tooBig):
		show(w, r, http.StatusRequestEntityTooLarge, "form larger than its limit")
	default:
		show(w, r, http.StatusBadRequest, "form: "+err.Error())
	}
}
